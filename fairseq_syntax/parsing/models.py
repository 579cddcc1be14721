"""What a parser's ``--model`` names, and fetching a pretrained model by name: a model name is a name, a path a path.

An argument that exists on disk (file or folder) is a local model. Anything else is a library's pretrained model
name (benepar ``benepar_en3``, SuPar ``biaffine-dep-en`` / ``crf-con-en``, stanza ``de`` / ``de_hdt``), downloaded
by that library into its cache. An argument that looks like a path (``models/x.pt``, ``./x``, a file suffix) but
is not there is a missing file, not a name.

Without the network a name ends in one line, :class:`ModelUnavailable`'s ``could not download NAME: REASON``; the
libraries' own output is held back while they try. ``fairseq-syntax-parse fetch``
(:func:`fairseq_syntax.parsing.backends.fetch`) fetches a name now, so a recipe stops before other work.

Every parser, tagger and stanza model loads through :func:`load_model`, which turns any failure into one
:class:`ModelUnavailable` line: the path, what it holds (:func:`fairseq_syntax.parsing.model_files.describe`) and
what the backend reads; a local file of another kind is refused before the library reads it."""
from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import urllib.error
from dataclasses import dataclass
from typing import Callable, TypeVar

#: the parse command's backends, by kind
CONSTITUENCY_BACKENDS = ("benepar", "crf-con", "stanza")
DEPENDENCY_BACKENDS = ("biaffine", "stanza")
#: file suffixes of model files: an argument ending in one is a path, even when nothing is there
MODEL_SUFFIXES = (".pt", ".pth", ".zip", ".bin", ".model", ".tar", ".gz")


class ModelUnavailable(Exception):
    """A model that cannot be had: its one-line message says which and why (the commands print it alone)."""


@dataclass(frozen=True)
class Wanted:
    """What a loader reads: the kinds of :mod:`fairseq_syntax.parsing.model_files` it takes, who reads it, and
    the words for it."""

    kinds: tuple[str, ...]
    reader: str  # "the crf-con backend", "--tagger"
    words: str


SUPAR_MAKERS = {"crf-constituency": "crf-con", "biaffine-dependency": "dependency"}


def supar_parser(name: str, reader: str) -> Wanted:
    """A SuPar parser of SuPar's ``NAME`` (``crf-constituency``, ``biaffine-dependency``)."""
    return Wanted((f"supar:{name}",), reader, f"a SuPar {name!r} parser (a SuPar model name, or the file of "
                                             f"preprocess/train_parser.py {SUPAR_MAKERS.get(name, name)})")


#: what each backend of the parse command reads, by (kind of parse, backend); and the tagger
WANTED = {
    ("constituency", "crf-con"): supar_parser("crf-constituency", "the crf-con backend"),
    ("dependency", "biaffine"): supar_parser("biaffine-dependency", "the biaffine backend"),
    ("constituency", "benepar"): Wanted(("benepar",), "the benepar backend", "a benepar model (a benepar model name, "
                                        "its folder, or the file of preprocess/train_parser.py benepar)"),
    ("dependency", "stanza"): Wanted(("stanza:dependency", "stanza-resources"), "the stanza backend",
                                     "a stanza dependency parser's file, a stanza resources folder or a model name"),
    ("constituency", "stanza"): Wanted(("stanza-resources",), "the stanza backend",
                                       "a stanza resources folder or a model name"),
}
TAGGER = Wanted(("tagger",), "--tagger", "a POS tagger (the file of preprocess/train_parser.py tagger)")
#: how much of a library's error a load failure's line keeps
REASON_CHARACTERS = 200
#: any SuPar parser (training resumes and reports)
ANY_SUPAR = Wanted((), "this command", "a SuPar parser")
Model = TypeVar("Model")


def _fits(kind: str, wanted: Wanted) -> bool:
    return kind in wanted.kinds or (not wanted.kinds and kind.startswith("supar:"))


def check_model_file(model: str, wanted: Wanted) -> None:
    """:class:`ModelUnavailable` for a local file or folder that holds another kind of model, or none, than
    ``wanted``; nothing for a name, a model of that kind, or a torch file of unknown contents (its loader tells)."""
    if not is_local(model):
        return
    from fairseq_syntax.parsing.model_files import describe

    held = describe(model)
    if held.kind is None or _fits(held.kind, wanted):
        return
    raise ModelUnavailable(f"{model}: {held.words}; {wanted.reader} reads {wanted.words}")


