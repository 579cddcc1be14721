"""How well each layer's link probabilities follow the gold trees, before any parsing algorithm is applied.

Tree Transformer's link ``a^l_k`` (Wang, Lee & Chen 2019, eq. 8) should be high when words ``k`` and ``k+1`` share
a small constituent. Per layer: Spearman's rank correlation, over all adjacent word pairs, between ``a^l_k`` and
minus the size of the smallest gold constituent holding both (+1: the links rank pairs as the gold trees do).
Unlike F1 of Algorithm 1, it does not depend on thresholds or layer schedule. :func:`links_by_tag_pair`: the mean
link of each POS tag pair per layer, beside the median size of its smallest gold constituent.

Inputs: per sentence, links ``L x (n-1)`` and a
:class:`~fairseq_syntax.methods.tree_transformer.parseval.GoldSentence`."""
from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, Iterable, List, Sequence, Tuple

import numpy as np

from fairseq_syntax.methods.tree_transformer.parseval import GoldSentence

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


def link_agreement(links: Sequence[np.ndarray], gold: Sequence[GoldSentence], offset: int = 0) -> List[float]:
    """Per layer, Spearman's correlation between the links and minus the smallest gold constituent sizes. ``offset``
    compares pair ``k, k+1`` with link ``a_{k+offset}`` (pairs without one left out), which shows links shifted
    from the gold constituents."""
    if len(links) != len(gold):
        raise ValueError(f"{len(links)} sentences of links but {len(gold)} gold trees")
    all_sizes, all_links = [], []
    for number, (sentence, reference) in enumerate(zip(links, gold)):
        sentence = np.asarray(sentence)
        sizes = smallest_common_constituent(reference.spans, len(reference.words))
        if sentence.shape[1] != len(sizes):
            raise ValueError(f"sentence {number}: {sentence.shape[1]} links but {len(sizes)} adjacent word pairs "
                             "in its gold tree")
        pairs = np.arange(max(0, -offset), len(sizes) - max(0, offset))
        all_sizes.append(sizes[pairs])
        all_links.append(sentence[:, pairs + offset])
    sizes = np.concatenate(all_sizes)
    layers = np.concatenate(all_links, axis=1)  # L x all pairs
    return [spearman(layer, -sizes) for layer in layers]


@dataclass(frozen=True)
class TagPairLinks:
    tags: Tuple[str, str]  # POS tags of words k and k+1
    count: int  # adjacent word pairs with these tags
    mean_links: Tuple[float, ...]  # mean a_k per layer
    median_gold_size: float  # median size of the smallest gold constituent holding both words


def links_by_tag_pair(links: Sequence[np.ndarray], gold: Sequence[GoldSentence], top: int = 12) -> List[TagPairLinks]:
    """The ``top`` most frequent POS tag pairs of adjacent words, by decreasing mean link over all layers."""
    found: Dict[Tuple[str, str], list] = defaultdict(list)
    for number, (sentence, reference) in enumerate(zip(links, gold)):
        if len(reference.tags) != len(reference.words):
            raise ValueError(f"sentence {number}: the gold tree has no POS tags")
        sizes = smallest_common_constituent(reference.spans, len(reference.words))
        for k, size in enumerate(sizes):
            found[reference.tags[k], reference.tags[k + 1]].append((np.asarray(sentence)[:, k], size))
    frequent = sorted(found.items(), key=lambda item: (-len(item[1]), item[0]))[:top]
    rows = [
        TagPairLinks(tags, len(pairs), tuple(float(v) for v in np.mean([a for a, _ in pairs], axis=0)),
                     float(np.median([size for _, size in pairs])))
        for tags, pairs in frequent
    ]
    return sorted(rows, key=lambda row: -float(np.mean(row.mean_links)))
