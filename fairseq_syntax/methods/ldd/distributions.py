"""Labeled dependency distributions (LDD): Pu & Sima'an (2022), section 3.1, Table 1 and Appendix A.

From a biaffine parser's records (:mod:`fairseq_syntax.parsing.dependency`):

    p(i, j, l) = P(head j, label l | dependent i) = P(head j | i) * P(label l | i, j)        (section 3.1)

summed into the 16 label groups of Appendix A (``LDD_l``, one matrix per attention head). Labels outside the
groups keep their mass in the channel ``OUTSIDE`` (the unlabeled variants UDD, UDP need the whole arc
probability). The 1-best variants (UDP, LDP) read the parser's 1-best tree, 17 more channels
(``BEST_OFFSET + group``).

Subwords (the paper works on words): every BPE token of a dependent word takes the word's row. A head word's mass
is shared evenly among its pieces (``--ldd-subword-heads share``, default: a row sums to its word's distribution)
or copied to each (``copy``: a row may sum to more than 1). The root (head 0) is fairseq's EOS token (the paper's
``<bos>``). EOS and padding rows are zero.

Shapes: word level ``B x NUM_STORED_CHANNELS x S x S`` (34 channels: 16 groups, OUTSIDE, the same 17 for the
1-best tree; row/column 0 = root, S = words + 2 with an all-zero word for padding) and ``token_words`` ``B x T``;
a variant (Table 1) makes the ``B x 16 x T x T`` tensor of the LDD layer's 16 heads
(:func:`variant_distribution`)."""
from typing import Dict, List, NamedTuple, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

NUM_GROUPS = 16
OUTSIDE = NUM_GROUPS  # channel of the labels no group covers
NUM_CHANNELS = NUM_GROUPS + 1
BEST_OFFSET = NUM_CHANNELS  # channel BEST_OFFSET + g: the 1-best tree's arc, its label in group g
NUM_STORED_CHANNELS = 2 * NUM_CHANNELS
ROOT = 0  # word index of the root (head 0 in the parser output)
#: how a head word's mass reaches its BPE pieces (module docstring)
SUBWORD_HEAD_RULES = ("share", "copy")

#: short names of the paper's l1..l16, for plots and logs
GROUP_NAMES = (
    "root", "aux", "comp", "obj", "csubj", "nsubj", "cc", "conj",
    "advcl", "amod", "advmod", "npadvmod", "det", "num", "appos", "punct",
)

#: Appendix A, Table A: Stanford (basic) dependencies, as written in the paper.
STANFORD_GROUPS: Tuple[Tuple[str, ...], ...] = (
    ("root",),
    ("aux", "auxpass", "cop"),
    ("acomp", "ccomp", "pcomp", "xcomp"),
    ("dobj", "iobj", "pobj"),
    ("csubj", "csubjpass"),
    ("nsubj", "nsubjpass"),
    ("cc",),
    ("conj", "preconj"),
    ("advcl",),
    ("amod",),
    ("advmod",),
    ("npadvmod", "tmod"),
    ("det", "predet"),
    ("num", "number", "quantmod"),
    ("appos",),
    ("punct",),
)

#: Appendix A adapted to Universal Dependencies v2. A label ``a:b`` not listed falls back to ``a``. SD -> UD: auxpass ->
#: aux:pass; acomp -> xcomp; dobj -> obj; pobj -> obl (joins the objects; ``nmod`` stays outside, or the fallback would
#: bring in nmod:poss); npadvmod/tmod -> obl:npmod, obl:tmod, nmod:npmod, nmod:tmod (UD <= 2.13), obl:unmarked,
#: nmod:unmarked (UD 2.14+); predet -> det:predet; preconj -> cc:preconj; num -> nummod. Outside, as their SD
#: counterparts: case, mark, nmod, compound, flat, fixed, acl, expl, parataxis, discourse, list, vocative, dep, ...
UNIVERSAL_GROUPS: Tuple[Tuple[str, ...], ...] = (
    ("root",),
    ("aux", "aux:pass", "cop"),
    ("ccomp", "xcomp"),
    ("obj", "iobj", "obl", "obl:agent"),
    ("csubj", "csubj:pass"),
    ("nsubj", "nsubj:pass"),
    ("cc",),
    ("conj", "cc:preconj"),
    ("advcl",),
    ("amod",),
    ("advmod",),
    ("obl:npmod", "obl:tmod", "obl:unmarked", "nmod:npmod", "nmod:tmod", "nmod:unmarked"),
    ("det", "det:predet"),
    ("nummod",),
    ("appos",),
    ("punct",),
)

