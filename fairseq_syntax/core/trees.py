"""Constituency trees in PTB bracket notation: reading, cleaning, BPE and the linearizations the models consume.

Pure functions over a small ``Tree`` dataclass (numpy only); malformed input raises ``TreeError`` naming file, line
and problem. Every walk is iterative: a parser's long unary chain can be deeper than Python's recursion limit.
Leaves carry the PTB escapes (``(`` -> ``-LRB-``, as benepar), and source words are escaped alike.

Preterminals (POS nodes) can be kept, dropped, or kept only over BPE-split words: McDonald & Chiang count them as
nodes (Table 1, Figure 1b); Nguyen et al. (2020) omit them (footnote 2) except over a split word (Appendix 7.4).
``auto`` (default): ``keep`` when the tree has POS tags, ``split`` when its preterminals are a placeholder
(SuPar's crf-con writes ``XX``)."""
from __future__ import annotations

import gzip
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import numpy as np

PRETERMINAL_MODES = ("auto", "keep", "split", "drop")
#: preterminal labels that stand for "no POS tag" (a parser that predicts none, the flat fallback trees)
PLACEHOLDER_TAGS = frozenset({"XX"})
# Single-child wrappers around the real tree: the PTB's empty-label "( (S ...) )" and the ROOT/TOP of parsers.
WRAPPER_LABELS = frozenset({"", "ROOT", "TOP"})
EMPTY_ELEMENT = "-NONE-"
MAX_TOKENS = int(np.iinfo(np.int16).max)  # parent arrays are stored as int16

PTB_ESCAPES = {"(": "-LRB-", ")": "-RRB-", "[": "-LSB-", "]": "-RSB-", "{": "-LCB-", "}": "-RCB-"}

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_WORD = re.compile(r"[^\s()]+")  # what a label or a word may be, so that the bracketed form parses back
_FUNCTION_TAG = re.compile(r"[-=]")


def ptb_escape_token(token: str) -> str:
    """``token`` with each bracket escaped as :data:`PTB_ESCAPES` says, wherever it occurs (``a(b`` -> ``a-LRB-b``)."""
    return "".join(PTB_ESCAPES.get(char, char) for char in token)


def ptb_unescape_token(token: str) -> str:
    """Inverse of ``ptb_escape_token`` (a token that held a literal ``-LRB-`` comes back as ``(``)."""
    for char, escape in PTB_ESCAPES.items():
        token = token.replace(escape, char)
    return token


class TreeError(ValueError):
    """Malformed tree. ``str()`` is ``'FILE:LINE: problem'`` (source and line given by the caller)."""

    def __init__(self, problem: str, source: str = "<string>", line: int | None = None):
        super().__init__(problem, source, line)  # args must rebuild the error when it is pickled
        self.problem = problem
        self.source = source
        self.line = line

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        return f"{where}: {self.problem}"


@dataclass
class Tree:
    """A node: ``label`` is the nonterminal for interior nodes and the word (or subword) for leaves."""

    label: str
    children: list["Tree"] = field(default_factory=list)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def is_preterminal(self) -> bool:
        """An interior node whose children are all leaves: a POS node, over several subwords after BPE."""
        return bool(self.children) and all(child.is_leaf for child in self.children)

    def leaves(self) -> list[str]:
        found = []
        stack = [self]
        while stack:
            node = stack.pop()
            if node.is_leaf:
                found.append(node.label)
            else:
                stack.extend(reversed(node.children))
        return found

    def __str__(self) -> str:
        return to_bracketed(self)


# --- reading


def _tokenize(lines: Iterable[str], first_line: int = 1) -> Iterator[tuple[str, int]]:
    """Brackets and words of ``lines``, each with the number of its line (the first is ``first_line``)."""
    return ((match.group(), line) for line, text in enumerate(lines, first_line) for match in _TOKEN.finditer(text))


