"""Sentences grouped into batches by padded size in tokens (the tagger's and benepar's; SuPar batches itself).

Sorted by length (ties in input order), cut into consecutive groups whose sentences times the longest is at most
``batch_tokens``; a longer sentence is a batch of its own. The grouping depends only on the lengths."""
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
