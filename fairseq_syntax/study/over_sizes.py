"""``plan``, ``run`` and ``report`` of a study over training-set sizes (:mod:`fairseq_syntax.study.sizes`): each
size's protocol sweep, then its grid once the protocol is chosen, in one pool of runs, smallest size first; a size's
cost is estimated from that size's finished runs (:func:`scaled_walls` for systems with none)."""
from __future__ import annotations

import dataclasses
import filecmp
import gzip
import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from statistics import fmean

from fairseq_syntax.core.files import write_atomically
from fairseq_syntax.evaluation import packed_runs
from fairseq_syntax.evaluation.tables import json_text
from fairseq_syntax.study.checks import study_problems
from fairseq_syntax.study.commands import (
    RunState,
    cost_text,
    device_hours,
    expected_means,
    finished_wall_times,
    grid_lines,
    grid_states,
)
from fairseq_syntax.study.config import StudyConfig
from fairseq_syntax.study.grid import Run, study_identity, study_runs
from fairseq_syntax.study.records import StudyError, project_root, read_record, reference_path, runs_dir, work_dir
from fairseq_syntax.study.runner import RunOutcome, RunTask, claim
from fairseq_syntax.study.sizes import Point, points, size_problems, size_systems, sweep_twin


def _value_text(values: dict) -> str:
    return ", ".join(f"{section}.{key} {value}" for section, keys in values.items() for key, value in keys.items())


def checked_points(config: StudyConfig) -> list[Point]:
    """The study's sizes, after the checks ``run`` makes before it prepares anything (StudyError, one line each)."""
    problems = size_problems(config)
    if problems:
        raise StudyError("\n".join(problems))
    return points(config)


def _sweep_states(point: Point) -> list[tuple[str, RunState, StudyConfig]]:
    return [(f"{study.point}/{state.run.name}", state, study) for _, study in point.sweep
            for state in grid_states(study)]


def size_walls(config: StudyConfig, point: Point, key: str = "wall_time_s") -> dict[str, list[float]]:
    """A size's finished runs' wall times by system (``key``: another number of their records): its grid's, else its
    sweep's."""
    walls = finished_wall_times(point.config, _states(point.config, _systems(config)), key) if point.config else {}
    sweep: dict[str, list[float]] = {}
    for _, study in point.sweep:
        for system, values in finished_wall_times(study, grid_states(study), key).items():
            sweep.setdefault(system, []).extend(values)
    return {**sweep, **walls}


def scaled_walls(walls_at: dict[int, dict[str, list[float]]], pairs: int, baseline: str,
                 runs: list[Run]) -> tuple[dict[str, float], str]:
    """Seconds for each system of ``runs`` with no finished run at ``pairs``: the baseline's mean there x the
    system's ratio to it at the nearest size (|log pairs|; a tie: the smaller) where both have some; and the words."""
    walls, scaled, used = walls_at[pairs], {}, set()
    if baseline not in walls:
        return {}, ""
    for system in {run.system.name for run in runs} - set(walls):
        near = [(max(size / pairs, pairs / size), size) for size, other in walls_at.items()
                if size != pairs and baseline in other and system in other]
        if near:
            used.add(size := min(near)[1])
            scaled[system] = fmean(walls[baseline]) * fmean(walls_at[size][system]) / fmean(walls_at[size][baseline])
    sizes = " and ".join(f"{size:,}" for size in sorted(used))
    return scaled, f" and the systems' ratios to {baseline} at {sizes} pairs" if used else ""


