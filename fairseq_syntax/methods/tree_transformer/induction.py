"""Unsupervised parsing from Tree Transformer link probabilities: Wang, Lee & Chen (2019), section 6, Algorithm 1,
and the trivial trees it is compared with (left-/right-branching, random by two draws).

Pure functions over numpy arrays. A sentence of ``n`` words has ``links`` of shape ``L x (n-1)``: ``links[l, k]``
is layer ``l``'s probability ``a^l_k`` that words ``k`` and ``k+1`` are in one constituent (``L x 0`` for one
word). A tree is a nested tuple: a word is its index (``int``), a constituent the tuple of its children, e.g.
``((0, 1), 2)`` for ``((w0 w1) w2)``. A node may have more than two children (Algorithm 1 leaves a span flat when
no link in it is a breakpoint at the minimum layer).

Algorithm 1 (``descend_above=None``): start at the top layer; split a span at its weakest link ``b`` if
``a^l_b <= threshold``, and parse both halves one layer lower (never below ``min_layer``); if the weakest link is
above the threshold, retry the span one layer lower, or leave it flat at ``min_layer``. Spans of one or two words
are not split. ``descend_above=0.7`` is the authors' released variant: a half moves one layer down only when its
own weakest link (at the current layer) is above 0.7, and is otherwise split again at the current layer.
"""
from __future__ import annotations

from typing import Iterator, Optional, Sequence, Tuple, Union

import numpy as np

from fairseq_syntax.core.trees import Tree

Node = Union[int, Tuple["Node", ...]]
Span = Tuple[int, int]  # (start, end): words start .. end-1


def _flat(start: int, end: int) -> Node:
    """Words ``start..end`` (inclusive) as one node; a single word is just its index."""
    return start if start == end else tuple(range(start, end + 1))


def induce_tree(
    links: np.ndarray,
    min_layer: int = 2,
    threshold: float = 0.8,
    descend_above: Optional[float] = None,
    top_layer: Optional[int] = None,
) -> Node:
    """Algorithm 1 on one sentence's ``links`` (``L x (n-1)``); returns the tree over words ``0..n-1``.

    ``top_layer`` (default ``L-1``) is where parsing starts. ``top_layer == min_layer`` with ``threshold >= 1``
    is plain top-down greedy parsing from one layer (the paper's Figure 4b).
    """
    links = np.asarray(links, dtype=np.float64)
    if links.ndim != 2:
        raise ValueError(f"links must be layers x (words - 1), got shape {links.shape}")
    num_layers = links.shape[0]
    top_layer = num_layers - 1 if top_layer is None else top_layer
    if not 0 <= min_layer <= top_layer < num_layers:
        raise ValueError(
            f"need 0 <= min_layer ({min_layer}) <= top_layer ({top_layer}) < number of layers ({num_layers})"
        )

    def build(layer: int, start: int, end: int) -> Node:  # words start..end, inclusive (the paper's s, e)
        if end - start < 2:
            return _flat(start, end)
        split = start + int(np.argmin(links[layer, start:end]))
        lower = max(layer - 1, min_layer)
        if links[layer, split] > threshold:
            return _flat(start, end) if layer == min_layer else build(lower, start, end)
        return (half(layer, lower, start, split), half(layer, lower, split + 1, end))

    def half(layer: int, lower: int, start: int, end: int) -> Node:
        stays = descend_above is not None and end > start and links[layer, start:end].min() <= descend_above
        return build(layer if stays else lower, start, end)

    return build(top_layer, 0, links.shape[1])


def left_branching(num_words: int) -> Node:
    """``(((w0 w1) w2) w3)``."""
    tree: Node = 0
    for word in range(1, num_words):
        tree = (tree, word)
    return tree


def right_branching(num_words: int) -> Node:
    """``(w0 (w1 (w2 w3)))``."""
    tree: Node = num_words - 1
    for word in range(num_words - 2, -1, -1):
        tree = (word, tree)
    return tree


def random_tree(num_words: int, rng: np.random.Generator) -> Node:
    """A random binary tree, the uniform-split draw: merge a uniformly chosen pair of adjacent nodes until one is left.

    The gaps are merged in a uniformly random order, so every node's split point is uniform over its gaps (the same
    trees as splitting top-down at a uniform point). At n=4: the balanced tree 1/3, each of the other four 1/6.
    """
    nodes: list = list(range(num_words))
    while len(nodes) > 1:
        merge = int(rng.integers(len(nodes) - 1))
        nodes[merge: merge + 2] = [(nodes[merge], nodes[merge + 1])]
    return nodes[0]


def random_shift_reduce_tree(num_words: int, rng: np.random.Generator) -> Node:
    """A random binary tree, the shift-reduce draw of Kim et al.'s evaluation code (URNNG, compound PCFG: their
    ``get_random_tree``): shift the first two words, then shift or reduce with probability 1/2 each while both are
    possible (shift only with fewer than two nodes on the stack, reduce only once every word is shifted). Not the
    uniform-split draw of :func:`random_tree`: at n=4 the balanced, left- and right-branching trees 1/4 each, the
    other two 1/8 (a draw per step: SS then R (1/2) gives ((0 1) ..), then S, then R or S; SSS (1/4) gives right-
    branching)."""
    stack: list = []
    shifted = 0
    while shifted < num_words or len(stack) > 1:
        if len(stack) < 2 or (shifted < num_words and rng.random() < 0.5):
            stack.append(shifted)
            shifted += 1
        else:
            right = stack.pop()
            stack[-1] = (stack[-1], right)
    return stack[0]


def _spans(node: Node, start: int) -> Iterator[Span]:
    """Spans of every constituent under ``node`` (postorder, ``node``'s own last), ``node`` starting at ``start``."""
    if isinstance(node, int):
        return
    position = start
    for child in node:
        if isinstance(child, int):
            position += 1
        else:
            child_spans = list(_spans(child, position))
            yield from child_spans
            position = child_spans[-1][1]
    yield (start, position)


def tree_spans(node: Node) -> list:
    """Spans ``(start, end)`` of every constituent, the whole sentence included (postorder)."""
    return list(_spans(node, 0))


def to_tree(node: Node, words: Sequence[str], label: str = "X") -> Tree:
    """The induced tree as a :class:`~fairseq_syntax.core.trees.Tree` (every constituent labelled ``label``)."""
    if isinstance(node, int):
        return Tree(label, [Tree(words[node])])

    def convert(part: Node) -> Tree:
        return Tree(words[part]) if isinstance(part, int) else Tree(label, [convert(child) for child in part])

    return convert(node)
