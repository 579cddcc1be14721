"""Tests for fairseq_syntax.core.structure against hand-derived matrices and a slow pure-Python reference."""
import numpy as np
import pytest
import torch
from conftest import parents_batch, random_preorder_tree

from fairseq_syntax.core import structure as st
from fairseq_syntax.core.structure import PAD
from fairseq_syntax.methods.syntax_mask import relations
from fairseq_syntax.methods.syntax_mask.relations import (
    ANC as A, CHILD as C, DESC as D, LEFT_OTHER as LO, LEFT_SIB as LS,
    PAD_RELATION as X, PARENT as P, RIGHT_OTHER as RO, RIGHT_SIB as RS, SELF as S,
)

# McDonald & Chiang (2021), Figure 1a in preorder with preterminals kept.
FATHER_TOKENS = ["(S", "(NP", "(PRP", "He", "(VP", "(VBZ", "is", "(NP", "(PRP$", "my", "(NN", "father", "(.", "."]
FATHER = [-1, 0, 1, 2, 0, 4, 5, 4, 7, 8, 7, 10, 0, 12]
# Relation of row i to column j, derived by hand from the tree; position 14 is the EOS root. Column 7 (the
# second NP) is their Figure 1c.
FATHER_RELATIONS = [
    # S  NP PRP He VP VBZ is NP PRP$ my NN fa (.  .   EOS
    [S, P, A, A, P, A, A, A, A, A, A, A, P, A, LO],  # (S
    [C, S, P, A, LS, LO, LO, LO, LO, LO, LO, LO, LS, LO, LO],  # (NP
    [D, C, S, P, LO, LO, LO, LO, LO, LO, LO, LO, LO, LO, LO],  # (PRP
    [D, D, C, S, LO, LO, LO, LO, LO, LO, LO, LO, LO, LO, LO],  # He
    [C, RS, RO, RO, S, P, A, P, A, A, A, A, LS, LO, LO],  # (VP
    [D, RO, RO, RO, C, S, P, LS, LO, LO, LO, LO, LO, LO, LO],  # (VBZ
    [D, RO, RO, RO, D, C, S, LO, LO, LO, LO, LO, LO, LO, LO],  # is
    [D, RO, RO, RO, C, RS, RO, S, P, A, P, A, LO, LO, LO],  # (NP
    [D, RO, RO, RO, D, RO, RO, C, S, P, LS, LO, LO, LO, LO],  # (PRP$
    [D, RO, RO, RO, D, RO, RO, D, C, S, LO, LO, LO, LO, LO],  # my
    [D, RO, RO, RO, D, RO, RO, C, RS, RO, S, P, LO, LO, LO],  # (NN
    [D, RO, RO, RO, D, RO, RO, D, RO, RO, C, S, LO, LO, LO],  # father
    [C, RS, RO, RO, RS, RO, RO, RO, RO, RO, RO, RO, S, P, LO],  # (.
    [D, RO, RO, RO, RO, RO, RO, RO, RO, RO, RO, RO, C, S, LO],  # .
    [RO, RO, RO, RO, RO, RO, RO, RO, RO, RO, RO, RO, RO, RO, S],  # EOS
]


# --- collation


@pytest.mark.parametrize("trees, options, expected", [
    # right padding: each row ends in its EOS root
    ([[-1, 0, 1, 2], [-1], [-1, 0, 0]], {}, [[-1, 0, 1, 2, -1], [-1, -1, PAD, PAD, PAD], [-1, 0, 0, -1, PAD]]),
    # left padding shifts the parents to absolute positions
    ([[-1, 0, 1, 2], [-1], [-1, 0, 0]], {"left_pad": True},
     [[-1, 0, 1, 2, -1], [PAD, PAD, PAD, -1, -1], [PAD, -1, 1, 1, -1]]),
    ([[-1, 0, 1], [-1, 0]], {"append_eos": False, "pad_to_length": 4, "left_pad": True},
     [[PAD, -1, 1, 2], [PAD, PAD, -1, 2]]),
    ([[-1, 0], []], {}, [[-1, 0, -1], [-1, PAD, PAD]]),  # an empty sentence
])
def test_collate_by_hand(trees, options, expected):
    parents = parents_batch(*trees, **options)
    assert parents.tolist() == expected and parents.dtype == torch.long