def _build_tree(tokens: list[tuple[str, int]], source: str, start_line: int | None, unwrap: bool) -> Tree:
    """Build the single tree that ``tokens`` must spell; TreeError points at the line of the offending token."""

    def fail(problem: str, line: int | None) -> TreeError:
        return TreeError(problem, source, line if start_line is not None else None)

    if not tokens:
        raise fail("empty input: expected a bracketed tree", start_line)
    tree_line = tokens[0][1]
    open_nodes: list[Tree] = []
    root: Tree | None = None
    position = 0
    while position < len(tokens):
        token, line = tokens[position]
        position += 1
        if root is not None:
            if token == ")":
                raise fail("unbalanced brackets: ')' after the tree is complete", line)
            raise fail(f"text after the tree: {token!r}", line)
        if token == "(":
            label = ""
            if position < len(tokens) and tokens[position][0] not in ("(", ")"):
                label = tokens[position][0]
                position += 1
            elif position < len(tokens) and tokens[position][0] == ")":
                raise fail("empty brackets '()'", line)
            if not label and open_nodes:
                raise fail("node without a label inside the tree (only the outer wrapper may lack one)", line)
            open_nodes.append(Tree(label))
        elif token == ")":
            if not open_nodes:
                raise fail("unbalanced brackets: ')' without a matching '('", line)
            node = open_nodes.pop()
            if not node.children:
                # "(NN f(x))" reads as a node "(x" closed at once: a word with a bracket in it
                raise fail(f"node ({node.label} has no children; a word containing '(' or ')' must be written "
                           "PTB-escaped, -LRB- and -RRB- (as parsers write it)", line)
            if open_nodes:
                open_nodes[-1].children.append(node)
            else:
                root = node
        elif not open_nodes:
            raise fail(f"bare word {token!r} outside brackets: a tree must start with '('", line)
        else:
            open_nodes[-1].children.append(Tree(token))
    if root is None:
        raise fail(f"unbalanced brackets: {len(open_nodes)} '(' not closed in the tree starting here", tree_line)
    if unwrap:
        root = unwrapped(root)
        if root.label == "":
            raise fail(
                f"outer wrapper '( ... )' holds {len(root.children)} items; expected exactly one tree", tree_line
            )
    return root


def unwrapped(tree: Tree) -> Tree:
    """``tree`` without the single-child wrappers (:data:`WRAPPER_LABELS`) above its real root."""
    while tree.label in WRAPPER_LABELS and len(tree.children) == 1 and not tree.children[0].is_leaf:
        tree = tree.children[0]
    return tree


def parse_tree(text: str, source: str = "<string>", line: int | None = None, unwrap: bool = True) -> Tree:
    """Parse one bracketed tree, e.g. ``(S (NP (PRP He)) (VP (VBZ is)))``.

    ``line`` is the line number of the text's first line (errors then point to the line of the problem).
    ``unwrap`` removes single-child wrappers: the PTB's empty-label ``( (S ...) )`` / ``((S ...))`` and the
    ``ROOT`` / ``TOP`` node parsers add. Unary chains, escaped brackets (``-LRB-``) and numeric labels (SST)
    are kept as they are.
    """
    return _build_tree(list(_tokenize(text.split("\n"), 1 if line is None else line)), source, line, unwrap)


def _open_text(path: str):
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig")
    return open(path, encoding="utf-8-sig")  # -sig: a byte order mark at the start is not part of the first tree


def read_trees(path: str) -> Iterator[Tree]:
    """One bracketed tree per line (plain or .gz); a blank line is an error, never skipped."""
    with _open_text(path) as lines:
        for line_number, text in enumerate(lines, 1):
            if not text.strip():
                raise TreeError("blank line: expected one tree per line", str(path), line_number)
            yield parse_tree(text, str(path), line_number)


def _split_trees(tokens: Iterable[tuple[str, int]]) -> Iterator[list[tuple[str, int]]]:
    """Group a token stream into top-level trees by bracket depth; a stray word or ``)`` is a group of its own,
    which :func:`_build_tree` refuses."""
    depth, current = 0, []
    for token, line in tokens:
        current.append((token, line))
        depth += {"(": 1, ")": -1}.get(token, 0)
        if depth <= 0:
            yield current
            depth, current = 0, []
    if current:
        yield current


def read_ptb(path: str) -> Iterator[Tree]:
    """Trees of a Penn Treebank ``.mrg`` file (plain or .gz), pretty-printed over several lines.

    Trees are found by bracket matching; blank lines between them are allowed. Empty-label wrappers are removed.
    """
    with _open_text(path) as lines:
        for tree_tokens in _split_trees(_tokenize(lines)):
            yield _build_tree(tree_tokens, str(path), tree_tokens[0][1], unwrap=True)


