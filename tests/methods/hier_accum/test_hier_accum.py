"""Hierarchical accumulation (Nguyen et al. 2020) against eqs. (5)-(10) in loops, its position form, masks and fused
parameters; ``transformer_hier_accum``."""
import random
from unittest import mock

import pytest
import torch
from conftest import (
    TRANSLATION,
    accumulation_cases,
    assert_close_with_gradients,
    build_on_cpu,
    parents_batch,
    random_accumulation_inputs,
    random_preorder_tree,
)

import fairseq_syntax.methods.hier_accum.attention as cross_module
from fairseq_syntax.core import structure as st
from fairseq_syntax.core.attention import StructuredSelfAttention
from fairseq_syntax.core.fused_linear import fused_linear, linear_part
from fairseq_syntax.methods.hier_accum.accumulation import (
    HierarchicalEmbeddings,
    accumulation_structure,
    additive_mask,
    hierarchical_accumulation,
    position_accumulation,
    reorder_structure,
)
from fairseq_syntax.methods.hier_accum.attention import (
    HierarchicalCrossAttention,
    HierarchicalSelfAttention,
    SourceTree,
)

torch.set_num_threads(1)


# --- the paper's equations, literally


def reference_accumulation(parents, values, leaf_weights, embeddings, average):
    """Eqs. (5)-(10) for one sentence: ``values`` ``H x T x d`` with every node row replaced by ``V(U(S + E), w)``."""
    valid = [p for p in range(len(parents)) if parents[p] != st.PAD]
    children = {p: [c for c in valid if parents[c] == p] for p in valid}

    def subtree(p):  # R(x_p)
        found = {p}
        for child in children[p]:
            found |= subtree(child)
        return found

    R = {p: subtree(p) for p in valid}
    leaves = [p for p in valid if not children[p]]  # L, left to right
    nodes = [p for p in valid if children[p]]  # N
    heads, _, dim = values.shape
    zero = values.new_zeros(dim)
    out = values.clone()
    for h in range(heads):
        # eq. 5: S has the leaves in row 0 and node i's value in row i+1 at every leaf column under it
        S = [[values[h, j] for j in leaves]] + [[values[h, i] if j in R[i] else zero for j in leaves] for i in nodes]
        # eq. 9: E_{i+1, j} = [e^v_|V_i^j|; e^h_|H_i^j|] where leaf j is under node i; row 0 has none
        E = [[zero] * len(leaves)]
        for i in nodes:
            row = []
            for j in leaves:
                if j not in R[i] or embeddings is None:
                    row.append(zero)
                    continue
                vertical = len([t for t in nodes if t in R[i] and j in R[t]])
                horizontal = len([leaf for leaf in leaves if leaf in R[i] and leaf <= j])
                size = embeddings.size
                row.append(torch.cat([embeddings.vertical[min(vertical, size) - 1],
                                      embeddings.horizontal[min(horizontal, size) - 1]]))
            E.append(row)
        S = [[S[r][c] + E[r][c] for c in range(len(leaves))] for r in range(len(S))]
        for row, i in enumerate(nodes, start=1):
            under = [c for c, j in enumerate(leaves) if j in R[i]]
            total = zero
            for c in under:
                # eq. 6: average over the branch C_j^i, the leaf and the nodes from node i down to leaf j
                branch = [S[0][c]] + [S[r][c] for r, t in enumerate(nodes, start=1) if t in R[i] and leaves[c] in R[t]]
                divisor = len(branch) if average == "paper" else len(branch) - 1
                total = total + leaf_weights[leaves[c]] * sum(branch) / divisor  # eq. 7
            out[h, i] = total / len(under)
    return out


@accumulation_cases
def test_accumulation_matches_the_papers_equations(average, embedding_size, left_pad):
    rng = random.Random(f"{average}-{embedding_size}-{left_pad}")  # str seeds are stable, hash() of str is not
    torch.manual_seed(rng.randrange(1000))
    for _ in range(3):
        parents, embeddings, values, weights, structure = random_accumulation_inputs(
            rng, 11, embedding_size, average, left_pad)
        reference = torch.stack([
            reference_accumulation(parents[b].tolist(), values[b], weights[b], embeddings, average)
            for b in range(len(parents))
        ])  # a float32 structure, hence the tolerance; one-word trees use no leaf weight: zero gradients in both
        assert_close_with_gradients(hierarchical_accumulation(values, weights, structure, embeddings), reference,
                                    values, weights, embeddings)