LABEL_TABLES: Dict[str, Tuple[Tuple[str, ...], ...]] = {"stanford": STANFORD_GROUPS, "universal": UNIVERSAL_GROUPS}

#: Table 1 of the paper, and ``lda_weights`` (see variant_distribution)
SYNTAX_VARIANTS = ("ldd", "udd", "ldp", "udp", "uldd", "uudd", "lda", "lda_weights")


def label_index(table: Sequence[Sequence[str]]) -> Dict[str, int]:
    """label -> group (0-based: the paper's l1 is 0); raises if a label is in two groups."""
    if len(table) != NUM_GROUPS:
        raise ValueError(f"a label table has {NUM_GROUPS} groups, this one {len(table)}")
    index: Dict[str, int] = {}
    for group, labels in enumerate(table):
        for label in labels:
            if label in index:
                raise ValueError(f"label {label!r} is in groups {index[label] + 1} and {group + 1}")
            index[label] = group
    return index


def label_group(label: str, index: Dict[str, int]) -> int:
    """Group of ``label`` (exact name first, then the part before ``:``), or ``OUTSIDE``."""
    if label in index:
        return index[label]
    return index.get(label.split(":", 1)[0], OUTSIDE)


class LabeledArc(NamedTuple):
    dependent: int  # 1-based word index
    head: int  # 0 = root
    label: str
    probability: float  # p(i, j, l) = P(head | dependent) * P(label | dependent, head)


def labeled_arcs(record: dict) -> List[LabeledArc]:
    """p(i, j, l) of one parser record ``{"words": [...], "arcs": [[dep, head, p_arc, {label: p}], ...]}``."""
    return [
        LabeledArc(dependent, head, label, p_arc * p_label)
        for dependent, head, p_arc, labels in record["arcs"]
        for label, p_label in labels.items()
    ]


class GroupedArcs(NamedTuple):
    """Sparse ``NUM_CHANNELS x (W+1) x (W+1)`` word-level tensor: entry k is ``(group, dependent, head)``."""

    dependents: np.ndarray  # K, int64
    heads: np.ndarray  # K, int64
    groups: np.ndarray  # K, int64 in 0..OUTSIDE
    probabilities: np.ndarray  # K, float64


def group_arcs(arcs: Sequence[LabeledArc], index: Dict[str, int]) -> GroupedArcs:
    """Sum p(i, j, l) over the labels of each group (Appendix A); one entry per (dependent, head, group)."""
    summed: Dict[Tuple[int, int, int], float] = {}
    for arc in arcs:
        key = (arc.dependent, arc.head, label_group(arc.label, index))
        summed[key] = summed.get(key, 0.0) + arc.probability
    keys = sorted(summed)
    columns = np.array(keys, dtype=np.int64).reshape(-1, 3)
    return GroupedArcs(
        columns[:, 0], columns[:, 1], columns[:, 2], np.array([summed[k] for k in keys], dtype=np.float64)
    )


