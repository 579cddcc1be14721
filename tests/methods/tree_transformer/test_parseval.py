"""Grammar-induction F1 (fairseq_syntax.methods.tree_transformer.parseval) on hand-made tree pairs, and the agreement
of link probabilities with gold trees: smallest common constituents and Spearman's rho by hand."""
import math

import numpy as np
import pytest

from fairseq_syntax.core.trees import parse_tree
from fairseq_syntax.methods.tree_transformer.link_agreement import (
    average_ranks,
    link_agreement,
    links_by_tag_pair,
    smallest_common_constituent,
    spearman,
)
from fairseq_syntax.methods.tree_transformer.parseval import (
    InductionScores,
    average_scores,
    gold_sentence,
    nontrivial,
    score_trees,
    sentence_scores,
)

#: the gold sentence of "The cat sat on the mat ."; SIZES: its smallest constituent over each adjacent word pair
CAT = gold_sentence(parse_tree("(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))"))
SIZES = np.array([2, 6, 4, 3, 2])
RIGHT_BRANCHING_6 = [(4, 6), (3, 6), (2, 6), (1, 6), (0, 6)]


def test_gold_spans_drop_punctuation_and_the_whole_sentence():
    assert CAT.words == ("The", "cat", "sat", "on", "the", "mat")
    assert CAT.spans == {(0, 2), (2, 6), (3, 6), (4, 6)}
    assert CAT.labeled_spans == {(0, 2, "NP"), (2, 6, "VP"), (3, 6, "PP"), (4, 6, "NP")}


def test_traces_currency_function_tags_and_unary_chains():
    tree = parse_tree(
        "( (S (NP-SBJ-1 (-NONE- *)) (VP (VBD paid) (NP ($ $) (CD 5))) (, ,) "
        "(SBAR (S (NP (PRP he)) (VP (VBD said)))) (. .)) )"
    )
    gold = gold_sentence(tree)
    # the trace, "$", "," and "." are gone; "paid 5" is the VP; SBAR -> S is one span with two labels
    assert gold.words == ("paid", "5", "he", "said")
    assert gold.spans == {(0, 2), (2, 4)}
    assert gold.labeled_spans == {(0, 2, "VP"), (2, 4, "SBAR"), (2, 4, "S")}


def test_right_branching_against_the_cat_by_hand():
    scores = score_trees([RIGHT_BRANCHING_6], [CAT])
    # predicted non-trivial: (4,6) (3,6) (2,6) (1,6); matched 3 of 4, gold 4
    assert scores.sentence_precision == pytest.approx(0.75)
    assert scores.sentence_recall == pytest.approx(0.75)
    assert scores.sentence_f1 == pytest.approx(0.75)
    assert scores.corpus_f1 == pytest.approx(0.75)
    assert scores.label_recall == {"NP": (1, 2), "PP": (1, 1), "VP": (1, 1)}


def test_sentence_rules_without_gold_spans():
    assert sentence_scores(frozenset(), frozenset()) == (1.0, 1.0, 1.0)
    assert sentence_scores(frozenset({(0, 2)}), frozenset()) == (0.0, 1.0, 0.0)
    assert sentence_scores(frozenset(), frozenset({(0, 2)})) == (0.0, 0.0, 0.0)


def test_sentence_mean_and_corpus_level_differ():
    flat = gold_sentence(parse_tree("(S (NP (PRP He)) (VP (VBD left)) (ADVP (RB early)) (. .))"))
    assert flat.spans == frozenset()
    # flat sentence: nothing predicted beyond the whole sentence -> F1 1; a span there -> F1 0
    scores = score_trees([RIGHT_BRANCHING_6, [(0, 3)]], [CAT, flat])
    assert scores.sentence_f1 == pytest.approx((0.75 + 1.0) / 2)
    assert scores.corpus_precision == pytest.approx(3 / 4) and scores.corpus_recall == pytest.approx(3 / 4)
    scores = score_trees([RIGHT_BRANCHING_6, [(0, 2), (0, 3)]], [CAT, flat])
    assert scores.sentence_f1 == pytest.approx((0.75 + 0.0) / 2)
    assert scores.corpus_precision == pytest.approx(3 / 5) and scores.corpus_recall == pytest.approx(3 / 4)
    assert scores.corpus_f1 == pytest.approx(2 * 0.6 * 0.75 / 1.35)


def test_a_flat_prediction_has_precision_one_of_recall():
    scores = score_trees([[(0, 2), (2, 6)]], [CAT])
    assert (scores.sentence_precision, scores.sentence_recall) == pytest.approx((1.0, 0.5))
    assert scores.sentence_f1 == pytest.approx(2 / 3)


