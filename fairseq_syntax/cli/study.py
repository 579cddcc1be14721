"""``fairseq-syntax-study``: the controlled study of source-side syntax (every system against the words alone and
against itself on control structures, over seeds) on any parallel corpus, from one TOML file.

A problem of the file, a record of another study or a missing file ends the command in one line each (status 2)."""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

from fairseq_syntax.study.config import ConfigError, load_study, template
from fairseq_syntax.study.devices import require_device
from fairseq_syntax.evaluation.kept_files import RecordError
from fairseq_syntax.study.records import StudyError
from fairseq_syntax.study.slurm import SlurmError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fairseq-syntax-study", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Every key of STUDY.toml is documented in the file `fairseq-syntax-study init` prints; docs/study.md "
               "walks through a study.")
    commands = parser.add_subparsers(dest="command", required=True)
    init = commands.add_parser("init", help="print a study file with every key, its default and what it does")
    init.add_argument("--output", "-o", help="write it to this file (refused if it exists) instead of stdout")
    plan = commands.add_parser("plan", help="the grid, one line a run with its state, and the cost of what is left")
    plan.add_argument("study", help="the study file (TOML)")
    plan.add_argument("--systems", action="store_true", help="print only the study's systems, one "
                      "NAME:ARCH:DATA[:EXTRA] spec a line in the file's order (each system's controls after it), as "
                      "recipes take them")
    commands.add_parser("status", help="what runs where now (this machine's runs in training, the study's Slurm "
                        "jobs)").add_argument("study", help="the study file (TOML)")
    run = commands.add_parser("run", help="prepare the data once, then train, decode and score every missing run")
    run.add_argument("study", help="the study file (TOML)")
    run.add_argument("--executor", choices=("local", "slurm"), help="where the runs go (default: executor.kind)")
    run.add_argument("--jobs", type=int, help="local: runs at once, each its own process and cores "
                     "(default: executor.jobs)")
    run.add_argument("--only", nargs="+", metavar="RUN", help="only these runs (SYSTEM.seedK, as plan names them)")
    report = commands.add_parser("report", help="the answer in the study's report folder")
    report.add_argument("study", help="the study file (TOML)")
    report.add_argument("--readme", metavar="FILE",
                        help="also write the short answer between the study-answer markers of FILE (e.g. README.md)")
    report.add_argument("--out", metavar="FOLDER", help="write RESULTS.md, RESULTS.json and seeds.png into FOLDER "
                        "instead of study.report (to compare with the committed ones)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # importing fairseq leaves the root logger at DEBUG: the figure's libraries would print their font searches
    for library in ("matplotlib", "PIL"):
        logging.getLogger(library).setLevel(logging.WARNING)
    if args.command == "init":
        if args.output:
            path = Path(args.output)
            if path.exists():
                print(f"error: {path} exists: not overwritten", file=sys.stderr)
                return 2
            path.write_text(template(), encoding="utf-8")
            print(f"wrote {path}: fill in study.name and corpus.raw, then fairseq-syntax-study plan {path}")
        else:
            sys.stdout.write(template())
        return 0
    try:
        config = load_study(args.study)
        if args.command == "plan":
            from fairseq_syntax.study.commands import plan_lines
            from fairseq_syntax.study.grid import study_runs
            from fairseq_syntax.study.over_sizes import plan_lines as sizes_plan_lines

            if args.systems:
                print("\n".join(dict.fromkeys(run.system.for_training_seed(1).spec() for run in study_runs(config))))
                return 0
            require_device(config, config.executor.kind)  # a GPU study where this machine trains on none
            # a study over training-set sizes shows each size in turn
            print("\n".join((sizes_plan_lines if config.size_list else plan_lines)(config)))
            return 0
        if args.command == "status":
            from fairseq_syntax.study.commands import status_lines

            print("\n".join(status_lines(config)))
            return 0
        if args.command == "run":
            from fairseq_syntax.study.commands import run_study
            from fairseq_syntax.study.over_sizes import run_sizes

            if args.jobs is not None and args.jobs < 1:
                print("error: --jobs must be at least 1", file=sys.stderr)
                return 2
            # killed (kill, timeout, a window's deadline) as if by Ctrl-C: the local runs stop with it, to go on
            # from their checkpoints at the next run; Slurm's jobs stay queued
            signal.signal(signal.SIGTERM, _interrupted)
            executor = args.executor or config.executor.kind
            jobs = args.jobs or config.executor.jobs
            require_device(config, executor)
            # a study over sizes: each size's protocol sweep, then each size's grid
            return (run_sizes if config.size_list else run_study)(config, executor, jobs, only=args.only)
        from fairseq_syntax.study.over_sizes import write_sizes_report
        from fairseq_syntax.study.report import write_report

        for line in (write_sizes_report if config.size_list else write_report)(config, readme=args.readme,
                                                                                out=args.out):
            print(line)
        return 0
    except ConfigError as error:
        for problem in error.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    except (StudyError, SlurmError, RecordError) as error:  # a record the table cannot read: one line, its file
        for line in str(error).splitlines():
            print(f"error: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: fairseq-syntax-study run goes on from here", file=sys.stderr)
        return 130


def _interrupted(signum, frame):
    raise KeyboardInterrupt


def cli_main() -> None:
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:  # its reader had enough (plan ... | head): no traceback, as for any Unix filter
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 0
    sys.exit(status)


if __name__ == "__main__":
    cli_main()
