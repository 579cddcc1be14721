"""Loading SuPar parsers under torch >= 2.6 without turning off the weights-only unpickler.

SuPar 1.1.4 saves with ``pickle_module=dill``: besides tensors, SuPar objects (``Config``, transforms, ``Field``s,
``Vocab``s, metrics) and, for ``Field('arcs', fn=CoNLL.get_arcs)``, a classmethod stored *by value* (bytecode
rebuilt by ``dill._dill._create_code`` / ``_create_function``). Allowing dill's rebuilders would let a file run any
code, so within one load (``supar_safe_globals``) we allow:
  * exactly the SuPar classes a parser file contains (they only store attributes);
  * stand-ins for dill's rebuilders that discard the bytecode and look the method up by name on an allowed SuPar
    class: the installed SuPar's code runs, never the file's;
  * any other function stored by value loads as an inert ``StoredFunction`` that raises when called."""
from __future__ import annotations

import datetime
import pickle
from contextlib import contextmanager
from typing import Iterator

import torch
from supar.parsers.parser import Parser
from supar.utils import config, field, metric, transform, vocab

SUPAR_CLASSES = (
    config.Config,
    transform.CoNLL,
    transform.Tree,
    field.RawField,
    field.Field,
    field.SubwordField,
    field.ChartField,
    vocab.Vocab,
    metric.Metric,  # the metric SuPar saves after an epoch that scored nothing (its base class)
    metric.AttachmentMetric,
    metric.SpanMetric,
)
# dill refers to a method's globals as the module dict, e.g. GLOBAL 'supar.utils.transform __dict__'.
SUPAR_MODULES = sorted({cls.__module__ for cls in SUPAR_CLASSES})


class StoredFunction:
    """A function dill stored by value, kept by name only; its bytecode is never loaded."""

    def __init__(self, name: str):
        self.name = name
        self.qualname = name

    def __setstate__(self, state: tuple[dict, dict]) -> None:
        # dill's BUILD for a function: (func.__dict__, {'__qualname__': ..., '__annotations__': ...}).
        _, attributes = state
        self.qualname = attributes.get("__qualname__", self.name)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            f"{self.qualname} was stored as bytecode in a checkpoint and is not loaded: only methods of "
            f"SuPar's own classes are restored (by name) from such files"
        )


def _discard_code(*args) -> None:
    """Stand-in for ``dill._dill._create_code``: the bytecode is dropped unread."""
    return None


def _function_by_name(code: None, module_name: str, name: str, *rest) -> StoredFunction:
    """Stand-in for ``dill._dill._create_function(code, globals, name, defaults, closure, ...)``."""
    return StoredFunction(name)


def _bind_by_name(function: StoredFunction, owner: type):
    """Stand-in for ``MethodType(function, owner)``: the installed method of an allowed SuPar class."""
    if not isinstance(function, StoredFunction) or owner not in SUPAR_CLASSES:
        raise pickle.UnpicklingError(f"refusing to bind {function!r} to {owner!r}: not a method of a SuPar class")
    method = getattr(owner, function.name, None)
    if getattr(method, "__self__", None) is not owner or method.__func__.__qualname__ != function.qualname:
        raise pickle.UnpicklingError(f"{owner.__name__} has no classmethod {function.qualname!r}")
    return method


def _dill_type(name: str):
    """Stand-in for ``dill._dill._load_type``: only the types SuPar parser files use (a ``set`` holds the
    constituency parser's evaluation labels)."""
    types = {"MethodType": _bind_by_name, "bytes": bytes, "set": set}
    if name not in types:
        raise pickle.UnpicklingError(f"refusing to load the type {name!r} stored by dill")
    return types[name]


def _allowed_globals() -> list:
    return [
        *SUPAR_CLASSES,
        datetime.timedelta,  # training time in SuPar's checkpoints
        StoredFunction,
        _bind_by_name,
        (bytes, "builtins.bytes"),
        (set, "builtins.set"),
        (_dill_type, "dill._dill._load_type"),
        (_discard_code, "dill._dill._create_code"),
        (_function_by_name, "dill._dill._create_function"),
        *[(module, f"{module}.__dict__") for module in SUPAR_MODULES],
    ]


@contextmanager
def supar_safe_globals() -> Iterator[None]:
    """Within this block, ``torch.load`` (weights-only) accepts SuPar parser files, and nothing else more."""
    with torch.serialization.safe_globals(_allowed_globals()):
        yield


def load_supar_parser(name_or_path: str, device: str | None = None, wanted=None, **kwargs) -> Parser:
    """``supar.Parser.load`` (a local file or a downloaded name, ``models.supar_model_path``) under
    ``supar_safe_globals``, moved to ``device`` when given. ``wanted`` (default: any SuPar parser) is the parser
    it must be; any failure is one line (``models.load_model``)."""
    from fairseq_syntax.parsing.models import ANY_SUPAR, load_model, supar_model_path

    wanted = wanted or ANY_SUPAR

    def load() -> Parser:
        path = supar_model_path(name_or_path)
        with supar_safe_globals():
            parser = Parser.load(path, **kwargs)
        if wanted.kinds and f"supar:{parser.NAME}" not in wanted.kinds:
            raise ValueError(f"{name_or_path} is a SuPar {parser.NAME!r} parser, not {wanted.words}")
        if device is not None:
            parser.model.to(device)
            parser.args.device = device
        return parser

    return load_model(name_or_path, wanted, load)


#: the seed of SuPar's length buckets (below)
BUCKET_SEED = 1


@contextmanager
def supar_device(device: str) -> Iterator[None]:
    """Within this block SuPar's fields put batches on ``device`` and its k-means length buckets start from a fixed
    seed (torch's random state restored after), so a corpus parsed in shards gives what one run gives."""
    from supar.utils.field import Field

    original = Field.__dict__["device"]
    Field.device = property(lambda field: device)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.random.default_generator.manual_seed(BUCKET_SEED)  # the CPU generator k-means draws from
            yield
    finally:
        Field.device = original
