"""transformer_ldd (Pu & Sima'an 2022, 3.1-3.2, Table 1): the distributions and variants against values worked out by
hand, side data, LDD and LDA layers, the model, preprocess and its refusals of bad settings and untrusted data
directories (a trained model's attention maps: test_ldd_interactive.py)."""
import json
import math
import os
import shutil
import sys

import numpy as np
import pytest
import torch
from conftest import TRANSLATION, arcs_record, run_preprocess, tiny_encoder_parts
from fairseq import options, tasks
from fairseq.data.indexed_dataset import MMapIndexedDataset

from fairseq_syntax.core.data_dir import read_meta, read_skipped_lines
from fairseq_syntax.core.side_inputs import load_side_data
from fairseq_syntax.methods.ldd import distributions as dep
from fairseq_syntax.methods.ldd.distributions import OUTSIDE
from fairseq_syntax.methods.ldd import preprocess as preprocess_dependencies
from fairseq_syntax.methods.ldd.attention import (
    DependencyAttentionOnly,
    LabeledDependencyAttention,
)
from fairseq_syntax.methods.ldd.model import LDDEncoder, LDDOptions
from fairseq_syntax.methods.ldd.side_input import (
    COMPACT,
    QUANTISATION,
    WordPairs,
    collate_ldd,
    decode_sentence,
    encode_sentence,
    record_item,
)

STANFORD = dep.label_index(dep.STANFORD_GROUPS)
ROOT_G, OBJ_G, NSUBJ_G, DET_G, PUNCT_G = 0, 3, 5, 12, 15  # the paper's l1, l4, l6, l13, l16, 0-based

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


def variant(name, record=RECORD, table=dep.STANFORD_GROUPS, token_words=TOKEN_WORDS):
    """``16 x T x T`` of one row (the word of each token: the root 0 at EOS, the last word at padding)."""
    size, words = len(record["words"]) + 2, torch.tensor([token_words])
    out = dep.variant_distribution(word_level(record, table, size), words, name, words == size - 1, words == 0)
    assert out.shape == (1, 16, len(token_words), len(token_words))
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
    out = variant("udp", CYCLE, token_words=[1, 2, 0])[0]
    # rows a, b; columns a, b, EOS (= root): a -> root, b -> a; one root attachment, no cycle
    assert out.tolist() == [[0, 0, 1], [1, 0, 0], [0, 0, 0]]
    assert out[:, 2].sum() == 1


def test_ldp_gives_no_group_when_the_1best_label_is_outside_them():
    # one arc "a -> b", labels nmod .40, obl .35, obj .25: the object group has .60 but the 1-best is nmod: no head
    record = {"words": ["a", "b"], "arcs": [[1, 2, 1.0, {"nmod": 0.40, "obl": 0.35, "obj": 0.25}],
                                            [2, 0, 1.0, {"root": 1.0}]],
              "best": [[2, "nmod"], [0, "root"]]}
    out = variant("ldp", record, dep.UNIVERSAL_GROUPS, [1, 2, 0])
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


# --- side data

# "a bc" with bc split as b@@ c; "x" alone
RECORD_A = {"words": ["a", "bc"], "arcs": [[1, 2, 1.0, {"det": 1.0}], [2, 0, 1.0, {"root": 0.75, "dep": 0.25}]],
            "best": [[2, "det"], [0, "root"]]}
RECORD_B = {"words": ["x"], "arcs": [[1, 0, 1.0, {"root": 1.0}]], "best": [[0, "root"]]}


def stored(record, pieces, floor=1e-3):
    return torch.from_numpy(record_item(record, pieces, STANFORD, floor))


def long_layout(record, pieces, index=STANFORD, floor=1e-3):
    """The item as side data written before the compact layout holds it."""
    grouped = dep.group_arcs(dep.labeled_arcs(record), index)
    best = dep.one_best_arcs(record["best"], index)
    grouped = dep.GroupedArcs(*(np.concatenate([a, b]) for a, b in zip(grouped, best)))
    return torch.from_numpy(encode_sentence(dep.subword_word_index(pieces), grouped, floor, compact=False))


