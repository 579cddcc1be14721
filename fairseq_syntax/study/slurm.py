"""The study's Slurm executor, through submitit: ``run_jobs`` submits ``function(item)`` for every item as one task
of a job array and returns each item's result or the exception its job ended with (one job's failure never stops the
others); ``study_jobs`` lists what of a study's arrays is still queued, from the ``ARRAYID_items.json`` each array
leaves in its folder.

A job is judged by its result file and ``squeue --states=all``, never by ``sacct`` (a cluster without accounting
leaves submitit's state ``UNKNOWN``): one that has left the queue without a result for ``RESULT_GRACE_S`` ended in
an ``UncompletedJobError`` naming Slurm's own line on how it ended (``*** JOB 13 ON node1 CANCELLED AT ... ***``)
and its log. Every job gets ``--signal=USR2@90``; one item is a plain job (id ``123``), more an array (``123_0``)."""
from __future__ import annotations

import importlib.util
import json
import os
import pwd
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from fairseq_syntax.core.files import write_atomically
from fairseq_syntax.study.config import Slurm

T = TypeVar("T")
R = TypeVar("R")

#: seconds a job that has left the queue may take to show its result file (submitit waits as long, 15 s)
RESULT_GRACE_S = 15.0
#: seconds between two looks at the result files and the queue
POLL_S = 2.0
#: the queue's states of a job that runs (or is ending); every other state it is listed in waits, or has ended
RUNNING_STATES = {"RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING"}
#: the end states ``squeue --states=all`` lists a job in until the controller forgets it (``MinJobAge``)
ENDED_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
                "OUT_OF_MEMORY"}
#: the end states in which Slurm, not the job's own program, ended it
ENDED_BY_SLURM = ENDED_STATES - {"COMPLETED", "FAILED"}
ITEMS_SUFFIX = "_items.json"


class SlurmError(RuntimeError):
    """Slurm or submitit cannot be used, or the cluster refused a submission: one line saying why."""


def submitit_parameters(settings: Slurm, job_name: str) -> dict:
    """The ``update_parameters`` of submitit's AutoExecutor for a study's ``[slurm]`` section (checked as it was
    read: :class:`~fairseq_syntax.study.config.Slurm`)."""
    parameters = {"name": job_name, "nodes": 1, "tasks_per_node": 1, "cpus_per_task": settings.cpus_per_job,
                  "mem_gb": settings.mem_gb, "timeout_min": settings.time_min,
                  "slurm_array_parallelism": settings.array_parallelism}
    if settings.gpus_per_job:  # no --gpus-per-node=0: a cluster without GPUs need not know the option
        parameters["gpus_per_node"] = settings.gpus_per_job
    if settings.partition:
        parameters["slurm_partition"] = settings.partition
    if settings.extra:
        parameters["slurm_additional_parameters"] = {key: str(value) for key, value in settings.extra.items()}
    return parameters


