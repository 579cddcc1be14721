"""Loading and saving fairseq checkpoints safely.

* torch >= 2.6 loads with ``weights_only=True``. fairseq checkpoints hold an ``argparse.Namespace`` (and, with
  ``--eval-bleu``, numpy arrays and scalars); exactly those classes are allow-listed (they store data and run no
  code), rather than turning ``weights_only`` off.
* Crash-safe saving: every checkpoint write goes to ``NAME.tmp``, is flushed and renamed over ``NAME``, so a kill
  leaves the previous file or the new one, whole. Resuming from a ``checkpoint_last.pt`` that is cut short or
  missing (while other checkpoints of the run exist) falls back to the newest whole checkpoint and says so.
* Before weights are loaded, every checkpoint loaded for a task goes to the task's ``check_checkpoint(path,
  state)``: the plugin's tasks compare the dictionaries their task state records (:func:`dictionary_mismatch`)."""
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

import numpy
import torch
from fairseq import checkpoint_utils
from fairseq.file_io import PathManager
from omegaconf import DictConfig, open_dict

from fairseq_syntax.core.files import atomic_path

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

#: task state: ``{"source": [symbol, ...], "target": [...]}``, the trained dictionaries in index order
TRAINED_DICTIONARIES = "syntax_dictionaries"
#: the task a checkpoint file now being loaded is for (set while fairseq loads checkpoints for a task)
_LOADING_FOR: contextvars.ContextVar = contextvars.ContextVar("checkpoint_loaded_for", default=None)


def dictionary_record(source, target) -> dict:
    """What :data:`TRAINED_DICTIONARIES` holds for two fairseq dictionaries."""
    return {"source": list(source.symbols), "target": list(target.symbols)}


#: how to make a data directory with a translation checkpoint's dictionaries (the end of the refusal)
MADE_WITH = "its dictionaries (fairseq-syntax-preprocess --srcdict and --tgtdict of that directory)"


def dictionary_mismatch(path: str, state: dict, dictionaries: dict, made_with: str = MADE_WITH) -> str | None:
    """One line (``error: ...``) saying how the dictionaries of checkpoint ``path`` (loaded as ``state``) differ from
    ``dictionaries`` (``{"source": (dict file, Dictionary), "target": (...)}``), or None where they agree or the
    task state records none (:data:`TRAINED_DICTIONARIES`: a checkpoint of another task, left to fairseq); the source
    side is reported where both differ. ``made_with``: how to make a matching directory."""
    recorded = (state.get("task_state") or {}).get(TRAINED_DICTIONARIES) or {}
    for side, (file, dictionary) in dictionaries.items():
        here = list(dictionary.symbols)
        trained = list(recorded.get(side, here))
        if trained == here:
            continue
        if len(trained) != len(here):
            how = f"{len(trained)} entries in the checkpoint, {len(here)} in {file}"
        else:
            index = next(i for i, (a, b) in enumerate(zip(trained, here)) if a != b)
            line = index - dictionary.nspecial + 1
            where = f"{file}:{line}" if line >= 1 else f"{file} (special symbol {index})"
            how = f"entry {index} is {trained[index]!r} in the checkpoint, {here[index]!r} at {where}"
        trained_on = _trained_data(state)
        return (f"error: {path} was trained with another {side} dictionary than {file}: {how}; give the data "
                f"directory it was trained on{f' ({trained_on})' if trained_on else ''}, or one made with "
                f"{made_with}")
    return None


def _trained_data(state: dict) -> str | None:
    """The ``--data`` a checkpoint was trained with, as its configuration records it."""
    data = getattr(getattr(state.get("cfg"), "task", None), "data", None)
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


class CrashSafePathManager(PathManager):
    """fairseq's ``PathManager`` for ``fairseq.checkpoint_utils``: copies onto other checkpoint names are atomic, and
    a fresh checkpoint is renamed after its data is on disk. Remote paths are left to fairseq."""

    @staticmethod
    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if PathManager.path_requires_pathmanager(dst_path):
            return PathManager.copy(src_path, dst_path, overwrite=overwrite)
        with open(src_path, "rb") as source, atomic_path(dst_path, ".tmp", sync=True) as partial, \
                open(partial, "wb") as target:
            shutil.copyfileobj(source, target)
        return True

    @staticmethod
    def rename(src: str, dst: str) -> None:
        with open(src, "rb") as written:
            os.fsync(written.fileno())
        os.replace(src, dst)


def cut_short(path: str) -> str | None:
    """Why checkpoint ``path`` cannot be whole (``0 bytes``, ``N bytes, no end of its zip archive``), or None."""
    if not os.path.isfile(path) or zipfile.is_zipfile(path):
        return None
    size = os.path.getsize(path)
    return "0 bytes" if size == 0 else f"{size} bytes, no end of its zip archive"