def test_encoding_layout_and_quantisation():
    item = stored(RECORD_A, [1, 2])
    q75, q25 = round(0.75 * QUANTISATION), round(0.25 * QUANTISATION)
    # 65535, n, word of each token, entries per word, then (64 * head + channel, q) by dependent, head, channel
    assert item.tolist() == [COMPACT, 3, 1, 2, 2, 2, 3,
                             64 * 2 + DET_G, QUANTISATION, 64 * 2 + dep.BEST_OFFSET + DET_G, QUANTISATION,
                             64 * 0 + ROOT_G, q75, 64 * 0 + dep.OUTSIDE, q25,
                             64 * 0 + dep.BEST_OFFSET + ROOT_G, QUANTISATION]
    sentence = decode_sentence(item)
    assert sentence.token_words.tolist() == [1, 2, 2]
    assert sentence.entries.tolist() == [[1, 2, DET_G, QUANTISATION], [1, 2, dep.BEST_OFFSET + DET_G, QUANTISATION],
                                         [2, 0, ROOT_G, q75], [2, 0, dep.OUTSIDE, q25],
                                         [2, 0, dep.BEST_OFFSET + ROOT_G, QUANTISATION]]
    # the long layout: n, words, (dependent, head, group, q), distributions sorted, the 1-best tree
    old = long_layout(RECORD_A, [1, 2])
    assert old.tolist() == [3, 1, 2, 2,
                            1, 2, DET_G, QUANTISATION,
                            2, 0, ROOT_G, q75,
                            2, 0, dep.OUTSIDE, q25,
                            1, 2, dep.BEST_OFFSET + DET_G, QUANTISATION,
                            2, 0, dep.BEST_OFFSET + ROOT_G, QUANTISATION]
    assert sorted(decode_sentence(old).entries.tolist()) == sentence.entries.tolist()
    # a record without the 1-best tree (an older arcs file) stores the distributions only
    without = {key: value for key, value in RECORD_A.items() if key != "best"}
    assert stored(without, [1, 2]).tolist() == [COMPACT, 3, 1, 2, 2, 1, 2, 64 * 2 + DET_G, QUANTISATION,
                                                ROOT_G, q75, dep.OUTSIDE, q25]


def test_the_compact_layout_gives_the_model_the_same_inputs_in_about_half_the_bytes():
    import random

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    from bench import synthetic

    rng, vocabulary = random.Random(1), synthetic.vocabulary()
    universal = dep.label_index(dep.UNIVERSAL_GROUPS)
    records = [synthetic.sentence(rng, rng.randint(1, 40), vocabulary).arcs for _ in range(40)]
    pieces = [[1 + (k % 3 == 0) for k in range(len(record["words"]))] for record in records]
    compact = [torch.from_numpy(record_item(r, p, universal, 1e-3)) for r, p in zip(records, pieces)]
    long = [long_layout(record, counts, universal) for record, counts in zip(records, pieces)]
    for start in range(0, 40, 8):
        for left_pad in (False, True):
            new, old = (collate_ldd(items[start:start + 8], left_pad, 100) for items in (compact, long))
            assert torch.equal(new.word_pairs, old.word_pairs) and torch.equal(new.token_words, old.token_words)
    words = sum(len(record["words"]) for record in records)
    new_bytes, old_bytes = (2 * sum(len(item) for item in items) for items in (compact, long))
    # 3 candidate heads x 2 labels + the 1-best arc a word: 8 bytes an entry in the long layout, 4 in the compact
    assert old_bytes / words > 50 and new_bytes / old_bytes < 0.6


def test_a_sentence_of_more_than_1023_words_keeps_the_long_layout():
    record = {"words": ["w"] * 1100, "arcs": [[i, i - 1, 1.0, {"dep": 1.0}] for i in range(1, 1101)],
              "best": [[i - 1, "dep"] for i in range(1, 1101)]}
    item = stored(record, [1] * 1100)
    assert item[0] == 1100 and decode_sentence(item).entries[-1].tolist() == [
        1100, 1099, dep.BEST_OFFSET + dep.label_group("dep", STANFORD), QUANTISATION]


