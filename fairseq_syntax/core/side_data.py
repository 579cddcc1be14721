"""How the side data that does not come with an input form is made: what a method declares, what its maker is handed,
and the writer most makers need.

A side input (:mod:`fairseq_syntax.core.side_inputs`) comes with the input form (:data:`FORM_SIDE_INPUTS`, made by
``fairseq-syntax-preprocess``) or is made afterwards from a split's tokens, parses and BPE: a method declares
those (``Method(side_data=(SideData(...),))``) and the study calls their makers
(:mod:`fairseq_syntax.study.prepare`).

Imports neither torch nor fairseq (the writer does when it runs)."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from fairseq_syntax.core.files import atomic_path

#: the parses a side input may be made from: constituency trees and dependency parses (the kinds a control changes)
PARSE_KINDS = ("trees", "arcs")
#: the side inputs that come with an input form (fairseq-syntax-preprocess --form makes them)
FORM_SIDE_INPUTS = {"preorder": ("src_parents",)}


@dataclass(frozen=True)
class SplitFiles:
    """One split's files for a maker: ``source``, ``target`` (the BPE'd text binarized), ``words`` (the source's
    words), ``parses`` (a file per kind read)."""
    split: str
    source: str
    target: str
    words: str
    parses: Mapping[str, str]


@dataclass(frozen=True)
class SideDataJob:
    """What a maker makes side data for: the data directory ``destdir``, its language pair, each split's files, the
    settings :attr:`SideData.settings` gave, and a scratch folder."""
    destdir: str
    source_lang: str
    target_lang: str
    splits: tuple[SplitFiles, ...]
    settings: Mapping[str, object]
    scratch: str

    def tokens_prefix(self, split: str) -> str:
        from fairseq_syntax.core.data_dir import source_prefix

        return source_prefix(self.destdir, split, self.source_lang, self.target_lang)


def no_settings(parses: Mapping[str, str]) -> dict:
    return {}


@dataclass(frozen=True)
class SideData:
    """How a side input that does not come with the input form is made.

    ``make(job)`` writes ``{split}.{src}-{tgt}.{src}.SUFFIX.{bin,idx}`` for every split and records each in
    ``syntax.json`` (:func:`write_token_items`); a problem is ``SystemExit`` (``error: FILE:LINE: problem``) or
    ``ValueError``. ``settings(parses)`` gets the training split's parses and returns ``{name: value}`` (JSON) it
    is made with, recorded by the study and handed to ``make``; ``fairseq-syntax-study plan`` calls it, so it must
    load neither torch nor fairseq."""
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
    """Writes ``split``'s side data ``suffix`` from ``items``, one integer array per line of ``split.source``
    (``--skip-invalid``'s lines dropped), one entry per BPE token, each checked against the binarized length (EOS
    excluded); files written ``.partial`` first, recorded in ``syntax.json``. Returns the sentence count; a
    mismatch is a ``ValueError`` naming file and line."""
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