def newest_whole_checkpoint(directory: str, suffix: str = "", excluding: str = "") -> str | None:
    """The most recently written ``checkpoint*{suffix}.pt`` of ``directory`` that is not cut short, other than
    ``excluding``."""
    candidates = [path for path in glob.glob(os.path.join(glob.escape(directory), f"checkpoint*{suffix}.pt"))
                  if os.path.abspath(path) != os.path.abspath(excluding) and cut_short(path) is None]
    return max(candidates, key=lambda path: (os.path.getmtime(path), path), default=None)


def _cut_short_message(path: str, reason: str) -> str:
    whole = newest_whole_checkpoint(os.path.dirname(path) or ".", excluding=path)
    remedy = (f"the newest whole checkpoint beside it is {whole}" if whole
              else "there is no whole checkpoint beside it")
    return (f"error: {path} is cut short ({reason}): a run killed while writing it leaves it so; {remedy}")


def _checked(load_checkpoint_to_cpu):
    """Every checkpoint file loaded: refused in one line where cut short, and within :func:`loading_for` checked by
    that task before it is used."""
    def load(path, *args, **kwargs):
        reason = cut_short(path)
        if reason is not None:
            raise SystemExit(_cut_short_message(path, reason))
        state = load_checkpoint_to_cpu(path, *args, **kwargs)
        check = getattr(_LOADING_FOR.get(), "check_checkpoint", None)
        if check is not None:
            check(path, state)
        return state

    return load


def require_checkpoint_file(filename: str) -> None:
    """A checkpoint file that is not there: one line (``SystemExit``), not fairseq's OSError."""
    if not os.path.isfile(filename):
        problem = "a directory, not a checkpoint file" if os.path.isdir(filename) else "no such checkpoint"
        raise SystemExit(f"error: {filename}: {problem}")


def _for_the_given_task(load_model_ensemble_and_task):
    """fairseq-generate/-interactive's ``--path`` files: one that is not there is one line, not fairseq's OSError;
    they are checked by the task set up from the command line (with ``task=None`` the task made from each
    checkpoint checks the input form in its ``load_state_dict``)."""
    def load(filenames, *args, **kwargs):
        suffix, shards = kwargs.get("suffix", ""), kwargs.get("num_shards", 1)
        for filename in filenames if suffix == "" and shards == 1 else ():  # sharded models: fairseq's own check
            require_checkpoint_file(filename)
        task = kwargs["task"] if "task" in kwargs else (args[1] if len(args) > 1 else None)
        with loading_for(task):
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
                cfg = _with_restore_file(cfg, whole, suffix)
        with loading_for(getattr(trainer, "task", None)):
            loaded = load_checkpoint(cfg, trainer, **passthrough_args)
        _stop_if_trained_to_max_update(trainer)
        return loaded

    return resume


def _stop_if_trained_to_max_update(trainer) -> None:
    """End ``fairseq-train`` (exit status 0) when the resumed checkpoint has ``--max-update`` updates (fairseq tests
    ``num_updates >= max_update`` only after a step)."""
    max_update = getattr(getattr(getattr(trainer, "cfg", None), "optimization", None), "max_update", 0)
    if max_update and trainer.get_num_updates() >= max_update:
        logger.info(f"the checkpoint resumed from has {trainer.get_num_updates()} updates, --max-update is "
                    f"{max_update}: nothing left to train (give a larger --max-update to train on)")
        raise SystemExit(0)


def _resume_without_last(cfg, last: str, suffix: str):
    """``cfg`` resuming from the newest whole checkpoint when ``checkpoint_last.pt`` is missing but others exist (a
    kill during the first save, or ``--no-last-checkpoints``); fairseq would start afresh and write over them."""
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
    return _with_restore_file(cfg, whole, suffix)


def _with_restore_file(cfg, checkpoint: str, suffix: str):
    """``cfg`` resuming from ``checkpoint`` (``--restore-file`` names it without the shard ``suffix``)."""
    restore_file = checkpoint[: len(checkpoint) - len(f"{suffix}.pt")] + ".pt"
    cfg = copy.deepcopy(cfg)
    if isinstance(cfg, DictConfig):
        with open_dict(cfg):
            cfg.restore_file = restore_file
    else:
        cfg.restore_file = restore_file
    return cfg


def make_checkpoints_crash_safe() -> None:
    """Route fairseq's checkpoint writes through :class:`CrashSafePathManager` and its loads through the cut-short
    and task checks (once per process)."""
    if checkpoint_utils.PathManager is CrashSafePathManager:
        return
    checkpoint_utils.PathManager = CrashSafePathManager
    checkpoint_utils.load_checkpoint_to_cpu = _checked(checkpoint_utils.load_checkpoint_to_cpu)
    checkpoint_utils.load_checkpoint = _resume_from_a_whole_checkpoint(checkpoint_utils.load_checkpoint)
    checkpoint_utils.load_model_ensemble_and_task = _for_the_given_task(checkpoint_utils.load_model_ensemble_and_task)