def test_collate_accepts_torch_tensors():
    parents = st.collate_parents([torch.tensor([-1, 0]), torch.tensor([], dtype=torch.long)])
    assert parents.tolist() == [[-1, 0, -1], [-1, PAD, PAD]]


@pytest.mark.parametrize(
    "arrays, message",
    [
        ([[-1, 0], [-1, 0, 2]], "sentence 1 of the batch, node 2: parent 2"),
        ([[-1, 0, -3]], "sentence 0 of the batch, node 2: parent -3"),
        # node 3's parent is 1, but node 2 (child of 0) sits between 1 and 3: not a preorder.
        ([[-1, 0, 1], [-1, 0, 0, 1]], "sentence 1 of the batch is not a preorder: node 3 has parent 1"),
        ([[-1, 0, 0], [-1, 0, 0.5]], "sentence 1 of the batch: parent array must hold integers"),
        ([[[-1, 0]]], "sentence 0 of the batch: parent array must be 1-D"),
        ([], "no sentences"),
    ],
)
def test_collate_rejects_bad_parent_arrays(arrays, message):
    with pytest.raises(ValueError, match=message):
        st.collate_parents([np.array(array) for array in arrays])


def test_collate_preorder_error_names_sentence_positions_under_left_padding():
    with pytest.raises(ValueError, match="node 3 has parent 1, but node 2 between them"):
        st.collate_parents([np.array([-1, 0, 1, 2, 3, 4]), np.array([-1, 0, 0, 1])], left_pad=True)


def test_collate_rejects_too_short_pad_length():
    with pytest.raises(ValueError, match="pad_to_length=3 is shorter than the longest row \\(4\\)"):
        parents_batch([-1, 0, 0], pad_to_length=3)


@pytest.mark.parametrize(
    "parents, message",
    [
        ([[-1, 1]], r"parents\[0, 1\] = 1"),  # not an earlier position
        ([[-1, 0], [PAD, 0]], r"parents\[1, 1\] = 0"),  # parent is padding
        ([[-1, -3]], r"parents\[0, 1\] = -3"),
    ],
)
def test_batch_functions_reject_malformed_parents(parents, message):
    with pytest.raises(ValueError, match=message):
        relations.relation_ids(torch.tensor(parents))


def test_batch_functions_reject_non_integer_and_wrong_rank():
    with pytest.raises(ValueError, match="integers"):
        st.is_leaf(torch.tensor([[-1.0, 0.0]]))
    with pytest.raises(ValueError, match="B x T"):
        st.ancestor_or_self(torch.tensor([-1, 0]))


# --- McDonald & Chiang relations (2021, section 2)


def test_relations_he_is_my_father_with_eos():
    assert relations.relation_ids(parents_batch(FATHER)).tolist() == [FATHER_RELATIONS]
    # the names --mask-relations takes, of rows (S (VP (VBZ (NP (PRP$ my He (. to the second NP (Figure 1c)
    assert [relations.RELATION_NAMES[FATHER_RELATIONS[i][7]] for i in (0, 4, 5, 7, 8, 9, 3, 12)] == [
        "anc", "parent", "left-sib", "self", "child", "desc", "left-other", "right-other"]


def test_relations_bpe_split_word_makes_subword_siblings():
    # (NN fa@@ ther): the preterminal NN (10) has two subword leaves, 11 and 12; "." moves to 14.
    tree = [-1, 0, 1, 2, 0, 4, 5, 4, 7, 8, 7, 10, 10, 0, 13]
    rel = relations.relation_ids(parents_batch(tree, append_eos=False))[0]
    #                        S  NP PRP He VP VBZ is NP PRP$ my NN fa ther (.  .
    assert rel[11].tolist() == [D, RO, RO, RO, D, RO, RO, D, RO, RO, C, S, LS, LO, LO]  # fa@@
    assert rel[12].tolist() == [D, RO, RO, RO, D, RO, RO, D, RO, RO, C, RS, S, LO, LO]  # ther
    assert rel[:, 12].tolist() == [A, LO, LO, LO, A, LO, LO, A, LO, LO, P, LS, S, RO, RO]


