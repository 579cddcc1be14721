"""Hierarchical accumulation's fused parameters equal the separate maps; old checkpoints load with equal outputs."""
import argparse

import pytest
import torch

import fairseq_syntax.methods.hier_accum.model as hier_accum
from fairseq_syntax.core.attention import StructuredSelfAttention
from fairseq_syntax.core.fused_linear import fused_linear, linear_part
from fairseq_syntax.core.model import tiny_architecture
from fairseq_syntax.core.structure import PAD
from fairseq_syntax.methods.hier_accum.accumulation import HierarchicalEmbeddings
from fairseq_syntax.methods.hier_accum.attention import HierarchicalCrossAttention, HierarchicalSelfAttention
from conftest import WordTask, assert_upgrade_keeps_a_new_state_dict, load_old_state_dict

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


class TreeWordTask(WordTask):
    """WordTask as a task that hands the encoder its side inputs (what build_model checks for)."""

    def batched_side_inputs(self, dataset):
        return ("src_parents",)


def _model(seed: int) -> torch.nn.Module:
    args = argparse.Namespace(hier_embed_size=4)
    tiny_architecture(args)
    torch.manual_seed(seed)
    return hier_accum.HierAccumTransformerModel.build_model(args, TreeWordTask()).eval()


def old_state_dict(state_dict: dict) -> dict:
    """``state_dict`` as written before the fusion: in_proj, kv_proj and embeddings.tables split."""
    splits = {".in_proj.": ("q_proj", "k_proj", "v_proj"), ".kv_proj.": ("k_proj", "v_proj")}
    old = {}
    for name, value in state_dict.items():
        fused = next((key for key in splits if key in name), None)
        if fused is not None:
            for part, piece in zip(splits[fused], value.clone().chunk(len(splits[fused]), dim=0)):
                old[name.replace(fused, f".{part}.")] = piece
        elif name.endswith("embeddings.tables"):
            old[name[:-len("tables")] + "vertical"], old[name[:-len("tables")] + "horizontal"] = value.clone()
        else:
            old[name] = value.clone()
    return old


# (root (a b) c): preorder root, x, a, b, c with x over a and b; then EOS, a root of its own
TOKENS = torch.tensor([[4, 5, 6, 7, 8, 2], [4, 6, 7, 2, 1, 1]])  # 1 = padding
PARENTS = torch.tensor([[-1, 0, 1, 1, 0, -1], [-1, 0, 0, -1, PAD, PAD]])


def test_old_state_dict_loads_through_the_models_upgrade_and_gives_the_same_output():
    trained = _model(seed=0)
    old = old_state_dict(trained.state_dict())
    # 2 encoder layers x (q, k, v) + 2 decoder cross-attentions x (k, v), weight and bias each; 4 tables x 2 halves
    separate = set(old) - set(trained.state_dict())
    assert len(separate) == 2 * (2 * 3 + 2 * 2) + 4 * 2
    assert sum(name.endswith(("vertical", "horizontal")) for name in separate) == 8
    loaded = _model(seed=1)  # other weights, so only the loading can make the outputs equal
    load_old_state_dict(trained, loaded, old, "in_proj")
    args = (TOKENS, torch.tensor([6, 4]), TOKENS)
    out = trained(*args, src_parents=PARENTS)[0]
    assert torch.isfinite(out).all()
    assert torch.equal(loaded(*args, src_parents=PARENTS)[0], out)


def test_upgrade_leaves_a_new_state_dict_as_it_is():
    assert_upgrade_keeps_a_new_state_dict(_model(seed=0))
