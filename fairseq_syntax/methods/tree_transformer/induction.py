"""Unsupervised parsing from Tree Transformer link probabilities: Wang, Lee & Chen (2019), section 6, Algorithm 1,
and the trivial trees it is compared with (left-/right-branching, random by two draws).

A sentence of ``n`` words has ``links`` ``L x (n-1)``: ``links[l, k]`` is layer ``l``'s ``a^l_k`` that words ``k``
and ``k+1`` are in one constituent. A tree is a nested tuple: a word is its index, a constituent the tuple of its
children (``((0, 1), 2)``); a node may have more than two children.

Algorithm 1 (``descend_above=None``): from the top layer, split a span at its weakest link ``b`` if
``a^l_b <= threshold`` and parse both halves one layer lower (never below ``min_layer``); else retry one layer
lower, or leave the span flat at ``min_layer``. Spans of one or two words are not split. ``descend_above=0.7`` is
the authors' released variant: a half moves down only when its own weakest link is above 0.7, else is split again
at the current layer."""
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
    """A random binary tree, the uniform-split draw: merge a uniformly chosen pair of adjacent nodes until one is
    left (every split point uniform over its gaps). At n=4: the balanced tree 1/3, each other 1/6."""
    nodes: list = list(range(num_words))
    while len(nodes) > 1:
        merge = int(rng.integers(len(nodes) - 1))
        nodes[merge: merge + 2] = [(nodes[merge], nodes[merge + 1])]
    return nodes[0]


def random_shift_reduce_tree(num_words: int, rng: np.random.Generator) -> Node:
    """A random binary tree, the shift-reduce draw of Kim et al.'s evaluation code (URNNG, compound PCFG:
    ``get_random_tree``): shift two words, then shift or reduce with probability 1/2 while both are possible. At
    n=4: balanced, left- and right-branching 1/4 each, the other two 1/8."""
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
