"""study.slurm against a real single-node Slurm (conftest.py): results, failures, cancels, time limit, status."""
import os
import re
import socket
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from fairseq_syntax.study import slurm
from fairseq_syntax.study.config import ConfigError, Slurm, load_study
from fairseq_syntax.study.slurm import SlurmError, run_jobs, study_jobs, submitit_parameters

from . import slurm_job_functions as functions

TINY = Slurm(cpus_per_job=1, mem_gb=0.25, time_min=5)
TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def cluster(slurm_cluster, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setattr(slurm, "RESULT_GRACE_S", 2.0)
    monkeypatch.setattr(slurm, "POLL_S", 0.5)
    return slurm_cluster


def test_every_item_comes_back_as_its_result_or_its_jobs_exception(cluster, tmp_path):
    from submitit.core.utils import FailedJobError

    lines = []
    outcomes = run_jobs(functions.inverse, [1, 0, 4], TINY, tmp_path, job_name="inverses",
                        describe=lambda number: f"n={number}", progress=lines.append)
    assert [item for item, _ in outcomes] == [1, 0, 4]
    assert outcomes[0][1] == 1.0 and outcomes[2][1] == 0.25 and isinstance(outcomes[1][1], FailedJobError)
    assert slurm.failure_line(outcomes[1][1]) == "ZeroDivisionError: division by zero"
    assert sorted(line.split(" (job")[0] for line in lines if " done n=" in line) == [
        "inverses: done n=1", "inverses: done n=4"]
    failed = [line for line in lines if " failed " in line]
    assert len(failed) == 1 and failed[0].startswith("inverses: failed n=0 (job ")
    assert failed[0].endswith("): ZeroDivisionError: division by zero")
    assert lines[-1] == "inverses: 2 done, 1 failed, 0 running, 0 pending (of 3)"
    script = "\n".join(path.read_text() for path in tmp_path.glob("*_submission.sh"))
    for flag in ("--array=0-2%3", "--cpus-per-task=1", "--mem=256MB", "--time=5", "--job-name=inverses"):
        assert f"#SBATCH {flag}\n" in script, flag
    assert "--gpus-per-node" not in script and "--partition" not in script


def _in_background(**run_jobs_arguments) -> tuple[threading.Thread, dict, list[str]]:
    """(thread running run_jobs, dict that gets its outcomes, progress lines)."""
    lines, done = [], {}
    thread = threading.Thread(target=lambda: done.update(outcomes=run_jobs(**run_jobs_arguments,
                                                                           progress=lines.append)))
    thread.start()
    return thread, done, lines


def _wait_for(path: Path, thread: threading.Thread, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"no {path.name} within {seconds} s"
        assert thread.is_alive(), f"run_jobs ended before {path.name}"
        time.sleep(0.2)


def test_a_cancelled_job_is_failed_with_slurms_line_and_the_others_return(cluster, tmp_path):
    """One job at a time: the first, cancelled, leaves no result (an UncompletedJobError with Slurm's line); the
    second, whose child dies of SIGTERM, returns a failed outcome printed failed with Slurm's line, never done."""
    from submitit.core.utils import FailedJobError, UncompletedJobError

    releases = [tmp_path / name for name in ("first", "second", "third")]
    releases[2].touch()
    items = [("wait", str(releases[0])), ("child", str(releases[1])), ("wait", str(releases[2]))]
    folder = tmp_path / "jobs"
    waiting, done, lines = _in_background(
        function=functions.wait_or_child, items=items, settings=replace(TINY, array_parallelism=1), folder=folder,
        job_name="waits", describe=lambda item: Path(item[1]).name,
        failure=lambda outcome: outcome[1] if isinstance(outcome, tuple) and outcome[0] == "failed" else None)
    try:
        _wait_for(tmp_path / "first.started", waiting)
        queued = study_jobs(folder)
        assert [(job["array_index"], job["state"], job["description"], job["running"]) for job in queued] == [
            (0, "RUNNING", "first", True), (1, "PENDING", "second", False), (2, "PENDING", "third", False)]
        assert queued[1]["reason"] == "JobArrayTaskLimit"
        assert queued[0]["job_id"] == f"{queued[0]['job_id'].split('_')[0]}_0"
        subprocess.run(["scancel", queued[0]["job_id"]], check=True)
        _wait_for(tmp_path / "second.started", waiting, 90)
        subprocess.run(["scancel", queued[1]["job_id"]], check=True)
        waiting.join(90)
        assert not waiting.is_alive(), "run_jobs still waits 90 s after the cancels"
    finally:
        for release in releases:  # whatever happened, the jobs end
            release.touch()
    outcomes = done["outcomes"]
    assert [item for item, _ in outcomes] == items
    cancelled = outcomes[0][1]
    assert type(cancelled) is UncompletedJobError and not isinstance(cancelled, FailedJobError)
    assert f"Slurm job {queued[0]['job_id']} (first) ended without a result" in str(cancelled)
    assert "CANCELLED AT" in str(cancelled)
    assert [outcome for _, outcome in outcomes[1:]] == [("failed", "the child ended by SIGTERM"), "released: third"]
    failed = sorted(line for line in lines if " failed " in line)  # first's, then second's
    assert len(failed) == 2 and failed[0].startswith(
        f"waits: failed first (job {queued[0]['job_id']}): Slurm job {queued[0]['job_id']} (first) ended without a "
        f"result: JOB ") and " CANCELLED AT " in failed[0], failed
    host = socket.gethostname().split(".")[0]
    assert re.fullmatch(rf"waits: failed second \(job {queued[1]['job_id']}\): the child ended by SIGTERM; "
                        rf"Slurm: JOB \d+ ON {host} CANCELLED AT \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d", failed[1]), failed
    assert not any(line.startswith("waits: done second") for line in lines)
    counts = [line for line in lines if line.endswith("(of 3)")]
    assert all(not line.startswith("waits: 2 done") for line in counts), counts
    assert max(map(lines.index, failed)) < lines.index(counts[-1])
    assert counts[-1] == "waits: 1 done, 2 failed, 0 running, 0 pending (of 3)"


def test_a_job_at_its_time_limit_is_printed_failed_when_it_ends(cluster, tmp_path):
    """A one-minute job that runs longer ends in a FailedJobError, printed failed with submitit's reason."""
    from submitit.core.utils import FailedJobError

    lines = []
    outcomes = run_jobs(functions.child_until_release, [str(tmp_path / "never")], replace(TINY, time_min=1),
                        tmp_path / "jobs", job_name="limit", describe=lambda path: "sequence.seed1",
                        progress=lines.append,
                        failure=lambda outcome: outcome[1] if outcome[0] == "failed" else None)
    assert isinstance(outcomes[0][1], FailedJobError)
    job = lines[0].split("Slurm job ")[1].split(",")[0]
    assert [line for line in lines if " failed sequence" in line] == [
        f"limit: failed sequence.seed1 (job {job}): submitit.core.utils.UncompletedJobError: Job not requeued "
        "because: timed-out and not checkpointable."]
    assert lines[-1] == "limit: 0 done, 1 failed, 0 running, 0 pending (of 1)"


def test_status_counts_runs_in_training_and_queued_jobs_apart(cluster, tmp_path):
    """status: a job holding its run's claim is in training, one without is starting or ending, a waiting one
    queued; ended jobs are left out."""
    from fairseq_syntax.study.commands import status_lines
    from fairseq_syntax.study.records import work_dir

    from .tiny_study_file import SETTINGS

    (tmp_path / "study.toml").write_text(SETTINGS.format(epochs=1) + '[[systems]]\nname = "sequence"\n'
                                         '[[systems]]\nname = "mask"\n', encoding="utf-8")
    config = load_study(tmp_path / "study.toml")
    assert status_lines(config) == ["study tiny: nothing in training or queued"]
    claims = work_dir(config) / "claims"
    claims.mkdir(parents=True)
    runs = ["sequence.seed1", "sequence.seed2", "mask.seed1"]
    releases = [tmp_path / f"release-{name}" for name in runs]
    items = [(str(claims / "sequence.seed1.lock"), str(releases[0])), ("", str(releases[1])),
             (str(claims / "mask.seed1.lock"), str(releases[2]))]
    waiting, done, lines = _in_background(
        function=functions.hold_claim_until_release, items=items, settings=replace(TINY, array_parallelism=2),
        folder=work_dir(config) / "slurm", job_name="study-tiny", describe=lambda item: runs[items.index(item)])
    try:
        for release in releases[:2]:
            _wait_for(release.with_name(release.name + ".started"), waiting)
        array = lines[0].split("Slurm job array ")[1].split(",")[0]
        host = socket.gethostname().split(".")[0]
        assert status_lines(config) == [
            "study tiny: 1 run in training, 1 slurm job queued, 1 slurm job starting or ending",
            f"  sequence.seed1: in training, starting, slurm job {array}_0 on {host}",
            f"  mask.seed1: queued, slurm job {array}_2 PENDING (JobArrayTaskLimit)",
            f"  sequence.seed2: slurm job {array}_1 RUNNING on {host}, starting or ending (no process holds the run)"]
    finally:
        for release in releases:
            release.touch()
    waiting.join(90)
    assert not waiting.is_alive(), "run_jobs still waits 90 s after the releases"
    assert [outcome for _, outcome in done["outcomes"]] == [f"released: {release.name}" for release in releases]
    deadline = time.monotonic() + 60
    while study_jobs(work_dir(config) / "slurm"):
        assert time.monotonic() < deadline, study_jobs(work_dir(config) / "slurm")
        time.sleep(0.5)
    known = subprocess.run(["squeue", "--noheader", "--array", "--states=all", f"--jobs={array}", "--format=%i %T"],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert sorted(known) == [f"{array}_{index} COMPLETED" for index in range(3)]
    assert status_lines(config) == ["study tiny: nothing in training or queued"]


def test_a_request_the_cluster_cannot_satisfy_is_one_line(cluster, tmp_path):
    too_big = Slurm(mem_gb=100_000)
    with pytest.raises(SlurmError) as refused:
        run_jobs(functions.inverse, [1, 2], too_big, tmp_path, job_name="big")
    assert str(refused.value) == ("sbatch refused the job array 'big': sbatch: error: Batch job submission failed: "
                                  "Requested node configuration is not available")
    assert study_jobs(tmp_path) == []


@pytest.mark.parametrize("line, problem", [
    ("cpus_per_job = 0", "slurm.cpus_per_job: must be an integer >= 1, not 0"),
    ("gpus_per_job = -1", "slurm.gpus_per_job: must be an integer >= 0, not -1"),
    ("mem_gb = 0", "slurm.mem_gb: must be a number > 0.0, not 0"),
    ("time_min = 1.5", "slurm.time_min: must be an integer >= 1, not 1.5"),
    ('extra = {"--account" = "nlp"}', "slurm.extra: must be a table of sbatch parameters (strings or integers) "
                                      "without their '--', not {'--account': 'nlp'}"),
])
def test_settings_out_of_range_are_refused_naming_the_key(tmp_path, line, problem):
    study = tmp_path / "study.toml"
    study.write_text(f'[study]\nname = "x"\n[corpus]\nraw = "raw"\n[[systems]]\nname = "sequence"\n[slurm]\n{line}\n')
    with pytest.raises(ConfigError) as refused:
        load_study(study)
    assert refused.value.problems == [f"{study}: {problem}"]


def test_the_settings_become_submitits_parameters():
    settings = Slurm(partition="gpu", cpus_per_job=4, gpus_per_job=1, mem_gb=16, time_min=600, array_parallelism=8,
                     extra={"account": "nlp", "qos": 2})
    assert submitit_parameters(settings, "study") == {
        "name": "study", "nodes": 1, "tasks_per_node": 1, "cpus_per_task": 4, "mem_gb": 16, "timeout_min": 600,
        "slurm_array_parallelism": 8, "gpus_per_node": 1, "slurm_partition": "gpu",
        "slurm_additional_parameters": {"account": "nlp", "qos": "2"}}
