"""fairseq_syntax.methods.ldd.distributions (Pu & Sima'an 2022, 3.1, Table 1) against values worked out by hand."""
import numpy as np
import pytest
import torch

from fairseq_syntax.methods.ldd import distributions as dep
from fairseq_syntax.methods.ldd.distributions import OUTSIDE

# "the father sees .": tokens the fa@@ ther sees . EOS; arc and label probabilities sum to 1
RECORD = {
    "words": ["the", "father", "sees", "."],
    "arcs": [
        [1, 2, 0.9, {"det": 1.0}],
        [1, 3, 0.1, {"det": 0.5, "dep": 0.5}],
        [2, 3, 0.8, {"nsubj": 0.75, "dobj": 0.25}],
        [2, 0, 0.2, {"root": 1.0}],
        [3, 0, 1.0, {"root": 0.9, "dep": 0.1}],
        [4, 3, 1.0, {"punct": 0.4, "dep": 0.6}],
    ],
    "best": [[2, "det"], [3, "nsubj"], [0, "root"], [3, "dep"]],  # the parser's 1-best tree
}
ROOT_G, OBJ_G, NSUBJ_G, DET_G, PUNCT_G = 0, 3, 5, 12, 15  # the paper's l1, l4, l6, l13, l16, 0-based
# (dependent, head, group) -> p(i, j, group), summed by hand from RECORD with the Stanford table
GROUPED = {
    (1, 2, DET_G): 0.9, (1, 3, DET_G): 0.05, (1, 3, OUTSIDE): 0.05,
    (2, 3, NSUBJ_G): 0.6, (2, 3, OBJ_G): 0.2, (2, 0, ROOT_G): 0.2,
    (3, 0, ROOT_G): 0.9, (3, 0, OUTSIDE): 0.1,
    (4, 3, PUNCT_G): 0.4, (4, 3, OUTSIDE): 0.6,
}
# left-padded batch row: pad the fa@@ ther sees . EOS -> word of each position (EOS = root 0, pad = 5: zero row)
TOKEN_WORDS = [5, 1, 2, 2, 3, 4, 0]
PAD, EOS = 0, 6
POSITIONS = {1: [1], 2: [2, 3], 3: [4], 4: [5], 0: [EOS]}  # word -> token positions


def word_level(record=RECORD, table=dep.STANFORD_GROUPS, size=6):
    """``1 x 34 x size x size`` word-level tensor of a record, as the collater builds it."""
    index = dep.label_index(table)
    words = torch.zeros(1, dep.NUM_STORED_CHANNELS, size, size)
    for grouped in (dep.group_arcs(dep.labeled_arcs(record), index), dep.one_best_arcs(record["best"], index)):
        for dependent, head, group, p in zip(*grouped):
            words[0, group, dependent, head] = float(p)
    return words


def token_level_ldd(pieces_share=True):
    """``1 x 17 x 7 x 7`` expected token-level tensor of GROUPED, written out position by position."""
    ldd = torch.zeros(1, dep.NUM_CHANNELS, 7, 7)
    for (dependent, head, group), p in GROUPED.items():
        for row in POSITIONS[dependent]:
            for column in POSITIONS[head]:
                ldd[0, group, row, column] = p / len(POSITIONS[head]) if pieces_share else p
    return ldd


def test_grouping_sums_arc_times_label_probabilities_of_a_group_and_keeps_the_rest_outside():
    grouped = dep.group_arcs(dep.labeled_arcs(RECORD), dep.label_index(dep.STANFORD_GROUPS))
    got = {(int(d), int(h), int(g)): p for d, h, g, p in zip(*grouped)}
    assert got == pytest.approx(GROUPED)


def test_stanford_table_is_appendix_a():
    index = dep.label_index(dep.STANFORD_GROUPS)
    assert len(index) == 30  # the labels named in Table A
    # one label of each group, l1 .. l16
    for group, label in enumerate(["root", "cop", "pcomp", "pobj", "csubjpass", "nsubjpass", "cc", "preconj",
                                   "advcl", "amod", "advmod", "tmod", "predet", "quantmod", "appos", "punct"]):
        assert dep.label_group(label, index) == group, label
    for label in ["prep", "nn", "poss", "mark", "dep", "rcmod"]:
        assert dep.label_group(label, index) == OUTSIDE


