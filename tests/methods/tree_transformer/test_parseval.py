"""Grammar-induction F1 (fairseq_syntax.methods.tree_transformer.parseval) on hand-made tree pairs."""
import pytest

from fairseq_syntax.core.trees import parse_tree
from fairseq_syntax.methods.tree_transformer.parseval import (
    InductionScores,
    average_scores,
    gold_sentence,
    nontrivial,
    score_trees,
    sentence_scores,
)

CAT = "(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))"
RIGHT_BRANCHING_6 = [(4, 6), (3, 6), (2, 6), (1, 6), (0, 6)]


def test_gold_spans_drop_punctuation_and_the_whole_sentence():
    gold = gold_sentence(parse_tree(CAT))
    assert gold.words == ("The", "cat", "sat", "on", "the", "mat")
    assert gold.spans == {(0, 2), (2, 6), (3, 6), (4, 6)}
    assert gold.labeled_spans == {(0, 2, "NP"), (2, 6, "VP"), (3, 6, "PP"), (4, 6, "NP")}


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
    gold = gold_sentence(parse_tree(CAT))
    scores = score_trees([RIGHT_BRANCHING_6], [gold])
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
    cat = gold_sentence(parse_tree(CAT))
    flat = gold_sentence(parse_tree("(S (NP (PRP He)) (VP (VBD left)) (ADVP (RB early)) (. .))"))
    assert flat.spans == frozenset()
    # flat sentence: nothing predicted beyond the whole sentence -> F1 1; a span there -> F1 0
    scores = score_trees([RIGHT_BRANCHING_6, [(0, 3)]], [cat, flat])
    assert scores.sentence_f1 == pytest.approx((0.75 + 1.0) / 2)
    assert scores.corpus_precision == pytest.approx(3 / 4) and scores.corpus_recall == pytest.approx(3 / 4)
    scores = score_trees([RIGHT_BRANCHING_6, [(0, 2), (0, 3)]], [cat, flat])
    assert scores.sentence_f1 == pytest.approx((0.75 + 0.0) / 2)
    assert scores.corpus_precision == pytest.approx(3 / 5) and scores.corpus_recall == pytest.approx(3 / 4)
    assert scores.corpus_f1 == pytest.approx(2 * 0.6 * 0.75 / 1.35)


def test_a_flat_prediction_has_precision_one_of_recall():
    gold = gold_sentence(parse_tree(CAT))
    scores = score_trees([[(0, 2), (2, 6)]], [gold])
    assert (scores.sentence_precision, scores.sentence_recall) == pytest.approx((1.0, 0.5))
    assert scores.sentence_f1 == pytest.approx(2 / 3)


def test_nontrivial_and_bad_input():
    assert nontrivial([(0, 1), (0, 3), (1, 3), (2, 3)], 3) == {(1, 3)}
    gold = gold_sentence(parse_tree(CAT))
    with pytest.raises(ValueError, match="1 predicted trees for 2 gold"):
        score_trees([[]], [gold, gold])
    with pytest.raises(ValueError, match="has 6 words but predicted spans"):
        score_trees([[(3, 7)]], [gold])
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
