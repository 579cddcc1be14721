"""What a model file or folder holds, read without running anything from it, for the one-line errors of
:func:`fairseq_syntax.parsing.models.load_model`.

A torch file is a pickle in a zip archive (``ARCHIVE/data.pkl``) or, in torch's legacy format (stanza's), the
fourth of four pickles. :func:`held_object` unpickles it with every global replaced by an inert :class:`Stand_in`
and every tensor by ``None``: nothing is imported or called. :func:`describe` tells

    supar:NAME          a SuPar parser: ``{"name": NAME, "args": supar Config, ...}`` (``supar.Parser.save``)
    benepar             benepar: ``{"config", "state_dict"}`` (``training.train_benepar``), or a folder of
                        ``config.json`` and ``benepar_model.bin`` (its released models)
    tagger              ``tagger.Tagger.state()``: ``{"size", "words", "chars", "tags", "state_dict"}``
    training-checkpoint the tagger's and benepar's ``OUTPUT.checkpoint`` (``{"tagger" or "state_dict",
                        "optimizer", ...}``, ``parsing.resumable``; SuPar's is a SuPar parser)
    stanza:dependency   stanza's parser: ``{"model", "vocab", "config", "model_type"}`` (``depparse.trainer.save``)
    stanza-resources    a folder with stanza's ``resources.json``
    fairseq             a fairseq checkpoint: ``{"model", "cfg" or "args", "optimizer_history", ...}``
    none                no model at all: an empty file, bytes that are no pickle, text, a folder of other files

and ``None`` for a torch file of other contents (the loader is tried, and its error reported)."""
from __future__ import annotations

import gzip
import io
import os
import pickle
import zipfile
from dataclasses import dataclass

#: the first pickle of a torch file in the legacy format (``torch.serialization.MAGIC_NUMBER``)
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
#: how much of a file in torch's legacy format is read: its pickles come before the tensors' bytes
LEGACY_HEAD_BYTES = 64 << 20
#: keys of the top-level dict shown for a torch file of unknown contents
KEYS_SHOWN = 6
#: entries of a folder shown
ENTRIES_SHOWN = 4


@dataclass(frozen=True)
class Held:
    """What a path holds: ``kind`` (the module docstring's table; None: a torch file of unknown contents) and the
    words for it (``a SuPar 'crf-constituency' parser``)."""

    kind: str | None
    words: str


class Stand_in:  # noqa: N801 (a name that says what it is in a repr)
    """Any class or function a pickle names: built, called and filled without running anything of the original."""

    qualified = "?"

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        self.args = args

    def __call__(self, *args, **kwargs):
        return self

    def __setstate__(self, state) -> None:
        self.state = state

    def __setitem__(self, key, value) -> None:
        self.__dict__.setdefault("items", {})[key] = value

    def append(self, value) -> None:
        self.__dict__.setdefault("values", []).append(value)

    def extend(self, values) -> None:
        for value in values:
            self.append(value)


class _Inspector(pickle.Unpickler):
    """An unpickler that imports nothing: each global is a fresh :class:`Stand_in` subclass named after it."""

    def __init__(self, handle, named: set):
        super().__init__(handle)
        self.named = named

    def find_class(self, module: str, name: str):
        self.named.add(f"{module}.{name}")
        return type(name, (Stand_in,), {"qualified": f"{module}.{name}"})

    def persistent_load(self, pid):
        return None  # a tensor's storage: not read


class NotTorch(Exception):
    """The bytes are no torch file."""