def one_best_arcs(best: Sequence[Sequence], index: Dict[str, int]) -> GroupedArcs:
    """The parser's 1-best tree ``[[head, label], ...]`` (per word in order) as entries of the channels
    ``BEST_OFFSET + group`` with probability 1."""
    heads = np.array([int(head) for head, _ in best], dtype=np.int64)
    groups = np.array([BEST_OFFSET + label_group(label, index) for _, label in best], dtype=np.int64)
    return GroupedArcs(np.arange(1, len(best) + 1, dtype=np.int64), heads, groups, np.ones(len(best)))


def subword_word_index(pieces_per_word: Sequence[int]) -> np.ndarray:
    """1-based word index of each subword token: ``[1, 3, 1]`` pieces -> ``[1, 2, 2, 2, 3]``."""
    counts = np.asarray(pieces_per_word, dtype=np.int64)
    if (counts < 1).any():
        raise ValueError(f"every word has at least one subword, got {list(pieces_per_word)}")
    return np.repeat(np.arange(1, len(counts) + 1), counts)


def expand_to_tokens(word_pairs: Tensor, token_words: Tensor, subword_heads: str = "share") -> Tensor:
    """Word-level pair tensor -> token level: every token takes its word's row; a head word's column is shared by
    its tokens (``share``: divided by its number of tokens) or copied to each (``copy``).

    ``word_pairs``: ``B x C x S x S``; ``token_words``: ``B x T`` word index (0..S-1) of each token (the root's index
    for EOS, an all-zero row/column's index for padding). Returns ``B x C x T x T`` with
    ``out[b, c, t, u] = word_pairs[b, c, token_words[b, t], token_words[b, u]] / pieces(token_words[b, u])``
    (``pieces`` = 1 under ``copy``).
    """
    if subword_heads not in SUBWORD_HEAD_RULES:
        raise ValueError(f"unknown subword head rule {subword_heads!r}; choose from {SUBWORD_HEAD_RULES}")
    bsz, channels, size, _ = word_pairs.shape
    length = token_words.size(1)
    pair_index = (token_words[:, :, None] * size + token_words[:, None, :]).reshape(bsz, 1, length * length)
    flat = word_pairs.reshape(bsz, channels, size * size)
    tokens = flat.gather(2, pair_index.expand(bsz, channels, length * length)).view(bsz, channels, length, length)
    if subword_heads == "copy":
        return tokens
    pieces = torch.zeros(bsz, size, dtype=word_pairs.dtype, device=word_pairs.device)
    pieces.scatter_add_(1, token_words, torch.ones_like(token_words, dtype=word_pairs.dtype))
    return tokens / pieces.gather(1, token_words)[:, None, None, :]


def _uniform(variant: str, padding_mask: Tensor, eos_mask: Tensor, dtype: torch.dtype) -> Tensor:
    """UUDD / ULDD at token level (module docstring of :func:`variant_distribution`)."""
    dependents = ~(padding_mask | eos_mask)
    keys = ~padding_mask
    n = keys.sum(dim=1).to(dtype)
    if variant == "uldd":
        n = n * NUM_GROUPS
    uniform = (dependents[:, :, None] & keys[:, None, :]).to(dtype) / n[:, None, None]
    bsz, length = padding_mask.shape
    return uniform[:, None].expand(bsz, NUM_GROUPS, length, length)


