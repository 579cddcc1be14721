"""A run's kept files (logs, decodes, records): plain, gzipped (``NAME.gz``) or packed into their folder's archive
(:mod:`~fairseq_syntax.evaluation.packed_runs`). Readers take ``name`` or ``name.gz``, whichever exists, else the
packed copy; a gzip file written here has no name or time stamp in its header (same text, same bytes)."""
import gzip
import io
import os
import shutil
from pathlib import Path

from fairseq_syntax.evaluation.packed_runs import read_bytes


class RecordError(ValueError):
    """A train log or run record that cannot be used (no statistics, missing fields, unreadable JSON)."""


def open_text(path, mode: str = "r", encoding: str = "utf-8", **kwargs):
    """Open a text file, through gzip when its name ends in ``.gz``; ``mode`` is "r", "w" or "a" (reading: the
    module docstring)."""
    mode = mode.replace("t", "")
    if mode not in ("r", "w", "a"):
        raise ValueError(f"mode must be 'r', 'w' or 'a', not {mode!r}")
    if mode == "r":
        return io.TextIOWrapper(io.BytesIO(read_bytes(path)), encoding=encoding, **kwargs)
    path = Path(path)
    if not path.name.endswith(".gz"):
        return open(path, mode, encoding=encoding, **kwargs)
    raw = open(path, mode + "b")  # noqa: SIM115  (the caller's handle closes it, through the gzip stream)
    compressed = gzip.GzipFile(filename="", mode=mode + "b", fileobj=raw, mtime=0)
    compressed.myfileobj = raw  # closed with the gzip stream
    return io.TextIOWrapper(compressed, encoding=encoding, **kwargs)


def read_text(path) -> str:
    """The whole text of ``path`` or ``path.gz`` (see ``open_text``)."""
    with open_text(path) as handle:
        return handle.read()


def compress(path) -> Path:
    """Gzip ``path`` into ``path.gz`` and remove ``path``; returns the new path."""
    path = Path(path)
    target = path.with_name(path.name + ".gz")
    with open(path, "rb") as source, open(target, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as compressed:
        shutil.copyfileobj(source, compressed)
    os.remove(path)
    return target
