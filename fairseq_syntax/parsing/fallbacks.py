"""Parse a batch so that every sentence gets a result: the parser's, or a fallback with the reason.

Empty sentences and sentences over the parser's length limit never reach the parser. If the parser raises on a
batch, its sentences are parsed one by one, so only the sentence it fails on falls back. Results keep the
input order."""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Callable, TypeVar

Result = TypeVar("Result")
Sentence = list[str]


def _parse_or_retry(parse_batch: Callable[[list[Sentence]], list[Result]], sentences: list[Sentence],
                    fallback: Callable[[Sentence, str], Result]) -> list[Result]:
    try:
        return parse_batch(sentences)
    except Exception as error:  # parser libraries raise many kinds (ValueError, RuntimeError, IndexError, ...)
        if len(sentences) == 1:
            return [fallback(sentences[0], f"parser error: {type(error).__name__}: {error}")]
        return [result for sentence in sentences for result in _parse_or_retry(parse_batch, [sentence], fallback)]


def parse_with_fallbacks(parse_batch: Callable[[list[Sentence]], list[Result]], sentences: Iterable[Sentence],
                         max_length: int, fallback: Callable[[Sentence, str], Result], chunk_size: int
                         ) -> Iterator[Result]:
    """``parse_batch`` on the parseable sentences of each ``chunk_size`` read together, ``fallback(sentence,
    reason)`` for the others."""
    sentences = iter(sentences)
    while chunk := list(islice(sentences, chunk_size)):
        results: list[Result | None] = [None] * len(chunk)
        parseable = []
        for index, tokens in enumerate(chunk):
            if not tokens:
                results[index] = fallback(tokens, "empty line")
            elif len(tokens) > max_length:
                results[index] = fallback(tokens, f"too long: {len(tokens)} words > {max_length}")
            else:
                parseable.append(index)
        for index, result in zip(parseable, _parse_or_retry(parse_batch, [chunk[k] for k in parseable], fallback)):
            results[index] = result
        yield from results