def test_universal_table_maps_subtypes_exactly_then_by_base_label():
    index = dep.label_index(dep.UNIVERSAL_GROUPS)
    assert dep.label_group("nsubj:pass", index) == NSUBJ_G
    assert dep.label_group("nsubj:outer", index) == NSUBJ_G  # unlisted subtype -> base label
    assert dep.label_group("cc:preconj", index) == 7  # conj group, not cc's
    assert dep.label_group("obl:unmarked", index) == 11  # npadvmod/tmod group, not obl's
    assert dep.label_group("obl", index) == OBJ_G
    assert dep.label_group("nmod:poss", index) == OUTSIDE  # base nmod is outside too
    for label in ["case", "mark", "compound", "acl:relcl", "flat"]:
        assert dep.label_group(label, index) == OUTSIDE


def test_a_label_in_two_groups_or_a_wrong_group_count_is_refused():
    with pytest.raises(ValueError, match="'det' is in groups 1 and 2"):
        dep.label_index((("det",), ("det",)) + ((),) * 14)
    with pytest.raises(ValueError, match="16 groups"):
        dep.label_index((("root",),))


def test_subword_word_index():
    assert dep.subword_word_index([1, 2, 1, 1]).tolist() == [1, 2, 2, 3, 4]
    with pytest.raises(ValueError):
        dep.subword_word_index([1, 0])


def test_expansion_shares_a_head_words_mass_among_its_pieces_and_copies_its_row():
    words = word_level()[:, :dep.NUM_CHANNELS]
    token_words = torch.tensor([TOKEN_WORDS])
    shared, copied = dep.expand_to_tokens(words, token_words), dep.expand_to_tokens(words, token_words, "copy")
    torch.testing.assert_close(shared, token_level_ldd())
    torch.testing.assert_close(copied, token_level_ldd(pieces_share=False))
    # by hand: both pieces of "father" depend on "sees" (nsubj) and on the root (EOS column), each with the word's row
    assert shared[0, NSUBJ_G, 2, 4] == shared[0, NSUBJ_G, 3, 4] == pytest.approx(0.6)
    assert shared[0, ROOT_G, 3, EOS] == pytest.approx(0.2)
    # "the" depends on "father" with 0.9: 0.45 on each piece (copy: 0.9 on each)
    assert shared[0, DET_G, 1, 2] == shared[0, DET_G, 1, 3] == pytest.approx(0.45)
    assert copied[0, DET_G, 1, 2] == copied[0, DET_G, 1, 3] == pytest.approx(0.9)
    # the row of "the" sums to its word's distribution, 1 (copy: 0.9 + 0.9 + 0.1 = 1.9)
    assert shared[0, :, 1].sum() == pytest.approx(1.0) and copied[0, :, 1].sum() == pytest.approx(1.9)
    for row in range(1, 6):
        assert shared[0, :, row].sum() == pytest.approx(1.0)
    assert shared[0, :, EOS].abs().sum() == 0 and shared[0, :, PAD].abs().sum() == 0
    assert shared[0, :, :, PAD].abs().sum() == 0


def variant(name, record=RECORD, table=dep.STANFORD_GROUPS):
    position = torch.arange(7)[None]
    out = dep.variant_distribution(word_level(record, table), torch.tensor([TOKEN_WORDS]), name, position == PAD,
                                   position == EOS)
    assert out.shape == (1, 16, 7, 7)
    return out[0]


def matrix(entries):
    m = torch.zeros(7, 7)
    for (row, column), value in entries.items():
        m[row, column] = value
    return m


# P(head | dependent) by hand: row 1 "the", 2-3 "father" (column mass halved over its pieces), 4 "sees", 5 "."
ARCS = {(1, 2): 0.45, (1, 3): 0.45, (1, 4): 0.1, (2, 4): 0.8, (3, 4): 0.8, (2, EOS): 0.2, (3, EOS): 0.2,
        (4, EOS): 1.0, (5, 4): 1.0}
BEST = {(1, 2): 0.5, (1, 3): 0.5, (2, 4): 1, (3, 4): 1, (4, EOS): 1, (5, 4): 1}  # RECORD["best"]


@pytest.mark.parametrize("name", ["ldd", "lda", "lda_weights"])
def test_ldd_and_lda_give_head_h_its_label_group(name):
    torch.testing.assert_close(variant(name), token_level_ldd()[0, :16])
    assert variant(name)[DET_G, 1, 4] == pytest.approx(0.05)


@pytest.mark.parametrize("name, expected", [("udd", ARCS), ("udp", BEST)])
def test_udd_sums_all_labels_and_udp_marks_the_1best_head_for_every_head(name, expected):
    # udd: every label, those outside the groups too; udp: the parser's 1-best head of each dependent
    torch.testing.assert_close(variant(name), matrix(expected).expand(16, 7, 7))