# --- hand-derived values

# (S a (NP b c)): positions 0 S, 1 a, 2 NP, 3 b, 4 c, 5 EOS
SMALL = [-1, 0, 0, 2, 2]
# positions 0 S, 1 NP, 2 a, 3 b, 4 VP, 5 c, 6 NP, 7 d, 8 e, 9 EOS (as in test_structure.py)
HIER = [-1, 0, 1, 1, 0, 4, 4, 6, 6]


def test_accumulated_values_and_gradients_by_hand():
    # values a=1, b=2, c=4, S=10, NP=20; EOS 7 is a leaf of its own and stays out of every node
    values = torch.tensor([10.0, 1.0, 20.0, 2.0, 4.0, 7.0]).view(1, 1, 6, 1).requires_grad_()
    weights = torch.tensor([[0.0, 2.0, 0.0, 1.0, 1.0, 1.0]], requires_grad=True)  # w_a = 2
    out = hierarchical_accumulation(values, weights, accumulation_structure(parents_batch(SMALL)))
    # NP: ((2 + 20) / 2 + (4 + 20) / 2) / 2;  S: (2 (1 + 10) / 2 + (2 + 20 + 10) / 3 + (4 + 20 + 10) / 3) / 3
    assert out.flatten().tolist() == pytest.approx([11.0, 1.0, 11.5, 2.0, 4.0, 7.0])
    official_structure = accumulation_structure(parents_batch(SMALL), average="official")
    official = hierarchical_accumulation(values, weights, official_structure)
    # divided by the nodes of the branch only: NP ((22) + (24)) / 2; S (2 * 11 + 32 / 2 + 34 / 2) / 3
    assert official.flatten().tolist() == pytest.approx([55 / 3, 1.0, 23.0, 2.0, 4.0, 7.0])
    out.sum().backward()  # the gradient of the sum of every output row (the paper's average)
    # w_a: (1 + 10) / 2 / 3; w_b: (2 + 20) / 2 / 2 + (2 + 20 + 10) / 3 / 3; w_c likewise with 4; EOS none
    assert weights.grad.flatten().tolist() == pytest.approx([0, 11 / 6, 0, 5.5 + 32 / 9, 6 + 34 / 9, 0])
    # leaves keep their rows, plus w_j / branch length / |L(i)| per node i above; node rows are replaced
    assert values.grad.flatten().tolist() == pytest.approx(
        [5 / 9, 1 + 1 / 3, 1 / 2 + 2 / 9, 1 + 1 / 4 + 1 / 9, 1 + 1 / 4 + 1 / 9, 1])


