#!/usr/bin/env python3
"""Parse sentences (one per line) into PTB-bracketed constituency trees (one per line).

Thin command line over ``fairseq_syntax.parsing.constituency`` (see its docstring for the output contract).
Sentences the parser cannot handle get a flat ``(S (XX w1) ...)`` tree; their line numbers and reasons are
printed and written to ``OUTPUT.skipped``. With ``--tagger``, a POS tagger's tags replace the parser's preterminal
labels (SuPar's crf-con writes ``XX``), fallback trees included.

  python3 preprocess/parse_constituency.py --backend benepar --model MODELS/benepar-ptb.pt \\
      --input train.tok.en --output train.tree
"""
import argparse
import sys

import torch

from fairseq_syntax.parsing.constituency import (
    DEFAULT_MAX_LENGTH,
    load_parser,
    parse_file,
)


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["benepar", "crf-con"], required=True)
    parser.add_argument("--model", required=True,
                        help="model name (benepar: benepar_en3; crf-con: a SuPar name such as crf-con-en), "
                             "downloaded where the network allows, or a local model path")
    parser.add_argument("--input", required=True, help="one sentence per line (plain or .gz)")
    parser.add_argument("--output", required=True, help="one bracketed tree per line")
    parser.add_argument("--tagger", help="POS tagger model (preprocess/train_parser.py tagger) whose tags label the "
                                         "preterminals: crf-con predicts none (it writes XX)")
    parser.add_argument("--tokenize", metavar="LANG",
                        help="the input is raw text: tokenize it with sacremoses (-l LANG -a, no escaping); "
                             "by default lines are already tokenized (split on whitespace)")
    parser.add_argument("--batch-size", type=int, default=256, help="sentences per parser call")
    parser.add_argument("--max-length", type=int, default=DEFAULT_MAX_LENGTH,
                        help="longer sentences get the flat fallback tree")
    parser.add_argument("--skipped", help="where to list fallback lines (default: OUTPUT.skipped)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    return parser


def main(argv=None) -> None:
    args = get_parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    parser = load_parser(args.backend, args.model, args.max_length, tagger=args.tagger)
    report = parse_file(parser, args.input, args.output, args.tokenize, args.batch_size)
    skipped = args.skipped or args.output + ".skipped"
    report.write_skipped(skipped)
    print(f"{args.output}: {report.summary()}; fallbacks listed in {skipped}", file=sys.stderr)


if __name__ == "__main__":
    main()