def test_ldp_marks_the_1best_head_in_the_group_of_the_1best_label_only():
    out = variant("ldp")
    expected = torch.zeros(16, 7, 7)
    expected[DET_G] = matrix({(1, 2): 0.5, (1, 3): 0.5})
    expected[NSUBJ_G] = matrix({(2, 4): 1, (3, 4): 1})
    expected[ROOT_G] = matrix({(4, EOS): 1})
    # "." -> sees: the 1-best label dep is outside the groups, so no group marks it
    torch.testing.assert_close(out, expected)


# "a b": a per-word argmax is the 2-cycle a <-> b; the parser's decoder (MST) gives a -> root, b -> a
CYCLE = {"words": ["a", "b"], "arcs": [[1, 2, 0.6, {"dep": 1.0}], [1, 0, 0.4, {"root": 1.0}],
                                        [2, 1, 0.6, {"dep": 1.0}], [2, 0, 0.4, {"root": 1.0}]],
         "best": [[0, "root"], [1, "dep"]]}


def test_udp_of_a_two_cycle_argmax_is_the_parsers_tree_with_one_root():
    eos = torch.tensor([[False, False, True]])
    out = dep.variant_distribution(word_level(CYCLE, size=4), torch.tensor([[1, 2, 0]]), "udp",
                                   torch.zeros(1, 3, dtype=torch.bool), eos)[0, 0]
    # rows a, b; columns a, b, EOS (= root): a -> root, b -> a; one root attachment, no cycle
    assert out.tolist() == [[0, 0, 1], [1, 0, 0], [0, 0, 0]]
    assert out[:, 2].sum() == 1


def test_ldp_gives_no_group_when_the_1best_label_is_outside_them():
    # one arc "a -> b", labels nmod .40, obl .35, obj .25: the object group has .60 but the 1-best is nmod: no head
    record = {"words": ["a", "b"], "arcs": [[1, 2, 1.0, {"nmod": 0.40, "obl": 0.35, "obj": 0.25}],
                                            [2, 0, 1.0, {"root": 1.0}]],
              "best": [[2, "nmod"], [0, "root"]]}
    out = dep.variant_distribution(word_level(record, dep.UNIVERSAL_GROUPS, size=4), torch.tensor([[1, 2, 0]]), "ldp",
                                   torch.zeros(1, 3, dtype=torch.bool), torch.tensor([[False, False, True]]))[0]
    assert out[:, 0].sum() == 0  # the row of "a": no group
    assert out[ROOT_G, 1, 2] == 1 and out.sum() == 1  # "b" -> root in the root group


def test_1best_variants_refuse_side_data_without_the_tree():
    old = word_level()
    old[:, dep.BEST_OFFSET:] = 0  # side data made before the 1-best tree was stored
    with pytest.raises(ValueError, match="udp reads the parser's 1-best tree"):
        dep.variant_distribution(old, torch.tensor([TOKEN_WORDS]), "udp", torch.tensor([[True] + [False] * 6]),
                                 torch.tensor([[False] * 6 + [True]]))


def test_uniform_variants_are_constant_over_dependents_and_keys():
    # 6 non-padding keys (5 tokens + EOS); dependents are the 5 tokens
    uniform = matrix({(row, column): 1.0 for row in range(1, 6) for column in range(1, 7)})
    torch.testing.assert_close(variant("uudd"), (uniform / 6).expand(16, 7, 7))
    torch.testing.assert_close(variant("uldd"), (uniform / 96).expand(16, 7, 7))


def test_unknown_variant_or_subword_rule_is_refused():
    masks = torch.zeros(1, 7, dtype=torch.bool), torch.zeros(1, 7, dtype=torch.bool)
    with pytest.raises(ValueError, match="unknown syntax variant 'xdd'"):
        dep.variant_distribution(word_level(), torch.tensor([TOKEN_WORDS]), "xdd", *masks)
    with pytest.raises(ValueError, match="unknown subword head rule 'first'"):
        dep.variant_distribution(word_level(), torch.tensor([TOKEN_WORDS]), "ldd", *masks, subword_heads="first")


def test_sparse_arrays_are_consistent():
    grouped = dep.group_arcs(dep.labeled_arcs(RECORD), dep.label_index(dep.UNIVERSAL_GROUPS))
    assert all(isinstance(a, np.ndarray) for a in grouped)
    assert len({len(a) for a in grouped}) == 1
    # "dobj" is no UD label: its mass moves to OUTSIDE under the UD table
    got = {(int(d), int(h), int(g)): p for d, h, g, p in zip(*grouped)}
    assert got[(2, 3, OUTSIDE)] == pytest.approx(0.2)