def test_a_row_without_nodes_passes_its_values_and_gradient_through():
    # a one-word sentence (a leaf and EOS) beside a tree: values and gradient pass unchanged, leaf weights get none
    embeddings = HierarchicalEmbeddings(2, 4).double()
    structure = accumulation_structure(parents_batch([-1], SMALL), embedding_size=2)
    values = torch.randn(2, 1, 6, 4, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    out = hierarchical_accumulation(values, weights, structure, embeddings)
    assert torch.equal(out[0], values[0])
    upstream = torch.randn_like(out)
    grad_values, grad_weights = torch.autograd.grad((out * upstream).sum(), (values, weights))
    assert torch.equal(grad_values[0], upstream[0]) and grad_weights[0].abs().sum() == 0
    assert grad_weights[1].abs().sum() > 0


def test_inverse_branch_sizes_by_hand():
    inverse = accumulation_structure(parents_batch(HIER))["inverse_branch_size"][0]
    # 1 / (|L(i)| (|P(i, j)| + 1)); e.g. S -> d passes S, VP, NP: 1 / (5 * 4)
    expected = torch.tensor([
        # a     b       c       d       e      EOS
        [1 / 15, 1 / 15, 1 / 15, 1 / 20, 1 / 20, 0],  # S
        [1 / 4, 1 / 4, 0, 0, 0, 0],  # NP(a b)
        [0, 0, 1 / 6, 1 / 9, 1 / 9, 0],  # VP
        [0, 0, 0, 1 / 4, 1 / 4, 0],  # NP(d e)
    ])
    torch.testing.assert_close(inverse, expected)


def test_hierarchical_embedding_term_counts_each_index_by_hand():
    # with identity tables node i's embedding term is its [vertical | horizontal] histogram; zero values isolate it
    embeddings = HierarchicalEmbeddings(3, 6)
    with torch.no_grad():
        embeddings.vertical.copy_(torch.eye(3))
        embeddings.horizontal.copy_(torch.eye(3))
    structure = accumulation_structure(parents_batch(SMALL), embedding_size=3)
    out = hierarchical_accumulation(torch.zeros(1, 1, 6, 6), torch.ones(1, 6), structure, embeddings)[0, 0]
    # S: c = 1/6 for a (branch S), 1/9 for b and c (branch S, NP)
    assert out[0].tolist() == pytest.approx([1 / 6 + 2 / 9, 2 / 9, 0, 1 / 6 + 1 / 9, 2 / 9, 1 / 9])
    # NP: c = 1/4 for b and c; (NP,b) = (1; 1), (NP,c) = (1; 2)
    assert out[2].tolist() == pytest.approx([1 / 2, 0, 0, 1 / 4, 1 / 4, 0])
    assert out[[1, 3, 4, 5]].abs().sum() == 0
    # |E| = 1: every index uses the one row
    capped = HierarchicalEmbeddings(1, 2)
    with torch.no_grad():
        capped.vertical.fill_(1.0)
        capped.horizontal.fill_(1.0)
    structure = accumulation_structure(parents_batch(SMALL), embedding_size=1)
    out = hierarchical_accumulation(torch.zeros(1, 1, 6, 2), torch.ones(1, 6), structure, capped)[0, 0]
    assert out[0].tolist() == pytest.approx([1 / 6 + 4 / 9] * 2)


def test_subtree_mask_by_hand():
    mask = accumulation_structure(parents_batch(HIER, SMALL), subtree_mask=True)["attention_mask"]
    assert mask.shape == (2, 1, 10, 10)
    # node queries see their subtree, leaf queries (a, b, c, d, e, EOS) see the leaves
    leaves = [0, 0, 1, 1, 0, 1, 0, 1, 1, 1]
    assert mask[0, 0].int().tolist() == [
        [1, 1, 1, 1, 1, 1, 1, 1, 1, 0],  # S
        [0, 1, 1, 1, 0, 0, 0, 0, 0, 0],  # NP(a b)
        leaves, leaves,
        [0, 0, 0, 0, 1, 1, 1, 1, 1, 0],  # VP
        leaves,
        [0, 0, 0, 0, 0, 0, 1, 1, 1, 0],  # NP(d e)
        leaves, leaves, leaves,
    ]
    # the second row is padded after its EOS (position 5): padding queries see only themselves
    assert mask[1, 0, 6:].int().tolist() == [[int(k == q) for k in range(10)] for q in range(6, 10)]
    no_mask = accumulation_structure(parents_batch(HIER, SMALL), subtree_mask=False)["attention_mask"]
    assert no_mask.shape == (2, 1, 1, 10) and no_mask[:, 0, 0].int().tolist() == [[1] * 10, [1] * 6 + [0] * 4]


def test_node_output_depends_only_on_its_subtree():
    torch.manual_seed(0)
    attention = HierarchicalSelfAttention(8, 2, 0.0, embedding_size=4).eval()
    structure = accumulation_structure(parents_batch(HIER), embedding_size=4, subtree_mask=True)
    x = torch.randn(10, 1, 8)
    changed = x.clone()
    changed[2] += 1.0  # leaf a, outside VP's subtree
    out, _, _ = attention(x, None, structure)
    out_changed, _, _ = attention(changed, None, structure)
    moved = (out - out_changed).abs().amax(dim=(1, 2)) > 1e-6
    #                          S     NP    a     b     VP     c     NP     d     e     EOS
    assert moved.tolist() == [True, True, True, True, False, True, False, True, True, True]


def test_without_subtree_masks_equal_nodes_stay_equal():
    # nodes with the same input and no subtree masks give equal outputs: the -SubMask ablation on SST
    torch.manual_seed(0)
    attention = HierarchicalSelfAttention(8, 2, 0.0, embedding_size=4).eval()
    x = torch.randn(10, 1, 8)
    nodes = [0, 1, 4, 6]
    x[nodes] = x[0].clone()
    for subtree_mask, equal in ((False, True), (True, False)):
        structure = accumulation_structure(parents_batch(HIER), embedding_size=4, subtree_mask=subtree_mask)
        out, _, _ = attention(x, None, structure)
        assert torch.allclose(out[nodes], out[0].expand(4, 1, 8), atol=1e-6) == equal


def test_attention_weights_follow_the_subtree_mask():
    torch.manual_seed(0)
    attention = HierarchicalSelfAttention(8, 2, 0.0, embedding_size=0).eval()
    structure = accumulation_structure(parents_batch(HIER), subtree_mask=True)
    x = torch.randn(10, 1, 8)
    out, weights, _ = attention(x, None, structure, need_weights=True)
    fused, _, _ = attention(x, None, structure)
    torch.testing.assert_close(out, fused)
    assert weights.shape == (1, 2, 10, 10)
    assert ((weights > 0) <= structure["attention_mask"]).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, 2, 10))


