"""What ``fairseq-syntax-study`` does: ``plan`` (the grid, each run's state, a cost estimate), ``run`` (prepare the
data, then every missing run, here or on Slurm), ``status`` and ``report`` (:mod:`fairseq_syntax.study.report`).

A run's state (:func:`run_state`): **done** (record and decode kept), **running** (a process holds its claim),
**failed** (``WORK/failed/RUN.txt``; the next ``run`` resumes it), **partway** (checkpoints, no record), **to do**;
over sizes, **to take** (a grid's baseline seed 1 from its sweep: ``over_sizes.take_from_sweep``).
A record of another study or setting stops every command first (:mod:`~fairseq_syntax.study.record_checks`)."""
from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from fairseq_syntax.study.checks import check_study
from fairseq_syntax.study.config import StudyConfig, Training
from fairseq_syntax.study.grid import Run, study_runs
from fairseq_syntax.study.local import current_epoch
from fairseq_syntax.study.record_checks import finished, refuse_foreign_records
from fairseq_syntax.study.records import StudyError, checkpoints_dir, read_record, runs_dir, work_dir
from fairseq_syntax.study.runner import RunTask, is_claimed


@dataclass(frozen=True)
class RunState:
    run: Run
    state: str  # done, running, failed, partway, to do
    detail: str = ""


def run_state(config: StudyConfig, run: Run) -> RunState:
    """The state of one run (module docstring); StudyError for a kept record of another study."""
    if finished(config, run):
        record = read_record(runs_dir(config) / f"{run.name}.run.json") or {}
        bleu = record.get("metrics", {}).get("BLEU")
        taken = f", from {record['from_sweep']}" if "from_sweep" in record else ""
        return RunState(run, "done", (f"BLEU {bleu:.2f}" if isinstance(bleu, (int, float)) else "") + taken)
    epoch = current_epoch(runs_dir(config) / f"{run.name}.train.log")
    if is_claimed(config, run.name):
        return RunState(run, "running", f"epoch {epoch}" if epoch else "starting")
    failure = work_dir(config) / "failed" / f"{run.name}.txt"
    if failure.is_file():
        return RunState(run, "failed", failure.read_text(encoding="utf-8").splitlines()[0])
    if any(checkpoints_dir(config, run.name).glob("checkpoint*.pt")):
        return RunState(run, "partway", f"epoch {epoch}" if epoch else "")
    return RunState(run, "to do")


def grid_states(config: StudyConfig) -> list[RunState]:
    """Every run's state; StudyError naming at once every record of another study or setting in the runs folder
    (grid, outside it, over seeds)."""
    refuse_foreign_records(config)
    states, refused = [], []
    for run in study_runs(config):
        try:
            states.append(run_state(config, run))
        except StudyError as error:
            refused.append(str(error))
    if refused:
        raise StudyError("\n".join(refused))
    return states


def finished_wall_times(config: StudyConfig, states: list[RunState],
                        key: str = "wall_time_s") -> dict[str, list[float]]:
    """Each system's finished runs' wall times in seconds (``key``: another number of their records), from their
    records (none of a run taken from a sweep)."""
    walls: dict[str, list[float]] = {}
    for found in states:
        if found.state == "done":
            record = read_record(runs_dir(config) / f"{found.run.name}.run.json") or {}
            if isinstance(record.get(key), (int, float)) and "from_sweep" not in record:
                walls.setdefault(found.run.system.name, []).append(record[key])
    return walls


def expected_means(walls: dict[str, list[float]], runs: list[Run],
                   scaled: dict[str, float] | None = None) -> list[float] | None:
    """What each of ``runs`` should take (wall seconds, or epochs: as ``walls`` holds), its system's finished runs'
    mean, else ``scaled``'s for its system, else every finished run's mean; None with no finished run."""
    if not walls:
        return None
    overall = statistics.fmean(value for values in walls.values() for value in values)
    means = {**(scaled or {}), **{system: statistics.fmean(values) for system, values in walls.items()}}
    return [means.get(run.system.name, overall) for run in runs]


def device_hours(training: Training, seconds: float) -> tuple[float, str]:
    """Wall ``seconds`` of a run as what it used: CPU thread-hours (times ``training.threads``), or GPU-hours."""
    if training.device == "cpu":
        return seconds / 3600 * training.threads, "CPU thread-hours"
    return seconds / 3600, "GPU-hours"


def cost_text(walls: dict[str, list[float]], left: list[Run], training: Training, whose: str = "",
              scaled: dict[str, float] | None = None, how: str = "") -> str:
    """What the runs ``left`` cost (:func:`expected_means`), in CPU thread-hours or GPU-hours; ``whose``: which
    finished runs (" of this size"), ``how``: whence ``scaled``."""
    if not left:
        return "nothing left to run"
    seconds = expected_means(walls, left, scaled)
    if seconds is None:
        return f"{len(left)} runs left; no finished run{whose} to estimate their cost from yet"
    hours, unit = device_hours(training, sum(seconds))
    finished = sum(map(len, walls.values()))
    return f"{len(left)} runs left: about {hours:.1f} {unit}, from {finished} finished runs{whose}{how}"


def grid_lines(states: list[RunState], prefix: str = "") -> list[str]:
    """``plan``'s line for each run (``prefix``: its size's label and a slash) and the count of each state."""
    width = max(len(prefix + found.run.name) for found in states)
    lines = [f"  {prefix + found.run.name:<{width}}  {found.state:<8} {found.detail:<24} "
             f"reads data-bin/{found.run.data}" for found in states]
    counts = {state: sum(1 for found in states if found.state == state)
              for state in ("done", "running", "partway", "failed", "to do", "to take")}
    return [*lines, "  " + ", ".join(f"{count} {state}" for state, count in counts.items() if count)]


