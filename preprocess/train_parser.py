#!/usr/bin/env python3
"""Train a small parser offline on a local treebank and report its accuracy.

Thin command line over ``fairseq_syntax.parsing.training``:

  dependency  SuPar biaffine dependency parser on CoNLL-U (e.g. UD EWT); reports UAS/LAS on --dev.
  crf-con     SuPar CRF constituency parser on a PTB .mrg file, cleaned and split (the last --heldout part is
              kept for evaluation); reports labeled bracketing F1 on that held-out part.
  benepar     benepar char-LSTM ChartParser, same data and report as crf-con; load it with benepar.Parser(path).

  python3 preprocess/train_parser.py dependency --train en_ewt-ud-train.conllu.gz --dev en_ewt-ud-dev.conllu.gz \\
      --output MODELS/biaffine-dep-ud-ewt.pt --work-dir MODELS/work --epochs 4

Run again with the same --output, it resumes after the last finished epoch (OUTPUT.checkpoint): --epochs is the
total. The best epoch on dev is the model; --record PATH writes its run record (held-out score, parsing speed,
training time), which preprocess/make_results.py tabulates from preprocess/runs/. The options are checked before
anything is read or written, each in one line.
"""
import argparse
import dataclasses
import os
import sys

import torch

from fairseq_syntax.parsing import training
from fairseq_syntax.parsing import training_report as report
from fairseq_syntax.parsing.models import ModelUnavailable
from fairseq_syntax.parsing.tagger import TaggerSize, sentences_from_conllu, sentences_from_trees, train_tagger


def _add_size_options(parser: argparse.ArgumentParser, size_class) -> None:
    for field in dataclasses.fields(size_class):
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=type(field.default), default=field.default)


def _size(args, size_class):
    return size_class(**{field.name: getattr(args, field.name) for field in dataclasses.fields(size_class)})


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    dependency = commands.add_parser("dependency", help="SuPar biaffine dependency parser on CoNLL-U")
    dependency.add_argument("--train", required=True, help="CoNLL-U (plain or .gz)")
    dependency.add_argument("--dev", required=True, help="CoNLL-U for model selection and the UAS/LAS report")
    dependency.add_argument("--test", help="CoNLL-U neither trained on nor selected by (e.g. another treebank of the "
                            "language): its UAS/LAS recorded beside dev's")
    _add_size_options(dependency, training.SuparSize)

    for name, help_text, size in (("crf-con", "SuPar CRF constituency parser", training.SuparSize),
                                  ("benepar", "benepar ChartParser", training.BeneparSize),
                                  ("tagger", "BiLSTM POS tagger (fairseq_syntax.parsing.tagger)", TaggerSize)):
        treebank = commands.add_parser(name, help=f"{help_text} on a PTB .mrg file")
        treebank.add_argument("--ptb", required=True, help="Penn Treebank .mrg (plain or .gz), several trees")
        treebank.add_argument("--heldout", type=float, default=0.1, help="last part kept for evaluation")
        treebank.add_argument("--dev-fraction", type=float, default=0.1,
                              help="part of the rest (its end) used for model selection")
        _add_size_options(treebank, size)
    treebank.add_argument("--extra-conllu", nargs="*", default=[],
                          help="more training words with their XPOS (e.g. UD EWT train); sentences with a tag the "
                               "treebank does not use are skipped and counted")

    for command in commands.choices.values():
        command.add_argument("--output", required=True, help="model file to write")
        command.add_argument("--work-dir", required=True, help="for decompressed / split data files")
        command.add_argument("--epochs", type=int, required=True)
        command.add_argument("--batch-size", type=int, default=None,
                             help="words per batch for SuPar (default 5000), sentences for benepar and the tagger "
                                  "(default 32)")
        command.add_argument("--lr", type=float, default=None,
                             help="learning rate (default: SuPar's 2e-3, as for the tagger; benepar's 8e-4)")
        command.add_argument("--seed", type=int, default=1)
        command.add_argument("--threads", type=int, default=1, help="torch CPU threads")
        command.add_argument("--record", help="write the run record here (none by default); "
                                              "preprocess/make_results.py tabulates those in preprocess/runs/")
        command.add_argument("--note", help="what the model is for, kept in the record and shown under the "
                                            "parsers table (e.g. trained only to measure a parser's speed)")
    return parser


def extra_training_sentences(paths: list, tagset: set) -> list:
    """The words and XPOS of CoNLL-U files, less the sentences with a tag outside ``tagset`` (UD EWT's ADD, NFP,
    GW, ... are not PTB tags), whose count is printed."""
    kept = []
    for path in paths:
        sentences = sentences_from_conllu(path)
        usable = [sentence for sentence in sentences if tagset.issuperset(sentence.tags)]
        print(f"{path}: {len(usable)} of {len(sentences)} sentences added to the training data; "
              f"{len(sentences) - len(usable)} skipped (a tag the treebank does not use)", file=sys.stderr)
        kept += usable
    return kept


def _fraction(option: str, value: float, meaning: str) -> str | None:
    if 0 < value < 1:
        return None
    return f"{option} {value:g}: a fraction in (0, 1) is meant ({meaning})"


