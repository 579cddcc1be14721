"""Loading fairseq checkpoints under torch >= 2.6.

torch 2.6 made ``torch.load(weights_only=True)`` the default. fairseq checkpoints hold their training arguments as
an ``argparse.Namespace``, which the weights-only unpickler refuses, so ``fairseq-generate``,
``fairseq-interactive`` and ``fairseq-train --restore-file`` fail on any checkpoint. Rather than turning
``weights_only`` off (which would let a checkpoint run arbitrary code), we allow exactly the one extra class a
fairseq checkpoint needs; ``Namespace`` only stores attributes, so allowing it executes nothing.

Training with ``--eval-bleu`` also stores numpy arrays and scalars (the BLEU n-gram counts in the meters), which
need numpy's array and scalar reconstructors and dtype classes; these build arrays from bytes and run no other code
(torch's documentation lists them for numpy checkpoints).

Saving that a kill cannot break (:func:`make_checkpoints_crash_safe`). fairseq writes the first checkpoint of a save
(e.g. ``checkpoint_1_40.pt``) to ``NAME.tmp`` and renames it, but then copies it onto the other names
(``checkpoint_last.pt``, ``checkpoint_best.pt``) in place: a run killed during that copy leaves ``checkpoint_last.pt``
cut short (often 0 bytes) and the next run dies resuming from it. Long CPU runs are killed mid-run often, so every
write of fairseq's checkpoint code now goes to ``NAME.tmp`` in the same directory, is flushed to disk and renamed
over ``NAME`` (:func:`write_atomically`): a kill leaves the previous file or the new one, whole. For checkpoints cut
short before (or by other tools), resuming from ``checkpoint_last.pt`` falls back to the newest whole checkpoint
beside it and says so, as it does where ``checkpoint_last.pt`` does not exist but other checkpoints of the run do (a
kill during the first save, after ``checkpoint_1_40.pt`` and ``checkpoint_best.pt`` were written, where fairseq
would train again from update 1 and write over them); loading one by name stops with one line naming it and that
whole checkpoint.

A finished run is not trained on. fairseq tests ``--max-update`` only after a training step, so resuming a run whose
checkpoint already has ``--max-update`` updates trained one more and saved it over the finished checkpoints; the
resume now ends ``fairseq-train`` there, with exit status 0 and a log line saying so.

A checkpoint is checked against the data directory it is given before its weights are loaded, by
``fairseq-generate``, ``fairseq-interactive`` and resumed ``fairseq-train`` alike: every load of a checkpoint file made
for a task (the task fairseq-generate/-interactive set up from the command line, the trainer's task) passes the loaded
state to the task's ``check_checkpoint(path, state)`` where it has one. The plugin's tasks record the source and target
dictionaries they were trained with (their symbols, in order: :data:`TRAINED_DICTIONARIES`) in their task state, which
fairseq saves in every checkpoint; :func:`dictionary_mismatch` compares them with the dictionaries the data directory
gives (``dict.SRC.txt``, ``dict.TGT.txt``) and names the first difference: the sizes, or the first entry that differs
(with its line in the dictionary file). A checkpoint saved before the dictionaries were recorded is compared by size,
against the rows of its embedding matrices (``encoder.embed_tokens.weight``: one a source entry,
``decoder.embed_tokens.weight``: one a target entry); another dictionary of the same size then goes unnoticed. Without
the check, another corpus's data directory was fairseq's ``size mismatch for decoder.embed_tokens.weight`` traceback
(or, from fairseq-train, two tracebacks ending "please ensure that the architectures match") where the sizes differ,
and silently wrong translations where they do not.
"""
import argparse
import contextlib
import contextvars
import copy
import glob
import logging
import os
import shutil
import zipfile
from collections.abc import Iterator
from typing import BinaryIO

import numpy
import torch
from fairseq import checkpoint_utils
from fairseq.file_io import PathManager
from omegaconf import DictConfig, open_dict

