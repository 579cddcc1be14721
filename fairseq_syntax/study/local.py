"""The local executor: N runs at once on this machine, each in a process of its own on cores of its own.

Each run is ``python -m fairseq_syntax.study.runner STUDY.toml RUN`` (:func:`fairseq_syntax.study.runner.execute`),
its console output in ``WORK/logs/RUN.log``. Slot ``i`` of ``jobs`` gets cores ``i*T .. i*T+T-1`` (T:
``training.threads``, modulo the machine's cores) by CPU affinity, so two runs of one thread each never share a core.
A progress line is printed whenever a run starts or ends and every ``interval`` seconds: the runs done / to do, the
elapsed time with an estimate of the rest, and the current runs' epochs (read from their training logs). Interrupted
(Ctrl-C, a killed ``run``), the children are stopped; the next ``run`` goes on from their checkpoints.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from fairseq_syntax.study.config import StudyConfig
from fairseq_syntax.study.runner import REPO_ROOT, RunOutcome, RunTask, runs_dir, work_dir

EPOCH = re.compile(r"epoch (\d+) \| valid on")
#: the runner's exit status -> its outcome's state
STATES = {0: "done", 3: "held"}


def current_epoch(log: Path) -> int | None:
    """The last epoch a training log has validated (None before the first)."""
    if not log.is_file():
        return None
    found = EPOCH.findall(log.read_text(encoding="utf-8", errors="replace")[-200_000:])
    return int(found[-1]) if found else None


def _cores(slot: int, threads: int) -> set[int]:
    available = sorted(os.sched_getaffinity(0))
    return {available[(slot * threads + offset) % len(available)] for offset in range(threads)}


def _eta(elapsed: float, finished: int, remaining: int) -> str:
    if not finished:
        return "?"
    seconds = elapsed / finished * remaining
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def run_local(config: StudyConfig, tasks: Sequence[RunTask], jobs: int, progress: Callable[[str], None] = print,
              interval: float = 60.0) -> list[RunOutcome]:
    """Run ``tasks`` with ``jobs`` at once; each one's outcome, in the order they ended."""
    threads = config["training"]["threads"]
    logs = work_dir(config) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    waiting = list(tasks)
    active: dict[int, tuple[subprocess.Popen, RunTask]] = {}
    outcomes: list[RunOutcome] = []
    started, last_line = time.time(), 0.0
    total = len(waiting)

    def report(now: float) -> None:
        running = ", ".join(
            f"{task.run_name} (epoch {current_epoch(runs_dir(config) / f'{task.run_name}.train.log') or 0})"
            for _, task in active.values())
        done = len(outcomes)
        progress(f"[{done}/{total} runs ended, {len(waiting)} waiting] {(now - started) / 60:.0f} min elapsed, "
                 f"about {_eta(now - started, done, total - done)} to go; running: {running or 'none'}")

    try:
        while waiting or active:
            changed = False
            for slot in range(jobs):
                if slot not in active and waiting:
                    task = waiting.pop(0)
                    cores = _cores(slot, threads)
                    with open(logs / f"{task.run_name}.log", "a", encoding="utf-8") as log:
                        child = subprocess.Popen(
                            [sys.executable, "-m", "fairseq_syntax.study.runner", task.config_path, task.run_name],
                            stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, start_new_session=True,
                            preexec_fn=lambda cores=cores: os.sched_setaffinity(0, cores))
                    active[slot] = (child, task)
                    progress(f"== start {task.run_name} on core(s) {','.join(map(str, sorted(cores)))} "
                             f"(log: {logs / (task.run_name + '.log')})")
                    changed = True
            for slot, (child, task) in list(active.items()):
                status = child.poll()
                if status is None:
                    continue
                del active[slot]
                state = STATES.get(status, "failed")
                outcomes.append(RunOutcome(task.run_name, state, "" if state != "failed" else
                                           f"exit status {status}; see {logs / (task.run_name + '.log')}"))
                progress(f"== {task.run_name}: {state}")
                changed = True
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
            progress(f"== {task.run_name}: stopped (it goes on from its checkpoint at the next run)")
        raise
    return outcomes
