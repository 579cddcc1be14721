#!/usr/bin/env python3
"""Parse sentences (one per line) with a SuPar biaffine dependency parser into labeled arc distributions.

Thin command line over ``fairseq_syntax.parsing.dependency`` (its docstring documents the formats). Writes
``--arcs`` (one JSON object per input line: the sparse P(head | dependent) and P(label | dependent, head))
and ``--conllu`` (the parser's 1-best labeled tree), prints the retained probability mass, and lists the
sentences that got the flat fallback structure in ``ARCS.skipped``.

  python3 preprocess/parse_dependency.py --model MODELS/biaffine-dep-ud-ewt.pt \\
      --input train.tok.en --arcs train.arcs.jsonl --conllu train.conllu

A large corpus: ``--workers W`` parses it in W local processes, resumably; ``--num-shards N --shard-id K`` one
shard of it (a cluster task), ``--num-shards N --merge`` the whole output from the shards; ``--device cuda`` on a
GPU (``fairseq_syntax.parsing.shards``; docs/parsers.md, "A large corpus").
"""
import argparse
import sys

import torch

from fairseq_syntax.parsing import shards
from fairseq_syntax.parsing.dependency import (
    DEFAULT_ARC_FLOOR,
    DEFAULT_BATCH_SIZE,
    DEFAULT_BATCH_TOKENS,
    DEFAULT_LABEL_FLOOR,
    DEFAULT_MAX_LENGTH,
    DependencyParser,
    RetainedMass,
    arcs_job,
    arcs_writer,
)
from fairseq_syntax.parsing.shards import model_identity


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True,
                        help="SuPar model name (e.g. biaffine-dep-en, downloaded where the network allows) "
                             "or local path")
    parser.add_argument("--input", required=True, help="one sentence per line (plain or .gz)")
    parser.add_argument("--arcs", required=True,
                        help="output: sparse arc distributions, one JSON line each (gzipped if it ends in .gz)")
    parser.add_argument("--conllu", required=True, help="output: the 1-best labeled trees (gzipped if .gz)")
    parser.add_argument("--tokenize", metavar="LANG",
                        help="the input is raw text: tokenize it with sacremoses (-l LANG -a, no escaping); "
                             "by default lines are already tokenized (split on whitespace)")
    parser.add_argument("--arc-floor", type=float, default=DEFAULT_ARC_FLOOR,
                        help="keep (dependent, head) pairs with P(head | dependent) >= this")
    parser.add_argument("--label-floor", type=float, default=DEFAULT_LABEL_FLOOR,
                        help="keep labels with P(label | dependent, head) >= this")
    parser.add_argument("--proj", action="store_true", help="1-best tree projective (Eisner) instead of MST")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE,
                        help="sentences read and bucketed by length together (the chunks shards are cut in)")
    parser.add_argument("--batch-tokens", type=int, default=DEFAULT_BATCH_TOKENS,
                        help="words per network batch: larger on a GPU")
    parser.add_argument("--max-length", type=int, default=DEFAULT_MAX_LENGTH,
                        help="longer sentences get the flat fallback structure")
    parser.add_argument("--skipped", help="where to list fallback lines (default: ARCS.skipped)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (each worker has one)")
    shards.add_arguments(parser)
    return parser


def main(argv=None) -> shards.ParseRun:
    parser = get_parser()
    args = parser.parse_args(argv)
    shards.check_arguments(parser, args)
    torch.set_num_threads(args.threads)
    settings = {"model": model_identity(args.model), "tokenize": args.tokenize, "arc_floor": args.arc_floor,
                "label_floor": args.label_floor, "proj": args.proj, "batch_tokens": args.batch_tokens,
                "max_length": args.max_length}

    def load(device: str) -> shards.ParseFunction:
        parser = DependencyParser(args.model, batch_tokens=args.batch_tokens, max_length=args.max_length,
                                  proj=args.proj, device=device)
        return arcs_writer(parser, args.arc_floor, args.label_floor, args.batch_size)

    job = arcs_job(args.input, args.arcs, args.conllu, args.tokenize, args.batch_size, settings, load)
    result = shards.run(job, args, shards.rerun_command(__file__, argv))
    shards.report_run(result, args, args.arcs, args.skipped or args.arcs + ".skipped")
    print(f"{args.arcs}: {RetainedMass(**result.stats)} (floors: arc {args.arc_floor:g}, label "
          f"{args.label_floor:g})", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
