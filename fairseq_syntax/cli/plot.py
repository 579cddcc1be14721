"""``fairseq-syntax-plot``: figures (PNG) and tables of what a trained syntax model attends to, one subcommand per
analysis: the methods' :class:`~fairseq_syntax.core.method.PlotCommand` s (their ``analysis`` modules; ``--help``
names each with its paper), and ``seeds``, the figure of a results table over seeds
(:mod:`fairseq_syntax.evaluation.seeds_figure`)."""
import argparse
import logging
import sys

from fairseq_syntax.evaluation.seeds_figure import plot_seeds
from fairseq_syntax.methods import plots


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairseq-syntax-plot", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    seeds = commands.add_parser("seeds", help="a seeds table's metric per system: each seed a point, mean +- sd, "
                                              "each method's control beside it")
    seeds.add_argument("results_json", help="RESULTS.json of fairseq-syntax-results")
    seeds.add_argument("output", help="the PNG to write")
    seeds.add_argument("--dataset", help="whose table (default: the first of several seeds)")
    seeds.add_argument("--metric", default="BLEU", help="BLEU (default) or chrF")
    seeds.set_defaults(run=lambda args: plot_seeds(args.results_json, args.output, args.dataset, args.metric))
    for method, plot in plots():
        command = commands.add_parser(plot.name, help=f"{plot.help} ({method.citation})")
        plot.add_arguments(command)
        command.set_defaults(run=plot.run)
    return parser


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", level=logging.INFO)
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    args = get_parser().parse_args(argv)
    args.run(args)


def cli_main() -> None:
    try:
        main(sys.argv[1:])
    except (OSError, ValueError) as error:  # a missing or unreadable input: its message, not a traceback
        sys.exit(f"fairseq-syntax-plot: error: {error}")


if __name__ == "__main__":
    cli_main()