def queued_prices(walls_at: dict[int, dict[str, list[float]]], epochs_at: dict[int, dict[str, list[float]]],
                  baseline: str, runs: dict[str, Run], tasks: list[RunTask]) -> dict[str, tuple[float, float]]:
    """The wall seconds and epochs each of ``tasks`` should take, as ``plan`` prices its size (:func:`size_walls`
    in ``walls_at``, its epochs in ``epochs_at``, :func:`scaled_walls`; a sweep run as its run in ``runs``, the
    baseline's); none for a size with no finished run."""
    prices = {}
    for pairs in {_priority(task)[0] for task in tasks}:
        queued = [task for task in tasks if _priority(task)[0] == pairs]
        left = [runs[task.run_name] for task in queued]
        seconds = expected_means(walls_at[pairs], left, scaled_walls(walls_at, pairs, baseline, left)[0])
        epochs = expected_means(epochs_at[pairs], left)
        prices.update(zip(map(str, queued), zip(seconds, epochs)) if seconds and epochs else {})
    return prices


def size_lines(config: StudyConfig, point: Point, walls_at: dict[int, dict[str, list[float]]]) -> list[str]:
    """``plan``'s lines for one size; ``walls_at``: every size's :func:`size_walls`."""
    head = f"size {point.pairs}"
    if point.given:
        lines = [f"{head}: the runs of {point.config.path.name} ({point.config.name}), read as they are"]
    else:
        lines = [f"{head} ({config.name}.{point.label})"]
    sweep = _sweep_states(point)
    if sweep:
        width = max(len(name) for name, _, _ in sweep)
        lines.append(f"  protocol sweep of {config.baseline}, seed 1 (the lowest validation negative log-likelihood "
                     "per sentence is chosen):")
        results = {found.candidate.label: found for found in point.results}
        for name, state, study in sweep:
            label = study.point.rsplit("/", 1)[-1]
            detail = state.detail
            if label in results:
                found = results[label]
                detail = (f"valid NLL {found.nll_per_sentence:.2f} nats/sentence (epoch {found.best_epoch} of "
                          f"{found.epochs})")
            lines.append(f"  {name:<{width}}  {state.state:<8} {detail}")
        chosen = point.chosen
        lines.append(f"  protocol: {_value_text(chosen.candidate.values)} (sweep candidate {chosen.candidate.label})"
                     if chosen else f"  protocol: {point.waiting}")
    elif not point.given:
        lines.append("  protocol: the file's, no sweep")
    if point.config is None:
        runs = grid_runs(config, point)  # the grid's runs once the protocol is chosen: their names do not depend on it
        seeds = Counter(run.system.name for run in runs)
        lines.append(f"  {len(runs)} runs wait for the protocol ({point.label}/SYSTEM.seedK): "
                     + ", ".join(f"{system} {count} seed{'s' if count > 1 else ''}" for system, count in seeds.items()))
        return [*lines, "  cost: " + cost_text(walls_at[point.pairs], runs, config.training, " of this size",
                                              *scaled_walls(walls_at, point.pairs, config.baseline, runs))]
    twin, seed1 = sweep_twin(point)[0], f"{config.baseline}.seed1"  # what run takes from the sweep
    states = [RunState(state.run, "to take", f"from {twin.point}") if twin and state.run.name == seed1 and
              state.state not in ("done", "running") else state for state in _states(point.config, _systems(config))]
    left = [state.run for state in states if state.state not in ("done", "to take")]
    return [*lines, *grid_lines(states, point.label + "/"),
            "  cost: " + cost_text(walls_at[point.pairs], left, point.config.training, " of this size",
                                   *scaled_walls(walls_at, point.pairs, config.baseline, left))]


def grid_runs(config: StudyConfig, point: Point) -> list[Run]:
    """The runs of a size's grid, the sizes' systems with that size's seeds, before its protocol is chosen too."""
    if point.config is not None:
        return [run for run in study_runs(point.config) if run.system.name in _systems(config)]
    return study_runs(dataclasses.replace(config, systems=size_systems(config, point.pairs)))


def _systems(config: StudyConfig) -> set[str]:
    """The systems of a study over sizes' grid, controls included (a given study may have more)."""
    return {run.system.name for run in study_runs(config)}


