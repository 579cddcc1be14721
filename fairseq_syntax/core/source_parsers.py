"""The constituency parsers ``fairseq-interactive --source-parser`` parses raw text with, as core reaches them.

The translation task (core) turns an input sentence into a tree with the parsers of :mod:`fairseq_syntax.parsing`,
which build on core: core may not import them (the layers run core <- parsing <- methods). So parsing registers
one :class:`ConstituencyParsers` here when it is imported (``fairseq_syntax`` imports it, before any task runs), and
the task asks :func:`constituency_parsers` for it.

A parse function takes the tokenized, PTB-escaped words of a buffer of lines and gives per sentence, in order, what
``preprocess/parse_constituency.py`` writes for it (:func:`fairseq_syntax.parsing.constituency.parse_sentences`): the
bracketed tree, and the reason where the parser gave none and the flat fallback tree stands in.
"""
from dataclasses import dataclass
from typing import Callable, List, NamedTuple, Optional

BACKENDS = ("benepar", "crf-con")


class ParsedSentence(NamedTuple):
    tree: str  # bracketed, one line
    fallback: Optional[str]  # why the flat fallback tree was given instead of the parser's, or None


#: the words of each sentence (none empty) -> one ParsedSentence per sentence, in order
ParseFunction = Callable[[List[List[str]]], List[ParsedSentence]]


@dataclass(frozen=True)
class ConstituencyParsers:
    #: (backend, model name or path, POS tagger path or None) -> the parse function of that parser; a model that
    #: cannot be had (no such file, no model of that kind, a name without the network) is a one-line ValueError
    load: Callable[[str, str, Optional[str]], ParseFunction]
    #: a model name or path -> its backend, or None where it cannot tell
    backend_of: Callable[[str], Optional[str]]
    #: a local model file -> its identity as syntax.json records it ({"name": file name, "sha256": 16 hex digits})
    identity: Callable[[str], dict]


_registered: Optional[ConstituencyParsers] = None


def register_constituency_parsers(parsers: ConstituencyParsers) -> None:
    global _registered
    if _registered is not None:
        raise ValueError("constituency parsers registered twice")
    _registered = parsers


def constituency_parsers() -> ConstituencyParsers:
    if _registered is None:
        raise RuntimeError("no constituency parsers are registered: import fairseq_syntax.parsing (importing "
                           "fairseq_syntax, as --user-dir does, imports it)")
    return _registered