def test_floor_drops_small_pairs_and_must_exceed_a_quantisation_step():
    record = {"words": ["a", "b"], "arcs": [[1, 2, 0.9995, {"det": 1.0}], [1, 0, 0.0005, {"root": 1.0}],
                                            [2, 0, 1.0, {"root": 1.0}]]}  # no 1-best tree: distributions only
    assert decode_sentence(stored(record, [1, 1], floor=1e-3)).entries[:, :3].tolist() == [[1, 2, DET_G],
                                                                                            [2, 0, ROOT_G]]
    assert len(decode_sentence(stored(record, [1, 1], floor=1e-4)).entries) == 3
    with pytest.raises(ValueError, match="quantisation step"):
        stored(record, [1, 1], floor=1e-6)


def test_corrupt_items_are_refused():
    with pytest.raises(ValueError, match="corrupt"):
        decode_sentence(torch.tensor([2, 1, 1, 1, 0]))  # 2 tokens, then 2 values: not 4 x K
    with pytest.raises(ValueError, match="beyond the 1 words"):
        decode_sentence(torch.tensor([1, 1, 2, 0, 0, 100]))  # dependent 2 in a one-word sentence
    with pytest.raises(ValueError, match="corrupt compact ldd item"):
        decode_sentence(torch.tensor([COMPACT, 1, 1, 2, 0, 100]))  # 2 entries counted, 1 stored
    with pytest.raises(ValueError, match="beyond the 1 words"):
        decode_sentence(torch.tensor([COMPACT, 1, 1, 1, 64 * 2, 100]))  # head 2 in a one-word sentence


@pytest.mark.parametrize("left_pad", [True, False])
def test_collate_gives_word_pairs_and_the_word_of_each_token(left_pad):
    word_pairs, token_words = collate_ldd([stored(RECORD_A, [1, 2]), stored(RECORD_B, [1])], left_pad, 5)
    # words: root 0, 1, 2, and 3 the all-zero word of padding
    assert word_pairs.shape == (2, dep.NUM_STORED_CHANNELS, 4, 4) and word_pairs.dtype == torch.float32
    q75 = round(0.75 * QUANTISATION) / QUANTISATION
    expected = torch.zeros(2, dep.NUM_STORED_CHANNELS, 4, 4)
    expected[0, DET_G, 1, 2] = expected[0, dep.BEST_OFFSET + DET_G, 1, 2] = 1.0
    expected[0, ROOT_G, 2, 0], expected[0, dep.OUTSIDE, 2, 0] = q75, 1 - q75
    expected[0, dep.BEST_OFFSET + ROOT_G, 2, 0] = 1.0
    expected[1, ROOT_G, 1, 0] = expected[1, dep.BEST_OFFSET + ROOT_G, 1, 0] = 1.0
    torch.testing.assert_close(word_pairs, expected)
    # A: a b@@ c EOS (+1 pad); B: x EOS (+3 pads); EOS is the root
    if left_pad:
        assert token_words.tolist() == [[3, 1, 2, 2, 0], [3, 3, 3, 1, 0]]
    else:
        assert token_words.tolist() == [[1, 2, 2, 0, 3], [1, 0, 3, 3, 3]]
    # at token level "a" depends on each piece of "bc" with 1/2 (shared), both pieces on the root (EOS) with .75
    tokens = dep.expand_to_tokens(word_pairs, token_words)[0]
    a, b_, c, eos = (1, 2, 3, 4) if left_pad else (0, 1, 2, 3)
    assert tokens[DET_G, a, b_] == tokens[DET_G, a, c] == 0.5
    assert tokens[ROOT_G, b_, eos] == tokens[ROOT_G, c, eos] == pytest.approx(q75)


def test_collate_refuses_a_batch_shorter_than_the_sentence():
    with pytest.raises(ValueError, match="3 tokens \\+ EOS, the batch only 3"):
        collate_ldd([stored(RECORD_A, [1, 2])], True, 3)


def identity(layer):
    """``layer`` (16 heads of dimension 1: head h sees feature h only) with identity projections, in eval mode."""
    with torch.no_grad():
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            if hasattr(layer, name):
                getattr(layer, name).weight.copy_(torch.eye(16))
                getattr(layer, name).bias.zero_()
    return layer.eval()