def _states(study: StudyConfig, keep: set[str] | None) -> list[RunState]:
    """The states of ``study``'s runs of the systems in ``keep`` (None: all)."""
    return [state for state in grid_states(study) if keep is None or state.run.system.name in keep]


def _studies(config: StudyConfig, point: Point) -> list[tuple[StudyConfig, set[str] | None]]:
    """A size's sweep studies (every system) and its own (the sizes' systems), where its protocol is chosen."""
    own = [(point.config, _systems(config))] if point.config is not None else []
    return [(study, None) for _, study in point.sweep] + own


def check_sizes(config: StudyConfig, found: list[Point], executor: str, only: set[str] | None = None) -> None:
    """Every check ``run`` makes before it trains (:mod:`fairseq_syntax.study.checks`), for each size's sweep and
    grid (the runs ``only`` names); a size whose sweep is not finished has its data checked on its first candidate's
    settings."""
    problems = []
    for point in found:
        for study, keep in _studies(config, point):
            problems += study_problems(study, executor, [
                state.run.name for state in _states(study, keep) if state.state != "done"
                and (only is None or f"{study.point}/{state.run.name}" in only)])
        if point.config is None and point.sweep:
            waiting = dataclasses.replace(point.sweep[0][1], systems=size_systems(config, point.pairs))
            problems += study_problems(waiting, executor, [
                run.name for run in study_runs(waiting) if only is None or f"{point.label}/{run.name}" in only],
                work=False)
    if problems:
        raise StudyError("\n".join(dict.fromkeys(problems)))


def plan_lines(config: StudyConfig) -> list[str]:
    found = checked_points(config)
    check_sizes(config, found, config.executor.kind)
    lines = [f"study {config.name}: {len(found)} sizes, {', '.join(str(point.pairs) for point in found)} training "
             f"pairs ({config.path})"]
    walls_at = {point.pairs: size_walls(config, point) for point in found}
    for point in found:
        lines += size_lines(config, point, walls_at)
    return lines


def _data_difference(sweep: StudyConfig, grid: StudyConfig, run: Run) -> str:
    """Where the data ``run`` read in ``sweep`` (each binarized file and dictionary there, the test reference) are not
    the grid's bytes; "" where none."""
    theirs, mine = (work_dir(study) / "data-bin" / run.data for study in (sweep, grid))
    if not theirs.is_dir():
        return f"its data ({theirs}) are not here to compare"
    pairs = [(path, mine / path.name) for path in sorted(theirs.iterdir())
             if path.suffix in (".bin", ".idx") or path.name.startswith("dict.")]
    for path, grids in [*pairs, (reference_path(sweep), reference_path(grid))]:
        if not grids.is_file() or not filecmp.cmp(path, grids, shallow=False):
            return f"the data differ: the grid's {os.path.relpath(grids, work_dir(grid))} is not {sweep.point}'s"
    return ""


def take_from_sweep(point: Point, run: Run, progress: Callable[[str], None]) -> bool:
    """Whether the grid's ``run``, its baseline seed 1, was taken from the chosen sweep run (``sizes.sweep_twin``, the
    same data bytes): its kept files copied, its record the grid's naming it (``from_sweep``); else a line says why."""
    grid = point.config
    if run.name != f"{grid.baseline}.seed1":
        return False
    sweep, why = sweep_twin(point)
    why = why or sweep and _data_difference(sweep, grid, run)
    if why:
        progress(f"== {grid.point}/{run.name}: trained, not taken from the sweep: {why}")
    if sweep is None or why:
        return False
    theirs, mine = runs_dir(sweep), runs_dir(grid)
    mine.mkdir(parents=True, exist_ok=True)
    with claim(grid, run.name) as held:
        if not held:
            return False
        for kept in ("train.log", "gen", "gen.log"):
            data = packed_runs.read_bytes(theirs / f"{run.name}.{kept}.gz")
            write_atomically(mine / f"{run.name}.{kept}.gz", gzip.compress(data, mtime=0))
        old, new = (os.path.relpath(folder, project_root(grid)) + "/" for folder in (theirs, mine))
        record = json.loads(packed_runs.read_bytes(theirs / f"{run.name}.run.json").decode().replace(old, new))
        parsers = work_dir(grid) / "data-bin" / run.data / "parsers.json"  # as the grid's runs record them
        record.update(dataset=grid.name, parsers=json.loads(parsers.read_text()) if parsers.is_file() else None,
                      study=study_identity(grid, run.data, work_dir(grid)), from_sweep=sweep.point)
        write_atomically(mine / f"{run.name}.run.json", json_text(record))  # last: the run is finished once it is there
    progress(f"== {grid.point}/{run.name}: taken from {sweep.point}, the same training (command, seed, data bytes)")
    return True


