"""Agreement of link probabilities with gold trees: smallest common constituents and Spearman's rho by hand."""
import math

import numpy as np
import pytest

from fairseq_syntax.evaluation.link_agreement import (
    average_ranks,
    link_agreement,
    smallest_common_constituent,
    spearman,
)
from fairseq_syntax.evaluation.parseval import gold_sentence
from fairseq_syntax.trees import parse_tree

# (S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat))))): words 0..5
TREE = "(S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))))"


def test_smallest_common_constituent_by_hand():
    gold = gold_sentence(parse_tree(TREE))
    # pairs: the-cat in NP(2); cat-sat only in S(6); sat-on in VP(4); on-the in PP(3); the-mat in NP(2)
    assert smallest_common_constituent(gold.spans, 6).tolist() == [2, 6, 4, 3, 2]
    assert smallest_common_constituent([], 1).tolist() == []


def test_average_ranks_share_ties():
    assert average_ranks(np.array([3.0, 1.0, 3.0, 2.0])).tolist() == [2.5, 0.0, 2.5, 1.0]


def test_spearman_by_hand():
    # ranks x 0,1,2 and y 0,1.5,1.5: cov 1.5 / sqrt(2 * 1.5)
    assert spearman(np.array([1.0, 2.0, 3.0]), np.array([1, 2, 2])) == pytest.approx(1.5 / math.sqrt(3.0))
    assert spearman(np.array([1.0, 2.0, 3.0]), np.array([3, 2, 1])) == pytest.approx(-1.0)
    assert math.isnan(spearman(np.array([1.0, 1.0]), np.array([1, 2])))


def test_link_agreement_per_layer():
    gold = [gold_sentence(parse_tree(TREE))]
    sizes = np.array([2, 6, 4, 3, 2])
    following = 1.0 / sizes  # strongest inside the smallest constituents: the gold ranking exactly
    links = [np.stack([following, 1.0 - following])]
    assert link_agreement(links, gold) == pytest.approx([1.0, -1.0])
    with pytest.raises(ValueError, match="adjacent word pairs"):
        link_agreement([np.zeros((2, 3))], gold)
