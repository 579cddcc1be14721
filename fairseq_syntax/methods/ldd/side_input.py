"""Side input ``src_ldd``: the labeled dependency distributions of Pu & Sima'an (2022) (section 3.1), stored per
source sentence at word level and expanded to BPE tokens per batch.

On disk (``{split}.{src}-{tgt}.{src}.ldd.{bin,idx}``, fairseq mmap, uint16) each sentence is one flat array, in
the compact layout::

    [65535, n, w_1 .. w_n, c_1 .. c_W, (64 * head + channel, q) * K]

or, for a sentence of more than 1023 words (and older side data), the long layout::

    [n, w_1 .. w_n, (dependent, head, channel, q) * K]

``n`` BPE tokens, ``w_t`` the 1-based word of token t, then K sparse entries of the word-level tensor of
:mod:`fairseq_syntax.methods.ldd.distributions`: dependent 1..W, head 0..W (0 = root), channel 0..33 (0..15 the
label groups, 16 outside them, 17 + g the 1-best arc with its label in group g, q = 65535) and
``q = round(p * 65535)`` (entries below the preprocessing floor are not stored). The compact layout lists entries
by dependent (``c_d`` of dependent d) and packs head and channel into one value: 4 bytes an entry, against 8; both
decode to the same numbers (a long item never starts with 65535). Side data without channels above 16 has no
1-best tree; the 1-best variants refuse it. A batch is :class:`WordPairs`."""
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from fairseq_syntax.core.command_help import option
from fairseq_syntax.core.data_dir import META_FILE
from fairseq_syntax.core.side_inputs import BadLine, SideInput, register_side_input
from fairseq_syntax.methods.ldd.distributions import (
    LABEL_TABLES,
    NUM_STORED_CHANNELS,
    ROOT,
    GroupedArcs,
    group_arcs,
    label_index,
    labeled_arcs,
    one_best_arcs,
    subword_word_index,
)
from fairseq_syntax.parsing.dependency import (
    DEFAULT_ARC_FLOOR,
    DEFAULT_LABEL_FLOOR,
    RetainedMass,
    sparse_record,
)

STORAGE_DTYPE = np.uint16
QUANTISATION = 65535  # largest uint16: p = q / QUANTISATION
ENTRY_WIDTH = 4  # dependent, head, group, q
COMPACT = 65535  # first value of a compact-layout item (module docstring)
CHANNEL_BITS = 6  # compact layout: one value holds head * 64 + channel
MAX_COMPACT_HEAD = (1 << (16 - CHANNEL_BITS)) - 1  # 1023 words


class StoredSentence(NamedTuple):
    token_words: np.ndarray  # n, 1-based word of each BPE token
    entries: np.ndarray  # K x 4: dependent, head, group, q


def quantise(probabilities: np.ndarray) -> np.ndarray:
    # a group's sum may exceed 1 by the parser file's rounding (6 significant digits): clip to q = 65535
    return np.rint(np.clip(probabilities, 0.0, 1.0) * QUANTISATION).astype(np.int64)


def encode_sentence(token_words: np.ndarray, arcs: GroupedArcs, floor: float, compact: bool = True) -> np.ndarray:
    """The stored array (int32 values, written as uint16) of one sentence without entries below ``floor`` (at least
    one quantisation step); compact unless ``compact`` is False or the sentence has over 1023 words."""
    if floor < 1 / QUANTISATION:
        raise ValueError(f"the floor {floor} is below one quantisation step (1/{QUANTISATION})")
    token_words = np.asarray(token_words, dtype=np.int64)
    kept = arcs.probabilities >= floor
    dependents, heads, groups = arcs.dependents[kept], arcs.heads[kept], arcs.groups[kept]
    q = quantise(arcs.probabilities[kept])
    num_words = int(token_words.max(initial=0))
    if compact and num_words <= MAX_COMPACT_HEAD and len(token_words) < COMPACT:
        order = np.lexsort((groups, heads, dependents))  # by dependent, then head, then channel
        counts = np.bincount(dependents, minlength=num_words + 1)[1:]
        if len(counts) > num_words:
            raise ValueError(f"an entry names a word beyond the {num_words} words of the tokens")
        packed = np.stack([(heads << CHANNEL_BITS) + groups, q], axis=1)[order]
        item = np.concatenate([[COMPACT, len(token_words)], token_words, counts, packed.reshape(-1)])
    else:
        entries = np.stack([dependents, heads, groups, q], axis=1)
        item = np.concatenate([[len(token_words)], token_words, entries.reshape(-1)])
        if len(token_words) >= COMPACT:
            raise ValueError(f"{len(token_words)} tokens: at most {COMPACT - 1} fit the side data")
    if item.size and (item.max() > np.iinfo(STORAGE_DTYPE).max or item.min() < 0):
        raise ValueError(f"a value does not fit {np.dtype(STORAGE_DTYPE).name}: {len(token_words)} tokens")
    return item.astype(np.int32)


