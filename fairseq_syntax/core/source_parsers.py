"""The constituency parsers ``fairseq-interactive --source-parser`` parses raw text with, as core reaches them.

Core may not import :mod:`fairseq_syntax.parsing` (layers: core <- parsing <- methods), so parsing registers one
:class:`ConstituencyParsers` here when imported and the task asks :func:`constituency_parsers`. A parse function
takes the PTB-escaped words of a buffer of lines and gives per sentence what
:func:`fairseq_syntax.parsing.constituency.parse_sentences` gives: the tree, and the reason where the flat
fallback stands in."""
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