def test_ldd_layer_equals_a_hand_computation_on_three_tokens():
    layer = identity(LabeledDependencyAttention(16))
    x = torch.zeros(3, 1, 16)  # T x B x C: tokens a, b, EOS
    x[:, 0, 0] = torch.tensor([1.0, 2.0, 0.0])
    x[:, 0, 1] = torch.tensor([0.5, -1.0, 1.0])
    ldd = torch.zeros(1, 16, 3, 3)
    ldd[0, 0, 0, 1], ldd[0, 0, 1, 2] = 1.0, 0.5  # head 0: a -> b (p 1), b -> EOS/root (p .5)
    ldd[0, 1, 0, 2] = 0.25  # head 1: a -> EOS (p .25)
    out, weights, _ = layer(x, None, {"ldd": ldd}, need_weights=True)
    # head 0, query a: scores [1*1, 1*2, 0] * [0, 1, 0] = [0, 2, 0]
    z = 2 + math.exp(2)
    assert weights[0, 0, 0].tolist() == pytest.approx([1 / z, math.exp(2) / z, 1 / z])
    assert out[0, 0, 0].item() == pytest.approx((1 * 1 + math.exp(2) * 2 + 1 * 0) / z)
    # head 0, query b: scores [2, 4, 0] * [0, 0, .5] = 0: uniform
    assert out[1, 0, 0].item() == pytest.approx((1 + 2 + 0) / 3)
    # head 1, query a: scores [.25, -.5, .5] * [0, 0, .25] = [0, 0, .125]
    z1 = 2 + math.exp(0.125)
    assert out[0, 0, 1].item() == pytest.approx((0.5 - 1.0 + math.exp(0.125) * 1.0) / z1)
    # head 2 reads an all-zero feature: output 0
    assert out[:, 0, 2].abs().max().item() == 0


