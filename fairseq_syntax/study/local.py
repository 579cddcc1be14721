"""The local executor: N runs at once, each ``python -m fairseq_syntax.study.runner STUDY.toml RUN`` (output in
``WORK/logs/RUN.log``) on ``training.threads`` cores of its own, claimed with a ``flock`` on
``TMPDIR/fairseq-syntax-study-cores-UID/coreN.lock`` that its process inherits: no two runs share a core, even of
two studies. Interrupted, the children are stopped; the next ``run`` resumes from their checkpoints."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from statistics import fmean
from typing import Any
from pathlib import Path

from fairseq_syntax.core.files import try_lock
from fairseq_syntax.study.config import StudyConfig
from fairseq_syntax.study.processes import REPO_ROOT
from fairseq_syntax.study.records import runs_dir, work_dir
from fairseq_syntax.study.runner import RunOutcome, RunTask

#: a validation's line of fairseq-train: its time (fairseq's log format), its epoch
VALIDATED = re.compile(r"^(?:(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \|)?.*?epoch (\d+) \| valid on", re.M)
#: the runner's exit status -> its outcome's state
STATES = {0: "done", 3: "held"}


def validations(log: Path) -> list[tuple[int, float | None]]:
    """Each epoch a training log has validated, with when (as ``time.time()`` counts; None for a line without it)."""
    text = log.read_text(encoding="utf-8", errors="replace")[-200_000:] if log.is_file() else ""
    return [(int(epoch), time.mktime(time.strptime(when, "%Y-%m-%d %H:%M:%S")) if when else None)
            for when, epoch in VALIDATED.findall(text)]


def current_epoch(log: Path) -> int | None:
    """The last epoch a training log has validated (None before the first)."""
    found = validations(log)
    return found[-1][0] if found else None


def core_claims_folder() -> Path:
    """Where this user's runs claim their cores, one lock file a core (shared by every study on the machine)."""
    folder = Path(tempfile.gettempdir()) / f"fairseq-syntax-study-cores-{os.getuid()}"
    folder.mkdir(exist_ok=True)
    return folder