def test_empty_rows_and_sentences_without_nodes():
    # a one-word sentence with its POS node dropped is a leaf plus the EOS: no node anywhere in the batch
    structure = accumulation_structure(parents_batch([-1], [-1]), embedding_size=2, subtree_mask=True)
    values = torch.randn(2, 1, 2, 4)
    out = hierarchical_accumulation(values, torch.randn(2, 2), structure, HierarchicalEmbeddings(2, 4))
    torch.testing.assert_close(out, values)


# --- the position form and the masks built once per batch

def test_hierarchical_accumulation_runs_the_position_form_unless_another_is_asked_for():
    """The position form against eqs. 5-10: test_accumulation_matches_the_papers_equations; here a hook's node rows
    are placed at the nodes."""
    rng = random.Random(7)
    _, embeddings, values, weights, structure = random_accumulation_inputs(rng, 10, 2, "paper", False)
    default = hierarchical_accumulation(values, weights, structure, embeddings)
    assert torch.equal(default, position_accumulation(values, weights, structure, embeddings))
    keep = ~structure["is_node"][:, None, :, None].expand_as(values)
    assert not torch.equal(default, values) and torch.equal(default[keep], values[keep])  # leaf rows as they are
    # both tables (one parameter) reach the output, so neither half's gradient is all zero
    assert all(half.abs().sum() > 0 for half in torch.autograd.grad(default.sum(), embeddings.tables)[0])
    calls = []

    def other(values, weights, structure, embeddings):  # the node rows B x H x m x d, as a hook gives them
        calls.append(structure)
        node_pos = structure["node_pos"][:, None, :, None].expand(-1, values.size(1), -1, values.size(3))
        return position_accumulation(values, weights, structure, embeddings).gather(2, node_pos)

    chosen = hierarchical_accumulation(values, weights, structure, embeddings, other)
    assert len(calls) == 1
    torch.testing.assert_close(chosen, default, rtol=0, atol=0)


def test_the_masks_built_once_per_batch_give_what_each_layer_made_from_the_boolean_masks():
    torch.manual_seed(0)
    parents = parents_batch([-1, 0, 0, 2, 2], [-1, 0, 0], [-1, 0, 1, 1, 0, 4, 4])  # padded rows
    structure = accumulation_structure(parents, embedding_size=3, subtree_mask=True)
    allowed = structure["attention_mask"]
    assert torch.equal(structure["attention_bias"] == 0, allowed)
    assert torch.isinf(structure["attention_bias"][~allowed]).all() and (structure["attention_bias"] <= 0).all()
    without = {name: tensor for name, tensor in structure.items() if name != "attention_bias"}
    encoder = HierarchicalSelfAttention(8, 2, 0.0, 3).eval()
    x = torch.randn(parents.size(1), 3, 8)
    torch.testing.assert_close(encoder(x, None, structure)[0], encoder(x, None, without)[0], rtol=0, atol=1e-6)

    padding = parents.eq(st.PAD)
    structure["padding_bias"] = additive_mask(~padding[:, None, None, :])
    assert torch.equal(torch.isinf(structure["padding_bias"][:, 0, 0]), padding)
    without = {name: tensor for name, tensor in structure.items() if name != "padding_bias"}
    cross = HierarchicalCrossAttention(8, 2, 0.0, 3).eval()
    query = torch.randn(4, 3, 8)
    got, _ = cross(query, x, x, SourceTree(padding, structure))
    want, _ = cross(query, x, x, SourceTree(padding, without))
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    # asked for the weights, it reads the boolean mask: none on the padding
    _, weights = cross(query, x, x, SourceTree(padding, structure), need_weights=True)
    assert weights[padding[:, None, :].expand_as(weights)].abs().sum() == 0