def slurm_missing() -> str | None:
    """What ``--executor slurm`` needs that is not here (submitit, found without importing it; Slurm's commands), or
    None."""
    if importlib.util.find_spec("submitit") is None:
        return "submitit, which is not installed here: pip install -e '.[slurm]' (from the repository)"
    missing = [program for program in ("sbatch", "squeue", "srun") if shutil.which(program) is None]
    if missing:
        return (f"a Slurm cluster's commands, and {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not on "
                "PATH here")
    return None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def queue() -> dict[str, dict[str, str]] | None:
    """The queue's jobs of this process's user by submitit's job id (``123_4``, ``123``): state,
    reason, node; ended jobs too while the controller keeps them, in one of ``ENDED_STATES``. None when ``squeue``
    fails."""
    user = pwd.getpwuid(os.getuid()).pw_name
    try:
        listed = subprocess.run(["squeue", "--noheader", "--array", "--states=all", f"--user={user}",
                                 "--format=%i|%T|%r|%N"],
                                capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listed.returncode != 0:
        return None
    jobs = {}
    for line in listed.stdout.splitlines():
        fields = line.strip().split("|")
        if len(fields) == 4:
            jobs[fields[0]] = {"state": fields[1], "reason": fields[2], "node": fields[3]}
    return jobs


def slurm_end(job, state: str) -> str:
    """Slurm's own word on how ``job`` ended, where Slurm ended it: its log's line (``JOB 13 ON node1 CANCELLED AT
    ...``, ``... DUE TO TIME LIMIT``), else ``state`` where it is in ``ENDED_BY_SLURM``; "" for a job that ended by
    itself."""
    log = job.paths.stderr
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    ended = [line.split("***")[1].strip() for line in lines if re.search(r"\*\*\* JOB .* \*\*\*", line)]
    return ended[0] if ended else state if state in ENDED_BY_SLURM else ""


def _uncompleted(job, description: str, last_state: str):
    from submitit.core.utils import UncompletedJobError

    how = slurm_end(job, last_state) or "cancelled, timed out or its node failed"
    return UncompletedJobError(f"Slurm job {job.job_id} ({description}) ended without a result: {how} "
                               f"(last seen {last_state} in the queue; its log: {job.paths.stderr})")


def failure_line(outcome: BaseException) -> str:
    """One line saying why a job failed: for ``FailedJobError`` the last line of the function's traceback, for any
    other exception its first line."""
    from submitit.core.utils import FailedJobError

    if isinstance(outcome, FailedJobError):  # the trace sits between two lines of dashes
        trace = str(outcome).split("-" * 22)
        return _last_line(trace[1] if len(trace) > 2 else str(outcome))
    return str(outcome).splitlines()[0] if str(outcome) else type(outcome).__name__


def run_jobs(function: Callable[[T], R], items: Sequence[T], settings: Slurm, folder: Path, *,
             job_name: str, describe: Callable[[T], str] = str, progress: Callable[[str], None] = print,
             failure: Callable[[R], str | None] = lambda result: None) -> list[tuple[T, R | BaseException]]:
    """``function(item)`` for every item as one Slurm job array; waits for every job, printing progress, and returns
    ``(item, result or exception)`` in the items' order (module docstring). ``failure(result)``: why a returned value
    is a failure, else None. Raises ``SlurmError`` where Slurm or submitit is missing or the cluster refuses the
    array. ``function`` and items must be picklable and ``folder`` shared with the nodes."""
    items = list(items)
    if not items:
        return []
    missing = slurm_missing()
    if missing:
        raise SlurmError(f"--executor slurm needs {missing}")
    import submitit
    from submitit.core.utils import FailedJobError

    descriptions = [describe(item) for item in items]
    folder = Path(folder).absolute()
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    executor.update_parameters(**submitit_parameters(settings, job_name))
    try:
        jobs = executor.map_array(function, items)
    except FailedJobError as refused:  # sbatch's own error, e.g. "Requested node configuration is not available"
        raise SlurmError(f"sbatch refused the job array {job_name!r}: {_last_line(refused)}") from None
    array_id = jobs[0].job_id.split("_")[0]
    write_atomically(folder / f"{array_id}{ITEMS_SUFFIX}", json.dumps({"job_name": job_name, "jobs": [
        {"job_id": job.job_id, "index": index, "description": description}
        for index, (job, description) in enumerate(zip(jobs, descriptions))]}, indent=1) + "\n")
    total = len(jobs)
    progress(f"{job_name}: Slurm job {'array ' if total > 1 else ''}{array_id}, {total} job{'s' * (total > 1)}; "
             f"scancel {array_id} stops {'them' if total > 1 else 'it'}")

    outcomes: dict[int, object] = {}
    failed: set[int] = set()
    last_state = {index: "PENDING" for index in range(total)}
    ended_at: dict[int, float] = {}  # when a job was first seen ended in the queue, or gone from it
    queue_failed_since = None
    shown = None
    try:
        while len(outcomes) < total:
            listed = queue()
            now = time.monotonic()
            if listed is None:
                if queue_failed_since is None or now - queue_failed_since > 60:
                    progress(f"{job_name}: squeue does not answer; trying again")
                    queue_failed_since = now
            else:
                queue_failed_since = None
            for index, job in enumerate(jobs):
                if index in outcomes:
                    continue
                if listed is not None and job.job_id in listed:
                    last_state[index] = listed[job.job_id]["state"]
                if job.paths.result_pickle.exists():
                    try:
                        outcome = job.result()  # returns at once: the result file is there
                    except Exception as error:  # the function's error (FailedJobError) or an unreadable result
                        outcome = error
                elif listed is None:
                    continue
                elif job.job_id in listed and last_state[index] not in ENDED_STATES:
                    ended_at.pop(index, None)  # waiting or running (again, after a requeue)
                    continue
                elif now - ended_at.setdefault(index, now) < RESULT_GRACE_S:
                    continue
                else:
                    outcome = _uncompleted(job, descriptions[index], last_state[index])
                outcomes[index] = outcome
                reason = failure_line(outcome) if isinstance(outcome, BaseException) else failure(outcome)
                if reason is None:
                    progress(f"{job_name}: done {descriptions[index]} (job {job.job_id})")
                    continue
                failed.add(index)
                slurm_word = slurm_end(job, last_state[index])
                if slurm_word and slurm_word not in reason:
                    reason += f"; Slurm: {slurm_word}"
                progress(f"{job_name}: failed {descriptions[index]} (job {job.job_id}): {reason}")
            running = sum(1 for index in range(total) if index not in outcomes
                          and (last_state[index] in RUNNING_STATES or index in ended_at))
            counts = (len(outcomes) - len(failed), len(failed), running, total - len(outcomes) - running)
            if counts != shown:
                progress(f"{job_name}: {counts[0]} done, {counts[1]} failed, {counts[2]} running, {counts[3]} pending "
                         f"(of {total})")
                shown = counts
            if len(outcomes) < total:
                time.sleep(POLL_S)
    except KeyboardInterrupt:
        progress(f"{job_name}: stopped waiting; the jobs stay in the queue (scancel {array_id} stops them)")
        raise
    return [(item, outcomes[index]) for index, item in enumerate(items)]


def study_jobs(folder: Path) -> list[dict]:
    """The jobs ``run_jobs`` submitted under ``folder`` that wait or run now: ``job_id``, ``array_index`` (None for a
    plain job), ``state``, ``reason``, ``node``, ``description`` and ``running`` (state in ``RUNNING_STATES``), in
    order of submission. Raises ``SlurmError`` when ``squeue`` fails."""
    records = []
    for path in sorted(Path(folder).glob(f"*{ITEMS_SUFFIX}"), key=lambda path: int(path.name.split("_")[0])):
        try:
            records.extend(json.loads(path.read_text(encoding="utf-8"))["jobs"])
        except (OSError, ValueError, KeyError) as error:
            raise SlurmError(f"{path}: not a record of run_jobs ({error})") from None
    if not records:
        return []
    if shutil.which("squeue") is None:
        raise SlurmError(f"{folder} holds Slurm jobs, and squeue is not on PATH here")
    listed = queue()
    if listed is None:
        raise SlurmError("squeue failed: the Slurm controller does not answer")
    return [{"job_id": record["job_id"], "array_index": int(record["job_id"].split("_")[1])
             if "_" in record["job_id"] else None, **listed[record["job_id"]], "description": record["description"],
             "running": listed[record["job_id"]]["state"] in RUNNING_STATES}
            for record in records
            if record["job_id"] in listed and listed[record["job_id"]]["state"] not in ENDED_STATES]