def test_nontrivial_and_bad_input():
    assert nontrivial([(0, 1), (0, 3), (1, 3), (2, 3)], 3) == {(1, 3)}
    with pytest.raises(ValueError, match="1 predicted trees for 2 gold"):
        score_trees([[]], [CAT, CAT])
    with pytest.raises(ValueError, match="has 6 words but predicted spans"):
        score_trees([[(3, 7)]], [CAT])
    with pytest.raises(ValueError, match="no POS tag"):
        gold_sentence(parse_tree("(S (NP (DT The) cat) (VP (VBD sat)))"))
    with pytest.raises(ValueError, match="a POS tag over 2 words"):
        gold_sentence(parse_tree("(S (NP The cat) (VP (VBD sat)))"))


def test_average_scores():
    first = InductionScores(2, 0.5, 0.5, 0.5, 0.4, 0.4, 0.4, {"NP": (1, 2)})
    second = InductionScores(2, 1.0, 1.0, 1.0, 0.6, 0.6, 0.6, {"NP": (2, 2), "VP": (0, 1)})
    mean = average_scores([first, second])
    assert mean.sentence_f1 == pytest.approx(0.75) and mean.corpus_f1 == pytest.approx(0.5)
    assert mean.label_recall == {"NP": (3, 4), "VP": (0, 1)}


# --- link agreement (words 0..5: The cat sat on the mat)

def test_smallest_common_constituent_by_hand():
    # pairs: the-cat in NP(2); cat-sat only in S(6); sat-on in VP(4); on-the in PP(3); the-mat in NP(2)
    assert smallest_common_constituent(CAT.spans, 6).tolist() == SIZES.tolist()
    assert smallest_common_constituent([], 1).tolist() == []


def test_average_ranks_share_ties():
    assert average_ranks(np.array([3.0, 1.0, 3.0, 2.0])).tolist() == [2.5, 0.0, 2.5, 1.0]


def test_spearman_by_hand():
    # ranks x 0,1,2 and y 0,1.5,1.5: cov 1.5 / sqrt(2 * 1.5)
    assert spearman(np.array([1.0, 2.0, 3.0]), np.array([1, 2, 2])) == pytest.approx(1.5 / math.sqrt(3.0))
    assert spearman(np.array([1.0, 2.0, 3.0]), np.array([3, 2, 1])) == pytest.approx(-1.0)
    assert math.isnan(spearman(np.array([1.0, 1.0]), np.array([1, 2])))


def test_link_agreement_per_layer():
    following = 1.0 / SIZES  # strongest inside the smallest constituents: the gold ranking exactly
    links = [np.stack([following, 1.0 - following])]
    assert link_agreement(links, [CAT]) == pytest.approx([1.0, -1.0])
    with pytest.raises(ValueError, match="sentence 0: 3 links but 5 adjacent word pairs"):
        link_agreement([np.zeros((2, 3))], [CAT])


def test_link_agreement_of_links_one_pair_to_the_right():
    # link k+1 carries the gold strength of pair k: offset +1 compares pairs 0..3 with links 1..4, exactly
    shifted = np.concatenate([[0.9], 1.0 / SIZES[:-1]])[None]
    assert link_agreement([shifted], [CAT], offset=1) == pytest.approx([1.0])
    # offset -1 compares pairs 1..4 (minus sizes -6 -4 -3 -2: ranks 0 1 2 3) with links 0..3 (0.9 1/2 1/6 1/4:
    # ranks 3 2 0 1); centred: (-1.5 -0.5 0.5 1.5) . (1.5 0.5 -1.5 -0.5) = -4, over sqrt(5 * 5)
    assert link_agreement([shifted], [CAT], offset=-1) == pytest.approx([-0.8])


def test_links_by_tag_pair_by_hand():
    assert CAT.tags == ("DT", "NN", "VBD", "IN", "DT", "NN")
    # pairs: DT NN (sizes 2, 2), NN VBD (6), VBD IN (4), IN DT (3); two layers
    links = [np.array([[0.2, 0.1, 0.3, 0.4, 0.6], [0.9, 0.2, 0.5, 0.6, 0.7]])]
    rows = links_by_tag_pair(links, [CAT], top=2)
    # the two most frequent pairs: DT NN (2) then, among the pairs seen once, IN DT (alphabetical); by mean link
    assert [(row.tags, row.count) for row in rows] == [(("DT", "NN"), 2), (("IN", "DT"), 1)]
    assert rows[0].mean_links == pytest.approx((0.4, 0.8)) and rows[0].median_gold_size == 2
    assert rows[1].mean_links == pytest.approx((0.4, 0.6)) and rows[1].median_gold_size == 3
