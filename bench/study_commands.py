#!/usr/bin/env python3
"""How long the study's commands that only read files take: ``fairseq-syntax-study init``, ``plan``, ``status`` and
``report``, each a process of its own as a user starts it.

    python3 bench/study_commands.py                     # writes bench/study_commands/RESULTS.{md,json}
    python3 bench/study_commands.py --study examples/multi30k_de_en/study.toml --repeats 5 --out FOLDER

Each command runs ``--repeats`` times, the commands in turn within each round (so that a change of the machine's
load falls on all of them alike), as ``python -c`` calling ``fairseq_syntax.cli.study.main`` with the command's
arguments, which is what the console script ``fairseq-syntax-study`` runs; its output goes to ``/dev/null``, and
``report`` writes into a temporary folder (``--out``), not the study's report. A row gives the wall time from the
process's start to its end (the interpreter's start, the imports and the command) and its CPU time (user + system,
``os.wait4``), the median over the rounds, and whether the process imported torch or fairseq: the goal is none of
them, and ``plan`` within 2 s on 2 cores. The last row, ``import of the plugin``, is a process that only imports
:mod:`fairseq_syntax.plugin`: what every fairseq tool with ``--user-dir fairseq_syntax`` loads, and what these
commands would take with it.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

import report  # bench/report.py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
COMMANDS = ("init", "plan", "status", "report")
PLUGIN = "import of the plugin"
#: runs TARGET (MODULE:FUNCTION, called with the arguments after it, or MODULE, only imported) and records its status
#: and which of torch and fairseq the process imported
LAUNCHER = """
import importlib, json, sys
record, target, *argv = sys.argv[1:]
module, _, function = target.partition(":")
imported = importlib.import_module(module)
status = getattr(imported, function)(argv) if function else 0
with open(record, "w") as out:
    json.dump({"status": status, "torch": "torch" in sys.modules, "fairseq": "fairseq" in sys.modules}, out)
"""


def timed(target: str, argv: list[str], work: str) -> dict:
    """One process of ``target`` with ``argv``: wall and CPU seconds, its status and imports."""
    record = os.path.join(work, "record.json")
    if os.path.exists(record):
        os.remove(record)
    with open(os.devnull, "wb") as quiet:
        process, wall, cpu = report.timed_process([sys.executable, "-c", LAUNCHER, record, target, *argv], cwd=REPO,
                                                  stdout=quiet, stderr=subprocess.PIPE)
    errors = process.stderr.read().decode(errors="replace")
    process.stderr.close()
    status = process.returncode
    if status or not os.path.exists(record):
        raise SystemExit(f"error: {target} {' '.join(argv)} exited {status}: {errors.strip()[-2000:]}")
    with open(record) as handle:
        answer = json.load(handle)
    if answer["status"]:
        raise SystemExit(f"error: {target} {' '.join(argv)} returned {answer['status']}: {errors.strip()[-2000:]}")
    return {"wall": wall, "cpu": cpu, "torch": answer["torch"],
            "fairseq": answer["fairseq"]}


def shown_path(path: str) -> str:
    """The study file as the table shows it: relative to the repository where it lies inside, else its name (no
    machine's absolute path in a committed table)."""
    absolute = os.path.abspath(path)
    inside = os.path.commonpath([absolute, REPO]) == REPO
    return os.path.relpath(absolute, REPO) if inside else os.path.basename(absolute)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", default="examples/multi30k/study.toml",
                        help="the study file plan, status and report read (default: %(default)s)")
    parser.add_argument("--commands", nargs="+", choices=COMMANDS, default=list(COMMANDS),
                        help="the commands to time (default: all four)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds (default: %(default)s)")
    parser.add_argument("--out", default=os.path.join(HERE, "study_commands"),
                        help="folder of RESULTS.md and RESULTS.json (default: bench/study_commands)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    study = os.path.abspath(args.study)
    if not os.path.isfile(study):
        parser.error(f"--study {args.study}: no such file")
    load_before = os.getloadavg()[0]
    measured = {command: [] for command in (*args.commands, PLUGIN)}
    with tempfile.TemporaryDirectory(prefix="study-commands-") as work:
        report_out = os.path.join(work, "report")
        calls = {"init": ["init"], "plan": ["plan", study], "status": ["status", study],
                 "report": ["report", study, "--out", report_out]}
        for round_number in range(1, args.repeats + 1):
            for command in args.commands:
                shutil.rmtree(report_out, ignore_errors=True)
                measured[command].append(timed("fairseq_syntax.cli.study:main", calls[command], work))
            measured[PLUGIN].append(timed("fairseq_syntax.plugin", [], work))
            print(f"round {round_number}: " + ", ".join(f"{command} {runs[-1]['wall']:.2f} s"
                                                        for command, runs in measured.items()), file=sys.stderr)
    rows = []
    for command, runs in measured.items():
        walls = [round(run["wall"], 3) for run in runs]
        cpus = [round(run["cpu"], 3) for run in runs]
        shown = ("python -c 'import fairseq_syntax.plugin'" if command == PLUGIN else
                 "fairseq-syntax-study " + " ".join(["init"] if command == "init" else
                                                    [command, shown_path(study)] +
                                                    (["--out", "TMP"] if command == "report" else [])))
        rows.append({"command": command, "runs": shown, "wall_seconds": walls,
                     "median_wall_seconds": statistics.median(walls), "cpu_seconds": cpus,
                     "median_cpu_seconds": statistics.median(cpus),
                     "imports_torch": any(run["torch"] for run in runs),
                     "imports_fairseq": any(run["fairseq"] for run in runs)})
    defaults = {"study": parser.get_default("study"), "commands": list(COMMANDS), "repeats": 3}
    given = {"study": shown_path(args.study), "commands": args.commands, "repeats": args.repeats}
    flags = " ".join(f"--{key} {' '.join(value) if isinstance(value, list) else value}"
                     for key, value in given.items() if value != defaults[key])
    facts = {"command": f"python3 bench/study_commands.py {flags}".strip(), "study": shown_path(args.study),
             "machine": report.machine(), "python": platform.python_version(),
             "load_average_before": round(load_before, 1), "load_average_after": round(os.getloadavg()[0], 1),
             "repeats": args.repeats}
    cells = [[row["command"], f"`{row['runs']}`", f"{row['median_wall_seconds']:.2f}",
              ", ".join(f"{seconds:.2f}" for seconds in row["wall_seconds"]), f"{row['median_cpu_seconds']:.2f}",
              *("yes" if row[key] else "no" for key in ("imports_torch", "imports_fairseq"))] for row in rows]
    report.write_benchmark(
        args.out, "The study's commands that only read files", __doc__.split("\n\n", 2)[2].strip() + "\n\n"
        f"Machine: {facts['machine']}, Python {facts['python']}; 1-minute load average {facts['load_average_before']} "
        f"before, {facts['load_average_after']} after (other work on the cores lengthens the wall times).", facts,
        ["command", "process", "median wall s", "wall s (each round)", "median CPU s", "imports torch",
         "imports fairseq"], cells, rows)


if __name__ == "__main__":
    main()