def _tasks(config: StudyConfig, study: StudyConfig, only: set[str] | None, keep: set[str] | None,
           queued: set[str], progress: Callable[[str], None], point: Point | None = None) -> tuple[list[RunTask], int]:
    """The runs of ``study`` (a point, or a sweep candidate) left to do and not yet ``queued``, their data
    prepared (``point``: ``study`` is its grid, :func:`take_from_sweep`); and how many are done."""
    from fairseq_syntax.study.prepare import prepare
    from fairseq_syntax.study.runner import is_claimed

    states = _states(study, keep)
    named = {f"{study.point}/{state.run.name}": state for state in states}
    to_run = [state.run for name, state in named.items()
              if state.state != "done" and (only is None or name in only) and name not in queued]
    if to_run:
        progress(f"== {study.point}: preparing the data of {len(to_run)} runs")
        prepare(study, progress=progress, only=[run.name for run in to_run])
    taken = [run for run in to_run if point is not None and take_from_sweep(point, run, progress)]
    tasks = [RunTask(str(config.path.resolve()), run.name, point=study.point) for run in to_run
             if run not in taken and not is_claimed(study, run.name)]
    return tasks, sum(state.state == "done" for state in states) + len(taken)


def _ready(config: StudyConfig, only: set[str] | None, queued: set[str],
           progress: Callable[[str], None]) -> tuple[list[RunTask], int]:
    """Every run that can start now and is not ``queued``: each size's sweep, and the grid of each size whose
    protocol is chosen; and how many runs of those are done. ``queued`` gains the tasks returned."""
    tasks, done = [], 0
    for point in points(config):
        for study, keep in _studies(config, point):
            more, finished = _tasks(config, study, only, keep, queued, progress,
                                    point if study is point.config else None)
            tasks, done = tasks + more, done + finished
    queued.update(str(task) for task in tasks)
    return tasks, done


def _priority(task: RunTask) -> tuple[int, int]:
    """Smaller sizes first, a size's sweep before its grid: the curve's first point is whole soonest."""
    size, _, rest = task.point.partition("/")
    return int(size[1:]), 0 if rest else 1


