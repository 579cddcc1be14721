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
total. The best epoch on dev is the model; its score on the held-out data, its parsing speed and the training time
over every sitting go into a run record (--record).
"""
import argparse
import dataclasses
import os
import sys

import torch

from fairseq_syntax.parsing import training
from fairseq_syntax.parsing import training_report as report
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

    for name, help_text in (("crf-con", "SuPar CRF constituency parser"), ("benepar", "benepar ChartParser")):
        constituency = commands.add_parser(name, help=f"{help_text} on a PTB .mrg file")
        constituency.add_argument("--ptb", required=True, help="Penn Treebank .mrg (plain or .gz), several trees")
        constituency.add_argument("--heldout", type=float, default=0.1, help="last part kept for evaluation")
        constituency.add_argument("--dev-fraction", type=float, default=0.1,
                                  help="part of the rest (its end) used for model selection")
        _add_size_options(constituency, training.SuparSize if name == "crf-con" else training.BeneparSize)

    tagger = commands.add_parser("tagger", help="BiLSTM POS tagger (fairseq_syntax.parsing.tagger) on a PTB .mrg file")
    tagger.add_argument("--ptb", required=True, help="Penn Treebank .mrg (plain or .gz): split as for crf-con")
    tagger.add_argument("--heldout", type=float, default=0.1, help="last part kept for evaluation")
    tagger.add_argument("--dev-fraction", type=float, default=0.1, help="part of the rest used for model selection")
    tagger.add_argument("--extra-conllu", nargs="*", default=[],
                        help="more training words with their XPOS (e.g. UD EWT train); sentences with a tag the "
                             "treebank does not use are skipped and counted")
    _add_size_options(tagger, TaggerSize)

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
        command.add_argument("--record", help="run record to write (default: preprocess/runs/NAME.json for "
                                              "--output NAME.pt), tabulated by preprocess/make_results.py")
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


def record_path(output: str) -> str:
    """preprocess/runs/NAME.json for the model file NAME.pt: the run record make_results.py tabulates."""
    name = os.path.splitext(os.path.basename(output))[0]
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs", f"{name}.json")


def main(argv=None) -> None:
    args = get_parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
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
    path = args.record or record_path(args.output)
    report.write_record(path, record)
    print(f"{args.output}: {state.epochs} epochs ({state.minutes:.1f} min, best epoch {state.best_epoch}); "
          f"{measured.summary()}; record {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
