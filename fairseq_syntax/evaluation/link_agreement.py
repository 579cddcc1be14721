"""How well each layer's link probabilities follow the gold trees, before any parsing algorithm is applied.

Tree Transformer's link ``a^l_k`` (Wang, Lee & Chen 2019, eq. 8) should be high when words ``k`` and ``k+1`` sit in a
small constituent together and low when only a large one holds both. For each layer we report Spearman's rank
correlation, over all adjacent word pairs of all sentences, between ``a^l_k`` and minus the size (in words) of the
smallest gold constituent holding both words: +1 means the links rank the pairs exactly as the gold trees do, 0
no relation, and a negative value links that cut the gold constituents. F1 of Algorithm 1 mixes this with the
algorithm's thresholds and layer schedule; this number isolates what the model has learnt.

Inputs: per sentence, links ``L x (n-1)`` (as :mod:`fairseq_syntax.induction` reads them) and a
:class:`~fairseq_syntax.evaluation.parseval.GoldSentence` (non-trivial spans; the whole sentence is the fallback).
"""
from __future__ import annotations

from typing import Iterable, List, Sequence, Tuple

import numpy as np

from fairseq_syntax.evaluation.parseval import GoldSentence

Span = Tuple[int, int]


def smallest_common_constituent(spans: Iterable[Span], num_words: int) -> np.ndarray:
    """``n-1`` sizes: entry ``k`` is the length of the shortest span ``(start, end)`` (end exclusive) holding words
    ``k`` and ``k+1``, or ``num_words`` when only the whole sentence does."""
    sizes = np.full(max(num_words - 1, 0), num_words, dtype=np.int64)
    for start, end in spans:
        pairs = slice(start, end - 1)  # k with start <= k and k + 1 < end
        sizes[pairs] = np.minimum(sizes[pairs], end - start)
    return sizes


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 0..N-1 of ``values``, ties sharing the mean of their ranks."""
    values = np.asarray(values)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.arange(len(values), dtype=np.float64)
    _, groups = np.unique(values, return_inverse=True)
    return (np.bincount(groups, ranks) / np.bincount(groups))[groups]


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (Pearson's on average ranks); NaN when either side is constant or empty."""
    rank_x, rank_y = average_ranks(x) - (len(x) - 1) / 2, average_ranks(y) - (len(y) - 1) / 2
    denominator = np.sqrt((rank_x ** 2).sum() * (rank_y ** 2).sum())
    return float((rank_x * rank_y).sum() / denominator) if denominator > 0 else float("nan")


def link_agreement(links: Sequence[np.ndarray], gold: Sequence[GoldSentence]) -> List[float]:
    """Per layer, Spearman's correlation between the links and minus the smallest gold constituent sizes."""
    if len(links) != len(gold):
        raise ValueError(f"{len(links)} sentences of links but {len(gold)} gold trees")
    sizes = np.concatenate([smallest_common_constituent(g.spans, len(g.words)) for g in gold])
    layers = np.concatenate([np.asarray(sentence) for sentence in links], axis=1)  # L x all pairs
    if layers.shape[1] != len(sizes):
        raise ValueError(f"{layers.shape[1]} links but {len(sizes)} adjacent word pairs in the gold trees")
    return [spearman(layer, -sizes) for layer in layers]