def test_ldd_layer_equals_a_scalar_reference_with_padding():
    torch.manual_seed(0)
    layer = LabeledDependencyAttention(32).eval()  # head dimension 2
    x = torch.randn(4, 2, 32)
    ldd = torch.rand(2, 16, 4, 4)
    padding = torch.tensor([[False] * 4, [True, False, False, False]])
    out, _, _ = layer(x, padding, {"ldd": ldd})
    q, k, v = (p(x).view(4, 2, 16, 2) for p in (layer.q_proj, layer.k_proj, layer.v_proj))
    concat = torch.zeros(4, 2, 32)
    for b in range(2):
        for h in range(16):
            for i in range(4):
                keys = [j for j in range(4) if not padding[b, j]]
                logits = [float((q[i, b, h] @ k[j, b, h]).detach()) / math.sqrt(2) * float(ldd[b, h, i, j])
                          for j in keys]
                top = max(logits)
                exps = [math.exp(s - top) for s in logits]
                concat[i, b, 2 * h : 2 * h + 2] = sum(e * v[j, b, h] for e, j in zip(exps, keys)) / sum(exps)
    torch.testing.assert_close(out, layer.out_proj(concat), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("normalise", [True, False])
def test_lda_weights_are_softmax_of_the_distributions_or_the_distributions_without_queries_or_keys(normalise):
    layer = identity(DependencyAttentionOnly(16, normalise=normalise))
    assert not hasattr(layer, "q_proj") and not hasattr(layer, "k_proj")
    x = torch.zeros(3, 1, 16)
    x[:, 0, 0] = torch.tensor([1.0, 2.0, 3.0])
    ldd = torch.zeros(1, 16, 3, 3)
    ldd[0, 0, 0, 1], ldd[0, 0, 0, 2], ldd[0, 0, 1, 2] = 0.5, 0.25, 1.0
    out, weights, _ = layer(x, None, {"ldd": ldd}, need_weights=True)
    if not normalise:  # lda_weights: N = LDD
        assert torch.equal(weights, ldd)
        assert out[:, 0, 0].tolist() == pytest.approx([0.5 * 2 + 0.25 * 3, 3.0, 0.0])
        return
    # lda, Table 1 as written: LDD replaces the scores S, so N = softmax_j(LDD); row a = softmax(0, .5, .25)
    z = 1 + math.exp(0.5) + math.exp(0.25)
    assert weights[0, 0, 0].tolist() == pytest.approx([1 / z, math.exp(0.5) / z, math.exp(0.25) / z])
    z_b = 2 + math.e  # row b = softmax(0, 0, 1); row EOS is all zero: uniform
    assert out[:, 0, 0].tolist() == pytest.approx([(1 + 2 * math.exp(0.5) + 3 * math.exp(0.25)) / z,
                                                   (1 + 2 + 3 * math.e) / z_b, 2.0])
    torch.testing.assert_close(weights[0, 5], torch.full((3, 3), 1 / 3))  # a head whose distributions are all zero


def test_lda_softmax_leaves_padding_keys_out():
    layer = DependencyAttentionOnly(16).eval()
    ldd = torch.zeros(1, 16, 3, 3)
    _, weights, _ = layer(torch.randn(3, 1, 16), torch.tensor([[True, False, False]]), {"ldd": ldd},
                          need_weights=True)
    torch.testing.assert_close(weights[0, 0], torch.tensor([[0.0, 0.5, 0.5]] * 3))


def make_encoder(variant="ldd", dim=32):
    config, d, embed = tiny_encoder_parts(["a", "b@@", "c", "x"], dim=dim)
    encoder = LDDEncoder(config, LDDOptions(syntax_variant=variant), d, embed)
    tokens = torch.tensor([[4, 5, 6, d.eos()], [d.pad(), d.pad(), 7, d.eos()]])
    side = collate_ldd([stored(RECORD_A, [1, 2]), stored(RECORD_B, [1])], True, 4)
    return encoder, tokens, side


@pytest.mark.parametrize("variant", dep.SYNTAX_VARIANTS)
def test_first_layer_has_16_heads_whatever_encoder_attention_heads_says(variant):
    encoder, tokens, side = make_encoder(variant)
    first, second = encoder.layers[0].self_attn, encoder.layers[1].self_attn
    assert first.num_heads == 16 and first.head_dim == 2 and second.num_heads == 2
    lda = variant in ("lda", "lda_weights")
    assert isinstance(first, DependencyAttentionOnly if lda else LabeledDependencyAttention)
    out = encoder(tokens, return_attention=True, src_ldd=side)
    assert out["encoder_attention"][0].shape == (2, 16, 4, 4)
    out["encoder_out"][0].pow(2).sum().backward()  # a plain sum of a LayerNorm output has zero gradient
    assert encoder.layers[0].self_attn.v_proj.weight.grad.abs().sum() > 0


def test_the_distributions_change_the_encoder_output():
    encoder, tokens, side = make_encoder("ldd")
    encoder.eval()
    with_syntax = encoder(tokens, src_ldd=side)["encoder_out"][0]
    without = encoder(tokens, src_ldd=WordPairs(torch.zeros_like(side.word_pairs), side.token_words))["encoder_out"][0]
    assert (with_syntax - without)[:, 0].abs().max() > 1e-4


def test_embed_dim_must_split_into_16_heads():
    with pytest.raises(ValueError, match="not divisible by the 16 heads of the LDD layer"):
        make_encoder(dim=24)


def test_missing_side_input_is_explained():
    encoder, tokens, _ = make_encoder()
    with pytest.raises(ValueError, match="needs the side inputs \\['src_ldd'\\]"):
        encoder(tokens)


# --- the preprocessing command (conftest's ldd_data)
def test_preprocessing_reports_mass_outside_groups_and_retained(ldd_data):
    dest, reports = ldd_data
    log = reports["train"].lines("train")
    # per sentence 8 arcs; three of them split into two groups: 11 (dependent, head, group) entries
    assert log[0] == "train: 200 sentences, 1200 words, 2200 entries (1.83 per word)"
    # per sentence 0.3 of 6 words' mass is "prep": 5%
    assert log[1] == "train: mass in the arcs file 100.00%; outside the 16 groups 5.00% (prep 5.00%)"
    assert log[2] == "train: retained after floor and quantisation 100.00% (in the 16 groups 95.00%)"
    assert log[3].startswith("train: 0 sentences fell back to the flat parse") and len(log) == 4  # all have "best"
    data = MMapIndexedDataset(os.path.join(dest, "test.en-de.en.ldd"))
    tokens = MMapIndexedDataset(os.path.join(dest, "test.en-de.en"))
    assert len(data) == len(tokens) == 21
    assert all(len(decode_sentence(data[i]).token_words) == tokens.sizes[i] - 1 for i in range(21))


def add_dependencies(raw, dest, *extra, split="train"):
    """fairseq-syntax-preprocess-dependencies (Stanford labels) of ``raw``'s ``split`` into ``dest``."""
    return preprocess_dependencies.main(["--destdir", str(dest), "-s", "en", "-t", "de", "--labels", "stanford",
                                         f"--{split}pref", f"{raw}/{split}", *extra])


def dependencies_error(raw, dest, *extra, split="train") -> str:
    with pytest.raises(SystemExit) as error:
        add_dependencies(raw, dest, *extra, split=split)
    return str(error.value)


def test_preprocessing_errors_name_file_and_line(ldd_data, raw_corpus, tmp_path):
    dest = str(tmp_path / "data")
    shutil.copytree(ldd_data[0], dest)
    written = open(os.path.join(dest, "test.en-de.en.ldd.bin"), "rb").read()
    raw = str(tmp_path / "test")
    with open(f"{raw_corpus}/test.en") as f:
        lines = f.read().splitlines()
    arcs = [json.dumps(arcs_record(line.replace("@@ ", "").split())) for line in lines]

    def refusal(source_lines, arcs_lines):
        with open(raw + ".en", "w") as f:
            f.write("".join(line + "\n" for line in source_lines))
        with open(raw + ".arcs.jsonl", "w") as f:
            f.write("".join(line + "\n" for line in arcs_lines))
        return dependencies_error(tmp_path, dest, split="test")

    third = arcs_record(lines[2].replace("@@ ", "").split())
    third["words"][1] = "horse"
    assert f"{raw}.arcs.jsonl:3: the parsed words differ from the source at word 2: parsed 'horse'" in refusal(
        lines, arcs[:2] + [json.dumps(third)] + arcs[3:])
    message = refusal(lines, arcs[:5])
    assert "line-count mismatch" in message and "arcs.jsonl 5" in message
    assert f"{raw}.en:4: 7 tokens, but sentence 4" in refusal(lines[:3] + [lines[3] + " extra"] + lines[4:], arcs)
    # the last line malformed: found as the records are read; one line too many: refused before any is read
    assert f"{raw}.arcs.jsonl:{len(lines)}: not a JSON object" in refusal(lines, arcs[:-1] + ["not json"])
    assert f"has {len(lines)} lines, {raw}.arcs.jsonl {len(lines) + 1}" in refusal(lines, arcs[:-1] + ["not json"] * 2)
    # a failed run leaves the side data it found untouched and no partial files
    assert open(os.path.join(dest, "test.en-de.en.ldd.bin"), "rb").read() == written
    assert not [name for name in os.listdir(dest) if name.endswith(".partial")]


def test_fallback_sentences_and_records_without_a_tree_are_counted():
    report = preprocess_dependencies.MassReport()
    fallback = {"words": ["a", "bc"], "arcs": [[1, 0, 1.0, {"dep": 1.0}], [2, 0, 1.0, {"dep": 1.0}]],
                "best": [[0, "dep"], [0, "dep"]], "fallback": "too long"}
    without_tree = {key: value for key, value in RECORD_A.items() if key != "best"}
    for record in (fallback, without_tree, RECORD_A):
        preprocess_dependencies.convert_sentence(record, "a b@@ c", STANFORD, 1e-3, report, "x.arcs.jsonl", 1)
    assert (report.sentences, report.fallbacks, report.without_best) == (3, 1, 1)
    lines = report.lines("test")
    assert lines[3].startswith("test: 1 sentences fell back to the flat parse")
    assert lines[4].startswith("test: 1 records have no 1-best tree")
    # outside the groups (label dep): the fallback's 2 words wholly, and .25 of word 2 in each RECORD_A: 2.5 / 6 words
    assert lines[1] == "test: mass in the arcs file 100.00%; outside the 16 groups 41.67% (dep 41.67%)"


def test_a_line_whose_words_keep_little_head_probability_is_named_and_counted(caplog):
    report = preprocess_dependencies.MassReport()
    thin = {"words": ["a", "bc"], "arcs": [[1, 2, 0.2, {"det": 1.0}], [2, 0, 1.0, {"root": 1.0}]],
            "best": [[2, "det"], [0, "root"]]}
    with caplog.at_level("WARNING"):
        preprocess_dependencies.convert_sentence(thin, "a b@@ c", STANFORD, 1e-3, report, "x.arcs.jsonl", 7)
        preprocess_dependencies.convert_sentence(RECORD_A, "a b@@ c", STANFORD, 1e-3, report, "x.arcs.jsonl", 8)
    assert "x.arcs.jsonl:7: words [1] keep head probability 0.20 (< 0.5)" in caplog.text
    assert "x.arcs.jsonl:8" not in caplog.text
    assert report.low_mass == 1
    assert "test: 1 sentences have a word whose head probabilities sum to less than 0.5" in report.lines("test")[4]


def ldd_directory(raw, dest):
    """The sequence form of the training split of ``raw`` with its LDD side data."""
    run_preprocess(raw, dest, "sequence", splits=("train",))
    add_dependencies(raw, dest)


NOT_BELOW_1 = ("is not below 1: a distribution's probabilities reach it only where one takes all the mass, so nothing "
               "of the parser's uncertainty would be kept: give a probability in (0, 1) (default 0.001)")
BELOW_A_STEP = "is below one quantisation step (1/65535)"


def test_a_floor_that_is_not_a_probability_below_one_is_refused_before_anything_is_written(small_corpus, tmp_path):
    run_preprocess(small_corpus, tmp_path, "sequence", splits=("train",))
    meta = (tmp_path / "syntax.json").read_text()
    for floor, problem in (("nan", "is not a number: give a probability in (0, 1) (default 0.001)"),
                           ("1", NOT_BELOW_1), ("1.5", NOT_BELOW_1), ("0", BELOW_A_STEP), ("-inf", BELOW_A_STEP)):
        assert dependencies_error(small_corpus, tmp_path, f"--floor={floor}") == f"error: --floor {floor} {problem}"
        assert (tmp_path / "syntax.json").read_text() == meta and not list(tmp_path.glob("*.ldd.*"))


def test_side_data_that_keeps_no_probability_mass_is_refused(small_corpus, tmp_path):
    """Every labeled pair at 0.25: a floor of 0.3 keeps none and is refused."""
    lines = (small_corpus / "train.en").read_text().splitlines()
    with open(small_corpus / "train.arcs.jsonl", "w") as out:
        for line in lines:
            words = line.replace("@@ ", "").split()
            arcs = [[d, h, 0.5, {"det": 0.5, "nsubj": 0.5}] for d in range(1, len(words) + 1)
                    for h in (0, d - 1 if d > 1 else 2)]
            out.write(json.dumps({"words": words, "arcs": arcs}) + "\n")
    run_preprocess(small_corpus, tmp_path, "sequence", splits=("train",))
    words = sum(len(line.replace("@@ ", "").split()) for line in lines)
    assert dependencies_error(small_corpus, tmp_path, "--floor", "0.3") == (
        f"error: {small_corpus}/train.arcs.jsonl: no probability of its {words} words' distributions reaches --floor "
        "0.3, so the side data would be all zeros and the model would learn from no parse: lower --floor, or check "
        "the arcs file")
    assert not list(tmp_path.glob("*.ldd.*")) and "ldd" not in read_meta(str(tmp_path))["side_data"]
    # the settings of a run that made nothing bind nothing: the corrected rerun is accepted
    report = add_dependencies(small_corpus, tmp_path)["train"]
    assert report.stored == pytest.approx(words, rel=1e-4)  # at 0.001 each word keeps its 4 x 0.25
    assert read_meta(str(tmp_path))["ldd"] == {"labels": "stanford", "floor": 0.001}


def test_the_lines_preprocessing_skipped_are_left_out_of_the_source_and_the_arcs(small_corpus, tmp_path):
    out = tmp_path / "out"
    # the sources with "fa@@ ther" have 7 tokens: with EOS they do not fit 7 positions and are skipped
    run_preprocess(small_corpus, out, "sequence", "--skip-invalid", "--max-source-positions", "7", splits=("train",))
    lines = (small_corpus / "train.en").read_text().splitlines()
    skipped = [number for number, line in enumerate(lines, 1) if "fa@@" in line]
    assert read_skipped_lines(str(out / "train.skipped.tsv")) == skipped and 0 < len(skipped) < 12
    listing = out / "train.skipped.tsv"
    listing.rename(tmp_path / "listing")  # without the listing the counts cannot agree
    assert dependencies_error(small_corpus, out) == (
        f"error: line-count mismatch: {small_corpus}/train.en and {small_corpus}/train.arcs.jsonl have 12 lines (no "
        f"{listing} names lines that fairseq-syntax-preprocess left out), but {out}/train.en-de.en.bin has "
        f"{12 - len(skipped)} sentences: the data directory was not made from these files")
    (tmp_path / "listing").rename(listing)
    # a skipped line is not read at all: it may be the very line that could not be read
    arcs = (small_corpus / "train.arcs.jsonl").read_text().splitlines()
    arcs[skipped[0] - 1] = "not json"
    (small_corpus / "train.arcs.jsonl").write_text("\n".join(arcs) + "\n")
    source = (small_corpus / "train.en").read_bytes().split(b"\n")
    source[skipped[0] - 1] += b" \xff"
    (small_corpus / "train.en").write_bytes(b"\n".join(source))
    report = add_dependencies(small_corpus, out)["train"]
    assert report.left_out == len(skipped) and report.sentences == 12 - len(skipped)
    assert report.lines("train")[0] == (f"train: {len(skipped)} lines that fairseq-syntax-preprocess skipped "
                                        "(train.skipped.tsv) are left out of the source and the arcs file")
    stored = MMapIndexedDataset(str(out / "train.en-de.en.ldd"))
    assert len(stored) == 12 - len(skipped)
    # n tokens: the kept 6-word lines (read through decode_sentence, which knows both layouts of an item)
    assert [len(decode_sentence(stored[k]).token_words) for k in range(len(stored))] == [6] * len(stored)
    listing.write_text(listing.read_text() + "x\tmalformed\n")
    assert dependencies_error(small_corpus, out) == (
        f"error: {listing}:{len(skipped) + 1}: expected LINE<TAB>reason<TAB>message, got 'x\\tmalformed'")


def test_side_data_made_for_other_tokens_is_refused_where_it_is_loaded(small_corpus, tmp_path):
    made = tmp_path / "made"
    ldd_directory(small_corpus, made)
    assert list(load_side_data(str(made), "train", "en", "de", read_meta(str(made)))) == ["src_ldd"]
    # the same pairs in reverse order: the same dictionary and number of sentences, other tokens in each
    reverse = tmp_path / "reverse"
    reverse.mkdir()
    for name in ("train.en", "train.de", "train.tree"):
        (reverse / name).write_text("".join(reversed((small_corpus / name).read_text().splitlines(keepends=True))))
    other = tmp_path / "other"
    run_preprocess(reverse, other, "sequence", splits=("train",))
    for extension in ("bin", "idx"):
        shutil.copy(made / f"train.en-de.en.ldd.{extension}", other)
    side_data = f"{other}/train.en-de.en.ldd.{{bin,idx}} (side input src_ldd)"
    remake = "remove it, or make it again with fairseq-syntax-preprocess-dependencies"
    with pytest.raises(SystemExit) as error:
        load_side_data(str(other), "train", "en", "de", read_meta(str(other)))
    assert str(error.value) == (f"error: {side_data} is not recorded in {other}/syntax.json: it is left from an "
                                f"earlier preprocessing run, or from a run that was stopped; {remake}")
    shutil.copy(made / "syntax.json", other)  # now a record, of the tokens of the other directory
    message = (f"error: {side_data} was made for other tokens than {other}/train.en-de.en.{{bin,idx}} holds (the "
               f"fingerprints in syntax.json differ): {remake}")
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(other), *TRANSLATION, "--arch", "transformer", "-s", "en", "-t", "de", "--cpu"])
    task = tasks.setup_task(args)
    with pytest.raises(SystemExit) as error:  # the task loads side data there, and nowhere else
        task.load_dataset("train")
    assert str(error.value) == message


def test_preprocessing_again_takes_the_side_data_of_the_earlier_run_away(small_corpus, tmp_path):
    out = tmp_path / "out"
    ldd_directory(small_corpus, out)  # without --overwrite refused: tests/core/test_preprocess.py
    run_preprocess(small_corpus, out, "sequence", "--overwrite", splits=("train",))
    assert not list(out.glob("*.ldd.*")) and "ldd" not in read_meta(str(out))
    assert load_side_data(str(out), "train", "en", "de", read_meta(str(out))) == {}
