"""Agreement of link probabilities with gold trees: smallest common constituents and Spearman's rho by hand."""
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
from fairseq_syntax.methods.tree_transformer.parseval import gold_sentence

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
    with pytest.raises(ValueError, match="sentence 0: 3 links but 5 adjacent word pairs"):
        link_agreement([np.zeros((2, 3))], gold)


def test_link_agreement_of_links_one_pair_to_the_right():
    gold = [gold_sentence(parse_tree(TREE))]
    sizes = np.array([2, 6, 4, 3, 2])
    # link k+1 carries the gold strength of pair k: offset +1 compares pairs 0..3 with links 1..4, exactly
    shifted = np.concatenate([[0.9], 1.0 / sizes[:-1]])[None]
    assert link_agreement([shifted], gold, offset=1) == pytest.approx([1.0])
    # offset -1 compares pairs 1..4 (minus sizes -6 -4 -3 -2: ranks 0 1 2 3) with links 0..3 (0.9 1/2 1/6 1/4:
    # ranks 3 2 0 1); centred: (-1.5 -0.5 0.5 1.5) . (1.5 0.5 -1.5 -0.5) = -4, over sqrt(5 * 5)
    assert link_agreement([shifted], gold, offset=-1) == pytest.approx([-0.8])


def test_links_by_tag_pair_by_hand():
    gold = gold_sentence(parse_tree(TREE))
    assert gold.tags == ("DT", "NN", "VBD", "IN", "DT", "NN")
    # pairs: DT NN (sizes 2, 2), NN VBD (6), VBD IN (4), IN DT (3); two layers
    links = [np.array([[0.2, 0.1, 0.3, 0.4, 0.6], [0.9, 0.2, 0.5, 0.6, 0.7]])]
    rows = links_by_tag_pair(links, [gold], top=2)
    # the two most frequent pairs: DT NN (2) then, among the pairs seen once, IN DT (alphabetical); by mean link
    assert [(row.tags, row.count) for row in rows] == [(("DT", "NN"), 2), (("IN", "DT"), 1)]
    assert rows[0].mean_links == pytest.approx((0.4, 0.8)) and rows[0].median_gold_size == 2
    assert rows[1].mean_links == pytest.approx((0.4, 0.6)) and rows[1].median_gold_size == 3