def test_one_word_sentence_and_eos_are_two_unrelated_roots():
    parents = parents_batch([-1])
    assert relations.relation_ids(parents).tolist() == [[[S, LO], [RO, S]]]
    assert st.is_leaf(parents).tolist() == [[True, True]]
    assert st.ancestor_or_self(parents).tolist() == [[[True, False], [False, True]]]


def test_padding_relation_mask_and_dominance():
    parents = parents_batch([-1, 0], [-1])
    assert st.is_leaf(parents).tolist() == [[False, True, True], [True, True, False]]  # padding is no leaf
    assert relations.relation_ids(parents)[1].tolist() == [[S, LO, X], [RO, S, X], [X, X, X]]
    assert st.ancestor_or_self(parents).tolist() == [
        [[True, True, False], [False, True, False], [False, False, True]],
        [[True, False, False], [False, True, False], [False, False, False]],
    ]


# --- per-position structure


def test_depths_leaves_and_spans_he_is_my_father():
    parents = parents_batch(FATHER)
    #            S NP PRP He VP VBZ is NP PRP$ my NN fa (. . EOS
    depths = [[0, 1, 2, 3, 1, 2, 3, 2, 3, 4, 3, 4, 1, 2, 0]]  # ancestors-or-self (dominance column sums) - 1
    assert (st.ancestor_or_self(parents).sum(1) - 1).tolist() == depths
    split = st.leaf_node_split(parents)
    assert split["leaf_pos"].tolist() == [[3, 6, 9, 11, 13, 14]]  # He is my father . EOS: leaves 0-5
    assert split["node_pos"].tolist() == [[0, 1, 2, 4, 5, 7, 8, 10, 12]]
    # (first, last) leaf under each node: S 0-4, NP 0, PRP 0, VP 1-3, VBZ 1, NP 2-3, PRP$ 2, NN 3, (. 4
    spans = [(0, 4), (0, 0), (0, 0), (1, 3), (1, 1), (2, 3), (2, 2), (3, 3), (4, 4)]
    _, node_over_leaf = st.dominance_blocks(parents, split)
    assert node_over_leaf.tolist() == [[[first <= leaf <= last for leaf in range(6)] for first, last in spans]]


# --- hierarchical accumulation (Nguyen et al. 2020, section 4.1)

# (S (NP a b) (VP c (NP d e))) without preterminals + EOS: 0 S, 1 NP, 2 a, 3 b, 4 VP, 5 c, 6 NP, 7 d, 8 e, 9 EOS
HIER = [-1, 0, 1, 1, 0, 4, 4, 6, 6]


def test_leaf_node_split_pads_rows_to_the_batch_maximum():
    split = st.leaf_node_split(parents_batch(HIER, [-1, 0, 0]))
    assert split["leaf_pos"].tolist() == [[2, 3, 5, 7, 8, 9], [1, 2, 3, 0, 0, 0]]
    assert split["leaf_mask"].tolist() == [[True] * 6, [True] * 3 + [False] * 3]
    assert split["node_pos"].tolist() == [[0, 1, 4, 6], [0, 0, 0, 0]]
    assert split["node_mask"].tolist() == [[True] * 4, [True, False, False, False]]


def test_dominance_blocks():
    parents = parents_batch(HIER)
    node_over_node, node_over_leaf = st.dominance_blocks(parents, st.leaf_node_split(parents))
    #                           S  NP VP NP
    assert node_over_node.int().tolist() == [[
        [1, 1, 1, 1],  # S
        [0, 1, 0, 0],  # NP(a b)
        [0, 0, 1, 1],  # VP
        [0, 0, 0, 1],  # NP(d e)
    ]]  # fmt: skip
    #                           a  b  c  d  e  EOS
    assert node_over_leaf.int().tolist() == [[
        [1, 1, 1, 1, 1, 0],
        [1, 1, 0, 0, 0, 0],
        [0, 0, 1, 1, 1, 0],
        [0, 0, 0, 1, 1, 0],
    ]]  # fmt: skip


# --- agreement with a slow reference on random trees


def strict_ancestors(parents, node):
    found = set()
    while parents[node] != -1:
        node = parents[node]
        found.add(node)
    return found