def plan_lines(config: StudyConfig) -> list[str]:
    states = grid_states(config)
    left = [found.run for found in states if found.state != "done"]
    check_study(config, config.executor.kind, [run.name for run in left])  # run's checks, for the runs it would run
    return [f"study {config.name}: {len(states)} runs ({config.path})", *grid_lines(states),
            "  cost: " + cost_text(finished_wall_times(config, states), left, config.training)]


def status_lines(config: StudyConfig) -> list[str]:
    """What runs where now: the runs in training (with their epochs and Slurm job), the study's Slurm jobs queued,
    and those running that hold no run's claim yet."""
    training = [found for found in grid_states(config) if found.state == "running"]
    jobs = []
    if (work_dir(config) / "slurm").is_dir():
        from fairseq_syntax.study.slurm import study_jobs

        jobs = study_jobs(work_dir(config) / "slurm")
    in_training = {found.run.name for found in training}
    lines = []
    for found in training:
        runs_it = "".join(f", slurm job {job['job_id']} on {job['node']}" for job in jobs
                          if job["running"] and job["description"] == found.run.name)
        lines.append(f"  {found.run.name}: in training, {found.detail}{runs_it}")
    starting = [job for job in jobs if job["running"] and job["description"] not in in_training]
    queued = [job for job in jobs if not job["running"]]
    lines += [f"  {job['description']}: queued, slurm job {job['job_id']} {job['state']} ({job['reason']})"
              for job in queued]
    lines += [f"  {job['description']}: slurm job {job['job_id']} {job['state']} on {job['node']}, starting or ending "
              "(no process holds the run)" for job in starting]
    counts = [f"{len(training)} run{'s' * (len(training) != 1)} in training" if training else "",
              f"{len(queued)} slurm job{'s' * (len(queued) != 1)} queued" if queued else "",
              f"{len(starting)} slurm job{'s' * (len(starting) != 1)} starting or ending" if starting else ""]
    return [f"study {config.name}: " + (", ".join(filter(None, counts)) or "nothing in training or queued"), *lines]


def run_study(config: StudyConfig, executor: str, jobs: int, only: list[str] | None = None,
              progress: Callable[[str], None] = print) -> int:
    """``run``: refuse another study's records, prepare the data, run every missing run, score every system over
    its seeds; 0 when every run of the grid is done. A study over sizes is ``over_sizes.run_sizes``'s."""
    if config.size_list:
        raise StudyError(f"{config.path}: corpus.subset lists sizes {config.size_list}: a study over sizes is run "
                         "size by size (fairseq_syntax.study.over_sizes.run_sizes, as `run` does)")
    states = grid_states(config)  # another study's records stop it here, before anything is made
    names = {found.run.name for found in states}
    for name in only or []:
        if name not in names:
            raise StudyError(f"--only {name}: no such run in the study ({config.path}; plan lists them)")
    from fairseq_syntax.study.prepare import prepare

    to_run = [found.run for found in states if found.state != "done" and (not only or found.run.name in only)]
    check_study(config, executor, [run.name for run in to_run])  # plan's checks, before anything is made
    if to_run:  # the data of the runs left to do only: a fresh machine makes none for finished runs
        prepare(config, progress=progress, only=[run.name for run in to_run])
    held = [run.name for run in to_run if is_claimed(config, run.name)]
    tasks = [RunTask(str(config.path.resolve()), run.name) for run in to_run if run.name not in held]
    done = sum(found.state == "done" for found in states)
    left_out = len(states) - done - len(to_run)  # not done, and not named by --only
    progress(f"== {done} runs done, {len(tasks)} to run"
             + (f", {len(held)} in training elsewhere ({', '.join(held)})" if held else "")
             + (f", {left_out} not asked for (--only)" if left_out else ""))
    if tasks and executor == "local":
        from fairseq_syntax.study.local import run_local

        left = [run for run in to_run if run.name not in held]
        seconds, epochs = (expected_means(finished_wall_times(config, states, key), left)
                           for key in ("wall_time_s", "epochs"))
        outcomes = run_local(config, tasks, jobs, progress=progress,
                             prices=dict(zip(map(str, tasks), zip(seconds, epochs))) if seconds and epochs else None)
    elif tasks:
        outcomes = _run_on_slurm(config, tasks, progress)
    else:
        outcomes = []
    from fairseq_syntax.study.over_seeds import rescore_stale

    rescore_stale(config, progress=progress)
    failed = [outcome for outcome in outcomes if outcome.state == "failed"]
    for outcome in failed:
        progress(f"== failed: {outcome.run_name}: {outcome.detail}")
    left = [found for found in grid_states(config) if found.state != "done"]
    progress(f"== {len(states) - len(left)} of {len(states)} runs done" + (f"; {len(left)} not" if left else ""))
    return 0 if not left else 1


def _run_on_slurm(config: StudyConfig, tasks: list[RunTask], progress) -> list:
    from fairseq_syntax.study.runner import RunOutcome, execute
    from fairseq_syntax.study.slurm import failure_line, run_jobs

    results = run_jobs(execute, tasks, config.slurm, work_dir(config) / "slurm", job_name=f"study-{config.name}",
                       describe=str, progress=progress,
                       failure=lambda outcome: (outcome.detail or "failed") if outcome.state == "failed" else None)
    return [RunOutcome(str(task), "failed", failure_line(result)) if isinstance(result, BaseException) else result
            for task, result in results]
