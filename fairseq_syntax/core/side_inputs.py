"""Per-sentence side data stored beside fairseq's binarized source: the contract every side input fulfils.

A side input is one indexed dataset ``{split}.{src}-{tgt}.{src}.{suffix}.{bin,idx}`` (fairseq mmap), one item per
source sentence, and a :class:`SideInput`:

* ``name``: its key in ``net_input`` (what an encoder lists in ``side_inputs``);
* ``suffix`` and ``dtype``: its files and stored integer type;
* ``collate(items, left_pad, T)``: a batch's items -> a tensor aligned with ``src_tokens`` (same padding side and
  length ``T``, EOS included), or a tuple of tensors (read by position); one path for training, validation,
  ``tree_classification`` and ``fairseq-interactive``;
* ``from_form(form)``: the item built from a sentence's :class:`~fairseq_syntax.core.input_forms.SourceForm`, for
  side data that comes with the tree (``src_parents``); else None;
* ``made_by``: the command that writes it;
* ``sizes(batch)``: optional data-dependent shapes ``{name: int}`` computed on the host at collation, passed as
  ``net_input["NAME_sizes"]``;
* ``interactive(cfg, meta, data_path)``: for side data not from the tree, a converter ``(sentences, line_numbers,
  segment) -> [(source tokens, {name: item}) or BadLine]`` for ``fairseq-interactive``; ``options``: its task
  option dataclass (options of ``syntax_translation``, :func:`task_options`).

:func:`load_side_data` loads a split's side inputs, each checked against the fingerprints ``syntax.json`` records
(:mod:`fairseq_syntax.core.data_dir`)."""
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from fairseq_syntax.core import structure
from fairseq_syntax.core.data_dir import (
    META_FILE,
    SIDE_DATA_KEY,
    source_prefix,
    files_fingerprint,
)
from fairseq_syntax.core.input_forms import SourceForm

# (items of the batch in batch order, left_pad, T) -> batch tensor, or a tuple of them
Collate = Callable[[List[torch.Tensor], bool, int], Union[torch.Tensor, Tuple[torch.Tensor, ...]]]


class BadLine(NamedTuple):
    """What an interactive converter gives for a line it cannot convert; ``message`` is ``<input>:N: problem``."""

    message: str


# (words of each line, 1-based numbers, word -> BPE pieces) -> per line (source tokens, {name: item}) or a BadLine
InteractiveConverter = Callable[[List[List[str]], Sequence[int], Callable[[str], List[str]]],
                                List[Union[Tuple[List[str], Dict[str, torch.Tensor]], BadLine]]]


@dataclass(frozen=True)
class SideInput:
    name: str
    suffix: str
    dtype: type
    collate: Collate
    made_by: str
    from_form: Optional[Callable[[SourceForm], Optional[np.ndarray]]] = None
    interactive: Optional[Callable[[object, dict, str], InteractiveConverter]] = None
    options: Optional[type] = None
    #: computed on the host so that a model on a GPU need not read them back from it (which makes the host wait)
    sizes: Optional[Callable[[torch.Tensor], Dict[str, int]]] = None


SIDE_INPUTS: Dict[str, SideInput] = {}
_OPTIONS_READ = False  # set once the task configuration has collected the options


def register_side_input(side_input: SideInput) -> SideInput:
    if side_input.name in SIDE_INPUTS:
        raise ValueError(f"side input {side_input.name} registered twice")
    if side_input.options is not None and _OPTIONS_READ:
        raise RuntimeError(f"side input {side_input.name} registered after the task options were collected: import "
                           "its method before fairseq_syntax.core.translation_task (fairseq_syntax does)")
    SIDE_INPUTS[side_input.name] = side_input
    return side_input


def task_options() -> Tuple[type, ...]:
    """The option dataclasses of the registered side inputs (bases of the translation task's configuration)."""
    global _OPTIONS_READ
    _OPTIONS_READ = True
    return tuple(side.options for side in SIDE_INPUTS.values() if side.options is not None)


def load_side_data(data_path: str, split: str, src: str, tgt: str, meta: dict) -> dict[str, object]:
    """``{name: dataset}`` of every side input beside ``split``'s source tokens in ``data_path``, checked against
    ``meta`` (syntax.json): the fingerprints of the tokens it was made for and of its own files. Side data made for
    other tokens, copied from another directory or not recorded stops with one line naming it and the command that
    makes it."""
    from fairseq.data import data_utils, indexed_dataset

    tokens = source_prefix(data_path, split, src, tgt)
    fingerprint, found = None, {}
    meta_path = os.path.join(data_path, META_FILE)
    for name, side in SIDE_INPUTS.items():
        prefix = f"{tokens}.{side.suffix}"
        if not indexed_dataset.dataset_exists(prefix, impl="mmap"):
            continue
        where, remake = f"{prefix}.{{bin,idx}} (side input {name})", f"remove it, or make it again with {side.made_by}"
        entry = meta.get(SIDE_DATA_KEY, {}).get(side.suffix, {}).get(split)
        if entry is None:
            raise SystemExit(f"error: {where} is not recorded in {meta_path}: it is left from an earlier "
                             f"preprocessing run, or from a run that was stopped; {remake}")
        fingerprint = fingerprint or files_fingerprint(tokens)
        if entry["tokens"] != fingerprint:
            raise SystemExit(f"error: {where} was made for other tokens than {tokens}.{{bin,idx}} holds (the "
                             f"fingerprints in {META_FILE} differ): {remake}")
        if files_fingerprint(prefix) != entry["files"]:
            raise SystemExit(f"error: {where} is not the side data {META_FILE} records for {split} (their "
                             "fingerprints differ): copied in from another data directory, or changed since it "
                             f"was made; {remake}")
        found[name] = data_utils.load_indexed_dataset(prefix, None, "mmap")
    return found


def collate_side_inputs(names: Sequence[str], items: List[Dict[str, torch.Tensor]], left_pad: bool, length: int,
                        where: str) -> Dict[str, torch.Tensor]:
    """``{name: batch tensor}`` of ``names`` from the per-sentence ``items``; a sentence lacking one is an error
    naming ``where`` and the command that makes the data."""
    batch = {}
    for name in names:
        side = SIDE_INPUTS[name]
        missing = [row for row, item in enumerate(items) if name not in item]
        if missing:
            raise KeyError(f"{where}: the model reads side input {name} ({side.suffix} files, made by "
                           f"{side.made_by}), which {len(missing)} sentences of the batch lack")
        try:
            batch[name] = side.collate([item[name] for item in items], left_pad, length)
        except ValueError as error:  # side data of other tokens (its fingerprints checked on loading)
            raise ValueError(f"{where}: side input {name} ({side.suffix} files) does not fit the batch's source "
                             f"tokens ({error}): it was made for other tokens; make it again with {side.made_by}"
                             ) from None
        if side.sizes is not None:
            batch[f"{name}_sizes"] = side.sizes(batch[name])
    return batch


def _collate_parents(items, left_pad, length):
    return structure.collate_parents(items, left_pad=left_pad, append_eos=True, pad_to_length=length)


#: preorder parent array of each source sentence (int16, -1 at the root), see fairseq_syntax.core.trees.preorder
PARENTS = register_side_input(SideInput(
    "src_parents", "parents", np.int16, _collate_parents, "fairseq-syntax-preprocess --form preorder",
    from_form=lambda form: form.parents,
    sizes=lambda parents: structure.tree_sizes(parents, collated=True),
))
