#!/usr/bin/env python3
"""Parse sentences (one per line) into PTB-bracketed constituency trees (one per line).

Thin command line over ``fairseq_syntax.parsing.constituency`` (see its docstring for the output contract).
Sentences the parser cannot handle get a flat ``(S (XX w1) ...)`` tree; their line numbers and reasons are
printed and written to ``OUTPUT.skipped``. With ``--tagger``, a POS tagger's tags replace the parser's preterminal
labels (SuPar's crf-con writes ``XX``), fallback trees included.

  python3 preprocess/parse_constituency.py --backend benepar --model MODELS/benepar-ptb.pt \\
      --input train.tok.en --output train.tree

A large corpus: ``--workers W`` parses it in W local processes, resumably; ``--num-shards N --shard-id K`` one
shard of it (a cluster task), ``--num-shards N --merge`` the whole output from the shards; ``--device cuda`` on a
GPU (``fairseq_syntax.parsing.shards``; docs/parsers.md, "A large corpus").
"""
import argparse

import torch

from fairseq_syntax.parsing import shards
from fairseq_syntax.parsing.batching import DEFAULT_BATCH_TOKENS
from fairseq_syntax.parsing.constituency import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_LENGTH,
    load_parser,
    tree_writer,
)
from fairseq_syntax.parsing.shards import LINES, ParseJob, model_identity


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
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE,
                        help="sentences read and parsed together (the chunks shards are cut in)")
    parser.add_argument("--batch-tokens", type=int, default=DEFAULT_BATCH_TOKENS,
                        help="padded words per network batch (parser and tagger): larger on a GPU")
    parser.add_argument("--max-length", type=int, default=DEFAULT_MAX_LENGTH,
                        help="longer sentences get the flat fallback tree")
    parser.add_argument("--skipped", help="where to list fallback lines (default: OUTPUT.skipped)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (each worker has one)")
    shards.add_arguments(parser)
    return parser


def main(argv=None) -> shards.ParseRun:
    parser = get_parser()
    args = parser.parse_args(argv)
    shards.check_arguments(parser, args)
    torch.set_num_threads(args.threads)
    settings = {"backend": args.backend, "model": model_identity(args.model), "tagger": model_identity(args.tagger),
                "tokenize": args.tokenize, "batch_tokens": args.batch_tokens, "max_length": args.max_length}

    def load(device: str) -> shards.ParseFunction:
        parser = load_parser(args.backend, args.model, args.max_length, args.tagger, device, args.batch_tokens)
        return tree_writer(parser, args.batch_size)

    job = ParseJob(args.input, args.tokenize, [(args.output, LINES)], args.batch_size, settings, load)
    result = shards.run(job, args, shards.rerun_command(__file__, argv))
    shards.report_run(result, args, args.output, args.skipped or args.output + ".skipped")
    return result


if __name__ == "__main__":
    main()
