"""fairseq-syntax-parse: parse a corpus's source side, one sentence a line, with any parser, in any language
(docs/parsers.md: the backends, their pretrained names by language, ``fetch`` and the record beside each output).

Line i of every output belongs to input line i; a sentence the parser cannot handle gets a flat fallback, listed in
``OUTPUT.skipped``. ``--workers``, ``--num-shards``, ``--shard-id``, ``--merge``, ``--device``:
:mod:`fairseq_syntax.parsing.shards`; ``OUTPUT.parse.json``: :mod:`fairseq_syntax.parsing.parse_records`."""
from __future__ import annotations

import argparse
import contextlib
import sys

import torch

from fairseq_syntax.core.stopping import stopping_cleanly
from fairseq_syntax.parsing import shards
from fairseq_syntax.parsing.backends import DependencyJob, constituency_job, fetch
from fairseq_syntax.parsing.batching import DEFAULT_BATCH_TOKENS
from fairseq_syntax.parsing.constituency import DEFAULT_BATCH_SIZE as TREE_BATCH_SIZE
from fairseq_syntax.parsing.constituency import DEFAULT_MAX_LENGTH
from fairseq_syntax.parsing.dependency import (
    DEFAULT_ARC_FLOOR,
    DEFAULT_LABEL_FLOOR,
    RetainedMass,
)
from fairseq_syntax.parsing.dependency import DEFAULT_BATCH_SIZE as ARCS_BATCH_SIZE
from fairseq_syntax.parsing.dependency import DEFAULT_BATCH_TOKENS as ARCS_BATCH_TOKENS
from fairseq_syntax.parsing.labels import UnknownLabelScheme
from fairseq_syntax.parsing.models import CONSTITUENCY_BACKENDS, DEPENDENCY_BACKENDS, ModelUnavailable
from fairseq_syntax.parsing.parse_records import record_path, write_record
from fairseq_syntax.parsing.text import output_problem

MODEL_HELP = ("a local model file or folder, or a pretrained model's name, handed to the backend's library and "
              "downloaded once where the network allows (docs/parsers.md has a table by language)")


def _common(parser: argparse.ArgumentParser, batch_size: int, batch_tokens: int) -> None:
    parser.add_argument("--model", required=True, help=MODEL_HELP)
    parser.add_argument("--input", required=True, help="one sentence per line (plain or .gz)")
    parser.add_argument("--lang", default="en", help="the input's language: its tokenizer with --raw, and the "
                                                     "language of a stanza model (default en)")
    parser.add_argument("--raw", action="store_true",
                        help="the input is raw text: tokenize each line for --lang (sacremoses -l LANG -a, no "
                             "escaping; stanza's tokenizer for a language Moses does not know); by default lines "
                             "are already tokenized (split on whitespace)")
    parser.add_argument("--batch-size", type=int, default=batch_size,
                        help="sentences read and parsed together (the chunks shards are cut in)")
    parser.add_argument("--batch-tokens", type=int, default=batch_tokens,
                        help="padded words per network batch: larger on a GPU")
    parser.add_argument("--max-length", type=int, default=DEFAULT_MAX_LENGTH,
                        help="longer sentences get the flat fallback")
    parser.add_argument("--skipped", help="where to list fallback lines (default: OUTPUT.skipped)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (each worker has one)")
    shards.add_arguments(parser)


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairseq-syntax-parse", description=__doc__.split("\n\n")[0])
    kinds = parser.add_subparsers(dest="kind", required=True)
    trees = kinds.add_parser("constituency", help="one PTB-bracketed tree a line")
    trees.add_argument("--backend", choices=CONSTITUENCY_BACKENDS, required=True)
    trees.add_argument("--output", required=True, help="one bracketed tree per line")
    trees.add_argument("--tagger", help="POS tagger model (preprocess/train_parser.py tagger) whose tags label the "
                                        "preterminals: crf-con predicts none (it writes XX)")
    _common(trees, TREE_BATCH_SIZE, DEFAULT_BATCH_TOKENS)
    arcs = kinds.add_parser("dependency", help="labeled arc distributions (JSON lines) and 1-best trees (CoNLL-U)")
    arcs.add_argument("--backend", choices=DEPENDENCY_BACKENDS, required=True)
    arcs.add_argument("--output", required=True,
                      help="sparse arc distributions, one JSON line each (gzipped if it ends in .gz)")
    arcs.add_argument("--conllu", help="also the 1-best labeled trees in CoNLL-U (gzipped if .gz)")
    arcs.add_argument("--arc-floor", type=float, default=DEFAULT_ARC_FLOOR,
                      help="keep (dependent, head) pairs with P(head | dependent) >= this")
    arcs.add_argument("--label-floor", type=float, default=DEFAULT_LABEL_FLOOR,
                      help="keep labels with P(label | dependent, head) >= this")
    arcs.add_argument("--proj", action="store_true", help="biaffine: 1-best tree projective (Eisner), not MST")
    _common(arcs, ARCS_BATCH_SIZE, ARCS_BATCH_TOKENS)
    only = kinds.add_parser("fetch", help="download a model name now (nothing for a local model), or say in one "
                                          "line why it cannot")
    only.add_argument("--kind", dest="parser_kind", choices=["constituency", "dependency"], required=True)
    only.add_argument("--backend", choices=sorted(set(CONSTITUENCY_BACKENDS + DEPENDENCY_BACKENDS)), required=True)
    only.add_argument("--model", required=True, help=MODEL_HELP)
    only.add_argument("--tagger", help="a tagger file, checked to be there")
    only.add_argument("--lang", default="en", help="the language of a stanza model")
    return parser


