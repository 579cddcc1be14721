"""Each method's maths in bf16/fp16 against float32 on the same rounded values, on the CPU."""
import contextlib
import copy
from typing import Callable, Dict, Optional

import pytest
import torch
from conftest import one_word_batch, parents_batch
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode

from fairseq_syntax.core import structure as st
from fairseq_syntax.core.attention import StructuredSelfAttention
from fairseq_syntax.methods.dependency_supervision.attention import DependencyBasedSelfAttention
from fairseq_syntax.methods.dependency_supervision.criterion import dependency_loss
from fairseq_syntax.methods.dependency_supervision.targets import IGNORE
from fairseq_syntax.methods.hier_accum.accumulation import (
    HierarchicalEmbeddings,
    accumulation_structure,
    hierarchical_accumulation,
)
from fairseq_syntax.methods.hier_accum.attention import HierarchicalSelfAttention
from fairseq_syntax.methods.ldd.attention import DependencyAttentionOnly, LabeledDependencyAttention
from fairseq_syntax.methods.ldd.distributions import variant_distribution
from fairseq_syntax.methods.pascal.attention import ParentScaledSelfAttention
from fairseq_syntax.methods.pascal.parents import parent_density, parent_positions
from fairseq_syntax.methods.syntax_mask.attention import MAX_LOG_PENALTY, RelationMaskAttention
from fairseq_syntax.methods.syntax_mask.relations import NUM_RELATIONS, relation_ids
from fairseq_syntax.methods.tree_transformer.attention import (
    ConstituentAttention,
    constituent_prior,
    hierarchical_links,
    neighbour_link_probabilities,
)

#: u: the largest relative error of one rounding to nearest (half the spacing of the numbers at 1)
UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}
FORWARD, BACKWARD, CAST = 4, 8, 1  # in u: ~4 roundings forward, twice that in a gradient, one cast back
FLOAT32 = 1e-6
#: gradients that are 0 in exact arithmetic (a softmax ignores a row's constant): no scale to measure noise by
UNDETERMINED = ("k_proj.bias", "link_key.bias")
FORMATS = pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])


class AtomicAddsInTheirDtype(TorchDispatchMode):
    """Every half ``scatter_add`` computed as CUDA's atomic adds do: term by term, each sum rounded to its dtype."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        scatter_adds = (torch.ops.aten.scatter_add.default, torch.ops.aten.scatter_add_.default)
        if func not in scatter_adds or args[0].dtype not in UNIT_ROUNDOFF:
            return func(*args, **kwargs)
        self.calls += 1
        result = scatter_add_term_by_term(*args)
        return args[0].copy_(result) if func is torch.ops.aten.scatter_add_.default else result


def scatter_add_term_by_term(target: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """``target.scatter_add(dim, index, source)`` with each term added on its own and rounded to ``target``'s dtype."""
    destination = torch.arange(target.numel()).view(target.shape).gather(dim, index).flatten()
    terms = source[tuple(slice(0, size) for size in index.shape)].flatten()
    by_destination = torch.sort(destination, stable=True).indices
    destination, terms = destination[by_destination], terms[by_destination]
    rank = torch.arange(len(destination)) - torch.searchsorted(destination, destination)
    by_rank = torch.sort(rank, stable=True).indices
    destination, terms = destination[by_rank], terms[by_rank]
    sums = target.flatten().clone()
    start = 0
    for end in torch.bincount(rank).cumsum(0).tolist():
        where = destination[start:end]
        sums[where] = (sums[where].float() + terms[start:end].float()).to(target.dtype)
        start = end
    return sums.view(target.shape)