# --- writing


def to_bracketed(tree: Tree) -> str:
    """Single-line bracketed form, e.g. ``(S (NP (PRP He)) (VP (VBZ is)))``; the inverse of ``parse_tree``."""
    parts: list[str] = []
    stack: list[Tree | str] = [tree]  # a node to write, or text to write as it is (a separator, a closing bracket)
    while stack:  # iterative: a tree may be deeper than Python's recursion limit
        node = stack.pop()
        if isinstance(node, str):
            parts.append(node)
        elif node.is_leaf:
            if _WORD.fullmatch(node.label) is None:
                raise TreeError(f"cannot write word {node.label!r}: it is empty or holds whitespace or brackets")
            parts.append(node.label)
        else:
            if node.label and _WORD.fullmatch(node.label) is None:
                raise TreeError(f"cannot write label {node.label!r}: it holds whitespace or brackets")
            parts.append(f"({node.label}")
            stack.append(")")
            for child in reversed(node.children):
                stack.extend((child, " "))
    return "".join(parts)


# --- transforms


def _rebuild(
    tree: Tree, on_leaf: Callable[[Tree], list[Tree]], on_node: Callable[[Tree, list[Tree]], list[Tree]]
) -> list[Tree]:
    """A new tree, bottom up: each leaf becomes ``on_leaf(leaf)`` and each interior node
    ``on_node(node, rebuilt children)`` (each a list: a node may become none or several). Leaves are visited left
    to right."""
    built: list[list[Tree]] = [[]]  # per open node (and the top), the rebuilt children so far
    stack: list[tuple[Tree, bool]] = [(tree, False)]  # (node, its children are rebuilt)
    while stack:
        node, children_done = stack.pop()
        if node.is_leaf:
            built[-1].extend(on_leaf(node))
        elif children_done:
            children = built.pop()
            built[-1].extend(on_node(node, children))
        else:
            stack.append((node, True))
            built.append([])
            stack.extend((child, False) for child in reversed(node.children))
    return built[0]


def _strip_function_tags(label: str) -> str:
    """``NP-SBJ-1`` -> ``NP``, ``NP=2`` -> ``NP``; labels starting with '-' (``-NONE-``, ``-LRB-``) stay intact."""
    if label.startswith("-"):
        return label
    return _FUNCTION_TAG.split(label, 1)[0]


def clean_ptb(tree: Tree, strip_function_tags: bool = True, remove_empty: bool = True) -> Tree:
    """PTB cleanup before parsing or evaluation, as a new tree: ``remove_empty`` drops ``-NONE-`` subtrees, then
    every constituent left without children; ``strip_function_tags`` as :func:`_strip_function_tags`. Words are
    never changed."""

    def clean(node: Tree, children: list[Tree]) -> list[Tree]:
        if (remove_empty and node.label == EMPTY_ELEMENT) or not children:
            return []
        return [Tree(_strip_function_tags(node.label) if strip_function_tags else node.label, children)]

    cleaned = _rebuild(tree, lambda leaf: [Tree(leaf.label)], clean)
    if not cleaned:
        raise TreeError(f"no words left after removing {EMPTY_ELEMENT} elements from {to_bracketed(tree)}")
    return cleaned[0]


def apply_bpe(tree: Tree, segment: Callable[[str], list[str]]) -> Tree:
    """Replace every word by its subwords ``segment(word)``, as sibling leaves under the word's parent.

    ``(NN father)`` -> ``(NN fa@@ ther)``: the POS node becomes the root of the word's subtree (McDonald & Chiang
    2021, Figure 1b; Nguyen et al. 2020, Appendix 7.4 / Figure 7). A word whose parent also has interior children
    gets its pieces as leaves of that parent. Returns a new tree."""
    if tree.is_leaf:
        raise TreeError(f"apply_bpe needs a bracketed tree, got the bare word {tree.label!r}")

    def pieces(word: str) -> list[Tree]:
        subwords = segment(word)
        if not subwords:
            raise TreeError(f"segmenting the word {word!r} gave no subwords")
        return [Tree(subword) for subword in subwords]

    return _rebuild(tree, lambda leaf: pieces(leaf.label), lambda node, children: [Tree(node.label, children)])[0]


# --- linearizations


