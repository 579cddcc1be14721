""":func:`position_accumulation`'s hook, and the masks built once per batch against the boolean masks."""
import random

import torch
from conftest import parents_batch, random_accumulation_inputs

from fairseq_syntax.core import structure as st
from fairseq_syntax.methods.hier_accum.accumulation import (
    accumulation_structure,
    additive_mask,
    hierarchical_accumulation,
    position_accumulation,
)
from fairseq_syntax.methods.hier_accum.attention import (
    HierarchicalCrossAttention,
    HierarchicalSelfAttention,
    SourceTree,
)

torch.set_num_threads(1)


def test_hierarchical_accumulation_runs_the_position_form_unless_another_is_asked_for():
    """The position form against eqs. 5-10: test_hier_accum.py; here a hook's node rows are placed at the nodes."""
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
