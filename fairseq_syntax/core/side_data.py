"""How the side data that does not come with an input form is made: what a method declares, what its maker is
handed, and the writer most makers need.

A side input (:mod:`fairseq_syntax.core.side_inputs`) either comes with the input form (``src_parents`` with the
``preorder`` form: :data:`FORM_SIDE_INPUTS`, made by ``fairseq-syntax-preprocess``) or is made afterwards into a
data directory from a split's tokens, parses and BPE. A method declares each of the latter in its description
(``Method(side_data=(SideData(...),))``, :mod:`fairseq_syntax.core.method`), and the study builds what its grid's
systems read by calling the makers (:mod:`fairseq_syntax.study.prepare`):

* :class:`SideData`: the side input's name, the suffix of its files (``{split}.{src}-{tgt}.{src}.SUFFIX.{bin,idx}``,
  also its key in ``syntax.json``'s ``side_data`` and in the study's record), the parses it is made from
  (:data:`PARSE_KINDS`), the input forms it can be made for, ``make(job)`` and ``settings(parses)`` (what it is made
  with beside its input files, e.g. the label scheme of the parses; recorded by the study with the directory).
* :class:`SideDataJob`: one data directory made by ``fairseq-syntax-preprocess`` and, per split, its files: the BPE'd
  source and target (what was binarized, one sentence a line), the source's words, and the parses of each kind the
  side data reads (those of a control structure for a control directory), plus the settings and a scratch folder.
* :func:`write_token_items`: one array per sentence, one entry per source token (EOS excluded), checked against the
  binarized source and written as the split's side data, recorded in ``syntax.json``
  (:func:`~fairseq_syntax.core.data_dir.with_side_data`) so that loading finds it tied to its tokens.

The declarations are plain data: this module imports neither torch nor fairseq (the writer imports them when it
runs), so the study's commands that only read files can look them up.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from fairseq_syntax.core.files import atomic_path

#: the parses a side input may be made from: constituency trees (one bracketed tree a line, its leaves the words)
#: and dependency parses (:mod:`fairseq_syntax.parsing.dependency`'s JSON lines); the same kinds a control changes
#: (:data:`fairseq_syntax.core.control_kinds.CONTROL_INPUTS`)
PARSE_KINDS = ("trees", "arcs")
#: the side inputs that come with an input form (fairseq-syntax-preprocess --form makes them)
FORM_SIDE_INPUTS = {"preorder": ("src_parents",)}


@dataclass(frozen=True)
class SplitFiles:
    """One split's files for a maker: ``source`` and ``target`` the BPE'd text the data directory's split was
    binarized from, ``words`` the source's words, ``parses`` a file per parse kind the side data reads."""
    split: str
    source: str
    target: str
    words: str
    parses: Mapping[str, str]


@dataclass(frozen=True)
class SideDataJob:
    """What a maker makes side data for: the data directory ``destdir`` (made by fairseq-syntax-preprocess: its
    ``syntax.json``, dictionaries and binarized splits), its language pair, each split's files, the settings
    :attr:`SideData.settings` gave, and a folder the maker may write scratch files in."""
    destdir: str
    source_lang: str
    target_lang: str
    splits: tuple[SplitFiles, ...]
    settings: Mapping[str, object]
    scratch: str

    def tokens_prefix(self, split: str) -> str:
        """``DESTDIR/{split}.{src}-{tgt}.{src}``: the split's binarized source tokens (and its side data's stem)."""
        from fairseq_syntax.core.data_dir import source_prefix

        return source_prefix(self.destdir, split, self.source_lang, self.target_lang)


def no_settings(parses: Mapping[str, str]) -> dict:
    return {}


