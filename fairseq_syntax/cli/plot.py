"""``fairseq-syntax-plot``: figures of what a trained syntax model attends to (PNG), one subcommand per figure.

* ``ldd-attention``: the 16 label-group heads of a ``transformer_ldd`` model's first encoder layer for one source
  sentence of a data directory (Pu & Sima'an 2022, Figures 5-6); see :mod:`fairseq_syntax.analysis.ldd_attention`.
"""
import argparse
import logging
import sys
from typing import List, Optional

logger = logging.getLogger("fairseq_syntax.plot")


def ldd_attention(args) -> None:
    from fairseq_syntax.analysis.ldd_attention import plot_ldd_attention, sentence_ldd_attention
    from fairseq_syntax.evaluation.model_inputs import load_model

    model, task = load_model(args.path, args.data)
    maps, tokens = sentence_ldd_attention(model, task, args.split, args.index)
    plot_ldd_attention(maps, tokens, args.output, heads=args.heads)
    logger.info(f"wrote {args.output}: LDD-layer attention of {args.split} sentence {args.index}: {' '.join(tokens)}")


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairseq-syntax-plot", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    ldd = commands.add_parser("ldd-attention", help="heads of the LDD layer of a transformer_ldd checkpoint")
    ldd.add_argument("--path", required=True, help="checkpoint (.pt)")
    ldd.add_argument("--data", help="data directory with the ldd side data (default: the one it was trained on)")
    ldd.add_argument("--split", default="test")
    ldd.add_argument("--index", type=int, default=0, help="sentence index in the split (0-based)")
    ldd.add_argument("--heads", type=lambda s: [int(h) - 1 for h in s.split(",")],
                     help="comma-separated heads to draw, 1..16 (default all)")
    ldd.add_argument("--output", required=True, help="PNG file")
    ldd.set_defaults(run=ldd_attention)
    return parser


def main(argv: Optional[List[str]] = None) -> None:
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", level=logging.INFO)
    args = get_parser().parse_args(argv)
    args.run(args)


def cli_main() -> None:
    main(sys.argv[1:])


if __name__ == "__main__":
    cli_main()
