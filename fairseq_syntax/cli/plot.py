"""``fairseq-syntax-plot``: figures (PNG) and tables of what a trained syntax model attends to, one subcommand per
analysis. The subcommands are the methods' :class:`~fairseq_syntax.core.method.PlotCommand` s (their
``analysis`` modules), e.g. ``mask-strengths`` (McDonald & Chiang 2021), ``ldd-attention`` (Pu & Sima'an 2022),
``constituent-prior`` (Wang, Lee & Chen 2019), ``cross-attention-share`` (Nguyen et al. 2020).
"""
import argparse
import logging
import sys
from typing import List, Optional

from fairseq_syntax.methods import METHODS


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairseq-syntax-plot", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for method in METHODS:
        for plot in method.plots:
            command = commands.add_parser(plot.name, help=f"{plot.help} ({method.citation})")
            plot.add_arguments(command)
            command.set_defaults(run=plot.run)
    return parser


def main(argv: Optional[List[str]] = None) -> None:
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", level=logging.INFO)
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    args = get_parser().parse_args(argv)
    args.run(args)


def cli_main() -> None:
    main(sys.argv[1:])


if __name__ == "__main__":
    cli_main()