# --- fused parameters

def test_fused_linear_is_the_maps_side_by_side_and_draws_nothing():
    torch.manual_seed(0)
    maps = [torch.nn.Linear(4, size) for size in (3, 3, 3)]
    x = torch.randn(2, 5, 4)
    state = torch.get_rng_state()
    fused = fused_linear(*maps)
    assert torch.equal(torch.get_rng_state(), state)  # no initialisation of its own
    assert fused.weight.shape == (9, 4) and fused.bias.shape == (9,)
    for index, linear in enumerate(maps):
        part = linear_part(fused, index, 3)
        assert torch.equal(part.weight, linear.weight) and torch.equal(part.bias, linear.bias)
        # equal up to float32 rounding: a 3 x 4 product may sum in another order than the 9 x 4 one
        torch.testing.assert_close(fused(x)[..., 3 * index:3 * index + 3], linear(x), rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="same input size"):
        fused_linear(torch.nn.Linear(4, 3), torch.nn.Linear(5, 3))


@pytest.mark.parametrize("module", [HierarchicalSelfAttention, HierarchicalCrossAttention])
def test_attention_starts_from_the_base_classs_separate_projections(module):
    torch.manual_seed(5)
    base = StructuredSelfAttention(8, 2)
    torch.manual_seed(5)
    fused = module(8, 2, 0.0, 3)
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        assert torch.equal(getattr(fused, name).weight, getattr(base, name).weight), name
        assert torch.equal(getattr(fused, name).bias, getattr(base, name).bias), name
    fused_names = {"in_proj"} if module is HierarchicalSelfAttention else {"q_proj", "kv_proj"}
    assert {name for name, _ in fused.named_children()} == fused_names | {"out_proj", "leaf_weight", "embeddings"}


def test_embedding_tables_are_drawn_as_two_tables_and_are_one_parameter():
    torch.manual_seed(2)
    vertical, horizontal = torch.empty(3, 2).normal_(std=4**-0.5), torch.empty(3, 2).normal_(std=4**-0.5)
    torch.manual_seed(2)
    embeddings = HierarchicalEmbeddings(3, 4)
    assert [name for name, _ in embeddings.named_parameters()] == ["tables"]
    assert torch.equal(embeddings.vertical, vertical) and torch.equal(embeddings.horizontal, horizontal)
    assert embeddings.vertical.data_ptr() == embeddings.tables.data_ptr()  # views, not copies


# --- the fairseq model

def build(data_dir, *extra):
    """(task, model in eval mode, sample of 8 test pairs, args) of transformer_hier_accum_tiny with |E| = 4."""
    task, model, _, sample, args = build_on_cpu([data_dir, *TRANSLATION, "--arch", "transformer_hier_accum_tiny",
                                                 "--hier-embed-size", "4", *extra])
    return task, model, sample, args


def test_leaves_alone_get_positions_numbered_left_to_right(hier_accum_data):
    task, model, sample, _ = build(hier_accum_data)
    net_input = sample["net_input"]
    encoder = model.encoder
    states = encoder(**{k: v for k, v in net_input.items() if k != "prev_output_tokens"}, return_all_hiddens=True)
    embedded = states["encoder_states"][0].transpose(0, 1)  # B x T x C, before the first layer
    tokens, parents = net_input["src_tokens"], net_input["src_parents"]
    is_leaf = st.is_leaf(parents)
    leaf_ordinal = torch.where(is_leaf, is_leaf.cumsum(-1) - 1, -1)  # leaves numbered 0, 1, ... left to right
    table = encoder.leaf_positions.weights  # sinusoidal; row padding_idx is zero
    positions = torch.where(leaf_ordinal >= 0, encoder.padding_idx + 1 + leaf_ordinal, encoder.padding_idx)
    expected = encoder.embed_scale * encoder.embed_tokens(tokens) + table[positions]
    keep = tokens.ne(encoder.padding_idx)
    torch.testing.assert_close(embedded[keep], expected[keep])
    # node tokens ("(S", "(NP", ...) carry no position
    is_node = ~st.is_leaf(parents) & parents.ne(st.PAD)
    torch.testing.assert_close(embedded[is_node], (encoder.embed_scale * encoder.embed_tokens(tokens))[is_node])