def run_sizes(config: StudyConfig, executor: str, jobs: int, only: list[str] | None = None,
              progress: Callable[[str], None] = print) -> int:
    """``run`` on a study over sizes; 0 when every size's grid is done. A size's grid joins the runs to do as soon as
    its sweep's last run ends (locally: the same pool; on Slurm: the next round). Within one ``run`` a failed run is
    not tried again. Locally, the time left is from :func:`queued_prices` of the runs queued at the start (a run
    queued later, or of a size with no finished run, at their mean)."""
    found = checked_points(config)
    wanted = set(only) if only else None
    if wanted:
        known = {f"{study.point}/{state.run.name}" for point in found for _, study in point.sweep
                 for state in grid_states(study)}
        known |= {f"{point.label}/{run.name}" for point in found for run in grid_runs(config, point)}
        unknown = sorted(wanted - known)
        if unknown:
            raise StudyError(f"--only {unknown[0]}: no such run in the study ({config.path}; plan lists them)")
    check_sizes(config, found, executor, wanted)  # plan's checks, before anything is made
    queued: set[str] = set()
    tasks, done = _ready(config, wanted, queued, progress)
    progress(f"== {done} runs done, {len(tasks)} to run now"
             + "".join(f"; size {point.pairs}: {point.waiting}" for point in found if point.config is None))
    outcomes: list[RunOutcome] = []
    if executor == "local":
        from fairseq_syntax.study.local import run_local

        def more(outcome: RunOutcome) -> list[RunTask]:
            if "/sweep/" not in outcome.run_name or outcome.state == "failed":
                return []  # only a sweep run's end can make a size's protocol chosen
            return _ready(config, wanted, queued, progress)[0]

        walls_at = {point.pairs: size_walls(config, point) for point in found}
        epochs_at = {point.pairs: size_walls(config, point, "epochs") for point in found}
        runs = {run.name: run for point in found for run in grid_runs(config, point)}  # a name: one system
        prices = queued_prices(walls_at, epochs_at, config.baseline, runs, tasks)
        outcomes = run_local(config, sorted(tasks, key=_priority), jobs, progress=progress, more=more,
                             order=_priority, prices=prices or None)
    else:
        from fairseq_syntax.study.commands import _run_on_slurm

        while tasks:
            outcomes += _run_on_slurm(config, sorted(tasks, key=_priority), progress)
            tasks = _ready(config, wanted, queued, progress)[0]
    from fairseq_syntax.study.over_seeds import rescore_stale

    left = 0
    for point in points(config):
        if point.config is None:
            left += len(grid_runs(config, point))
            continue
        rescore_stale(point.config, progress=progress)
        left += sum(state.state != "done" for state in _states(point.config, _systems(config)))
    for outcome in outcomes:
        if outcome.state == "failed":
            progress(f"== failed: {outcome.run_name}: {outcome.detail}")
    progress("== every size's runs are done" if not left else f"== {left} runs of the sizes' grids not done")
    return 0 if not left else 1


# --- report

def _sweep_markdown(config: StudyConfig, found: list[Point], report: Path) -> tuple[list[str], dict]:
    """Each size's sweep: every candidate's validation loss, the one chosen (test BLEU shown, not used), and where
    its records are (relative to ``report``)."""
    from fairseq_syntax.evaluation.tables import markdown_table

    lines, data = [], {}
    for point in found:
        if not point.sweep:
            continue
        chosen = point.chosen
        results = {result.candidate.label: result for result in point.results}
        rows, cells = [], []
        taken = point.config is not None and "from_sweep" in (  # the grid's baseline seed 1 is the chosen run
            read_record(runs_dir(point.config) / f"{config.baseline}.seed1.run.json") or {})
        for candidate, _ in point.sweep:
            result = results.get(candidate.label)
            rows.append({"candidate": candidate.label, "values": candidate.values})
            if result is None:
                cells.append([candidate.label, "not run yet", "", "", ""])
                continue
            mark = (" **(chosen; the grid's seed 1)**" if taken else " **(chosen)**") \
                if chosen and chosen.candidate.label == candidate.label else ""
            cells.append([candidate.label + mark, f"{result.nll_per_sentence:.3f}", f"{result.nll_per_token_bits:.3f}",
                          f"{result.best_epoch} / {result.epochs}",
                          f"{result.bleu:.2f}" if isinstance(result.bleu, (int, float)) else ""])
            rows[-1].update(valid_nll_per_sentence=result.nll_per_sentence,
                            valid_nll_loss_bits=result.nll_per_token_bits, best_epoch=result.best_epoch,
                            epochs=result.epochs, test_BLEU=result.bleu)
        records = os.path.relpath(point.sweep[0][1].folder("runs").parent, report)
        lines += ["", f"**{point.pairs:,} pairs**: " + (f"chosen {chosen.candidate.label}" if chosen else
                                                           point.waiting)
                  + (f"; its run is the grid's {config.baseline} seed 1 (the same training: not trained again)"
                     if taken else ""), "",
                  *markdown_table(["Candidate", "Valid NLL per sentence (nats)", "Valid nll_loss (bits/token)",
                                   "Best epoch / epochs", "Test BLEU (not used)"], cells)]
        data[str(point.pairs)] = {"candidates": rows, "chosen": chosen.candidate.label if chosen else None,
                                  "records": records, **({"grid_seed1": "taken"} if taken else {})}
    if data:
        lines += ["", f"Each candidate is {config.baseline}'s run with its values; its record, log and commands: "
                      f"`{os.path.relpath(config.folder('runs'), report)}/nN/sweep/LABEL/`."]
    return lines, data