def _run(args: argparse.Namespace, argv: list[str] | None) -> shards.ParseRun:
    if not args.merge and args.workers > 1:  # a name fails here, in one line, before any worker starts
        fetch(args.kind, args.backend, args.model, args.lang, getattr(args, "tagger", None))
    job = DependencyJob(args) if args.kind == "dependency" else None
    result = shards.run(job.job if job else constituency_job(args), args, shards.rerun_command(__file__, argv))
    shards.report_run(result, args, args.output, args.skipped or args.output + ".skipped")
    if result.whole and job is None:
        write_record([args.output], "constituency", args.backend, {"constituency": args.model, "tagger": args.tagger},
                     None, args.input, args.lang, args.raw)
    elif result.whole:
        print(f"{args.output}: {RetainedMass(**result.stats)} (floors: arc {args.arc_floor:g}, label "
              f"{args.label_floor:g})", file=sys.stderr)
        try:
            labels = job.labels()
        except UnknownLabelScheme as error:
            labels = None
            print(f"{args.output}: label scheme not recorded: {error}", file=sys.stderr)
        outputs = [args.output] + ([args.conllu] if args.conllu else [])
        write_record(outputs, "dependency", args.backend, {"dependency": args.model}, labels, args.input, args.lang,
                     args.raw)
        if labels:
            print(f"{args.output}: {labels} dependency labels (fairseq-syntax-preprocess-dependencies --labels "
                  f"{labels})", file=sys.stderr)
    return result


def check_outputs(args: argparse.Namespace) -> None:
    """One line (``SystemExit``) for an output that cannot be written (a folder, or in a missing folder), the files
    beside ``--output`` included, before any model is loaded."""
    outputs = [("--output", args.output), ("--conllu", getattr(args, "conllu", None)), ("--skipped", args.skipped),
               (None, args.output + ".skipped" if args.skipped is None else None), (None, record_path(args.output))]
    for option, path in outputs:
        problem = path is not None and output_problem(path)
        if problem:
            raise SystemExit(f"error: {option} {path}: {problem}" if option else
                             f"error: {path} (written beside --output): {problem}")


def main(argv: list[str] | None = None) -> shards.ParseRun | None:
    """The command. SIGTERM and Ctrl-C stop it in one line with what it was writing removed (finished shards are
    kept)."""
    parser = get_parser()
    args = parser.parse_args(argv)
    worker = getattr(args, "parent_pid", None) is not None
    try:
        with contextlib.nullcontext() if worker else stopping_cleanly("fairseq-syntax-parse"):
            if args.kind == "fetch":
                fetch(args.parser_kind, args.backend, args.model, args.lang, args.tagger)
                return None
            shards.check_arguments(parser, args)
            check_outputs(args)
            torch.set_num_threads(args.threads)
            return _run(args, argv)
    except ModelUnavailable as error:
        sys.exit(f"error: {error}")


def script_main(head: list[str], argv: list[str] | None = None, renamed: dict | None = None):
    """``preprocess/parse_*.py``: :func:`main` with ``head`` and ``argv`` (default: ``sys.argv``), in which
    ``--tokenize LANG`` is ``--raw --lang LANG`` and each option of ``renamed`` its new name."""
    translated, words = list(head), iter(sys.argv[1:] if argv is None else argv)
    for word in words:
        option, equals, value = word.partition("=")
        if option == "--tokenize":
            translated += ["--raw", "--lang", value if equals else next(words, "")]
        else:
            translated.append((renamed or {}).get(option, option) + equals + value)
    return main(translated)


def cli_main() -> None:
    main()


if __name__ == "__main__":
    cli_main()
