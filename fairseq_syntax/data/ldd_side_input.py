"""Side input ``src_ldd``: the labeled dependency distributions of Pu & Sima'an (2022) (section 3.1), stored per
source sentence at word level and expanded to BPE tokens per batch.

On disk (``{split}.{src}-{tgt}.{src}.ldd.{bin,idx}``, fairseq mmap, uint16) each sentence is one flat array::

    [n, w_1 .. w_n, (dependent, head, group, q) * K]

``n`` BPE tokens, ``w_t`` the 1-based word of token t, then K sparse entries of the word-level tensor of
:mod:`fairseq_syntax.dependency`: dependent 1..W, head 0..W (0 = root), group 0..16 (16 = labels outside the 16
groups) and the probability quantised as ``q = round(p * 65535)`` (step 1.5e-5; entries below the preprocessing
floor are not stored). 8 bytes per entry; all values must fit 16 bits (at most 65535 tokens).

:func:`record_item` makes that array from one parser record (:mod:`fairseq_syntax.parsing.dependency`) and the
number of BPE pieces of each word; ``fairseq-syntax-preprocess-dependencies`` and ``fairseq-interactive`` (task
``syntax_translation``) both call it, so a sentence gets the same array on either path.

The collater (:func:`collate_ldd`) gives ``B x 17 x T x T`` float32 aligned with ``src_tokens``: token rows and
columns take their word's, the EOS column holds the root, EOS and padding rows (and padding columns) are zero.
"""
from typing import Dict, List, NamedTuple, Sequence

import numpy as np
import torch

from fairseq_syntax.data.side_inputs import SideInput, register_side_input
from fairseq_syntax.dependency import (NUM_CHANNELS, ROOT, GroupedArcs, expand_to_tokens, group_arcs, labeled_arcs,
                                       subword_word_index)

STORAGE_DTYPE = np.uint16
QUANTISATION = 65535  # largest uint16: p = q / QUANTISATION
ENTRY_WIDTH = 4  # dependent, head, group, q


class StoredSentence(NamedTuple):
    token_words: np.ndarray  # n, 1-based word of each BPE token
    entries: np.ndarray  # K x 4: dependent, head, group, q


def quantise(probabilities: np.ndarray) -> np.ndarray:
    # a group's sum may exceed 1 by the parser file's rounding (6 significant digits): clip to q = 65535
    return np.rint(np.clip(probabilities, 0.0, 1.0) * QUANTISATION).astype(np.int64)


def encode_sentence(token_words: np.ndarray, arcs: GroupedArcs, floor: float) -> np.ndarray:
    """The stored array (int32 values, written as uint16) of one sentence; drops entries below ``floor``.

    ``floor`` must be at least one quantisation step, so no stored entry is zero.
    """
    if floor < 1 / QUANTISATION:
        raise ValueError(f"the floor {floor} is below one quantisation step (1/{QUANTISATION})")
    token_words = np.asarray(token_words, dtype=np.int64)
    kept = arcs.probabilities >= floor
    entries = np.stack(
        [arcs.dependents[kept], arcs.heads[kept], arcs.groups[kept], quantise(arcs.probabilities[kept])], axis=1
    )
    item = np.concatenate([[len(token_words)], token_words, entries.reshape(-1)])
    if item.size and (item.max() > np.iinfo(STORAGE_DTYPE).max or item.min() < 0):
        raise ValueError(f"a value does not fit {np.dtype(STORAGE_DTYPE).name}: {len(token_words)} tokens")
    return item.astype(np.int32)


def record_item(
    record: dict, pieces_per_word: Sequence[int], label_index: Dict[str, int], floor: float
) -> np.ndarray:
    """One parser record and the BPE piece count of each of its words -> the stored array (:func:`encode_sentence`).

    Raises ``ValueError`` (the caller adds file and line) when the counts do not match the record's words or a
    word has no head.
    """
    words = record["words"]
    if len(pieces_per_word) != len(words):
        raise ValueError(f"{len(words)} parsed words, but BPE pieces for {len(pieces_per_word)} words")
    missing = sorted(set(range(1, len(words) + 1)) - {arc[0] for arc in record["arcs"]})
    if missing:
        raise ValueError(f"words {missing} have no head at all")
    grouped = group_arcs(labeled_arcs(record), label_index)
    return encode_sentence(subword_word_index(pieces_per_word), grouped, floor)


def decode_sentence(item) -> StoredSentence:
    item = np.asarray(item, dtype=np.int64)
    n = int(item[0]) if item.size else -1
    if n < 0 or (item.size - 1 - n) % ENTRY_WIDTH:
        raise ValueError(f"corrupt ldd item of {item.size} values (n = {n}): not [n, n words, 4 x K entries]")
    token_words, entries = item[1 : 1 + n], item[1 + n :].reshape(-1, ENTRY_WIDTH)
    num_words = int(token_words.max(initial=0))
    dependents, heads, groups = entries[:, 0], entries[:, 1], entries[:, 2]
    if ((dependents < 1) | (dependents > num_words) | (heads > num_words) | (groups >= NUM_CHANNELS)).any():
        raise ValueError(f"corrupt ldd item: an entry names a word beyond the {num_words} words or a bad group")
    return StoredSentence(token_words, entries)


def collate_ldd(items: List[torch.Tensor], left_pad: bool, length: int) -> torch.Tensor:
    """Stored sentences in batch order -> ``B x 17 x T x T`` float32 token-level p(i, j, group)."""
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
    word_pairs = torch.zeros(len(sentences), NUM_CHANNELS, size * size)
    batch, dependent, head, group, q = entries.unbind(1)
    word_pairs[batch, group, dependent * size + head] = q.float() / QUANTISATION
    return expand_to_tokens(word_pairs.view(len(sentences), NUM_CHANNELS, size, size), torch.from_numpy(token_words))


LDD = register_side_input(SideInput("src_ldd", "ldd", collate_ldd))