def test_the_emulated_atomic_adds_round_every_addition():
    # bfloat16 term-by-term sums of 500 x 1.5e-3 stop at 0.5 (spacing 2^-8); float16 keeps growing; float32 exact
    terms = torch.full((1, 500), 1.5e-3)
    index = torch.zeros(1, 500, dtype=torch.long)
    bf16 = scatter_add_term_by_term(torch.zeros(1, 1, dtype=torch.bfloat16), 1, index, terms.bfloat16())
    assert bf16.item() == 0.5
    fp16 = scatter_add_term_by_term(torch.zeros(1, 1, dtype=torch.float16), 1, index, terms.half())
    assert abs(fp16.item() - 500 * 1.5e-3) > 10 * 2.0**-11 * 0.75  # off by more than one rounding of the sum
    rows = torch.randint(0, 5, (3, 40))
    values = torch.randn(3, 40)
    exact = scatter_add_term_by_term(torch.zeros(3, 5), 1, rows, values)
    assert torch.allclose(exact, torch.zeros(3, 5).scatter_add(1, rows, values), atol=1e-6)
    with AtomicAddsInTheirDtype() as mode:
        torch.zeros(1, 1, dtype=torch.bfloat16).scatter_add(1, index, terms.bfloat16())
    assert mode.calls == 1


# --- the comparison
def relative_error(got: Tensor, want: Tensor) -> float:
    """Largest absolute difference over the largest absolute float32 value; inf when ``got`` is not finite."""
    got = got.detach().float()
    if not torch.isfinite(got).all():
        return float("inf")
    return float((got - want.detach()).abs().max() / want.detach().abs().max().clamp_min(1e-30))


def half_against_float32(
    function: Callable[..., Tensor], dtype: torch.dtype, module: Optional[nn.Module] = None,
    inputs: Optional[Dict[str, Tensor]] = None, data: Optional[Dict[str, Tensor]] = None, seed: int = 0,
) -> Dict[str, float]:
    """Relative errors of ``function``'s output and float gradients in ``dtype`` against float32 on rounded values."""
    inputs = {name: value.to(dtype).float() if value.is_floating_point() else value
              for name, value in (inputs or {}).items()}
    data = {name: value.to(dtype).float() for name, value in (data or {}).items()}
    if module is not None:
        module = copy.deepcopy(module)
        with torch.no_grad():
            for parameter in module.parameters():
                parameter.copy_(parameter.to(dtype).float())
    runs = {}
    for run_dtype in (torch.float32, dtype):
        run_module = None if module is None else copy.deepcopy(module).to(run_dtype)
        run_inputs = {name: value.detach().to(run_dtype).requires_grad_() if value.is_floating_point() else value
                      for name, value in inputs.items()}
        with AtomicAddsInTheirDtype() if run_dtype != torch.float32 else contextlib.nullcontext():
            try:
                torch.manual_seed(seed)
                run_data = {name: value.to(run_dtype) for name, value in data.items()}
                output = function(run_module, **run_inputs, **run_data)
                upstream = torch.randn(output.shape, generator=torch.Generator().manual_seed(seed + 1))
                output.backward(upstream.to(dtype).to(output.dtype))
            except (RuntimeError, NotImplementedError) as error:
                if "not implemented for" in str(error):
                    pytest.skip(f"the CPU has no {dtype} kernel for a step: {error}")
                raise
        runs[run_dtype] = output, run_inputs, run_module
    (want, want_inputs, want_module), (got, got_inputs, got_module) = runs[torch.float32], runs[dtype]
    errors = {"output": relative_error(got, want)}
    for name, value in want_inputs.items():
        if value.is_floating_point():
            errors["d" + name] = relative_error(got_inputs[name].grad, value.grad)
    if module is not None:
        got_parameters = dict(got_module.named_parameters())
        for name, parameter in want_module.named_parameters():
            if parameter.grad is not None and name not in UNDETERMINED:
                errors["d" + name] = relative_error(got_parameters[name].grad, parameter.grad)
    return errors


def assert_within(errors: Dict[str, float], dtype: torch.dtype, forward: float = FORWARD,
                  backward: float = BACKWARD) -> None:
    """The output within ``forward`` u and every gradient within ``backward`` u of float32."""
    u = UNIT_ROUNDOFF[dtype]
    over = {name: f"{error:.3g} = {error / u:.3g} u" for name, error in errors.items()
            if error > (forward if name == "output" else backward) * u}
    assert not over, f"{dtype}: beyond {forward} u (output) / {backward} u (gradients) of float32: {over}"


def assert_attention_within(dtype: torch.dtype, attention: nn.Module, x: Tensor, *arguments, **options) -> None:
    """``attention(x, *arguments, **options)[0]`` and its gradients in ``dtype`` within FORWARD / BACKWARD u."""
    assert_within(half_against_float32(lambda m, x: m(x, *arguments, **options)[0], dtype, attention, {"x": x}), dtype)


