"""Hierarchical accumulation's fused parameters equal the separate maps and start from their values."""
import pytest
import torch

from fairseq_syntax.core.attention import StructuredSelfAttention
from fairseq_syntax.core.fused_linear import fused_linear, linear_part
from fairseq_syntax.methods.hier_accum.accumulation import HierarchicalEmbeddings
from fairseq_syntax.methods.hier_accum.attention import HierarchicalCrossAttention, HierarchicalSelfAttention

torch.set_num_threads(1)


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