def load_model(model: str, wanted: Wanted, load: Callable[[], Model]) -> Model:
    """``load()`` (which loads ``model``), its failure, whatever it is, in one :class:`ModelUnavailable` line (the
    module docstring); a local file of another kind is refused before ``load`` runs."""
    check_model_file(model, wanted)
    try:
        return load()
    except ModelUnavailable:
        raise
    except Exception as error:  # noqa: BLE001 (unpickling, torch and the libraries raise anything)
        message = " ".join(str(error).split())
        reason = f"{type(error).__name__}: " + (message if len(message) <= REASON_CHARACTERS else
                                                message[:REASON_CHARACTERS].rsplit(" ", 1)[0] + " ...")
        if not is_local(model):
            raise ModelUnavailable(f"{model}: the model of this name does not load ({reason}); {wanted.reader} "
                                   f"reads {wanted.words}") from None
        from fairseq_syntax.parsing.model_files import describe

        held = describe(model)
        if held.kind is not None and _fits(held.kind, wanted):
            raise ModelUnavailable(f"{model}: {held.words} that does not load ({reason})") from None
        raise ModelUnavailable(f"{model}: {held.words}; {wanted.reader} reads {wanted.words} ({reason})") from None


def is_local(model: str) -> bool:
    """Whether ``model`` is a file or folder on disk (then it is loaded from there, never downloaded)."""
    return os.path.exists(model)


def looks_like_path(model: str) -> bool:
    """Whether an argument that is not on disk was meant as a path rather than a library's model name."""
    return os.sep in model or model.startswith(".") or model.lower().endswith(MODEL_SUFFIXES)


def check_model_argument(model: str, role: str = "model") -> None:
    """:class:`ModelUnavailable` for a path that is not there (it would otherwise be taken for a name)."""
    if not is_local(model) and looks_like_path(model):
        raise ModelUnavailable(f"{model}: no such {role} file or folder")


def reason_of(error: BaseException, name: str = "") -> str:
    """The cause of a failed download in words: the innermost network error of the chain (urllib's, or requests'
    that stanza downloads with), else the error's own message."""
    chain, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        chain.append(error)
        error = error.__cause__ or error.__context__
    for candidate in reversed(chain):
        if isinstance(candidate, urllib.error.URLError):
            return _one_line(candidate.reason)
    for candidate in chain:
        if type(candidate).__module__.startswith(("requests", "urllib3")):
            inner = candidate.args[0] if candidate.args else candidate
            while getattr(inner, "reason", None) is not None:  # MaxRetryError -> NameResolutionError ...
                inner = inner.reason
            return _one_line(inner).split("): ", 1)[-1]  # "HTTPSConnection(host=..., port=443): Failed to ..."
    message = _one_line(chain[0]) or type(chain[0]).__name__
    return message.removeprefix(f"Error loading {name}: ")  # nltk's (benepar's) own words around the reason


def _one_line(value) -> str:
    return " ".join(str(value).split())[:300]


@contextlib.contextmanager
def _quiet():
    """This process's stdout and stderr (Python's and the libraries' own handles) go to a temporary file for the
    block."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as held:
        try:
            os.dup2(held.fileno(), 1)
            os.dup2(held.fileno(), 2)
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for descriptor in saved:
                os.close(descriptor)


@contextlib.contextmanager
def downloading(name: str):
    """Around a library's download of ``name``: its printing held back; any failure becomes
    ``ModelUnavailable("could not download NAME: REASON")``."""
    try:
        with _quiet():
            yield
    except ModelUnavailable:
        raise
    except Exception as error:  # noqa: BLE001 (the libraries raise anything from OSError to ValueError)
        raise ModelUnavailable(f"could not download {name}: {reason_of(error, name)}") from None


def supar_model_path(name_or_path: str) -> str:
    """A local SuPar file as is; a SuPar name downloaded into SuPar's cache, its path there."""
    check_model_argument(name_or_path)
    if is_local(name_or_path):
        return name_or_path
    import supar
    from supar.utils.fn import download

    known = supar.MODEL["github"]
    if name_or_path not in known and "://" not in name_or_path:
        raise ModelUnavailable(f"could not download {name_or_path}: not a name of SuPar's pretrained models "
                               f"({', '.join(sorted(known))}) and no such file")
    with downloading(name_or_path):
        return download(known.get(name_or_path, name_or_path))


def benepar_model_path(name_or_path: str) -> str:
    """A local benepar model as is; a benepar name from nltk's data folder, downloaded there once if missing."""
    check_model_argument(name_or_path)
    if is_local(name_or_path):
        return name_or_path
    import benepar
    from benepar.integrations.downloader import locate_model

    try:
        return locate_model(name_or_path)
    except LookupError:
        pass
    with downloading(name_or_path):
        benepar.download(name_or_path, quiet=True, raise_on_error=True)
    try:
        return locate_model(name_or_path)
    except LookupError:
        raise ModelUnavailable(f"could not download {name_or_path}: benepar fetched nothing under that name") from None
