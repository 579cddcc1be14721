"""Parsers for the source side: constituency trees (benepar, SuPar CRF, stanza) and dependency arc distributions
(SuPar biaffine, stanza), their training on local treebanks, and their evaluation; ``fairseq-syntax-parse``
(:mod:`fairseq_syntax.cli.parse`) runs them. See the modules' docstrings.

Importing the package registers the constituency parsers with the translation task's raw-text path
(:mod:`fairseq_syntax.core.source_parsers`); their modules (nltk, the networks) load when a parser is asked for."""
import os

from fairseq_syntax.core.source_parsers import ConstituencyParsers, register_constituency_parsers


def _load(backend, model, tagger):
    from fairseq_syntax.parsing.constituency import fairseq_interactive_parser
    from fairseq_syntax.parsing.models import ModelUnavailable

    try:
        return fairseq_interactive_parser(backend, model, tagger)
    except ModelUnavailable as error:  # the task's one line (core.source_parsers: a ValueError)
        raise ValueError(str(error)) from None


def _backend_of(model):
    from fairseq_syntax.parsing.constituency import backend_of_model

    return backend_of_model(model)


def _identity(path):
    from fairseq_syntax.parsing.provenance import model_digest

    return {"name": os.path.basename(path), "sha256": model_digest(path)}


register_constituency_parsers(ConstituencyParsers(load=_load, backend_of=_backend_of, identity=_identity))