def claim_cores(threads: int) -> tuple[set[int], list[int]] | None:
    """``threads`` cores of this process's affinity that no other run holds, with the open lock files holding them
    (passed to the run's process, closed once it starts); None when fewer are free."""
    cores, held = set(), []
    for core in sorted(os.sched_getaffinity(0)):
        descriptor = os.open(core_claims_folder() / f"core{core}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        if not try_lock(descriptor):
            os.close(descriptor)
            continue
        cores.add(core)
        held.append(descriptor)
        if len(cores) == threads:
            return cores, held
    for descriptor in held:
        os.close(descriptor)
    return None


def time_left(waiting: list[float], running: list[tuple[float, float, int]], jobs: int, pace: float = 1.0) -> float:
    """Seconds until the last run ends, ``jobs`` at once, each queued run starting on the first free slot in order.
    ``waiting``: each queued run's expected seconds; ``running``: each running run's expected seconds and epochs,
    and the epochs it has done (a resumed run's included); ``pace``: this machine's seconds per expected second."""
    slots = sorted([pace * seconds * max(1 - done / epochs, 0.0) for seconds, epochs, done in running]
                   + [0.0] * (jobs - len(running)))
    for seconds in waiting:
        slots[0] += pace * seconds
        slots.sort()
    return max(slots)


def run_pace(validated: list[tuple[int, float | None]], price: tuple[float, float]) -> float | None:
    """A run's seconds per epoch between the first and the last of ``validated`` (the epochs it validated here, with
    when: its start-up left out) over its ``price``'s (seconds, epochs); None before two."""
    timed = [(epoch, when) for epoch, when in validated if when is not None]
    if len(timed) < 2 or timed[-1][0] == timed[0][0]:
        return None
    (first, start), (last, end), (seconds, epochs) = timed[0], timed[-1], price
    return (end - start) / (last - first) / (seconds / epochs)


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def run_local(config: StudyConfig, tasks: Sequence[RunTask], jobs: int, progress: Callable[[str], None] = print,
              interval: float = 60.0, prices: dict[str, tuple[float, float]] | None = None,
              more: Callable[[RunOutcome], list[RunTask]] | None = None,
              order: Callable[[RunTask], Any] | None = None) -> list[RunOutcome]:
    """Run ``tasks`` with ``jobs`` at once; each one's outcome, in the order they ended. ``prices``: each task's
    (``str(task)``) expected wall seconds and epochs, for :func:`time_left` (a task without one: their mean; the
    pace: :func:`run_pace`'s mean); None: the time left from the pool's ended runs. ``more``: called with each
    ended run's outcome, returns the tasks it made ready (then sorted by ``order``)."""
    threads = config.training.threads
    studies: dict[str, StudyConfig] = {}

    def study_of(task: RunTask) -> StudyConfig:
        """The study a task's run belongs to (a point of a study over sizes has its own folders)."""
        if task.point not in studies:
            studies[task.point] = task.study() if task.point else config
        return studies[task.point]

    def log_of(task: RunTask) -> Path:
        logs = work_dir(study_of(task)) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        return logs / f"{task.run_name}.log"

    waiting = list(tasks)
    active: dict[int, tuple[subprocess.Popen, RunTask]] = {}
    outcomes: list[RunOutcome] = []
    started, last_line = time.time(), 0.0
    waiting_for_cores = False
    total = len(waiting)

    begun: dict[str, float] = {}
    paces: dict[str, float] = {}

    def report(now: float) -> None:
        found = {str(task): validations(runs_dir(study_of(task)) / f"{task.run_name}.train.log")
                 for _, task in active.values()}
        epochs = {name: lines[-1][0] if lines else 0 for name, lines in found.items()}
        running = ", ".join(f"{task} (epoch {epochs[str(task)]})" for _, task in active.values())
        done = len(outcomes)
        if prices:
            mean = tuple(map(fmean, zip(*prices.values())))
            price = {name: prices.get(name, mean) for name in [*map(str, waiting), *epochs]}
            paces.update({name: pace for name, lines in found.items() if (pace := run_pace(
                [line for line in lines if (line[1] or 0) >= begun[name]], price[name]))})
            left = time_left([price[str(task)][0] for task in waiting],
                             [(*price[name], epoch) for name, epoch in epochs.items()], jobs,
                             fmean(paces.values()) if paces else 1.0)
        else:
            left = (now - started) / done * (total - done) if done else None
        left = _eta(left)
        progress(f"[{done}/{total} runs ended, {len(waiting)} waiting] {(now - started) / 60:.0f} min elapsed, "
                 f"about {left} to go; running: {running or 'none'}")

    try:
        while waiting or active:
            changed = False
            for slot in range(jobs):
                if slot not in active and waiting:
                    claim = claim_cores(min(threads, len(os.sched_getaffinity(0))))
                    if claim is None:  # every core is another run's: wait for one to end
                        if not waiting_for_cores:
                            progress(f"== {len(waiting)} runs waiting for a free core (the claims in "
                                     f"{core_claims_folder()})")
                            waiting_for_cores = True
                        break
                    waiting_for_cores = False
                    cores, held = claim
                    task = waiting.pop(0)
                    try:
                        with open(log_of(task), "a", encoding="utf-8") as log:
                            # the run's process holds the claims until it ends, even if this pool is killed
                            child = subprocess.Popen(
                                [sys.executable, "-m", "fairseq_syntax.study.runner", task.config_path,
                                 task.run_name, *([task.point] if task.point else [])], stdout=log,
                                stderr=subprocess.STDOUT, cwd=REPO_ROOT,
                                start_new_session=True, pass_fds=tuple(held),
                                preexec_fn=lambda cores=cores: os.sched_setaffinity(0, cores))
                    finally:
                        for descriptor in held:
                            os.close(descriptor)
                    active[slot] = (child, task)
                    begun[str(task)] = time.time() - 1  # the log's times are whole seconds
                    progress(f"== start {task} on core(s) {','.join(map(str, sorted(cores)))} "
                             f"(log: {log_of(task)})")
                    changed = True
            for slot, (child, task) in list(active.items()):
                status = child.poll()
                if status is None:
                    continue
                del active[slot]
                state = STATES.get(status, "failed")
                outcomes.append(RunOutcome(str(task), state, "" if state != "failed" else
                                           f"exit status {status}; see {log_of(task)}"))
                progress(f"== {task}: {state}")
                changed = True
                added = more(outcomes[-1]) if more is not None else []
                if added:
                    waiting += added
                    total += len(added)
                    if order is not None:
                        waiting.sort(key=order)
                    progress(f"== {len(added)} runs ready now: {', '.join(map(str, added))}")
            now = time.time()
            if changed or now - last_line >= interval:
                report(now)
                last_line = now
            time.sleep(0.5 if changed else min(2.0, interval))
    except KeyboardInterrupt:
        for child, task in active.values():
            os.killpg(child.pid, signal.SIGTERM)  # the runner and the training it started
        for child, task in active.values():
            child.wait()
            progress(f"== {task}: stopped (it goes on from its checkpoint at the next run)")
        raise
    return outcomes
