#!/usr/bin/env python3
"""Train the parsers a study file names that are not there yet, offline, from the treebanks beside the repository.

    python3 examples/train_parsers.py --study examples/iwslt15_en_vi/study.toml [--treebanks DIR] [--threads N]

A study never trains a parser (docs/study.md). This script trains each model file its grid needs that is missing:
``parses.constituency`` (``crf-con`` or ``benepar``) with ``parses.tagger`` where a system reads a tree form, and
``parses.dependency`` (``biaffine``) where one reads dependency side data, each with
``preprocess/train_parser.py`` and ``preprocess/RESULTS.md``'s settings: crf-con, benepar and the tagger on the
PTB sample (``TREEBANKS/ptb-sample/wsj_0001-0159.mrg.gz``), biaffine on UD English EWT
(``TREEBANKS/ud-ewt/en_ewt-ud-{train,dev}.conllu.gz``), SuPar's published sizes; hours on 2 CPU cores, minutes on
a GPU. A killed command resumes from its last finished epoch. A study of another source language is refused
(naming ``corpus.source``); nothing is trained where the parses come from an archive or the parsers are there.
``--dry-run`` prints the commands."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: SuPar's published encoder and MLP sizes (the parsers of preprocess/RESULTS.md)
SUPAR_SIZE = ["--n-lstm-hidden", "400", "--n-lstm-layers", "3", "--n-mlp", "500"]
PTB_SAMPLE = "ptb-sample/wsj_0001-0159.mrg.gz"
UD_EWT = "ud-ewt/en_ewt-ud-{split}.conllu.gz"


def is_model_file(value: str) -> bool:
    """A parser given as a model file (a path), not a pretrained name its library downloads."""
    return value.endswith((".pt", ".pth")) or "/" in value


def commands(study: str, treebanks: Path, threads: int) -> list[list[str]]:
    """The train_parser.py commands of the study's missing model files (module docstring), in training order."""
    from fairseq_syntax.study.config import load_study
    from fairseq_syntax.study.prepare.needs import grid_needs

    config = load_study(study)
    parses = config.parses
    if parses.archive:
        return []
    needs = grid_needs(config)
    wanted = []
    if needs.trees:
        wanted.append(("constituency", parses.constituency_backend))
        if parses.tagger:
            wanted.append(("tagger", "tagger"))
    if needs.arcs:
        wanted.append(("dependency", parses.dependency_backend))
    found = []
    for key, backend in wanted:
        value = parses[key]
        if not value or not is_model_file(value) or config.resolve(value).exists():
            continue
        if config.corpus.source != "en":
            raise SystemExit(f"error: {config.path}: corpus.source: {config.corpus.source!r}: the treebanks "
                             f"here are English; parses.{key} {value} is not there, and this script trains English "
                             "parsers only")
        if backend not in ("crf-con", "benepar", "tagger", "biaffine"):
            raise SystemExit(f"error: {config.path}: parses.{key}_backend {backend!r}: a {backend} model is not "
                             f"trained here (crf-con, benepar, tagger, biaffine are); give parses.{key} a model")
        model = config.resolve(value)
        if backend == "biaffine":
            data = ["--train", str(treebanks / UD_EWT.format(split="train")),
                    "--dev", str(treebanks / UD_EWT.format(split="dev"))]
        else:
            data = ["--ptb", str(treebanks / PTB_SAMPLE)]
        epochs = {"benepar": ["12"], "tagger": ["18"]}.get(backend, ["60", "--batch-size", "1000", *SUPAR_SIZE])
        found.append([sys.executable, str(REPO / "preprocess" / "train_parser.py"),
                      "dependency" if backend == "biaffine" else backend, *data, "--output", str(model),
                      "--work-dir", str(model.parent / "work" / model.stem), "--epochs", *epochs,
                      "--threads", str(threads)])
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 examples/train_parsers.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", required=True, help="the study file whose parsers to train where missing")
    parser.add_argument("--treebanks", default=str(REPO.parent / "shared" / "data"),
                        help="the folder of the treebanks (default: ../shared/data beside the repository; its "
                             "SOURCES.md)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each training (default 1)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, train nothing")
    args = parser.parse_args(argv)
    from fairseq_syntax.study.config import ConfigError

    try:
        found = commands(args.study, Path(args.treebanks), args.threads)
    except ConfigError as error:
        for problem in error.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    if not found:
        print(f"{args.study}: every parser it needs is there (or comes from its archive or its library)")
        return 0
    missing = sorted({word for command in found for word in command
                      if word.startswith(args.treebanks) and word.endswith(".gz") and not os.path.isfile(word)})
    if missing and not args.dry_run:
        print(f"error: --treebanks {args.treebanks}: no {', '.join(missing)} (../shared/data/SOURCES.md lists them)",
              file=sys.stderr)
        return 1
    for command in found:
        print("== train a parser: " + " ".join(command[1:]), flush=True)
        if not args.dry_run and subprocess.run(command, cwd=REPO).returncode != 0:
            print(f"error: training {command[command.index('--output') + 1]} failed (the error above)",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