def record_item(
    record: dict, pieces_per_word: Sequence[int], label_index: Dict[str, int], floor: float
) -> np.ndarray:
    """One parser record and the BPE piece count of each word -> the stored array (:func:`encode_sentence`), with the
    1-best tree where the record has it. ``ValueError`` when the counts do not match the words or a word has no
    head."""
    words = record["words"]
    if len(pieces_per_word) != len(words):
        raise ValueError(f"{len(words)} parsed words, but BPE pieces for {len(pieces_per_word)} words")
    missing = sorted(set(range(1, len(words) + 1)) - {arc[0] for arc in record["arcs"]})
    if missing:
        raise ValueError(f"words {missing} have no head at all")
    grouped = group_arcs(labeled_arcs(record), label_index)
    if "best" in record:
        best = one_best_arcs(record["best"], label_index)
        grouped = GroupedArcs(*(np.concatenate([a, b]) for a, b in zip(grouped, best)))
    return encode_sentence(subword_word_index(pieces_per_word), grouped, floor)


def _decode_compact(item: np.ndarray) -> StoredSentence:
    n = int(item[1]) if item.size > 1 else -1
    token_words = item[2 : 2 + n]
    num_words = int(token_words.max(initial=0))
    counts, packed = item[2 + n : 2 + n + num_words], item[2 + n + num_words :]
    if n < 0 or len(token_words) < n or len(counts) < num_words or len(packed) % 2 or counts.sum() != len(packed) // 2:
        raise ValueError(f"corrupt compact ldd item of {item.size} values (n = {n}): not [65535, n, n words, "
                         "an entry count per word, 2 x K entries]")
    packed = packed.reshape(-1, 2)
    dependents = np.repeat(np.arange(1, num_words + 1), counts)
    heads, groups = packed[:, 0] >> CHANNEL_BITS, packed[:, 0] & ((1 << CHANNEL_BITS) - 1)
    return StoredSentence(token_words, np.stack([dependents, heads, groups, packed[:, 1]], axis=1))


def decode_sentence(item) -> StoredSentence:
    """Either layout (module docstring) -> the tokens' words and the entries (dependent, head, channel, q)."""
    item = np.asarray(item, dtype=np.int64)
    if item.size and item[0] == COMPACT:
        token_words, entries = _decode_compact(item)
    else:
        n = int(item[0]) if item.size else -1
        if n < 0 or (item.size - 1 - n) % ENTRY_WIDTH:
            raise ValueError(f"corrupt ldd item of {item.size} values (n = {n}): not [n, n words, 4 x K entries]")
        token_words, entries = item[1 : 1 + n], item[1 + n :].reshape(-1, ENTRY_WIDTH)
    num_words = int(token_words.max(initial=0))
    dependents, heads, groups = entries[:, 0], entries[:, 1], entries[:, 2]
    if ((dependents < 1) | (dependents > num_words) | (heads > num_words) | (groups >= NUM_STORED_CHANNELS)).any():
        raise ValueError(f"corrupt ldd item: an entry names a word beyond the {num_words} words or a bad group")
    return StoredSentence(token_words, entries)


class WordPairs(NamedTuple):
    """A batch of ``src_ldd``: the word-level tensor and the word of each token (a plain tuple after fairseq's device
    moves: read by position)."""

    word_pairs: torch.Tensor  # B x NUM_STORED_CHANNELS x S x S float32; row/column 0 = root, S - 1 = padding
    token_words: torch.Tensor  # B x T int64: word of each token, 0 (root) at EOS, S - 1 at padding


def collate_ldd(items: List[torch.Tensor], left_pad: bool, length: int) -> WordPairs:
    """Stored sentences in batch order -> :class:`WordPairs`, tokens aligned with ``src_tokens``."""
    sentences = [decode_sentence(item) for item in items]
    num_words = max(int(s.token_words.max(initial=0)) for s in sentences)
    null_word = num_words + 1  # index of an all-zero row and column, for padding
    size = num_words + 2
    token_words = np.full((len(sentences), length), null_word, dtype=np.int64)
    batch_entries = []
    for row, sentence in enumerate(sentences):
        n = len(sentence.token_words)
        if n + 1 > length:
            raise ValueError(f"ldd side data has {n} tokens + EOS, the batch only {length} positions")
        start = length - n - 1 if left_pad else 0
        token_words[row, start : start + n] = sentence.token_words
        token_words[row, start + n] = ROOT  # fairseq's EOS stands for the root
        batch_entries.append(np.concatenate([np.full((len(sentence.entries), 1), row), sentence.entries], 1))
    entries = torch.from_numpy(np.concatenate(batch_entries))
    word_pairs = torch.zeros(len(sentences), NUM_STORED_CHANNELS, size * size)
    batch, dependent, head, group, q = entries.unbind(1)
    word_pairs[batch, group, dependent * size + head] = q.float() / QUANTISATION
    return WordPairs(word_pairs.view(len(sentences), NUM_STORED_CHANNELS, size, size), torch.from_numpy(token_words))


