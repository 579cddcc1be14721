"""Whether a system's record over its seeds read every run finished by now, of itself and of each system it tests.

A system's record over its seeds (``RUNS/NAME.seeds.run.json``, ``fairseq-syntax-score`` given one decode per seed)
is made from the runs finished at that moment: NAME's, and those of each system it tests NAME against (its
``significance``: the baseline, NAME's controls or, for a control, its method), each over those of the seeds it is
given that the system has finished. Its ``score_command`` names each decode it read (``RUNS/SYSTEM.seedK.gen.gz``).
A run that finishes later (a seed 4 of NAME, of the baseline or of NAME's method) is not in it, nor is a run of a
seed the scoring was not given (a control scored against the baseline's seeds 1-3 of 5): the record is stale, and
the table reads a test over fewer seeds than it shows beside it. What runs a study asks this module which records
are stale, and scores them again over every finished seed.

A finished run is one whose decode is kept: ``RUNS/SYSTEM.seedK.gen.gz`` on disk, or ``SYSTEM.seedK.gen`` in the
runs' archive (:mod:`fairseq_syntax.evaluation.packed_runs`). A pair tested in one record only (a method scored
before its control had runs: the control's record holds the pair) is that record's to keep up to date.

    python3 -m fairseq_syntax.evaluation.seed_records seeds RUNS [NAME]   # NAME's finished seeds (or any system's)
    python3 -m fairseq_syntax.evaluation.seed_records stale RUNS [--baseline NAME]  # the stale records

``stale`` writes one line per stale record, tab-separated: the system; the seeds to score it over again (every seed
that one of the systems it reads has finished: each system's own among them are scored); the finished runs the
record did not read; the systems whose runs it reads (itself first). The last three are space-separated. Its
``--baseline`` (whose record comes first: every other is tested against it) is by default the method registry's
words-only baseline (:func:`fairseq_syntax.methods.words_baseline`).
"""
import argparse
import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from fairseq_syntax.evaluation import packed_runs
from fairseq_syntax.evaluation.comparisons import Comparisons

SEEDS_RECORD_SUFFIX = ".seeds.run.json"
# a run's decode, as kept (gzipped) or packed: SYSTEM.seedK.gen[.gz], not its log SYSTEM.seedK.gen.log
_DECODE = re.compile(r"(?P<system>[^\s,/]+)\.seed(?P<seed>\d+)\.gen(?:\.gz)?$")
# a decode the scoring command read: its path ends the command or a comma-separated list in it
_READ = re.compile(r"(?:^|[\s,/])(?P<system>[^\s,/]+)\.seed(?P<seed>\d+)\.gen(?:\.gz)?(?=[\s,]|$)")


def finished_runs(runs) -> dict[str, list[int]]:
    """Each system's seeds with a finished run in the folder ``runs`` (a decode kept or packed), sorted."""
    found: dict[str, set[int]] = {}
    for path in packed_runs.glob(str(Path(runs) / "*.seed*.gen*")):
        decode = _DECODE.fullmatch(Path(path).name)
        if decode:
            found.setdefault(decode["system"], set()).add(int(decode["seed"]))
    return {system: sorted(seeds) for system, seeds in found.items()}


def seeds_of(finished: dict[str, list[int]], systems: Iterable[str]) -> list[int]:
    """Every seed that one of ``systems`` has a finished run of, sorted."""
    return sorted({seed for system in systems for seed in finished.get(system, [])})


def tested_against(record: dict) -> list[str]:
    """The systems whose runs a record over seeds reads: its own, then those it holds a test against."""
    return list(dict.fromkeys([record["system"], *record.get("significance", {})]))


def runs_read(record: dict) -> set[tuple[str, int]]:
    """The runs (system, seed) whose decodes the record's scoring command read."""
    return {(read["system"], int(read["seed"])) for read in _READ.finditer(record.get("score_command", ""))}


def lacking(record: dict, finished: dict[str, list[int]]) -> list[str]:
    """The finished runs (``SYSTEM.seedK``) of the systems the record reads that its scoring did not read."""
    read = runs_read(record)
    return [f"{system}.seed{seed}" for system in tested_against(record) for seed in finished.get(system, [])
            if (system, seed) not in read]


def stale_records(runs, comparisons: Comparisons) -> list[tuple[str, list[int], list[str], list[str]]]:
    """Every record over seeds in ``runs`` that lacks a finished run: (system, the seeds to score it over, the
    runs it lacks, the systems whose runs it reads), the baseline's of ``comparisons`` first (every other system is
    tested against it), then by name."""
    finished = finished_runs(runs)
    stale = []
    for path in sorted(Path(runs).glob(f"*{SEEDS_RECORD_SUFFIX}")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"{path}: not a readable record ({error})") from None
        record.setdefault("system", path.name[:-len(SEEDS_RECORD_SUFFIX)])
        missing = lacking(record, finished)
        if missing:
            systems = tested_against(record)
            stale.append((record["system"], seeds_of(finished, systems), missing, systems))
    return sorted(stale, key=lambda entry: (entry[0] != comparisons.baseline, entry[0]))


def _words(items: Iterable) -> str:
    return " ".join(map(str, items))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m fairseq_syntax.evaluation.seed_records",
                                     description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for command, help_text in (("seeds", "the seeds NAME (else any system) has a finished run of, space-separated"),
                               ("stale", "the records over seeds that lack a finished run, one a line")):
        commands.add_parser(command, help=help_text).add_argument("runs", help="the folder of the runs")
    commands.choices["seeds"].add_argument("name", nargs="?", help="a system (its records NAME.seedK.run.json)")
    commands.choices["stale"].add_argument("--baseline", help="the system every other is tested against, whose "
                                           "record comes first (default: the registry's words-only baseline)")
    args = parser.parse_args(argv)
    if not Path(args.runs).is_dir():
        print(f"error: {args.runs}: no such folder of runs", file=sys.stderr)
        return 2
    try:
        if args.command == "seeds":
            finished = finished_runs(args.runs)
            print(_words(seeds_of(finished, [args.name] if args.name else finished)))
            return 0
        if args.baseline is None:
            from fairseq_syntax.methods import words_baseline

            args.baseline = words_baseline()
        for name, finished, missing, systems in stale_records(args.runs, Comparisons(args.baseline)):
            print(f"{name}\t{_words(finished)}\t{_words(missing)}\t{_words(systems)}")
        return 0
    except (packed_runs.PackedRunsError, ValueError) as error:  # an unreadable archive or record, named
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