def _writable(option: str, path: str | None) -> str | None:
    """Why ``path`` (a file to write; its folder is made) cannot be written."""
    if path is None:
        return None
    if os.path.isdir(path):
        return f"{option} {path}: a folder, not a file: give a file's path"
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        return f"{option} {path}: {folder} is a file, not a folder"
    return None


def option_problems(args) -> list:
    """Every option that cannot work, one line each."""
    problems = []
    if args.epochs < 1:
        problems.append(f"--epochs {args.epochs}: train at least 1 epoch (--epochs is the total, over every sitting)")
    if hasattr(args, "heldout"):
        problems.append(_fraction("--heldout", args.heldout, "0.1 keeps the last tenth of the trees for evaluation"))
        problems.append(_fraction("--dev-fraction", args.dev_fraction,
                                  "0.1 selects the epoch on the last tenth of the rest"))
    for option, value in (("--batch-size", args.batch_size), ("--threads", args.threads)):
        if value is not None and value < 1:
            problems.append(f"{option} {value}: at least 1")
    if args.lr is not None and not args.lr > 0:
        problems.append(f"--lr {args.lr:g}: a learning rate above 0")
    files = [("--train", getattr(args, "train", None)), ("--dev", getattr(args, "dev", None)),
             ("--test", getattr(args, "test", None)), ("--ptb", getattr(args, "ptb", None)),
             *(("--extra-conllu", path) for path in getattr(args, "extra_conllu", []))]
    for option, path in files:
        if path is not None and not os.path.isfile(path):
            problems.append(f"{option} {path}: " + ("a folder, not a file" if os.path.isdir(path) else "no such file"))
    problems.append(_writable("--output", args.output))
    problems.append(_writable("--record", args.record))
    if os.path.exists(args.work_dir) and not os.path.isdir(args.work_dir):
        problems.append(f"--work-dir {args.work_dir}: a file, not a folder")
    return [problem for problem in problems if problem]


def main(argv=None) -> None:
    args = get_parser().parse_args(argv)
    problems = option_problems(args)
    if problems:
        raise SystemExit("\n".join(f"error: {problem}" for problem in problems))
    torch.set_num_threads(args.threads)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    try:
        train(args)
    except ModelUnavailable as error:  # a checkpoint to resume from that does not load
        raise SystemExit(f"error: {error}") from None


def train(args) -> None:
    if args.command == "dependency":
        train = training.plain_copy(args.train, args.work_dir)
        dev = training.plain_copy(args.dev, args.work_dir)
        training.train_supar_dependency(train, dev, args.output, args.epochs, _size(args, training.SuparSize),
                                        args.batch_size or 5000, args.lr or training.SUPAR_OPTIMIZER["lr"], args.seed)
        measured = report.measure_dependency(args.output, dev)
        data, split = os.path.basename(args.train), os.path.basename(args.dev)
        if args.test:
            tested = report.measure_dependency(args.output, training.plain_copy(args.test, args.work_dir))
    elif args.command == "tagger":
        splits = training.prepare_ptb(args.ptb, args.work_dir, args.heldout, args.dev_fraction)
        train, dev = (sentences_from_trees(training.read_bracketed(splits[split])) for split in ("train", "dev"))
        train += extra_training_sentences(args.extra_conllu, {tag for sentence in train for tag in sentence.tags})
        train_tagger(train, dev, args.output, args.epochs, _size(args, TaggerSize), args.batch_size or 32,
                     args.lr or 2e-3, seed=args.seed)
        measured = report.measure_tagger(args.output, splits["test"])
        data = " + ".join([os.path.basename(args.ptb), *map(os.path.basename, args.extra_conllu)])
        split = f"held-out last {100 * args.heldout:g}% of {os.path.basename(args.ptb)}"
    else:
        splits = training.prepare_ptb(args.ptb, args.work_dir, args.heldout, args.dev_fraction)
        if args.command == "crf-con":
            training.train_supar_constituency(splits["train"], splits["dev"], args.output, args.epochs,
                                              _size(args, training.SuparSize), args.batch_size or 5000,
                                              args.lr or training.SUPAR_OPTIMIZER["lr"], args.seed)
        else:
            training.train_benepar(splits["train"], splits["dev"], args.output, args.epochs,
                                   _size(args, training.BeneparSize), args.batch_size or 32,
                                   args.lr or training.BENEPAR_LEARNING_RATE, seed=args.seed)
        measured = report.measure_constituency(args.command, args.output, splits["test"])
        data, split = os.path.basename(args.ptb), f"held-out last {100 * args.heldout:g}%"
    state = training.TrainingState.of(args.output)
    record = report.training_record(args.command, args.output, data, split, measured, state, sys.argv)
    if args.note:
        record["note"] = args.note
    if getattr(args, "test", None):
        record["test"] = {"split": os.path.basename(args.test), "scores": tested.scores,
                          "evaluated_sentences": tested.sentences,
                          "sentences_per_second": tested.sentences_per_second}
    if args.record:
        report.write_record(args.record, record)
    print(f"{args.output}: {state.epochs} epochs ({state.minutes:.1f} min, best epoch {state.best_epoch}); "
          f"{measured.summary()}" + (f"; record {args.record}" if args.record else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
