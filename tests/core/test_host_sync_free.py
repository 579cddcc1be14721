"""The computations that replaced ones which read values back from the device (on a GPU the host waits for each;
issue 48, ``bench/ops``) give what the plain statements give: pointer doubling against a walk up the parents, the
shapes collation computes on the host against those read from the device, a padding mask of False against none,
sums with zeros against boolean selections, metrics summed and derived against fairseq's weighted averages, and the
side-data check made on the first batch only."""
import math
import random
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from conftest import one_word_batch, parents_batch, random_preorder_tree
from fairseq import metrics

from fairseq_syntax.core import structure as st
from fairseq_syntax.core.attention import StructuredSelfAttention
from fairseq_syntax.core.side_inputs import collate_side_inputs
from fairseq_syntax.methods.dependency_supervision.criterion import (
    LabelSmoothedCrossEntropyWithDependency,
    dependency_loss,
)
from fairseq_syntax.methods.dependency_supervision.targets import IGNORE
from fairseq_syntax.methods.hier_accum.accumulation import accumulation_structure, reorder_structure
from fairseq_syntax.methods.syntax_mask.relations import NUM_RELATIONS, relation_ids
from fairseq_syntax.methods.tree_transformer.attention import ConstituentAttention


def walked_ancestors(row, k):
    """Position k and its ancestors, walking up a row of absolute parents."""
    found = {k}
    while row[k] >= 0:
        k = row[k]
        found.add(k)
    return found


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
        expected = [[i < len(row) and j < len(row) and i in walked_ancestors(row, j) for j in range(width)]
                    for i in range(width)]
        assert dominance[b].tolist() == expected, row


def python_sizes(rows):
    """Most leaves, most nodes in a row and the most node ancestors of a leaf, by walking each row."""
    leaves = nodes = depth = 0
    for row in rows:
        valid = [k for k in range(len(row)) if row[k] != st.PAD]
        row_leaves = [k for k in valid if k not in row]
        leaves, nodes = max(leaves, len(row_leaves)), max(nodes, len(valid) - len(row_leaves))
        depth = max([depth] + [len(walked_ancestors(row, k)) - 1 for k in row_leaves])
    return {"leaves": leaves, "nodes": nodes, "depth": depth}


def test_one_hot_relations_by_comparison_are_torch_one_hot():
    relations = relation_ids(parents_batch([-1, 0, 0, 2], [-1]))
    one_hot = relations.unsqueeze(-1) == torch.arange(NUM_RELATIONS + 1)
    assert torch.equal(one_hot, F.one_hot(relations, NUM_RELATIONS + 1).bool())


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


#: "the cat sat" with the parser's distributions but without its 1-best tree (side data made before it was stored)
WITHOUT_BEST = {"words": ["the", "cat", "sat"],
                "arcs": [[1, 2, 1.0, {"det": 1.0}], [2, 3, 1.0, {"nsubj": 1.0}], [3, 0, 1.0, {"root": 1.0}]]}
