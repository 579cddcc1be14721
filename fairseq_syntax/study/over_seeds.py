"""A system's record over its seeds (``RUNS/SYSTEM.seeds.run.json``): the row of the study's table and the tests
the verdicts read, by ``fairseq-syntax-score`` over every seed it and each partner
(:func:`~fairseq_syntax.study.grid.compared_with`) has finished; made again when a run of either finished since
(:func:`stale_reasons`). Its seeds' facts (commands, device, parsers, settings) and scores are their records'
(:func:`~fairseq_syntax.evaluation.records.seeds_give`)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fairseq_syntax.study.config import StudyConfig
from fairseq_syntax.study.grid import planned_seeds, registry_systems, compared_with
from fairseq_syntax.study.processes import REPO_ROOT
from fairseq_syntax.study.records import StudyError, kept, project_root, read_record, reference_path, runs_dir, work_dir
from fairseq_syntax.study.runner import _environment, detokenizing


def finished_seeds(config: StudyConfig, system: str) -> list[int]:
    """The seeds (of those the file gives ``system``) whose decode is kept."""
    runs = runs_dir(config)
    return [seed for seed in range(1, planned_seeds(config).get(system, 0) + 1)
            if kept(runs / f"{system}.seed{seed}.gen") is not None]


def _current_test(record: dict | None, partner: str, own: int, theirs: int) -> bool:
    """Whether ``record`` (of a system with ``own`` finished seeds) tests it against ``partner``'s ``theirs``."""
    report = (record or {}).get("significance", {}).get(partner)
    return bool(report) and report.get("seeds_a") in (None, theirs) and report.get("seeds_b") in (None, own)


def stale_reasons(config: StudyConfig, system: str) -> list[str]:
    """Why ``system``'s record over seeds must be made (again); empty when up to date or without runs. A pair is
    tested once, by either system's record, over the seeds both have finished."""
    own = finished_seeds(config, system)
    if not own:
        return []
    runs = runs_dir(config)
    record = read_record(runs / f"{system}.seeds.run.json", seed_facts=False)  # its seeds and tests: its own
    if record is None:
        return ["no record over its seeds yet"]
    reasons = []
    if list(record.get("seed_list", [])) != own:
        reasons.append(f"scored over seeds {record.get('seed_list')}, finished {own}")
    for partner in compared_with(config, system):
        theirs = finished_seeds(config, partner)
        if not theirs:
            continue
        their_record = read_record(runs / f"{partner}.seeds.run.json", seed_facts=False)
        their_current = their_record is not None and list(their_record.get("seed_list", [])) == theirs
        if not _current_test(record, partner, len(own), len(theirs)) and not (
                their_current and _current_test(their_record, system, len(theirs), len(own))):
            reasons.append(f"no test against {partner} over {len(own)} and {len(theirs)} seeds")
    return reasons


def score_over_seeds(config: StudyConfig, system: str) -> Path:
    """Make ``system``'s record over every seed it has finished (tested against each partner over theirs)."""
    runs = runs_dir(config)
    own = finished_seeds(config, system)
    if not own:
        raise StudyError(f"{system}: no finished run to score over seeds")
    first = read_record(runs / f"{system}.seed{own[0]}.run.json")
    if first is None:
        raise StudyError(f"{runs}/{system}.seed{own[0]}.run.json: the run's record is missing")
    hyps = [str(kept(runs / f"{system}.seed{seed}.gen")) for seed in own]
    logs = [str(kept(runs / f"{system}.seed{seed}.train.log")) for seed in own]
    args, names = [",".join(hyps), str(reference_path(config))], []
    for partner in compared_with(config, system):
        theirs = finished_seeds(config, partner)
        if theirs:  # the partners' decodes are positional: all of them before the options, their names in order
            args.append(",".join(str(kept(runs / f"{partner}.seed{seed}.gen")) for seed in theirs))
            names += ["--baseline-name", partner]
    args += names
    args += [*detokenizing(config), "--bootstrap", str(config.test.bootstrap_rounds)]
    arch = first.get("arch") or registry_systems()[system].arch
    record = runs / f"{system}.seeds.run.json"
    args += ["--repo-root", str(project_root(config)), "--out-dir", str(work_dir(config)),
             "--run-seeds", ",".join(map(str, own)), "--record", str(record), "--dataset", config.name,
             "--system", system, "--arch", arch, "--train-log", ",".join(logs)]
    status = subprocess.run([sys.executable, "-m", "fairseq_syntax.cli.score", *args],
                            env=_environment(config), cwd=REPO_ROOT).returncode
    if status != 0:
        raise StudyError(f"{system}: scoring over seeds {own} failed (the error above)")
    return record


def rescore_stale(config: StudyConfig, progress=print) -> list[str]:
    """Score again every system whose record over seeds is stale, in the file's order; the systems scored."""
    scored = []
    for system in planned_seeds(config):
        reasons = stale_reasons(config, system)
        if reasons:
            progress(f"== {system} over its seeds: {'; '.join(reasons)}")
            score_over_seeds(config, system)
            scored.append(system)
    return scored
