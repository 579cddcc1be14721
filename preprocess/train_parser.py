#!/usr/bin/env python3
"""Train a small parser offline on a local treebank and report its accuracy.

Thin command line over ``fairseq_syntax.parsing.training``:

  dependency  SuPar biaffine dependency parser on CoNLL-U (e.g. UD EWT); reports UAS/LAS on --dev.
  crf-con     SuPar CRF constituency parser on a PTB .mrg file, cleaned and split (the last --heldout part is
              kept for evaluation); reports labeled bracketing F1 on that held-out part.
  benepar     benepar char-LSTM ChartParser, same data and report as crf-con; load it with benepar.Parser(path).

  python3 preprocess/train_parser.py dependency --train en_ewt-ud-train.conllu.gz --dev en_ewt-ud-dev.conllu.gz \\
      --output /work/models/biaffine-dep-ud-ewt.pt --work-dir /work/models/work --epochs 4
"""
import argparse
import dataclasses
import os
import sys
import time

import torch

from fairseq_syntax.parsing import training
from fairseq_syntax.parsing.constituency import load_parser


def _add_size_options(parser: argparse.ArgumentParser, size_class) -> None:
    for field in dataclasses.fields(size_class):
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=int, default=field.default)


def _size(args, size_class):
    return size_class(**{field.name: getattr(args, field.name) for field in dataclasses.fields(size_class)})


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    dependency = commands.add_parser("dependency", help="SuPar biaffine dependency parser on CoNLL-U")
    dependency.add_argument("--train", required=True, help="CoNLL-U (plain or .gz)")
    dependency.add_argument("--dev", required=True, help="CoNLL-U for model selection and the UAS/LAS report")
    _add_size_options(dependency, training.SuparSize)

    for name, help_text in (("crf-con", "SuPar CRF constituency parser"), ("benepar", "benepar ChartParser")):
        constituency = commands.add_parser(name, help=f"{help_text} on a PTB .mrg file")
        constituency.add_argument("--ptb", required=True, help="Penn Treebank .mrg (plain or .gz), several trees")
        constituency.add_argument("--heldout", type=float, default=0.1, help="last part kept for evaluation")
        constituency.add_argument("--dev-fraction", type=float, default=0.1,
                                  help="part of the rest (its end) used for model selection")
        _add_size_options(constituency, training.SuparSize if name == "crf-con" else training.BeneparSize)

    for command in commands.choices.values():
        command.add_argument("--output", required=True, help="model file to write")
        command.add_argument("--work-dir", required=True, help="for decompressed / split data files")
        command.add_argument("--epochs", type=int, required=True)
        command.add_argument("--batch-size", type=int, default=None,
                             help="words per batch for SuPar (default 5000), sentences for benepar (default 32)")
        command.add_argument("--lr", type=float, default=None,
                             help="learning rate (default: SuPar's 2e-3; benepar's 8e-4)")
        command.add_argument("--seed", type=int, default=1)
        command.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    return parser


def main(argv=None) -> None:
    args = get_parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    start = time.perf_counter()
    if args.command == "dependency":
        train = training.plain_copy(args.train, args.work_dir)
        dev = training.plain_copy(args.dev, args.work_dir)
        parser = training.train_supar_dependency(train, dev, args.output, args.epochs, _size(args, training.SuparSize),
                                                 args.batch_size or 5000, args.lr or training.SUPAR_OPTIMIZER["lr"],
                                                 args.seed)
        minutes = (time.perf_counter() - start) / 60
        uas, las = training.evaluate_dependency(parser, dev)
        result = f"UAS {100 * uas:.2f} LAS {100 * las:.2f} on {args.dev} (punctuation excluded, MST decoding)"
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
        minutes = (time.perf_counter() - start) / 60
        score = training.evaluate_constituency(load_parser(args.command, args.output), splits["test"])
        result = f"held-out {splits['test']}: {score}"
    print(f"{args.output}: trained in {minutes:.1f} min ({args.epochs} epochs); {result}", file=sys.stderr)


if __name__ == "__main__":
    main()
