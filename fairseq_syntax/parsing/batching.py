"""Sentences grouped into batches by their padded size in tokens, so that a batch fits a device whatever the
sentence lengths: the tagger's and benepar's batches (SuPar batches by tokens itself).

Sentences are sorted by length (ties in input order) and cut into consecutive groups whose padded size, sentences
times the longest, is at most ``batch_tokens``; a sentence longer than that is a batch of its own. Sorting keeps
the padding small. The grouping depends only on the lengths given, so a set of sentences is always batched alike.
"""
from __future__ import annotations

from collections.abc import Sequence

DEFAULT_BATCH_TOKENS = 5000  # SuPar's default batch size, in tokens


def token_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Indices into ``lengths``, grouped as the module docstring says; every index once."""
    if batch_tokens < 1:
        raise ValueError(f"batch_tokens must be at least 1, not {batch_tokens}")
    batches: list[list[int]] = []
    current: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if current and (len(current) + 1) * lengths[index] > batch_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches
