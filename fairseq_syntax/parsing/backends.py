"""The parse jobs of ``fairseq-syntax-parse`` (:mod:`fairseq_syntax.cli.parse`), one per kind, any backend: each a
:class:`fairseq_syntax.parsing.shards.ParseJob` whose settings name the model by digest or name. :func:`fetch` makes
sure a named model is there before parsing."""
from __future__ import annotations

import argparse
import os

from fairseq_syntax.parsing import shards
from fairseq_syntax.parsing.models import (
    CONSTITUENCY_BACKENDS,
    DEPENDENCY_BACKENDS,
    TAGGER,
    WANTED,
    ModelUnavailable,
    benepar_model_path,
    check_model_argument,
    check_model_file,
    supar_model_path,
)
from fairseq_syntax.parsing.shards import LINES, ParseJob, model_identity


def fetch(kind: str, backend: str, model: str, lang: str = "en", tagger: str | None = None) -> None:
    """Downloads a model name once; a local model (and tagger) of another kind than the backend reads is refused
    without loading it. :class:`ModelUnavailable` in one line when it cannot. A stanza name is fetched by loading
    its pipeline."""
    if tagger is not None:
        check_model_argument(tagger, "tagger")
        if not os.path.exists(tagger):
            raise ModelUnavailable(f"{tagger}: no such tagger file (a tagger is a local model: "
                                   "preprocess/train_parser.py tagger makes one)")
        check_model_file(tagger, TAGGER)
    if (kind, backend) in WANTED:
        check_model_file(model, WANTED[kind, backend])
    if backend == "benepar":
        benepar_model_path(model)
    elif backend in ("crf-con", "biaffine"):
        supar_model_path(model)
    elif backend == "stanza":
        from fairseq_syntax.parsing.stanza_backend import load_stanza_pipeline

        load_stanza_pipeline(model, lang, kind, "cpu")
    else:
        raise ValueError(f"unknown backend {backend!r}")


def label_names_of_parser(parser) -> list[str]:
    """A loaded dependency parser's labels, SuPar's specials (``<bos>``) left out."""
    if hasattr(parser, "special_labels"):
        return [name for name, special in zip(parser.label_names, parser.special_labels.tolist()) if not special]
    return list(parser.label_names)


def dependency_labels(label_names: list[str], model: str) -> str:
    """The scheme of a model's labels; :class:`fairseq_syntax.parsing.labels.UnknownLabelScheme` naming the model."""
    from fairseq_syntax.parsing.labels import label_scheme

    return label_scheme(label_names, f"the labels of {model}")


def load_dependency_parser(args: argparse.Namespace, device: str):
    if args.backend == "stanza":
        from fairseq_syntax.parsing.stanza_backend import StanzaDependencyParser

        return StanzaDependencyParser(args.model, args.lang, max_length=args.max_length, device=device)
    from fairseq_syntax.parsing.dependency import DependencyParser

    return DependencyParser(args.model, batch_tokens=args.batch_tokens, max_length=args.max_length, proj=args.proj,
                            device=device)


def common_settings(args: argparse.Namespace) -> dict:
    """What every shard of one output must agree on besides the input."""
    return {"backend": args.backend, "model": model_identity(args.model), "lang": args.lang,
            "tokenize": args.lang if args.raw else None, "batch_tokens": args.batch_tokens,
            "max_length": args.max_length}


def constituency_job(args: argparse.Namespace) -> ParseJob:
    from fairseq_syntax.parsing.constituency import load_parser, tree_writer

    settings = {**common_settings(args), "tagger": model_identity(args.tagger)}

    def load(device: str) -> shards.ParseFunction:
        parser = load_parser(args.backend, args.model, args.max_length, args.tagger, device, args.batch_tokens,
                             lang=args.lang)
        return tree_writer(parser, args.batch_size)

    return ParseJob(args.input, settings["tokenize"], [(args.output, LINES)], args.batch_size, settings, load)


class DependencyJob:
    """The dependency job, and the labels of the parser it loaded (when it loaded one in this process)."""

    def __init__(self, args: argparse.Namespace):
        from fairseq_syntax.parsing.dependency import arcs_job, arcs_writer

        self.label_names: list[str] | None = None
        settings = {**common_settings(args), "arc_floor": args.arc_floor, "label_floor": args.label_floor,
                    "proj": args.proj}

        def load(device: str) -> shards.ParseFunction:
            parser = load_dependency_parser(args, device)
            self.label_names = label_names_of_parser(parser)
            return arcs_writer(parser, args.arc_floor, args.label_floor, args.batch_size)

        self.job = arcs_job(args.input, args.output, args.conllu, settings["tokenize"], args.batch_size, settings,
                            load)
        self.args = args

    def labels(self) -> str:
        """The label scheme of the model: from the labels of the parser loaded here, else of one loaded now."""
        if self.label_names is None:
            self.label_names = label_names_of_parser(load_dependency_parser(self.args, "cpu"))
        return dependency_labels(self.label_names, self.args.model)


__all__ = ["CONSTITUENCY_BACKENDS", "DEPENDENCY_BACKENDS", "DependencyJob", "constituency_job", "fetch"]
