"""Which source lines a parse archive (:mod:`fairseq_syntax.parsing.archive`) holds a parse of, told from a corpus's
text without tokenizing or parsing it: what ``fairseq-syntax-study plan`` checks.

A line's **key** is its text without whitespace, control characters and ``@``, PTB bracket escapes read as
brackets and, with ``entities``, Moses' XML entities unescaped: what tokenization leaves unchanged (the study's
sacremoses tokenizer, :mod:`fairseq_syntax.parsing.normalize`; checked on all of Multi30k). Its **digest**: the
first 8 bytes of BLAKE2b of the key's UTF-8, 16 hex digits.

``SPLIT.lines.xz`` in an archive: one digest per parsed line, in the archive's order, listed in ``SHA256SUMS``."""
from __future__ import annotations

import functools
import gzip
import hashlib
import html
import json
import lzma
import os
from collections.abc import Iterable

from fairseq_syntax.core.trees import PTB_ESCAPES
from fairseq_syntax.parsing.normalize import ENTITY

MANIFEST = "MANIFEST.json"
XZ_PRESET = 9 | lzma.PRESET_EXTREME
#: what a key leaves out besides whitespace: control characters, and the @ of Moses' @-@
_DROPPED = dict.fromkeys([*range(0x20), 0x7F, ord("@")])


class ArchiveError(Exception):
    """A problem with a file, named in the message: the command prints it as one line."""


def line_key(text: str, entities: bool = False) -> str:
    """The part of a line tokenization does not change (module docstring)."""
    if entities:
        text = ENTITY.sub(lambda match: html.unescape(match.group(0)), text)
    text = "".join(text.translate(_DROPPED).split())
    if "-" in text:
        for char, escape in PTB_ESCAPES.items():
            text = text.replace(escape, char)
    return text


def line_digest(text: str, entities: bool = False) -> str:
    """16 hex digits: BLAKE2b (8 bytes) of the line's key."""
    return hashlib.blake2b(line_key(text, entities).encode("utf-8"), digest_size=8).hexdigest()


def lines_name(split: str) -> str:
    return f"{split}.lines.xz"


def lines_file(lines: Iterable[str]) -> bytes:
    """The xz-compressed ``SPLIT.lines.xz`` of a split's lines."""
    text = "".join(line_digest(line) + "\n" for line in lines)
    return lzma.compress(text.encode("ascii"), preset=XZ_PRESET)


def read_bytes(path: str) -> bytes:
    """A file's bytes (uncompressed, for ``.gz``)."""
    if not os.path.isfile(path):
        raise ArchiveError(f"{path}: no such file")
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as handle:
        return handle.read()


def read_manifest(archive: str) -> dict:
    path = os.path.join(archive, MANIFEST)
    try:
        return json.loads(read_bytes(path))
    except json.JSONDecodeError as error:
        raise ArchiveError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None


@functools.lru_cache(maxsize=16)
def _split_digests(archive: str, split: str, stamp: tuple) -> frozenset[str]:
    manifest = read_manifest(archive)
    entry = manifest.get("splits", {}).get(split)
    if entry is None:
        raise ArchiveError(f"{archive}/{MANIFEST} holds no parses of the {split} split (it has: "
                           f"{', '.join(manifest.get('splits', {}))})")
    path = os.path.join(archive, lines_name(split))
    try:
        digests = lzma.decompress(read_bytes(path)).decode("ascii").split()
    except (lzma.LZMAError, UnicodeDecodeError) as error:
        raise ArchiveError(f"{path}: not a list of line digests ({error})") from None
    if len(digests) != entry["lines"]:
        raise ArchiveError(f"{path}: {len(digests)} lines, but the manifest says {entry['lines']} (a damaged "
                           "archive: take it again)")
    return frozenset(digests)


def covered(archive: str, split: str) -> frozenset[str]:
    """The digests of the lines ``archive`` holds a parse of in ``split`` (read once a process while its files
    stay as they are); ArchiveError for a split it does not hold."""
    paths = [os.path.join(archive, name) for name in (MANIFEST, lines_name(split))]
    stamp = tuple((os.stat(path).st_mtime_ns, os.stat(path).st_size) if os.path.exists(path) else None
                  for path in paths)
    return _split_digests(os.path.abspath(archive), split, stamp)


__all__ = ["ArchiveError", "covered", "line_digest", "line_key", "lines_file", "lines_name"]