def _spent(study: StudyConfig, keep: set[str] | None) -> dict:
    """What a study's finished runs (of the systems in ``keep``, None: all) cost: their count, CPU thread-hours (wall
    time x training.threads; on a GPU, GPU-hours) and the mean per run."""
    walls = [wall for values in finished_wall_times(study, _states(study, keep)).values() for wall in values]
    hours, unit = device_hours(study.training, sum(walls))
    return {"runs": len(walls), "hours": hours, "unit": unit, "per_run": hours / len(walls) if walls else None}


def _cost_markdown(config: StudyConfig, found: list[Point]) -> tuple[list[str], dict]:
    """What each size's finished runs cost, its sweep and its grid apart, measured from their records."""
    from fairseq_syntax.evaluation.tables import markdown_table

    data, rows = {}, []
    for point in found:
        sweep = [_spent(study, None) for _, study in point.sweep]
        grid = _spent(point.config, _systems(config)) if point.config is not None else None
        entry = data[str(point.pairs)] = {"sweep_runs": sum(part["runs"] for part in sweep),
                                          "sweep_hours": sum(part["hours"] for part in sweep), "grid": grid}
        rows.append([f"{point.pairs:,}", entry["sweep_runs"],
                     f"{entry['sweep_hours']:.1f}" if entry["sweep_runs"] else "",
                     *([grid["runs"], f"{grid['hours']:.1f}", f"{grid['per_run']:.2f}"] if grid and grid["runs"]
                       else [0, "", ""])])
    unit = next((entry["grid"]["unit"] for entry in data.values() if entry["grid"]), "CPU thread-hours")
    return ["", "## What each size cost", "",
            f"Measured: the wall time of each finished run in its record, times its threads ({unit}). "
            "`fairseq-syntax-study plan` prices a run left at its system's mean at that size, else at "
            f"{config.baseline}'s mean there times the system's ratio to {config.baseline} at the nearest size where "
            "both have finished runs.", "",
            *markdown_table(["Size (pairs)", "Sweep runs", f"Sweep {unit}", "Grid runs", f"Grid {unit}",
                             "Per grid run"], rows)], data


