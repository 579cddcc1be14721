"""Computations without device read-backs (bench/ops) give what the plain statements give."""
import math
import random
from types import SimpleNamespace

import pytest
import torch
from conftest import one_word_batch, parents_batch, random_preorder_tree
from test_structure import strict_ancestors
from fairseq import metrics

from fairseq_syntax.core import structure as st
from fairseq_syntax.core.attention import StructuredSelfAttention
from fairseq_syntax.core.side_inputs import collate_side_inputs
from fairseq_syntax.methods.dependency_supervision.criterion import (
    LabelSmoothedCrossEntropyWithDependency,
    dependency_loss,
)
from fairseq_syntax.methods.dependency_supervision.targets import IGNORE
from fairseq_syntax.methods.hier_accum.accumulation import accumulation_structure
from fairseq_syntax.methods.tree_transformer.attention import ConstituentAttention


def random_parent_row(rng, size):
    """``parents[k] < k``, any earlier node: not always a preorder (ancestor_or_self does not need one)."""
    return [-1] + [rng.randrange(-1, k) for k in range(1, size)]


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 8, 9, 16, 17, 30])
def test_pointer_doubling_finds_every_ancestor_of_a_chain(size):
    # a chain is as deep as a row of `size` positions can be: the last node is size - 1 steps below the root
    chain = torch.tensor([[-1] + list(range(size - 1))])
    dominance = st.ancestor_or_self(chain)
    assert dominance[0].tolist() == [[i <= j for j in range(size)] for i in range(size)]


def test_pointer_doubling_agrees_with_a_walk_up_the_parents():
    rng = random.Random(3)
    rows = [random_parent_row(rng, rng.randint(1, 20)) for _ in range(12)]
    width = max(map(len, rows)) + 2
    parents = torch.full((len(rows), width), st.PAD)
    for b, row in enumerate(rows):
        parents[b, :len(row)] = torch.tensor(row)
    dominance = st.ancestor_or_self(parents)
    for b, row in enumerate(rows):
        expected = [[i < len(row) and j < len(row) and (i == j or i in strict_ancestors(row, j)) for j in range(width)]
                    for i in range(width)]
        assert dominance[b].tolist() == expected, row


def python_sizes(rows):
    """Most leaves, most nodes in a row and the most node ancestors of a leaf, by walking each row."""
    leaves = nodes = depth = 0
    for row in rows:
        valid = [k for k in range(len(row)) if row[k] != st.PAD]
        row_leaves = [k for k in valid if k not in row]
        leaves, nodes = max(leaves, len(row_leaves)), max(nodes, len(valid) - len(row_leaves))
        depth = max([depth] + [len(strict_ancestors(row, k)) for k in row_leaves])
    return {"leaves": leaves, "nodes": nodes, "depth": depth}


@pytest.mark.parametrize("left_pad", [False, True])
def test_tree_sizes_are_the_batch_maxima(left_pad):
    rng = random.Random(5)
    parents = parents_batch(*[random_preorder_tree(rng, rng.randint(1, 25)) for _ in range(7)], left_pad=left_pad)
    assert st.tree_sizes(parents) == python_sizes(parents.tolist())
    assert st.tree_sizes(parents[:0]) == {"leaves": 0, "nodes": 0, "depth": 0}


def test_collation_passes_the_sizes_of_the_parents_beside_them():
    items = [{"src_parents": torch.tensor([-1, 0, 1, 1])}, {"src_parents": torch.tensor([-1, 0])}]
    batch = collate_side_inputs(["src_parents"], items, False, 5, "test")
    assert batch["src_parents"].tolist() == [[-1, 0, 1, 1, -1], [-1, 0, -1, -2, -2]]
    # leaves: 2, 3 and EOS in the first row; nodes 0 and 1; leaf 2 is under 1 and 0
    assert batch["src_parents_sizes"] == {"leaves": 3, "nodes": 2, "depth": 2}
    assert all(type(value) is int for value in batch["src_parents_sizes"].values())  # host numbers, not tensors


@pytest.mark.parametrize("embedding_size", [0, 3])
def test_the_structure_from_collated_sizes_is_the_structure_read_from_the_device(embedding_size):
    rng = random.Random(embedding_size)
    parents = parents_batch(*[random_preorder_tree(rng, rng.randint(1, 25)) for _ in range(6)])
    read = accumulation_structure(parents, embedding_size, subtree_mask=True)
    given = accumulation_structure(parents, embedding_size, subtree_mask=True, collated=True,
                                   sizes=st.tree_sizes(parents))
    assert read.keys() == given.keys()
    for name in read:
        assert torch.equal(read[name], given[name]), name