def test_ablation_switches(hier_accum_data):
    _, full, _, _ = build(hier_accum_data)
    _, plain, sample, _ = build(hier_accum_data, "--no-hier-embed", "--no-subtree-mask")
    names = {name for name, _ in full.named_parameters()} - {name for name, _ in plain.named_parameters()}
    # the vertical and horizontal tables (one parameter) of each encoder layer and decoder cross-attention (2 + 2)
    assert len(names) == 4 and all(name.endswith("embeddings.tables") for name in names)
    parents = sample["net_input"]["src_parents"]
    structure = plain.encoder.build_structure(sample["net_input"]["src_tokens"], {"src_parents": parents})
    assert "embedding_bins" not in structure and structure["attention_mask"].shape[2] == 1


def test_a_reordered_structure_selects_a_tensor_only_when_read_and_composes_orders():
    """Two reorders of the encoder output equal one by the composed order, and select only what is read, once."""
    rng = random.Random(5)
    trees = [random_preorder_tree(rng, rng.randint(3, 12)) for _ in range(3)]
    structure = accumulation_structure(parents_batch(*trees), 4, subtree_mask=True)
    first, second = torch.tensor([0, 0, 1, 1, 2, 2]), torch.tensor([1, 0, 0, 3, 5, 5])
    reordered = reorder_structure(reorder_structure(structure, first), second)
    assert reordered.selected == {} and set(reordered) == set(structure) and "attention_mask" in reordered
    assert reordered.selected == {}  # iterating and asking for a name select nothing
    order = first[second]  # row r: row second[r] of the first reordering, row first[second[r]] of the batch
    bias = reordered["attention_bias"]
    assert reordered["attention_bias"] is bias  # read twice, selected once
    assert set(reordered.selected) == {"attention_bias"}
    assert reordered.base is structure  # the second reorder composed the orders rather than select from the first
    # the structure of the reordered batch (every tree still in it: the same widths)
    direct = accumulation_structure(parents_batch(*[trees[i] for i in order.tolist()]), 4, subtree_mask=True)
    for name in structure:
        assert torch.equal(reordered[name], direct[name]), name