def variant_distribution(
    word_pairs: Tensor, token_words: Tensor, variant: str, padding_mask: Tensor, eos_mask: Tensor,
    subword_heads: str = "share", check_one_best: bool = True,
) -> Tensor:
    """The ``B x 16 x T x T`` tensor head h of the LDD layer reads, for one row of the paper's Table 1.

    ``word_pairs``: ``B x NUM_STORED_CHANNELS x S x S`` word-level p(i, j, group) and the 1-best tree (rows:
    dependents = queries, columns: heads = keys); ``token_words`` ``B x T``; ``padding_mask`` and ``eos_mask``:
    ``B x T``, True at padding / at EOS. Tokens as :func:`expand_to_tokens` with ``subword_heads``. The 1-best
    variants refuse side data without the 1-best tree unless ``check_one_best`` is False (:class:`FirstBatchCheck`).

    * ``ldd``, ``lda``, ``lda_weights``: the 16 label groups, head h gets group h.
    * ``udd``: the arc distribution P(head j | i), all labels summed (OUTSIDE included), the same for all heads.
    * ``ldp``: the parser's 1-best labeled tree: 1 at (1-best head, the group of the 1-best label), else 0; a
      dependent whose 1-best label is outside the groups marks no head.
    * ``udp``: the 1-best unlabeled tree: 1 at the 1-best head, for all heads.
    * ``uudd``: uniform unlabeled: every dependent token gives each key (all tokens and EOS, itself included)
      1/n, n = non-padding tokens with EOS; ``uldd``: uniform over heads and the 16 groups, 1/(16 n). Footnote 2
      of the paper: every value of the tensor is identical. Neither reads the parser.
    """
    if variant not in SYNTAX_VARIANTS:
        raise ValueError(f"unknown syntax variant {variant!r}; choose from {SYNTAX_VARIANTS}")
    bsz, channels, size, _ = word_pairs.shape
    if channels != NUM_STORED_CHANNELS:
        raise ValueError(f"expected {NUM_STORED_CHANNELS} word-level channels (16 groups + outside, twice), got "
                         f"{channels}")
    if variant in ("uldd", "uudd"):
        return _uniform(variant, padding_mask, eos_mask, word_pairs.dtype)
    if variant in ("ldd", "lda", "lda_weights"):
        words = word_pairs[:, :NUM_GROUPS]
    elif variant == "udd":
        words = word_pairs[:, :NUM_CHANNELS].sum(dim=1, keepdim=True)
    else:
        best = word_pairs[:, BEST_OFFSET:]
        if check_one_best:
            _check_one_best(best, token_words, padding_mask | eos_mask, f"--syntax-variant {variant}")
        words = best[:, :NUM_GROUPS] if variant == "ldp" else best.sum(dim=1, keepdim=True)
    tokens = expand_to_tokens(words, token_words, subword_heads)
    return tokens.expand(bsz, NUM_GROUPS, *tokens.shape[2:])


class FirstBatchCheck:
    """Whether the check that side data holds the 1-best tree is due: on the first batch only (side data without it
    lacks it in every sentence, and the check waits for the device)."""

    def __init__(self):
        self.done = False

    def due(self) -> bool:
        due, self.done = not self.done, True
        return due


def _check_one_best(best: Tensor, token_words: Tensor, not_dependent: Tensor, reader: str) -> None:
    """Every dependent token's word has one 1-best arc, else the side data has no 1-best tree."""
    per_word = best.sum(dim=(1, 3))  # B x S: 1-best arcs of each word
    per_token = per_word.gather(1, token_words).masked_fill(not_dependent, 1.0)
    if not torch.all(per_token == 1):
        raise ValueError(
            f"{reader} reads the parser's 1-best tree, which this src_ldd side data lacks: make it "
            "again with fairseq-syntax-preprocess-dependencies from an arcs file that has \"best\" (written by "
            "preprocess/parse_dependency.py)"
        )


def one_best_head_words(word_pairs: Tensor, token_words: Tensor, not_dependent: Tensor, reader: str,
                        check: bool = True) -> Tensor:
    """``B x T``: the word index of the 1-best head of each token's word; the word itself for the root word and at
    ``not_dependent`` tokens. ``reader`` names the method in the error for side data without a 1-best tree
    (checked unless ``check`` is False)."""
    best = word_pairs[:, BEST_OFFSET:]
    if check:
        _check_one_best(best, token_words, not_dependent, reader)
    heads = best.sum(dim=1).argmax(dim=2).gather(1, token_words)  # the one 1 of each word's row
    return torch.where((heads == ROOT) | not_dependent, token_words, heads)