try:  # numpy >= 2
    from numpy._core import multiarray as _multiarray
except ImportError:  # numpy 1.x
    from numpy.core import multiarray as _multiarray

_NUMPY_DTYPES = tuple(type(numpy.dtype(kind)) for kind in (
    numpy.bool_, numpy.int8, numpy.int16, numpy.int32, numpy.int64, numpy.uint8, numpy.uint16, numpy.uint32,
    numpy.uint64, numpy.float16, numpy.float32, numpy.float64,
))
FAIRSEQ_CHECKPOINT_GLOBALS = (argparse.Namespace, numpy.ndarray, numpy.dtype, _multiarray._reconstruct,
                              _multiarray.scalar) + _NUMPY_DTYPES


def allow_fairseq_checkpoints() -> None:
    """Allow-list the classes found in fairseq checkpoints for torch's weights-only unpickler."""
    add_safe_globals = getattr(torch.serialization, "add_safe_globals", None)
    if add_safe_globals is not None:  # torch < 2.4 has no weights-only default to fix
        add_safe_globals(list(FAIRSEQ_CHECKPOINT_GLOBALS))


logger = logging.getLogger(__name__)

#: task state (saved in every checkpoint by the plugin's tasks): ``{"source": [symbol, ...], "target": [...]}``, the
#: dictionaries the model was trained with (their symbols in index order)
TRAINED_DICTIONARIES = "syntax_dictionaries"
#: the state dict keys whose rows are one a source / target dictionary entry (fairseq's encoder-decoder models)
EMBEDDINGS = {"source": "encoder.embed_tokens.weight", "target": "decoder.embed_tokens.weight"}
#: the task a checkpoint file now being loaded is for (set while fairseq loads checkpoints for a task)
_LOADING_FOR: contextvars.ContextVar = contextvars.ContextVar("checkpoint_loaded_for", default=None)


def dictionary_record(source, target) -> dict:
    """What :data:`TRAINED_DICTIONARIES` holds for two fairseq dictionaries."""
    return {"source": list(source.symbols), "target": list(target.symbols)}


#: how to make a data directory with a translation checkpoint's dictionaries (the end of the refusal)
MADE_WITH = "its dictionaries (fairseq-syntax-preprocess --srcdict and --tgtdict of that directory)"


def dictionary_mismatch(path: str, state: dict, dictionaries: dict, embeddings: dict[str, str] = EMBEDDINGS,
                        made_with: str = MADE_WITH) -> str | None:
    """One line (``error: ...``) saying how the dictionaries of the checkpoint ``path`` (loaded as ``state``) differ
    from ``dictionaries`` (``{"source": (dict file, Dictionary), "target": (...)}``), the data directory's, or None
    where they agree. Compared with the checkpoint's :data:`TRAINED_DICTIONARIES` entry where its task state has one,
    else by size with its embedding matrices (``embeddings``: side -> state dict key, :data:`EMBEDDINGS` for an
    encoder-decoder); the source side is reported where both differ. ``made_with``: how to make a directory with
    the checkpoint's dictionaries."""
    recorded = (state.get("task_state") or {}).get(TRAINED_DICTIONARIES)
    for side, (file, dictionary) in dictionaries.items():
        here = list(dictionary.symbols)
        if recorded is not None and side in recorded:
            trained = list(recorded[side])
            if trained == here:
                continue
            if len(trained) != len(here):
                how = f"{len(trained)} entries in the checkpoint, {len(here)} in {file}"
            else:
                index = next(i for i, (a, b) in enumerate(zip(trained, here)) if a != b)
                line = index - dictionary.nspecial + 1
                where = f"{file}:{line}" if line >= 1 else f"{file} (special symbol {index})"
                how = f"entry {index} is {trained[index]!r} in the checkpoint, {here[index]!r} at {where}"
        else:
            weight = (state.get("model") or {}).get(embeddings.get(side))
            if weight is None or weight.shape[0] == len(here):
                continue
            how = (f"its {embeddings[side]} has {weight.shape[0]} rows (one an entry), {file} gives {len(here)} "
                   "entries")
        trained_on = _trained_data(state)
        return (f"error: {path} was trained with another {side} dictionary than {file}: {how}; give the data "
                f"directory it was trained on{f' ({trained_on})' if trained_on else ''}, or one made with "
                f"{made_with}")
    return None