@pytest.fixture(autouse=True)
def seeded():
    """Every test's inputs are drawn from torch's generator seeded 0."""
    torch.manual_seed(0)


def padding_mask(lengths, length: int, left: bool = False) -> Tensor:
    """``B x T`` True at padding: row b has ``lengths[b]`` tokens, then (or, ``left``, before them) padding."""
    positions = torch.arange(length)
    mask = positions[None, :] >= torch.tensor(lengths)[:, None]
    return mask.flip(1) if left else mask


def chain(depth: int, leaves: int = 1) -> list:
    """Parent list of a chain of ``depth`` nodes (each the child of the one before) with ``leaves`` leaves below."""
    return [-1] + list(range(depth - 1)) + [depth - 1] * leaves


# --- core/structure.py
def test_structures_are_integers_and_the_accumulation_coefficients_float32():
    parents = parents_batch(chain(150, leaves=3))
    assert st.ancestor_or_self(parents).dtype == torch.bool
    assert st.is_leaf(parents).dtype == torch.bool
    assert relation_ids(parents).dtype == torch.long
    assert all(value.dtype in (torch.long, torch.bool) for value in st.leaf_node_split(parents).values())
    structure = accumulation_structure(parents, embedding_size=8, subtree_mask=True)
    floats = {name for name, value in structure.items() if value.is_floating_point()}
    # the coefficients of eqs. 11-12 and the subtree mask: float32, cast to the activations' dtype where used
    assert floats == {"node_over_leaf", "node_over_node", "inverse_branch_size", "leaf_coefficients",
                      "leaf_under_node", "node_over_node_positions", "kept_rows", "attention_bias"}
    assert all(structure[name].dtype == torch.float32 for name in floats)
    # node i of the chain: 1 / (|L(i)| (|P(i, j)| + 1)) = 1 / (3 (151 - i)), in float32
    inverse = structure["inverse_branch_size"][0, :150, :3]
    want = 1.0 / (3.0 * (151 - torch.arange(150, dtype=torch.float64)))
    assert torch.equal(inverse, want.float()[:, None].expand(150, 3))


# --- core/attention.py
@FORMATS
@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "weights"])
def test_plain_attention_over_long_padded_rows(dtype, need_weights):
    # 256 positions; row 1 half padding on the right, row 2 on the left: their padded queries are fully padded rows
    attention = StructuredSelfAttention(16, 2)
    mask = padding_mask([256, 128, 200], 256)
    mask[2] = padding_mask([200], 256, left=True)[0]
    assert_attention_within(dtype, attention, torch.randn(256, 3, 16), mask, {}, need_weights=need_weights)


# --- syntax_mask
@FORMATS
@pytest.mark.parametrize("bias", ["gather", "one_hot"])
def test_syntax_mask_with_large_strengths_over_a_deep_chain(dtype, bias):
    """Strengths past the cap (exp(60) overflows float16) on a chain of depth 100 and 120 flat leaves: bias, grads."""
    strengths = torch.rand(4, NUM_RELATIONS) * 2 - 1
    strengths[0, :3] = torch.tensor([60.0, 20.0, MAX_LOG_PENALTY + 1])
    attention = RelationMaskAttention(16, 4, nn.Parameter(strengths))
    parents = parents_batch(chain(100, leaves=27), [-1] + [0] * 120)
    relations = relation_ids(parents)
    structure = {"relations": relations}
    if bias == "one_hot":
        structure["relation_one_hot"] = relations.unsqueeze(-1) == torch.arange(NUM_RELATIONS + 1)
    assert_attention_within(dtype, attention, torch.randn(parents.size(1), 2, 16), parents == st.PAD, structure)


# --- ldd
def long_parse(words: int) -> dict:
    """A parser record of ``words`` words: heads d + 1 (p 0.997), d - 1 (0.002), d - 2 (0.001): arcs near 1 and 0."""
    arcs = []
    for dependent in range(1, words + 1):
        heads = [dependent + 1 if dependent < words else 0, dependent - 1, dependent - 2]
        for head, probability in zip(heads, (0.997, 0.002, 0.001)):
            if head >= 0 and head != dependent:
                arcs.append([dependent, head, probability, {"nsubj": 0.999, "det": 0.001}])
    best = [[dependent + 1 if dependent < words else 0, "nsubj"] for dependent in range(1, words + 1)]
    return {"words": [f"w{i}" for i in range(1, words + 1)], "arcs": arcs, "best": best}