def held_object(path: str) -> tuple[object, set]:
    """(the top-level object of the torch file ``path``, the module.name of every global its pickle names), read as
    the module docstring says; :class:`NotTorch` when it is none."""
    named: set = set()
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            pickles = [name for name in archive.namelist() if name == "data.pkl" or name.endswith("/data.pkl")]
            if not pickles:
                raise NotTorch("a zip archive without torch's data.pkl")
            data = archive.read(pickles[0])
        try:
            return _Inspector(io.BytesIO(data), named).load(), named
        except Exception as error:  # noqa: BLE001 (a damaged pickle raises anything)
            raise NotTorch(f"a zip archive whose data.pkl is no pickle ({type(error).__name__})") from None
    with open(path, "rb") as handle:
        handle = io.BytesIO(handle.read(LEGACY_HEAD_BYTES))  # a length the bytes claim is never allocated
        try:
            magic = _Inspector(handle, named).load()
            if magic != LEGACY_MAGIC:
                raise NotTorch("not a torch file")
            _Inspector(handle, named).load()  # protocol version
            _Inspector(handle, named).load()  # system information
            return _Inspector(handle, named).load(), named
        except NotTorch:
            raise
        except Exception:  # noqa: BLE001
            raise NotTorch("not a torch file") from None


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _not_torch(path: str, size: int) -> str:
    """What a file that is no torch file is, in words."""
    with open(path, "rb") as handle:
        head = handle.read(1 << 16)
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as unzipped:
                unzipped.read(1)
        except (OSError, EOFError):
            return f"{_plural(size, 'byte')} of a damaged gzip file"
        return "a gzip file (a model is not gzipped)"
    if b"\0" not in head:
        try:
            head.decode("utf-8")
            with open(path, "rb") as handle:
                lines = sum(1 for _ in handle)
            return f"a text file of {_plural(lines, 'line')}"
        except UnicodeDecodeError:
            pass
    return f"{_plural(size, 'byte')} that are no torch file"


def _state_of(value) -> dict | None:
    """A dict, or a stand-in's dict state (a Namespace, an OrderedDict), else None."""
    if isinstance(value, dict):
        return value
    if isinstance(value, Stand_in):
        state = getattr(value, "state", None)
        if isinstance(state, dict):
            return state
        return getattr(value, "items", None)
    return None


def describe_object(value, named: set) -> Held:
    """The kind of a torch file's top-level object (module docstring)."""
    top = _state_of(value)
    if top is None:
        name = type(value).qualified if isinstance(value, Stand_in) else type(value).__name__
        return Held(None, f"a torch file of one {name}, no model")
    keys = set(top)
    if isinstance(top.get("name"), str) and any(name.startswith("supar.") for name in named):
        return Held(f"supar:{top['name']}", f"a SuPar {top['name']!r} parser")
    if {"model", "optimizer_history"} <= keys or ("model" in keys and keys & {"cfg", "args"}
                                                  and any(name.startswith(("omegaconf.", "argparse.", "fairseq."))
                                                          for name in named)):
        return Held("fairseq", "a fairseq checkpoint (a translation model, for fairseq-generate)")
    if {"words", "chars", "tags", "state_dict"} <= keys:
        return Held("tagger", "a POS tagger")
    if "optimizer" in keys and ("tagger" in keys or {"state_dict", "epoch"} <= keys):
        return Held("training-checkpoint", "a training checkpoint of preprocess/train_parser.py (its model is the "
                                           "file without .checkpoint)")
    if {"config", "state_dict"} <= keys:
        return Held("benepar", "a benepar model")
    if {"model", "vocab", "config"} <= keys:
        if "model_type" in keys:
            return Held("stanza:dependency", "a stanza dependency parser")
        return Held(None, "a stanza model")
    shown = ", ".join(sorted(map(str, keys))[:KEYS_SHOWN]) + (", ..." if len(keys) > KEYS_SHOWN else "")
    return Held(None, f"a torch file of a dict ({shown}), no model known here" if keys else
                "a torch file of an empty dict, no model")


def describe_folder(path: str) -> Held:
    entries = sorted(os.listdir(path))
    if "resources.json" in entries:
        return Held("stanza-resources", "a stanza resources folder")
    if {"config.json", "benepar_model.bin"} <= set(entries):
        return Held("benepar", "a benepar model folder")
    if not entries:
        return Held("none", "no model: an empty folder")
    shown = ", ".join(entries[:ENTRIES_SHOWN]) + (", ..." if len(entries) > ENTRIES_SHOWN else "")
    return Held("none", f"no model: a folder of {_plural(len(entries), 'entry').replace('entrys', 'entries')} "
                        f"({shown})")


def describe(path: str) -> Held:
    """What the file or folder ``path`` holds (module docstring); never raises."""
    try:
        if os.path.isdir(path):
            return describe_folder(path)
        size = os.path.getsize(path)
        if size == 0:
            return Held("none", "no model: an empty file")
        try:
            value, named = held_object(path)
        except NotTorch as error:
            words = str(error) if str(error) != "not a torch file" else _not_torch(path, size)
            return Held("none", f"no model: {words}")
        return describe_object(value, named)
    except OSError as error:
        return Held(None, f"a path that cannot be read ({error.strerror or error})")