def _trained_data(state: dict) -> str | None:
    """The ``--data`` a checkpoint was trained with, as its configuration records it."""
    cfg = state.get("cfg")
    task = getattr(cfg, "task", None) if cfg is not None else None
    if task is None and state.get("args") is not None:
        task = state["args"]
    data = getattr(task, "data", None) if task is not None else None
    return str(data) if data else None


@contextlib.contextmanager
def loading_for(task) -> Iterator[None]:
    """Checkpoint files loaded in this block are checked by ``task.check_checkpoint(path, state)`` (where ``task``
    has one) before fairseq builds or fills a model from them."""
    token = _LOADING_FOR.set(task)
    try:
        yield
    finally:
        _LOADING_FOR.reset(token)


@contextlib.contextmanager
def write_atomically(path: str) -> Iterator[BinaryIO]:
    """A binary handle on ``path + ".tmp"``; when the block ends without an error the data is flushed to disk and
    the file renamed over ``path``, else it is removed and ``path`` stays as it was."""
    partial = path + ".tmp"
    try:
        with open(partial, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(partial)
        raise
    os.replace(partial, path)


class CrashSafePathManager(PathManager):
    """fairseq's ``PathManager`` as ``fairseq.checkpoint_utils`` sees it: copies onto other checkpoint names are
    atomic, and the rename of a freshly written checkpoint comes after its data is on disk. Paths that need
    fairseq's remote-file handlers are left to it."""

    @staticmethod
    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if PathManager.path_requires_pathmanager(dst_path):
            return PathManager.copy(src_path, dst_path, overwrite=overwrite)
        with open(src_path, "rb") as source, write_atomically(dst_path) as target:
            shutil.copyfileobj(source, target)
        return True

    @staticmethod
    def rename(src: str, dst: str) -> None:
        with open(src, "rb") as written:
            os.fsync(written.fileno())
        os.replace(src, dst)


def cut_short(path: str) -> str | None:
    """Why the checkpoint file ``path`` cannot be whole (``0 bytes``, ``N bytes, no end of its zip archive``), or
    None. torch writes zip archives, whose directory sits at the end, so a file cut short lacks it; a file in
    torch's legacy format (a pickle) is left to torch."""
    if not os.path.isfile(path):
        return None
    size = os.path.getsize(path)
    if size == 0:
        return "0 bytes"
    with open(path, "rb") as handle:
        legacy = handle.read(1) == b"\x80"  # pickle protocol 2+: torch.save(..., _use_new_zipfile_serialization=0)
    if legacy or zipfile.is_zipfile(path):
        return None
    return f"{size} bytes, no end of its zip archive"


def newest_whole_checkpoint(directory: str, suffix: str = "", excluding: str = "") -> str | None:
    """The most recently written checkpoint ``checkpoint*{suffix}.pt`` of ``directory`` that is not cut short,
    other than ``excluding``; fairseq writes each save's files at once, so the newest file holds the latest state."""
    candidates = [path for path in glob.glob(os.path.join(glob.escape(directory), f"checkpoint*{suffix}.pt"))
                  if os.path.abspath(path) != os.path.abspath(excluding) and cut_short(path) is None]
    return max(candidates, key=lambda path: (os.path.getmtime(path), path), default=None)


def _cut_short_message(path: str, reason: str) -> str:
    whole = newest_whole_checkpoint(os.path.dirname(path) or ".", excluding=path)
    remedy = (f"the newest whole checkpoint beside it is {whole}" if whole
              else "there is no whole checkpoint beside it")
    return (f"error: {path} is cut short ({reason}): a run killed while writing it leaves it so; {remedy}")


def _refuse_cut_short(load_checkpoint_to_cpu):
    def load(path, *args, **kwargs):
        reason = cut_short(path)
        if reason is not None:
            raise SystemExit(_cut_short_message(path, reason))
        return load_checkpoint_to_cpu(path, *args, **kwargs)

    return load


def _check_for_the_task(load_checkpoint_to_cpu):
    """Every checkpoint file loaded within :func:`loading_for` is checked by that task before it is used."""
    def load(path, *args, **kwargs):
        state = load_checkpoint_to_cpu(path, *args, **kwargs)
        check = getattr(_LOADING_FOR.get(), "check_checkpoint", None)
        if check is not None:
            check(path, state)
        return state

    return load


def _load_for_the_given_task(load_model_ensemble_and_task):
    """fairseq-generate/-interactive load their ``--path`` for the task set up from the command line (its data
    directory): the files are checked by that task. Without one (``task=None``), the task is made from each
    checkpoint's own configuration and checks the input form in its ``load_state_dict``."""
    def load(filenames, *args, **kwargs):
        task = kwargs["task"] if "task" in kwargs else (args[1] if len(args) > 1 else None)
        with loading_for(task):
            return load_model_ensemble_and_task(filenames, *args, **kwargs)

    return load


def require_checkpoint_file(filename: str) -> None:
    """A checkpoint file that is not there: one line (``SystemExit``), not fairseq's OSError."""
    if not os.path.isfile(filename):
        problem = "a directory, not a checkpoint file" if os.path.isdir(filename) else "no such checkpoint"
        raise SystemExit(f"error: {filename}: {problem}")


def _require_checkpoint_files(load_model_ensemble_and_task):
    """fairseq-generate/-interactive ``--path`` (and the plugin's commands that load a checkpoint): a file that is
    not there is one line, not fairseq's OSError."""
    def load(filenames, *args, **kwargs):
        suffix, shards = kwargs.get("suffix", ""), kwargs.get("num_shards", 1)
        for filename in filenames if suffix == "" and shards == 1 else ():  # sharded models: fairseq's own check
            require_checkpoint_file(filename)
        return load_model_ensemble_and_task(filenames, *args, **kwargs)

    return load


def _resume_from_a_whole_checkpoint(load_checkpoint):
    def resume(cfg, trainer, **passthrough_args):
        suffix = trainer.checkpoint_suffix
        if cfg.restore_file == "checkpoint_last.pt":  # fairseq's default: resume from the save directory
            last = os.path.join(cfg.save_dir, f"checkpoint_last{suffix}.pt")
            reason = cut_short(last)
            if not os.path.exists(last) and getattr(cfg, "continue_once", None) is None:
                cfg = _resume_without_last(cfg, last, suffix)
            elif reason is not None:
                whole = newest_whole_checkpoint(cfg.save_dir, suffix, excluding=last)
                if whole is None or cfg.finetune_from_model is not None:
                    raise SystemExit(_cut_short_message(last, reason) + "; remove it to start afresh")
                logger.warning(f"{last} is cut short ({reason}): a run killed while writing it leaves it so; "
                               f"resuming from {whole}, the newest whole checkpoint beside it")
                cfg = _with_restore_file(cfg, whole[: len(whole) - len(f"{suffix}.pt")] + ".pt")
        try:
            with loading_for(getattr(trainer, "task", None)):
                loaded = load_checkpoint(cfg, trainer, **passthrough_args)
        except ValueError as error:
            if "parameter group that doesn't match the size" not in str(error):
                raise
            raise SystemExit(_optimizer_mismatch_message(cfg, trainer)) from None
        _stop_if_trained_to_max_update(trainer)
        return loaded

    return resume


def _optimizer_mismatch_message(cfg, trainer) -> str:
    """torch's optimizer refuses a saved state whose parameters are not the model's (a checkpoint written before a
    model's parameters changed, such as the Tree Transformer's two link projections merged into one): the weights
    load (the model upgrades them), the optimizer's moments cannot be matched to the new parameters."""
    restore = cfg.restore_file
    if restore == "checkpoint_last.pt":
        restore = os.path.join(cfg.save_dir, f"checkpoint_last{trainer.checkpoint_suffix}.pt")
    return (f"error: {restore}: its optimizer state is for other parameters than this model's (a checkpoint written "
            "before the model's parameters changed): its weights load, but training cannot go on with its "
            "optimizer state; add --reset-optimizer to go on from its weights with a fresh optimizer")


def _stop_if_trained_to_max_update(trainer) -> None:
    """End ``fairseq-train`` (exit status 0) when the checkpoint it resumed from has ``--max-update`` updates.

    fairseq tests ``num_updates >= max_update`` only after a training step, so the same command run again on a
    finished run trained one more update and saved it over the finished checkpoints (a recipe run again to go on
    from where it stopped changed the model it had already evaluated)."""
    max_update = getattr(getattr(getattr(trainer, "cfg", None), "optimization", None), "max_update", 0)
    if max_update and trainer.get_num_updates() >= max_update:
        logger.info(f"the checkpoint resumed from has {trainer.get_num_updates()} updates, --max-update is "
                    f"{max_update}: nothing left to train (give a larger --max-update to train on)")
        raise SystemExit(0)


def _resume_without_last(cfg, last: str, suffix: str):
    """``cfg`` resuming from the newest whole checkpoint of the save directory when ``checkpoint_last.pt`` is
    missing there: fairseq would start afresh and write over them. A kill during a run's first save leaves them so
    (the epoch's checkpoint and ``checkpoint_best.pt`` written, ``checkpoint_last.pt`` not yet), as does a run with
    ``--no-last-checkpoints``."""
    whole = newest_whole_checkpoint(cfg.save_dir, suffix, excluding=last)
    if whole is None:
        return cfg  # a first run: fairseq starts afresh (or from --finetune-from-model)
    if cfg.finetune_from_model is not None:
        raise SystemExit(f"error: {cfg.save_dir} holds checkpoints of a run (the newest {whole}) but no "
                         f"{os.path.basename(last)}: to go on with it, give --restore-file {whole} without "
                         "--finetune-from-model; to start afresh, give another --save-dir or remove them")
    logger.warning(f"{last} does not exist, but {whole} does: a run killed during its first save (or run with "
                   f"--no-last-checkpoints) leaves them so; resuming from {whole}, the newest whole checkpoint "
                   "beside it (to start afresh, give another --save-dir or remove them)")
    return _with_restore_file(cfg, whole[: len(whole) - len(f"{suffix}.pt")] + ".pt")


def _with_restore_file(cfg, restore_file: str):
    cfg = copy.deepcopy(cfg)
    if isinstance(cfg, DictConfig):
        with open_dict(cfg):
            cfg.restore_file = restore_file
    else:
        cfg.restore_file = restore_file
    return cfg


def make_checkpoints_crash_safe() -> None:
    """Route fairseq's checkpoint writes through :class:`CrashSafePathManager`, and its checkpoint loads through
    the checks for files cut short and the checks of the task they are loaded for (once per process)."""
    if checkpoint_utils.PathManager is CrashSafePathManager:
        return
    checkpoint_utils.PathManager = CrashSafePathManager
    checkpoint_utils.load_checkpoint_to_cpu = _check_for_the_task(
        _refuse_cut_short(checkpoint_utils.load_checkpoint_to_cpu))
    checkpoint_utils.load_checkpoint = _resume_from_a_whole_checkpoint(checkpoint_utils.load_checkpoint)
    checkpoint_utils.load_model_ensemble_and_task = _require_checkpoint_files(
        _load_for_the_given_task(checkpoint_utils.load_model_ensemble_and_task))