@dataclass(frozen=True)
class SideData:
    """How a side input that does not come with the input form is made (the module docstring).

    ``make(job)`` writes ``{split}.{src}-{tgt}.{src}.SUFFIX.{bin,idx}`` for every split of ``job`` and records each
    in ``syntax.json`` (:func:`write_token_items` does both); a problem stops it with ``SystemExit`` (one line,
    ``error: FILE:LINE: problem``) or ``ValueError``. ``settings(parses)`` gets the training split's parses (the
    parser's, also for a control directory: a control keeps the labels) and returns the settings the side data is
    made with beside its input files, ``{name: value}`` (JSON values), which the study records and hands to ``make``.
    ``fairseq-syntax-study plan`` calls ``settings`` too (it checks the recorded data): it must load neither torch
    nor fairseq, where ``make`` may.
    """
    input: str  # the side input's name, as a system's ``side_inputs`` lists it: "src_ldd"
    suffix: str  # its files' suffix and its key in records: "ldd"
    reads: tuple[str, ...]  # the parse kinds it is made from (PARSE_KINDS)
    make: Callable[[SideDataJob], None]
    settings: Callable[[Mapping[str, str]], dict] = no_settings
    forms: tuple[str, ...] = ("sequence",)  # the input forms of the data directories it can be made into

    def __post_init__(self):
        unknown = [kind for kind in self.reads if kind not in PARSE_KINDS]
        if unknown or not self.reads:
            raise ValueError(f"side data {self.input}: reads {list(self.reads)}; give one or more of {PARSE_KINDS}")


@contextlib.contextmanager
def side_data_builder(prefix: str, dtype):
    """fairseq's indexed dataset builder for ``PREFIX.{bin,idx}``, writing ``.partial`` files that are renamed when
    the block ends and removed where it raises: only a whole split replaces what was there."""
    from fairseq.data.indexed_dataset import MMapIndexedDatasetBuilder

    with atomic_path(f"{prefix}.bin") as data, atomic_path(f"{prefix}.idx") as index:
        builder = MMapIndexedDatasetBuilder(data, dtype=dtype)
        yield builder
        builder.finalize(index)


def write_token_items(job: SideDataJob, split: SplitFiles, suffix: str, items: Iterable, dtype) -> int:
    """Writes ``split``'s side data ``suffix``: ``items`` holds one integer array per line of ``split.source`` (the
    lines ``fairseq-syntax-preprocess --skip-invalid`` left out, ``{split}.skipped.tsv``, are dropped here), each
    with one entry per BPE token of the line; each is checked against the binarized sentence's length (EOS
    excluded), then the files are written (``.partial`` first, renamed when whole) and recorded in ``syntax.json``.
    Returns the number of sentences. A mismatch raises ``ValueError`` naming the file and line."""
    import numpy as np
    import torch
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    from fairseq_syntax.core.data_dir import read_meta, read_skipped_lines, skipped_listing, with_side_data, \
        write_meta

    tokens = job.tokens_prefix(split.split)
    binarized = MMapIndexedDataset(tokens)
    sizes = np.array(binarized.sizes) - 1  # a copy (.sizes is a view of the mmap); EOS excluded
    del binarized
    listing = skipped_listing(job.destdir, split.split)
    skipped = set(read_skipped_lines(listing)) if os.path.exists(listing) else set()
    sentence = 0
    with side_data_builder(f"{tokens}.{suffix}", dtype) as builder:
        for line, item in enumerate(items, 1):
            if line in skipped:
                continue
            if sentence >= len(sizes):
                raise ValueError(f"{split.source}:{line}: more lines than the {len(sizes)} sentences of {tokens}.bin")
            item = np.asarray(item)
            if len(item) != sizes[sentence]:
                raise ValueError(f"{split.source}:{line}: side data {suffix} for {len(item)} tokens, sentence "
                                 f"{sentence + 1} of {tokens}.bin has {sizes[sentence]} (+ EOS)")
            builder.add_item(torch.from_numpy(item.astype(dtype)))
            sentence += 1
        if sentence != len(sizes):
            raise ValueError(f"{split.source}: side data {suffix} for {sentence} sentences, {tokens}.bin has "
                             f"{len(sizes)}")
    write_meta(job.destdir, with_side_data(read_meta(job.destdir), suffix, split.split, tokens))
    return sentence