def reference_relation(parents, i, j):
    """McDonald & Chiang (2021), section 2, read literally."""
    if i == j:
        return S
    if parents[j] == i:
        return P
    if parents[i] == j:
        return C
    if parents[i] == parents[j] != -1:
        return LS if i < j else RS
    if i in strict_ancestors(parents, j):
        return A
    if j in strict_ancestors(parents, i):
        return D
    return LO if i < j else RO


def reference_blocks(parents):
    """Nguyen et al. (2020), section 4.1, read literally: the leaves and nodes, and the subtree rule R as
    node-over-node and node-over-leaf nested lists (True when the column is in the row node's subtree)."""
    size = len(parents)
    ancestors_or_self = [strict_ancestors(parents, k) | {k} for k in range(size)]
    leaves = [k for k in range(size) if k not in parents]
    nodes = [k for k in range(size) if k in parents]
    node_over_node = [[i in ancestors_or_self[t] for t in nodes] for i in nodes]
    node_over_leaf = [[i in ancestors_or_self[j] for j in leaves] for i in nodes]
    return leaves, nodes, node_over_node, node_over_leaf


@pytest.mark.parametrize("left_pad", [False, True])
def test_vectorised_structure_matches_reference_on_random_trees(left_pad):
    rng = np.random.default_rng(7)
    trees = [random_preorder_tree(rng, int(rng.integers(1, 26))) for _ in range(50)]
    for start in range(0, len(trees), 10):
        chunk = trees[start : start + 10]
        parents = parents_batch(*chunk, left_pad=left_pad)
        relation_matrix = relations.relation_ids(parents)
        dominance = st.ancestor_or_self(parents)
        split = st.leaf_node_split(parents)
        node_over_node, node_over_leaf = st.dominance_blocks(parents, split)
        width = parents.size(1)
        for row, tree in enumerate(chunk):
            full = tree + [-1]  # with the EOS root
            shift = width - len(full) if left_pad else 0
            block = relation_matrix[row, shift : shift + len(full), shift : shift + len(full)]
            expected = [[reference_relation(full, i, j) for j in range(len(full))] for i in range(len(full))]
            assert block.tolist() == expected, f"tree {start + row}: {tree}"
            assert int((relation_matrix[row] == X).sum()) == width**2 - len(full) ** 2
            expected_dominance = [[i == j or i in strict_ancestors(full, j) for j in range(len(full))]
                                  for i in range(len(full))]
            assert dominance[row, shift : shift + len(full), shift : shift + len(full)].tolist() == expected_dominance
            assert int(dominance[row].sum()) == sum(map(sum, expected_dominance))  # nothing at padding
            leaves, nodes, expected_over_nodes, expected_over_leaves = reference_blocks(full)
            assert split["leaf_pos"][row, : len(leaves)].tolist() == [shift + k for k in leaves]
            assert split["node_pos"][row, : len(nodes)].tolist() == [shift + k for k in nodes]
            assert node_over_node[row, : len(nodes), : len(nodes)].tolist() == expected_over_nodes
            assert node_over_leaf[row, : len(nodes), : len(leaves)].tolist() == expected_over_leaves
            # nothing outside the blocks
            assert int(node_over_node[row].sum()) == sum(map(sum, expected_over_nodes))
            assert int(node_over_leaf[row].sum()) == sum(map(sum, expected_over_leaves))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_gives_the_same_results_as_cpu():
    parents = parents_batch(FATHER, [-1, 0, 1, 2], [-1], HIER, left_pad=True)
    on_gpu = parents.cuda()
    assert torch.equal(relations.relation_ids(on_gpu).cpu(), relations.relation_ids(parents))
    assert torch.equal(st.ancestor_or_self(on_gpu).cpu(), st.ancestor_or_self(parents))
    assert torch.equal(st.is_leaf(on_gpu).cpu(), st.is_leaf(parents))
    split_gpu, split_cpu = st.leaf_node_split(on_gpu), st.leaf_node_split(parents)
    for key in split_cpu:
        assert torch.equal(split_gpu[key].cpu(), split_cpu[key])
    for got, want in zip(st.dominance_blocks(on_gpu, split_gpu), st.dominance_blocks(parents, split_cpu)):
        assert got.is_cuda and torch.equal(got.cpu(), want)