@pytest.mark.parametrize("attention", [StructuredSelfAttention(16, 4), ConstituentAttention(16, 4)])
def test_an_all_false_padding_mask_gives_what_no_mask_gives(attention):
    # a batch without padding: every layer now gets its all-False mask instead of none
    torch.manual_seed(0)
    attention.eval()
    x = torch.randn(7, 3, 16)
    no_padding = torch.zeros(3, 7, dtype=torch.bool)
    for need_weights in (False, True):
        without, with_mask = attention(x, None, need_weights=need_weights), attention(x, no_padding,
                                                                                     need_weights=need_weights)
        assert torch.equal(without[0], with_mask[0])


def test_the_dependency_loss_with_zeros_is_the_sum_over_the_tokens_with_a_parent():
    torch.manual_seed(1)
    attention = torch.softmax(torch.randn(3, 6, 6), dim=-1)
    targets = torch.tensor([[1, 0, 3, IGNORE, IGNORE, IGNORE], [5, 5, 5, 5, 5, IGNORE], [IGNORE] * 6])
    summed, tokens, correct = dependency_loss(attention, targets)
    supervised = targets != IGNORE
    picked = attention.log().gather(2, targets.clamp(min=0)[:, :, None]).squeeze(2)
    torch.testing.assert_close(summed, -picked[supervised].sum())
    assert (int(tokens), int(correct)) == (8, int((attention.argmax(2) == targets)[supervised].sum()))


def test_dependency_metrics_are_summed_and_derived_as_fairseq_averages_them():
    logs = [{"loss": torch.tensor(4.0), "nll_loss": torch.tensor(2.0), "ntokens": 10, "nsentences": 2,
             "sample_size": 10, "dependency_loss": torch.tensor(6.0), "dependency_tokens": torch.tensor(8),
             "dependency_correct": torch.tensor(3)},
            {"loss": torch.tensor(2.0), "nll_loss": torch.tensor(1.0), "ntokens": 6, "nsentences": 1,
             "sample_size": 6, "dependency_loss": torch.tensor(1.5), "dependency_tokens": torch.tensor(4),
             "dependency_correct": torch.tensor(3)}]
    with metrics.aggregate() as aggregate:
        LabelSmoothedCrossEntropyWithDependency.reduce_metrics(logs)
        values = aggregate.get_smoothed_values()
    # fairseq's weighted average of the per-batch values, weighted by each batch's supervised tokens
    loss = (6.0 / 8 / math.log(2) * 8 + 1.5 / 4 / math.log(2) * 4) / 12
    assert torch.is_tensor(values["dependency_loss"])  # read back only when printed
    assert values["dependency_loss"].item() == round(loss, 3)
    assert values["dependency_accuracy"].item() == round(100 * 6 / 12, 2)
    assert not any(key.startswith("_") for key in values)  # the sums are not shown
    assert list(values).index("dependency_loss") < list(values).index("ppl")  # shown beside the loss, as before


#: "the cat sat" with the parser's distributions but without its 1-best tree (side data made before it was stored)
WITHOUT_BEST = {"words": ["the", "cat", "sat"],
                "arcs": [[1, 2, 1.0, {"det": 1.0}], [2, 3, 1.0, {"nsubj": 1.0}], [3, 0, 1.0, {"root": 1.0}]]}


def test_side_data_without_the_1best_tree_is_refused_on_the_first_batch_only():
    from fairseq_syntax.methods.ldd.distributions import FirstBatchCheck
    from fairseq_syntax.methods.pascal.model import PascalEncoder

    word_pairs, token_words, _ = one_word_batch(WITHOUT_BEST, [1, 1, 1], 4)
    eos, pad = 2, 1
    encoder = SimpleNamespace(padding_idx=pad, dictionary=SimpleNamespace(eos=lambda: eos),
                              options=SimpleNamespace(pascal_sigma=1.0), one_best_check=FirstBatchCheck())
    batch = {"src_ldd": (word_pairs, token_words)}
    src_tokens = torch.tensor([[7, 8, 9, eos]])
    with pytest.raises(ValueError, match="lacks: make it again with fairseq-syntax-preprocess-dependencies"):
        PascalEncoder.build_structure(encoder, src_tokens, batch)
    # later batches are not checked again: nothing is read back from the device at every step
    assert PascalEncoder.build_structure(encoder, src_tokens, batch)["parent_density"].shape == (1, 4, 4)


def test_the_link_masks_built_once_per_batch_give_what_each_layer_made_from_the_padding():
    from fairseq_syntax.methods.tree_transformer.attention import link_masks

    torch.manual_seed(2)
    attention = ConstituentAttention(16, 4).eval()
    x, previous = torch.randn(6, 3, 16), torch.rand(3, 5)
    padding = torch.tensor([[False] * 6, [False] * 4 + [True] * 2, [True] * 3 + [False] * 3])
    masks = link_masks(~padding, 3, 6, x.device)
    links, prior = attention.links_and_prior(x, padding, previous)
    shared_links, shared_prior = attention.links_and_prior(x, padding, previous, masks)
    assert torch.equal(links, shared_links) and torch.equal(prior, shared_prior)
    assert torch.equal(attention(x, padding, {"link_masks": masks})[0], attention(x, padding)[0])
