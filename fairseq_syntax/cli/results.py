"""fairseq-syntax-results: render run records (*.run.json) into a Markdown results table (and RESULTS.json).

    fairseq-syntax-results RUN_DIR_OR_JSON... [--out examples/<dataset>/RESULTS.md]

A directory contributes every *.run.json below it; files are taken as given. With --out, the same table goes to
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
    load_record,
    render_json,
    render_markdown,
    write_results,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairseq-syntax-results", description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", metavar="RUN_DIR_OR_JSON", help="run record files or directories")
    parser.add_argument("--out", help="write the Markdown here, and RESULTS.json beside it (default: the Markdown "
                        "to standard output)")
    return parser


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
    else:
        sys.stdout.write(markdown)
    return markdown


def cli_main() -> None:
    try:
        main()
    except (RecordError, PackedRunsError, OSError) as error:
        sys.exit(f"fairseq-syntax-results: error: {error}")


if __name__ == "__main__":
    cli_main()