def write_sizes_report(config: StudyConfig, readme: str | None = None, out: str | None = None) -> list[str]:
    """``report`` on a study over sizes: each size's report (``REPORT/nN``), then the curve (``RESULTS.md``,
    ``RESULTS.json``, ``curve.png``) and, with ``readme``, its block in that file."""
    from fairseq_syntax.evaluation.curve import curve_data, curve_markdown, readme_block, replace_block, sizes_text
    from fairseq_syntax.evaluation.results import seeds_notes
    from fairseq_syntax.evaluation.tables import write_results
    from fairseq_syntax.study.report import comparisons_of, own_records, write_readme, write_report

    found = checked_points(config)
    folder = Path(out) if out else config.folder("report")
    folder.mkdir(parents=True, exist_ok=True)
    lines, reports, notes = [], {}, {}
    for point in found:
        if point.given:
            path = point.config.folder("report") / "RESULTS.json"
            if path.is_file():
                reports[point.pairs] = path
            else:
                lines.append(f"size {point.pairs}: {point.config.path.name} has no report yet "
                             f"(fairseq-syntax-study report {point.config.path})")
        elif point.config is not None and any(state.state == "done" for state in grid_states(point.config)):
            own = folder / point.label
            lines += write_report(point.config, out=str(own), within="../RESULTS.md")
            reports[point.pairs] = own / "RESULTS.json"
            found_notes = tuple(seeds_notes(own_records(point.config), comparisons_of(point.config)))
            if found_notes:  # a table of one seed each keeps its own
                notes.setdefault(found_notes, []).append(point.pairs)
        else:
            lines.append(f"size {point.pairs}: no run of its grid has finished yet"
                         + (f" ({point.waiting})" if point.waiting else ""))
    datasets = {point.pairs: point.config.name for point in found if point.pairs in reports}
    curve = {"sizes": [point.pairs for point in found], "baseline": config.baseline,
             "methods": {entry.name: [entry.control_name(kind) for kind in entry.controls]
                         for entry in config.systems if entry.name != config.baseline},
             "reports": {str(pairs): {"results": os.path.relpath(path, folder), "dataset": datasets[pairs]}
                         for pairs, path in reports.items()}}
    data = curve_data(curve, folder)
    sweep_lines, sweep_data = _sweep_markdown(config, found, folder)
    cost_lines, cost_data = _cost_markdown(config, found)
    md = folder / "RESULTS.md"
    records = os.path.relpath(config.folder("runs"), folder)
    links = [f"[{pairs:,} pairs]({os.path.relpath(path.with_suffix('.md'), folder)})" for pairs, path in
             reports.items()]
    markdown = [f"# {config.name}: the study over training-set sizes", "",
                f"Generated by `fairseq-syntax-study report {config.path.name}` from each size's report "
                f"({', '.join(links) or 'none yet'}). Each size trains every system with one protocol; the subsets "
                "are nested (each inside the larger ones).", "", "![the curve](curve.png)", *curve_markdown(data),
                *(["", "## Each size's notes", "", "The p-values, sacrebleu signatures and parses of each size's "
                   "table (`nN/RESULTS.md`), said once:"] if notes else []),
                *(line for found_notes, sizes in notes.items() for line in [
                    "", f"**{sizes_text(sizes)} pairs**", "", *(f"- {note}" for note in found_notes)]),
                "", "## Each size's protocol", "",
                "Chosen for the baseline by its validation negative log-likelihood per sentence at its best epoch "
                "(comparable across BPE vocabularies); every system of that size is trained with it.", *sweep_lines,
                "", "Each size's commands are its systems' (a one-size study's report shows them) with the size's "
                f"settings and protocol; each run's record holds them whole (`{records}/nN/`: "
                "`python3 fairseq_syntax/evaluation/packed_runs.py cat RECORD`).", *cost_lines]
    json_data = {"generated_by": "fairseq-syntax-study report (fairseq_syntax.study.over_sizes)",
                 "study": config.name, "curve": curve,
                 "notes": [{"sizes": sizes, "notes": list(found_notes)} for found_notes, sizes in notes.items()],
                 "sweeps": sweep_data, "cost": cost_data}
    md_path, json_path = write_results(md, "\n".join(markdown) + "\n", json_data)
    lines.append(f"wrote {md_path} and {json_path}")
    try:
        from fairseq_syntax.evaluation.curve_figure import plot_curve

        plot_curve(data, folder / "curve.png")
        lines.append(f"wrote {folder / 'curve.png'}")
    except ValueError as error:
        lines.append(f"no curve yet: {error}")
    if readme:
        write_readme(readme, lambda at: readme_block(data, os.path.relpath(md_path, at),
                                                     os.path.relpath(folder / "curve.png", at), config.name),
                     replace_block)
        lines.append(f"wrote the sizes answer into {readme}")
    return lines
