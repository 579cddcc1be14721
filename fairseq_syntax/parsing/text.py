"""Parser input: one sentence per line, tokenized here or already tokenized, and PTB bracket escaping.

A line is split on whitespace (as fairseq splits lines); raw text is tokenized for its language
(:func:`tokenizer`). An empty line stays an empty sentence. Tree leaves carry the PTB escapes (``(`` -> ``-LRB-``,
``a(b`` -> ``a-LRB-b``, :func:`fairseq_syntax.core.trees.ptb_escape_token`); ``ptb_unescape_token`` inverts it."""
from __future__ import annotations

import gzip
import json
import os
from contextlib import contextmanager
from typing import Callable

from fairseq_syntax.core.files import atomic_path
from fairseq_syntax.core.trees import ptb_escape_token, ptb_unescape_token  # noqa: F401  (imported from here too)


def open_text(path: str, mode: str = "r"):
    """Open a UTF-8 text file for reading (``"r"``) or writing (``"w"``), gzipped when the name ends in ``.gz``."""
    if str(path).endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def output_problem(path: str) -> str | None:
    """Why a whole file cannot be written at ``path`` (:func:`open_output`), in words, or None: it is a folder, its
    folder is not there (it is not made) or is no folder, or the folder is not writable."""
    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        return "a folder, not a file: give a file's path"
    if not os.path.exists(folder):
        return f"no such folder {folder} (make it first)"
    if not os.path.isdir(folder):
        return f"{folder} is a file, not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable"
    return None


@contextmanager
def open_output(path: str):
    """``open_text(path, "w")`` through :func:`atomic_path`: ``path`` appears, whole, only when the block ends."""
    with atomic_path(path) as temporary:
        if str(path).endswith(".gz"):
            handle = gzip.open(temporary, "wt", encoding="utf-8")
        else:
            handle = open(temporary, "w", encoding="utf-8")
        with handle:
            yield handle


def write_json(path: str, value, indent: int | None = 1, ensure_ascii: bool = True) -> None:
    """``value`` as JSON and a newline, written whole (:func:`open_output`)."""
    with open_output(path) as out:
        json.dump(value, out, indent=indent, ensure_ascii=ensure_ascii)
        out.write("\n")


def read_json(path: str):
    """The JSON value in ``path``; JSON that does not parse is a ValueError naming the file and line."""
    with open(path, encoding="utf-8") as handle:
        try:
            return json.load(handle)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None


#: the languages sacremoses tokenizes (those it has non-breaking prefixes of), less the Chinese ones: Moses does not
#: segment text written without spaces; every other language goes to stanza's tokenizer
MOSES_LANGUAGES = frozenset({
    "as", "bn", "ca", "cs", "de", "el", "en", "es", "et", "fi", "fr", "ga", "gu", "hi", "hu", "is", "it", "kn", "lt",
    "lv", "ml", "mni", "mr", "nl", "or", "pa", "pl", "pt", "ro", "ru", "sk", "sl", "sv", "ta", "te",
})


def tokenizer(tokenize_lang: str | None = None) -> Callable[[str], list[str]]:
    """Line -> tokens: ``str.split``, or with ``tokenize_lang`` the raw line tokenized: sacremoses (``-l LANG -a``,
    no escaping) for :data:`MOSES_LANGUAGES`, else stanza's tokenizer (``tokenize_no_ssplit``, its model fetched
    by name: :mod:`fairseq_syntax.parsing.stanza_resources`)."""
    if tokenize_lang is None:
        return str.split
    if tokenize_lang in MOSES_LANGUAGES:
        from sacremoses import MosesTokenizer

        moses = MosesTokenizer(lang=tokenize_lang)
        return lambda line: moses.tokenize(line.strip(), aggressive_dash_splits=True, escape=False)
    from fairseq_syntax.parsing.stanza_resources import stanza_tokenizer

    return stanza_tokenizer(tokenize_lang)