LDD_META_KEY = "ldd"  # syntax.json entry: {"labels": ..., "floor": ...} of fairseq-syntax-preprocess-dependencies


@dataclass
class InteractiveDependencyConfig:
    """Options of ``--task syntax_translation`` for ``fairseq-interactive`` with a model reading ``src_ldd``."""

    source_dependency_parser: Optional[str] = option(
        None, "fairseq-interactive only, for models reading src_ldd (transformer_ldd): parse the input lines "
        "(tokenized words) with this SuPar biaffine dependency parser (local path or model name), the one that made "
        "the data directory's side data")
    source_dependency_arc_floor: float = option(
        DEFAULT_ARC_FLOOR, "with --source-dependency-parser: the --arc-floor preprocess/parse_dependency.py used")
    source_dependency_label_floor: float = option(
        DEFAULT_LABEL_FLOOR, "with --source-dependency-parser: the --label-floor preprocess/parse_dependency.py used")


def ldd_settings(meta: dict, data_path: str) -> Tuple[str, float]:
    """(label table, floor) of the data directory's ``src_ldd``, as syntax.json records them."""
    recorded = meta.get(LDD_META_KEY)
    if recorded is None:
        raise ValueError(f"{os.path.join(data_path, META_FILE)} does not record how the src_ldd side data was made: "
                         "make it again with fairseq-syntax-preprocess-dependencies")
    if recorded["labels"] not in LABEL_TABLES:
        raise ValueError(f"label table {recorded['labels']!r}: choose from {sorted(LABEL_TABLES)}")
    return recorded["labels"], recorded["floor"]


class InteractiveDependencies:
    """``fairseq-interactive`` sentences -> source tokens and the ``src_ldd`` item each has in the data directory.

    A buffer's sentences are parsed together by ``--source-dependency-parser``, each word BPE'd on its own, each
    parse through :func:`sparse_record` (``--source-dependency-arc-floor`` / ``--source-dependency-label-floor``)
    and :func:`record_item` with syntax.json's label table and floor. A sentence the parser cannot parse becomes a
    :class:`~fairseq_syntax.core.side_inputs.BadLine`."""

    def __init__(self, cfg, meta: dict, data_path: str):
        if cfg.source_dependency_parser is None:
            raise ValueError(
                "the model reads labeled dependency distributions (src_ldd): give --source-dependency-parser, "
                "the SuPar biaffine dependency parser that made the data directory's side data, to parse the "
                "input lines (tokenized words)"
            )
        labels, self.floor = ldd_settings(meta, data_path)
        self.label_index = label_index(LABEL_TABLES[labels])
        self.arc_floor, self.label_floor = cfg.source_dependency_arc_floor, cfg.source_dependency_label_floor
        from fairseq_syntax.parsing.dependency import DependencyParser
        from fairseq_syntax.parsing.models import ModelUnavailable

        try:
            self.parser = DependencyParser(cfg.source_dependency_parser)
        except ModelUnavailable as error:  # the task's one line (a ValueError, as for the options above)
            raise ValueError(str(error)) from None

    def __call__(self, sentences: List[List[str]], numbers: Sequence[int],
                 segment: Callable[[str], List[str]]) -> List[Union[tuple, BadLine]]:
        return [self._convert(number, words, parse, segment)
                for number, words, parse in zip(numbers, sentences, self.parser.parse(sentences))]

    def _convert(self, number: int, words: List[str], parse, segment) -> Union[tuple, BadLine]:
        if parse.fallback is not None:
            return BadLine(f"<input>:{number}: the dependency parser gave no parse of {' '.join(words)[:80]!r}: "
                           f"{parse.fallback}")
        record = sparse_record(parse, self.parser.label_names, self.arc_floor, self.label_floor, RetainedMass())
        pieces = [segment(word) for word in words]
        try:
            item = record_item(record, [len(p) for p in pieces], self.label_index, self.floor)
        except ValueError as error:
            return BadLine(f"<input>:{number}: {error}")
        return [piece for word in pieces for piece in word], {LDD.name: torch.from_numpy(item)}


LDD = register_side_input(SideInput(
    "src_ldd", "ldd", STORAGE_DTYPE, collate_ldd, "fairseq-syntax-preprocess-dependencies",
    interactive=InteractiveDependencies, options=InteractiveDependencyConfig,
))