def has_pos_tags(tree: Tree) -> bool:
    """Whether some preterminal of ``tree`` carries a real tag (a label outside :data:`PLACEHOLDER_TAGS`)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if node.is_preterminal and node.label not in PLACEHOLDER_TAGS:
            return True
        stack.extend(child for child in node.children if not child.is_leaf)
    return False


def resolve_preterminals(tree: Tree, preterminals: str) -> str:
    """The mode ``preterminals`` means for ``tree``: ``auto`` -> ``keep`` with POS tags, else ``split``."""
    if preterminals not in PRETERMINAL_MODES:
        raise ValueError(f"preterminals must be one of {PRETERMINAL_MODES}, got {preterminals!r}")
    if preterminals != "auto":
        return preterminals
    return "keep" if has_pos_tags(tree) else "split"


def _check_linearizable(tree: Tree, preterminals: str) -> str:
    """The resolved preterminal mode of a tree that can be linearized."""
    if tree.is_leaf:
        raise TreeError(f"a bracketed tree is needed, got the bare word {tree.label!r}")
    return resolve_preterminals(tree, preterminals)


def _is_node_token(node: Tree, is_root: bool, preterminals: str) -> bool:
    """Whether interior ``node`` becomes a token under the ``preterminals`` option (see ``preorder``)."""
    if not node.is_preterminal or preterminals == "keep":
        return True
    # A preterminal over several subwords is the root of that word's subtree ("split" keeps it); at the root
    # of the tree it must stay even under "drop", or its subwords would be several roots.
    return len(node.children) > 1 and (preterminals == "split" or is_root)


def preorder(tree: Tree, preterminals: str = "auto") -> tuple[list[str], np.ndarray]:
    """Preorder tokens without closing brackets, and the parent of each: McDonald & Chiang's (2021) "Mask" input
    (section 2); :mod:`fairseq_syntax.core.structure` derives the rest per batch.

    Interior node ``X`` -> ``(X``; leaves as themselves. ``parents[k]`` is the index of token k's parent,
    ``-1`` for the root. ``preterminals``:
      ``"auto"``  ``keep`` if the tree has POS tags, else ``split`` (:func:`resolve_preterminals`);
      ``"keep"``  every POS node is a token;
      ``"split"`` only POS nodes over a BPE-split word (more than one leaf) are tokens; other words attach to
                  the POS node's parent;
      ``"drop"``  no POS node is a token; words and subwords attach to the POS node's parent. A one-word tree
                  then has the word as its root (a split one-word tree keeps its POS node as the single root).
    Out: (tokens ``list[str]`` length n, parents ``np.int16[n]``).
    """
    preterminals = _check_linearizable(tree, preterminals)
    tokens: list[str] = []
    parents: list[int] = []
    stack: list[tuple[Tree, int]] = [(tree, -1)]
    while stack:
        node, parent = stack.pop()
        if node.is_leaf:
            tokens.append(node.label)
            parents.append(parent)
            continue
        if _is_node_token(node, node is tree, preterminals):
            tokens.append("(" + node.label)
            parents.append(parent)
            parent = len(tokens) - 1
        stack.extend((child, parent) for child in reversed(node.children))
    if len(tokens) > MAX_TOKENS:
        raise TreeError(f"tree has {len(tokens)} tokens; the int16 parent array holds at most {MAX_TOKENS}")
    return tokens, np.array(parents, dtype=np.int16)


def linearize(tree: Tree, preterminals: str = "auto") -> list[str]:
    """McDonald & Chiang's (2021) "Linearized" baseline (section 3.2): interior ``X`` -> ``(X``, its children,
    ``)``; leaves as themselves. ``preterminals`` chooses the interior nodes as in ``preorder``, so removing the
    ``)`` tokens gives the preorder tokens."""
    preterminals = _check_linearizable(tree, preterminals)
    tokens: list[str] = []
    stack: list[Tree | str] = [tree]  # a node, or a closing bracket to write (iterative: trees may be deep)
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            tokens.append(node)
        elif node.is_leaf:
            tokens.append(node.label)
        else:
            if _is_node_token(node, node is tree, preterminals):
                tokens.append("(" + node.label)
                stack.append(")")
            stack.extend(reversed(node.children))
    return tokens


def words(tree: Tree) -> list[str]:
    """The leaves: McDonald & Chiang's (2021) "Sequence" baseline input."""
    return tree.leaves()