def long_ldd_batch(words: int, length: int):
    """(word_pairs, token_words, not_dependent, padding, eos) of :func:`long_parse`, padded to ``length``."""
    pieces = [1 + word % 2 for word in range(words)]
    word_pairs, token_words, not_dependent = one_word_batch(long_parse(words), pieces, length)
    tokens = sum(pieces)
    padding = torch.arange(length)[None, :] > tokens
    eos = torch.arange(length)[None, :] == tokens
    return word_pairs, token_words, not_dependent, padding, eos


@FORMATS
@pytest.mark.parametrize("variant", ["ldd", "lda", "lda_weights"])
def test_labeled_dependency_heads_over_a_long_sentence(dtype, variant):
    """Half side data, probabilities near 1 and the floor, 200 positions, 19 padded: variant and head distributions."""
    word_pairs, token_words, _, padding, eos = long_ldd_batch(120, 200)
    if variant == "ldd":
        attention = LabeledDependencyAttention(32)
    else:
        attention = DependencyAttentionOnly(32, normalise=variant == "lda")

    def heads(module, x, word_pairs):
        ldd = variant_distribution(word_pairs, token_words, variant, padding, eos)
        return module(x, padding, {"ldd": ldd})[0]

    errors = half_against_float32(heads, dtype, attention, {"x": torch.randn(200, 1, 32)}, {"word_pairs": word_pairs})
    assert_within(errors, dtype)
    rounded = word_pairs.to(dtype)
    distributions = relative_error(variant_distribution(rounded, token_words, variant, padding, eos),
                                   variant_distribution(rounded.float(), token_words, variant, padding, eos))
    assert distributions <= CAST * UNIT_ROUNDOFF[dtype]  # one division by a piece count, rounded once


# --- tree_transformer
def link_scores(length: int, batch: int = 2) -> Dict[str, Tensor]:
    """Link queries and keys ``B x T x 16`` whose link probabilities are near 1 and near 0."""
    torch.manual_seed(0)
    query = torch.randn(batch, length, 16)
    key = query.roll(1, dims=1) + 0.05 * torch.randn(batch, length, 16)
    key[:, ::9] = -key[:, ::9] * 4
    return {"query": query * 6, "key": key * 6}


@FORMATS
def test_links_and_prior_over_512_tokens_stay_in_float32(dtype):
    """Eqs. 5-8 and 3-4 on 512 and 300 half tokens: links and prior come back in float32, equal to float32's."""
    length = 512
    token_mask = ~padding_mask([512, 300], length)
    scores = link_scores(length)

    def three_layers(_, query, key):
        links = None
        for layer in range(3):
            links = hierarchical_links(neighbour_link_probabilities(query, key, token_mask, 8.0 / (layer + 1)), links)
        return constituent_prior(links, token_mask)

    errors = half_against_float32(three_layers, dtype, inputs=scores)
    assert errors["output"] <= FLOAT32
    # the gradients are float32 until the half inputs, where they are rounded once
    assert errors["dquery"] <= CAST * UNIT_ROUNDOFF[dtype] and errors["dkey"] <= CAST * UNIT_ROUNDOFF[dtype]
    half = {name: value.to(dtype) for name, value in scores.items()}
    assert neighbour_link_probabilities(half["query"], half["key"], token_mask, 8.0).dtype == torch.float32


@FORMATS
def test_prior_of_half_links_is_computed_in_float32(dtype):
    """``constituent_prior`` of half links over 512 tokens needs S in float32: it equals the float32 run's prior."""
    links = 0.98 + 0.02 * torch.rand(2, 511)
    links[:, ::50] = 1e-6
    token_mask = ~padding_mask([512, 400], 512)
    errors = half_against_float32(lambda _, links: constituent_prior(links, token_mask), dtype,
                                  inputs={"links": links})
    assert errors["output"] <= FLOAT32
    assert errors["dlinks"] <= CAST * UNIT_ROUNDOFF[dtype]


