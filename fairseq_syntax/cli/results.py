"""fairseq-syntax-results: render run records (*.run.json) into a Markdown results table (and RESULTS.json).

A directory gives every *.run.json below it (records of ``fairseq-syntax-score --record``), listed by its path
relative to the working directory; seeds are tested as the options say
(:class:`~fairseq_syntax.evaluation.comparisons.Comparisons`)."""
import argparse
import re
import sys
from typing import List, Optional

from fairseq_syntax.core.control_kinds import CONTROLS
from fairseq_syntax.evaluation.comparisons import registry_comparisons
from fairseq_syntax.evaluation.packed_runs import PackedRunsError
from fairseq_syntax.evaluation.kept_files import RecordError
from fairseq_syntax.evaluation.records import find_record_files, load_record
from fairseq_syntax.evaluation.results import displayed_path, format_wall_time, render_json, render_markdown
from fairseq_syntax.evaluation.tables import write_results

_CONTROL = re.compile(r"(?P<control>[^=:\s]+)=(?P<system>[^=:\s]+):(?P<kind>[^=:\s]+)")
_PLAN = re.compile(r"(?P<system>[^=\s]+)=(?P<seeds>\d+)")


def _control(text: str) -> tuple[str, tuple[str, str]]:
    found = _CONTROL.fullmatch(text)
    if not found:
        raise argparse.ArgumentTypeError(f"{text!r}: expected CONTROL=SYSTEM:KIND, e.g. mask_random=mask:random")
    if found["kind"] not in CONTROLS:
        raise argparse.ArgumentTypeError(f"{text!r}: kind {found['kind']!r} is not one of {', '.join(CONTROLS)}")
    return found["control"], (found["system"], found["kind"])


def _plan(text: str) -> tuple[str, int]:
    found = _PLAN.fullmatch(text)
    if not found or int(found["seeds"]) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected SYSTEM=SEEDS with SEEDS a positive number, e.g. "
                                         "sequence=5")
    return found["system"], int(found["seeds"])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairseq-syntax-results", description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", metavar="RUN_DIR_OR_JSON", help="run record files or directories")
    parser.add_argument("--out", help="write the Markdown here, and RESULTS.json beside it (default: the Markdown "
                        "to standard output)")
    parser.add_argument("--terminal", action="store_true", help="print a short table for the terminal (system, "
                        "BLEU, chrF, p against --baseline, training time) instead of the Markdown")
    parser.add_argument("--baseline", help="the system every other of a seeds table is tested against (default: "
                        "the method registry's words-only baseline, sequence)")
    parser.add_argument("--control", action="append", type=_control, metavar="CONTROL=SYSTEM:KIND",
                        help="CONTROL is SYSTEM on control structures of KIND (one of " + ", ".join(CONTROLS) +
                        "); repeatable; default: every control the method registry describes")
    parser.add_argument("--plan", action="append", type=_plan, metavar="SYSTEM=SEEDS",
                        help="the study gives SYSTEM SEEDS seeds; repeatable, the study's systems in order "
                             "(default: no plan)")
    return parser


def comparisons_of(args: argparse.Namespace):
    """The :class:`~fairseq_syntax.evaluation.comparisons.Comparisons` of the command line's options (each named in
    a one-line error: a control given twice, a system planned twice, a control of itself ...)."""
    return registry_comparisons(args.baseline, _once("--control", args.control), _once("--plan", args.plan))


def _once(option: str, pairs: list[tuple] | None) -> dict | None:
    """An appended option's (name, value) pairs as a dict (None where not given); a name given twice is refused."""
    if not pairs:
        return None
    found = {}
    for name, value in pairs:
        if name in found:
            raise ValueError(f"{option} {name}: given twice")
        found[name] = value
    return found


#: the metrics of the terminal table, and of its p-values
TERMINAL_METRICS = ("BLEU", "chrF")


def _score_text(value) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "–"


def _p_text(report) -> str:
    """``p BLEU / p chrF`` of a record's significance report against the baseline; "–" where it has none."""
    if not report:
        return "–"
    return " / ".join(f"{report[metric]['p_value']:.3f}" if metric in report else "–" for metric in TERMINAL_METRICS)


def terminal_table(records: List[dict], against: Optional[str] = None) -> str:
    """The runs of each dataset, best BLEU first, under 100 columns: system, BLEU, chrF, p (BLEU / chrF) against
    ``against`` (default: the words-only baseline) and the training time (H:MM:SS)."""
    if against is None:
        from fairseq_syntax.methods import words_baseline

        against = words_baseline()
    header = ["system", *TERMINAL_METRICS, f"p vs {against} (BLEU / chrF)", "training"]
    blocks = []
    for dataset in dict.fromkeys(record["dataset"] for record in records):
        runs = [record for record in records if record["dataset"] == dataset]
        runs.sort(key=lambda record: -record["metrics"]["BLEU"] if isinstance(record["metrics"].get("BLEU"), (
            int, float)) else float("inf"))
        rows = [[record["system"], *(_score_text(record["metrics"].get(metric)) for metric in TERMINAL_METRICS),
                 _p_text(record.get("significance", {}).get(against)), format_wall_time(record["wall_time_s"])]
                for record in runs]
        widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]

        def line(cells):  # the system left-aligned, every number right-aligned under its header
            return "  ".join([cells[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in
                                                             zip(cells[1:], widths[1:])]).rstrip()

        blocks.append("\n".join([f"{dataset}: {len(runs)} runs", line(header),
                                  "  ".join("-" * width for width in widths), *map(line, rows)]))
    return "\n\n".join(blocks) + "\n"


def main(argv: Optional[List[str]] = None) -> str:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        comparisons = comparisons_of(args)
    except ValueError as error:  # one line naming the option and the problem
        parser.error(str(error))
    paths = find_record_files(args.inputs)
    records = [load_record(path) for path in paths]
    sources = [displayed_path(p) for p in paths]
    markdown = render_markdown(records, sources=sources, comparisons=comparisons)
    if args.out:
        write_results(args.out, markdown, render_json(records, sources=sources, comparisons=comparisons))
    if args.terminal:
        sys.stdout.write(terminal_table(records, comparisons.baseline))
    elif not args.out:
        sys.stdout.write(markdown)
    return markdown


def cli_main() -> None:
    try:
        main()
    except (RecordError, PackedRunsError, OSError) as error:
        sys.exit(f"fairseq-syntax-results: error: {error}")


if __name__ == "__main__":
    cli_main()
