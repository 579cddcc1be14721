"""fairseq-syntax-results: render run records (*.run.json) into a Markdown results table.

    fairseq-syntax-results RUN_DIR_OR_JSON... [--out examples/<dataset>/RESULTS.md]

A directory contributes every *.run.json below it; files are taken as given. Records are written by
`fairseq-syntax-score --record` (or fairseq_syntax.results.record_run); see fairseq_syntax.results.
The table lists its records by their path relative to the working directory when they lie under it (the recipes
run from the repository root and pass absolute directories; a committed table must not name one machine's paths).
"""
import argparse
import os
import sys
from pathlib import Path
from typing import List, Optional

from fairseq_syntax.results import RecordError, find_record_files, load_record, render_markdown


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairseq-syntax-results", description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", metavar="RUN_DIR_OR_JSON", help="run record files or directories")
    parser.add_argument("--out", help="write the Markdown here (default: standard output)")
    return parser


def displayed_path(path: Path) -> str:
    """``path`` relative to the working directory if it lies under it, else as given."""
    relative = os.path.relpath(os.path.abspath(path))
    return str(path) if relative.startswith(os.pardir) else relative


def main(argv: Optional[List[str]] = None) -> str:
    args = build_parser().parse_args(argv)
    paths = find_record_files(args.inputs)
    markdown = render_markdown([load_record(path) for path in paths], sources=[displayed_path(p) for p in paths])
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(markdown, encoding="utf-8")
    else:
        sys.stdout.write(markdown)
    return markdown


def cli_main() -> None:
    try:
        main()
    except (RecordError, OSError) as error:
        sys.exit(f"fairseq-syntax-results: error: {error}")


if __name__ == "__main__":
    cli_main()