@FORMATS
def test_constituent_attention_over_padded_rows(dtype):
    attention = ConstituentAttention(16, 2)
    mask = padding_mask([300, 150], 300)
    assert_attention_within(dtype, attention, torch.randn(300, 2, 16), mask, need_weights=True)


# --- hier_accum
#: a chain of depth 150 with 3 leaves, and 500 leaves under one node
TREES = {"chain150": chain(150, leaves=3), "flat500": [-1] + [0] * 500}


@FORMATS
@pytest.mark.parametrize("tree", list(TREES))
def test_hierarchical_accumulation_over_deep_and_wide_subtrees(dtype, tree):
    """Eqs. 5-10 and 16 with |E| = 8: node values and gradients of values, leaf weights and embedding tables."""
    parents = parents_batch(TREES[tree], append_eos=False)
    structure = accumulation_structure(parents, embedding_size=8)
    length = parents.size(1)
    errors = half_against_float32(
        lambda m, values, weights: hierarchical_accumulation(values, weights, structure, m), dtype,
        HierarchicalEmbeddings(8, 16), {"values": torch.randn(1, 2, length, 16), "weights": torch.rand(1, length) + 1})
    assert_within(errors, dtype)


@FORMATS
def test_hierarchical_self_attention_with_subtree_masks(dtype):
    parents = parents_batch([-1, 0, 1, 1, 0, 4, 4, 4] + [0] * 100, chain(30, leaves=40))
    structure = accumulation_structure(parents, embedding_size=8, subtree_mask=True)
    attention = HierarchicalSelfAttention(16, 2, 0.0, 8)
    assert_attention_within(dtype, attention, torch.randn(parents.size(1), 2, 16), None, structure)


# --- pascal
@FORMATS
def test_parent_positions_past_256_are_exact(dtype):
    """Parent positions (up to 450, halves) from half side data: float32, exactly the float32 run's."""
    word_pairs, token_words, not_dependent, _, _ = long_ldd_batch(300, 480)
    want = parent_positions(word_pairs, token_words, not_dependent)
    got = parent_positions(word_pairs.to(dtype), token_words, not_dependent)
    assert got.dtype == torch.float32 and torch.equal(got, want)
    assert want[0, 0] == 1.5 and want[0, 447] == 448.5  # w1 (0) -> w2 (pieces 1, 2); w299 (447) -> w300 (448, 449)
    assert parent_density(got, 1.0).dtype == torch.float32


@FORMATS
@pytest.mark.parametrize("sigma", [1.0, 1e-4])
def test_parent_scaled_heads_with_sigma_near_zero(dtype, sigma):
    """PASCAL scores times a Gaussian of sigma 1e-4 (peak 3989) stay finite in float16: saturated softmax rows."""
    word_pairs, token_words, not_dependent, padding, _ = long_ldd_batch(120, 200)
    density = parent_density(parent_positions(word_pairs.to(dtype), token_words, not_dependent), sigma)
    attention = ParentScaledSelfAttention(16, 4, pascal_heads=2)
    if sigma < 1:
        with torch.no_grad():  # the PASCAL heads' scores up to about +-30, whose product with 3989 is past 65504
            attention.q_proj.weight[8:].mul_(8)
    assert_attention_within(dtype, attention, torch.randn(200, 1, 16), padding, {"parent_density": density})


# --- dependency_supervision
@FORMATS
def test_dependency_loss_of_parents_given_almost_no_attention(dtype):
    """Eq. 9's -log A_dep where the parent gets 2e-19 (below float16's 6e-8): finite, as in float32."""
    attention = DependencyBasedSelfAttention(32, 4, dependency_heads=1)
    with torch.no_grad():
        attention.biaffine_weight.mul_(20)
    mask = padding_mask([64, 40], 64)
    targets = torch.randint(0, 40, (2, 64)).masked_fill(mask, IGNORE)
    x = torch.randn(64, 2, 32)
    errors = half_against_float32(lambda m, x: dependency_loss(m(x, mask, {})[2], targets)[0], dtype, attention,
                                  {"x": x})
    assert_within(errors, dtype)
    assert attention.to(dtype)(x.to(dtype), mask, {})[2].dtype == torch.float32