def test_incremental_decoding_equals_full_decoding_and_accumulates_once(hier_accum_data):
    """Step-by-step decoding (beams reordered at step 2, a sentence ending at step 4) equals the full pass."""
    _, model, sample, _ = build(hier_accum_data)
    net_input = sample["net_input"]
    sentences = net_input["src_tokens"].size(0)
    beams = torch.arange(sentences).repeat_interleave(2)  # rows 2j and 2j + 1: sentence j
    prev = net_input["prev_output_tokens"]
    prev = torch.stack([prev[j // 2] if j % 2 == 0 else prev[(j // 2 + 1) % sentences] for j in range(2 * sentences)])
    moves = {2: torch.tensor([1, 1, 2, 3, 5, 4, 6, 6, 9, 8, *range(10, 16)]),  # within each sentence's two rows
             4: torch.tensor([0, 1, 5, 4, *range(6, 16)])}  # sentence 1 (rows 2, 3) leaves
    with torch.no_grad():
        encoder_out = model.encoder(net_input["src_tokens"], net_input["src_lengths"],
                                    src_parents=net_input["src_parents"])
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, beams)
        full, _ = model.decoder(prev, encoder_out)
        state, steps = {}, []
        counting = mock.patch.object(cross_module, "hierarchical_accumulation",
                                     wraps=cross_module.hierarchical_accumulation)
        with counting as accumulations:
            for t in range(prev.size(1)):
                if t in moves:
                    order = moves[t]
                    model.decoder.reorder_incremental_state_scripting(state, order)
                    encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
                    prev, full, steps = prev[order], full[order], [step[order] for step in steps]
                out, _ = model.decoder(prev[:, : t + 1], encoder_out, incremental_state=state)
                steps.append(out)
        assert accumulations.call_count == len(model.decoder.layers)  # once per layer, at the first step
    assert max(moves) < prev.size(1) and prev.size(0) == 14
    incremental = torch.cat(steps, dim=1)
    real = prev.ne(model.decoder.padding_idx)  # the full pass masks target padding, one step at a time cannot
    torch.testing.assert_close(incremental[real], full[real], rtol=1e-5, atol=1e-5)


def test_beam_search_scores_match_a_full_forward_pass(hier_accum_data):
    task, model, sample, args = build(hier_accum_data)
    args.beam = 3
    generator = task.build_generator([model], args)
    hypotheses = task.inference_step(generator, [model], sample)
    net_input = sample["net_input"]
    eos = task.target_dictionary.eos()
    for row, hypos in enumerate(hypotheses):
        best = hypos[0]["tokens"]
        prev = torch.cat([torch.tensor([eos]), best[:-1]]).unsqueeze(0)
        with torch.no_grad():
            logits, _ = model(net_input["src_tokens"][row : row + 1], net_input["src_lengths"][row : row + 1], prev,
                              src_parents=net_input["src_parents"][row : row + 1])
        scores = torch.log_softmax(logits.float(), -1)[0].gather(1, best.unsqueeze(1)).squeeze(1)
        torch.testing.assert_close(hypos[0]["positional_scores"], scores, rtol=1e-4, atol=1e-4)


def test_cross_attention_share_matches_fairseqs_alignment_output(hier_accum_data):
    from fairseq_syntax.methods.hier_accum.analysis import cross_attention_share

    task, model, sample, _ = build(hier_accum_data)
    share = cross_attention_share(model, [sample])
    assert share.node_share + share.leaf_share + share.eos_share == pytest.approx(1.0)
    net_input = sample["net_input"]
    parents = net_input["src_parents"]
    is_node = ~st.is_leaf(parents) & parents.ne(st.PAD)
    real = sample["target"].ne(model.decoder.padding_idx)
    # fairseq's decoder returns one layer's cross-attention (mean over heads) as its alignment: layer by layer
    with torch.no_grad():
        encoder_out = model.encoder(net_input["src_tokens"], net_input["src_lengths"], src_parents=parents)
        for layer, expected in enumerate(share.layer_node_shares):
            _, extra = model.decoder(net_input["prev_output_tokens"], encoder_out, alignment_layer=layer)
            on_nodes = (extra["attn"][0] * is_node.unsqueeze(1)).sum(-1)[real]
            assert on_nodes.mean().item() == pytest.approx(expected, rel=1e-5)
    # a tree has 4 nodes (S, NP, VP, NP) and 6 leaves, one of each more for each fa@@ ther (its NN and 2 pieces)
    split = int(net_input["src_tokens"].eq(task.source_dictionary.index("fa@@")).sum())
    assert split > 0 and share.node_fraction == pytest.approx((4 * 8 + split) / (10 * 8 + 2 * split))
    assert share.target_tokens == int(real.sum())


def test_cross_attention_with_zero_queries_is_the_mean_of_leaves_and_accumulated_nodes():
    # q = 0: each decoder position averages the source values over the real positions
    torch.manual_seed(0)
    attention = HierarchicalCrossAttention(8, 2, 0.0, embedding_size=0).eval()
    torch.nn.init.zeros_(attention.q_proj.weight)
    torch.nn.init.zeros_(attention.q_proj.bias)
    parents = parents_batch(SMALL, [-1, 0, 0], left_pad=True)
    structure = accumulation_structure(parents)
    padding = parents.eq(st.PAD)
    source = torch.randn(parents.size(1), 2, 8)
    out, _ = attention(torch.randn(3, 2, 8), source, source, key_padding_mask=SourceTree(padding, structure))
    values = attention.v_proj(source).view(-1, 2, 2, 4).permute(1, 2, 0, 3)  # B x H x S x d
    leaf_weights = attention.leaf_weight(source).squeeze(-1).t()
    with torch.no_grad():
        for b in range(2):
            accumulated = reference_accumulation(parents[b].tolist(), values[b], leaf_weights[b], None, "paper")
            mean = accumulated[:, ~padding[b]].mean(dim=1)  # H x d
            expected = attention.out_proj(mean.reshape(8))
            for query in range(3):
                torch.testing.assert_close(out[query, b], expected, atol=1e-5, rtol=1e-5)
