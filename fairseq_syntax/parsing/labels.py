"""Which dependency label scheme a parser writes: Stanford dependencies or Universal Dependencies.

LDD groups labels by one of two tables (:data:`fairseq_syntax.methods.ldd.distributions.LABEL_TABLES`,
``--labels stanford|universal``), which must be the parser's: SuPar's ``biaffine-dep-en`` writes Stanford labels
(dobj, pobj, prep, nn, ...); UD-trained models and every stanza model write UD v2 (obj, obl, case, nummod,
``nsubj:pass``, ...).

:func:`label_scheme` tells them apart by the labels only one scheme has, from a model's label vocabulary or an
arcs file (:func:`label_scheme_of_arcs`). A set with labels of both, or of neither, is reported, never guessed."""
from __future__ import annotations

from collections.abc import Iterable

STANFORD, UNIVERSAL = "stanford", "universal"
#: labels of Stanford basic dependencies (de Marneffe & Manning's manual, v3.3, SuPar's PTB conversion) that UD v2
#: does not have
STANFORD_ONLY = frozenset({
    "dobj", "pobj", "prep", "pcomp", "acomp", "nn", "poss", "possessive", "auxpass", "nsubjpass", "csubjpass",
    "partmod", "infmod", "rcmod", "vmod", "num", "number", "quantmod", "npadvmod", "tmod", "predet", "preconj",
    "prt", "neg", "abbrev", "attr", "complm", "purpcl", "rel", "xsubj",
})
#: labels of UD v2 that Stanford basic dependencies do not have (subtypes ``a:b`` of UD labels count too)
UNIVERSAL_ONLY = frozenset({
    "obj", "obl", "nummod", "case", "flat", "fixed", "acl", "clf", "orphan", "goeswith", "reparandum", "list",
    "vocative", "dislocated",
})
#: the base labels whose subtypes ``base:subtype`` are UD's (Stanford basic labels have no colon)
UNIVERSAL_BASES = frozenset({
    "acl", "advcl", "advmod", "amod", "appos", "aux", "case", "cc", "ccomp", "clf", "compound", "conj", "cop",
    "csubj", "dep", "det", "discourse", "dislocated", "expl", "fixed", "flat", "goeswith", "iobj", "list", "mark",
    "nmod", "nsubj", "nummod", "obj", "obl", "orphan", "parataxis", "punct", "reparandum", "root", "vocative",
    "xcomp",
})


class UnknownLabelScheme(ValueError):
    """A set of labels that names no one scheme: the message says which labels point where."""


def scheme_evidence(labels: Iterable[str]) -> tuple[set[str], set[str]]:
    """(the labels only Stanford has, the labels only UD has) among ``labels``."""
    stanford, universal = set(), set()
    for label in labels:
        base, colon, _ = label.partition(":")
        if label in STANFORD_ONLY:
            stanford.add(label)
        elif label in UNIVERSAL_ONLY or (colon and base in UNIVERSAL_BASES):
            universal.add(label)
    return stanford, universal


def label_scheme(labels: Iterable[str], source: str = "the labels") -> str:
    """``"stanford"`` or ``"universal"``: the one scheme ``labels`` have labels of; :class:`UnknownLabelScheme`
    naming ``source`` when they have labels of both or of neither."""
    labels = set(labels)
    stanford, universal = scheme_evidence(labels)
    if stanford and not universal:
        return STANFORD
    if universal and not stanford:
        return UNIVERSAL
    if stanford and universal:
        raise UnknownLabelScheme(f"{source} mix Stanford ({', '.join(sorted(stanford)[:6])}) and universal "
                                 f"({', '.join(sorted(universal)[:6])}) dependency labels")
    raise UnknownLabelScheme(f"{source} ({', '.join(sorted(labels)[:12]) or 'none'}) hold no label that only "
                             "Stanford or only universal dependencies have")


def label_scheme_of_arcs(path: str) -> str:
    """The scheme of the labels an arcs file (``*.arcs.jsonl[.gz]``, :mod:`fairseq_syntax.parsing.dependency`)
    holds: read until its labels tell (a whole file when they never do)."""
    import json

    from fairseq_syntax.core.text_lines import iter_lines_or_errors

    seen: set[str] = set()
    for number, line in enumerate(iter_lines_or_errors(path), 1):
        if isinstance(line, Exception):
            raise line
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: not a JSON object: {error}") from None
        if record.get("fallback") is not None:
            continue  # the flat structure's "dep" is no parser's label
        new = {label for arc in record.get("arcs", []) for label in arc[3]} - seen
        if new:
            seen |= new
            stanford, universal = scheme_evidence(seen)
            if bool(stanford) != bool(universal) and number >= 100:  # a hundred lines agreeing: decided
                break
    return label_scheme(seen, f"the labels of {path}")
