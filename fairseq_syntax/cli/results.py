"""fairseq-syntax-results: render run records (*.run.json) into a Markdown results table (and RESULTS.json).

    fairseq-syntax-results RUN_DIR_OR_JSON... [--out examples/<dataset>/RESULTS.md] [--terminal [--against NAME]]

A directory contributes every *.run.json below it; files are taken as given. With --terminal it prints, in place of
the Markdown, a table a terminal shows (:func:`terminal_table`: system, BLEU, chrF, p against a baseline, training
time; the demo ends with it), and --out still writes the full table, each run's command included. With --out, the same table goes to
RESULTS.json beside RESULTS.md (one row per system, the same columns; see results.render_json). Records are written by
`fairseq-syntax-score --record` (or fairseq_syntax.evaluation.results.record_run); see
fairseq_syntax.evaluation.results.
The table lists its records by their path relative to the working directory when they lie under it (the recipes
run from the repository root and pass absolute directories; a committed table must not name one machine's paths).
"""
import argparse
import os
import sys
from pathlib import Path
from typing import List, Optional

from fairseq_syntax.evaluation.packed_runs import PackedRunsError
from fairseq_syntax.evaluation.results import (
    RecordError,
    find_record_files,
    format_wall_time,
    load_record,
    render_json,
    render_markdown,
)
from fairseq_syntax.evaluation.tables import write_results


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairseq-syntax-results", description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", metavar="RUN_DIR_OR_JSON", help="run record files or directories")
    parser.add_argument("--out", help="write the Markdown here, and RESULTS.json beside it (default: the Markdown "
                        "to standard output)")
    parser.add_argument("--terminal", action="store_true", help="print a short table for the terminal (system, "
                        "BLEU, chrF, p against --against, training time) instead of the Markdown")
    parser.add_argument("--against", default="sequence", help="the baseline of --terminal's p-values (default: "
                        "sequence)")
    return parser


#: the metrics of the terminal table, and of its p-values
TERMINAL_METRICS = ("BLEU", "chrF")


def _score_text(value) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "–"


def _p_text(report) -> str:
    """``p BLEU / p chrF`` of a record's significance report against the baseline; "–" where it has none."""
    if not report:
        return "–"
    return " / ".join(f"{report[metric]['p_value']:.3f}" if metric in report else "–" for metric in TERMINAL_METRICS)


def terminal_table(records: List[dict], against: str = "sequence") -> str:
    """The runs of each dataset, best BLEU first, as lines a terminal shows under 100 columns: system, BLEU, chrF,
    the two-sided p-values (BLEU / chrF) against the run of ``against`` and the training time (H:MM:SS). The commands
    and the other metrics stay in RESULTS.md, whose path the caller prints."""
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


def displayed_path(path: Path) -> str:
    """``path`` relative to the working directory if it lies under it, else as given."""
    relative = os.path.relpath(os.path.abspath(path))
    return str(path) if relative.startswith(os.pardir) else relative


def main(argv: Optional[List[str]] = None) -> str:
    args = build_parser().parse_args(argv)
    paths = find_record_files(args.inputs)
    records = [load_record(path) for path in paths]
    sources = [displayed_path(p) for p in paths]
    markdown = render_markdown(records, sources=sources)
    if args.out:
        write_results(args.out, markdown, render_json(records, sources=sources))
    if args.terminal:
        sys.stdout.write(terminal_table(records, args.against))
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
