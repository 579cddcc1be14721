"""The study's Slurm executor (fairseq_syntax/study/slurm.py) against a real single-node Slurm (conftest.py's
``slurm_cluster``), no mock: results, a function that raises, a job cancelled with ``scancel``, the queue as
``status`` shows it, a request the cluster refuses. The jobs are a few seconds of Python each (slurm_job_functions)."""
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from fairseq_syntax.study import slurm
from fairseq_syntax.study.slurm import SlurmError, SlurmSettings, run_jobs, study_jobs

from . import slurm_job_functions as functions

#: one CPU, a quarter of a GB and five minutes a job: the node has two CPUs, both busy with other work
TINY = SlurmSettings(cpus_per_job=1, mem_gb=0.25, time_min=5)
TESTS = Path(__file__).resolve().parents[1]  # where the jobs import slurm_job_functions from (as study.*)


@pytest.fixture
def cluster(slurm_cluster, monkeypatch):
    # sbatch passes this process's environment on to the jobs
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setattr(slurm, "RESULT_GRACE_S", 2.0)  # a local filesystem: no lag to wait out
    monkeypatch.setattr(slurm, "POLL_S", 0.5)
    return slurm_cluster


def test_every_item_comes_back_as_its_result(cluster, tmp_path):
    lines = []
    outcomes = run_jobs(functions.square, [2, 3, 4], TINY, tmp_path, job_name="squares",
                        describe=lambda number: f"n={number}", progress=lines.append)
    assert outcomes == [(2, 4), (3, 9), (4, 16)]
    assert sorted(line.split(" (job")[0] for line in lines if " done n=" in line) == [
        "squares: done n=2", "squares: done n=3", "squares: done n=4"]
    assert lines[-1] == "squares: 3/3 done, 0 running, 0 pending"
    # one array of three (all at once: fewer than array_parallelism), each job with the settings' request
    script = "\n".join(path.read_text() for path in tmp_path.glob("*_submission.sh"))
    for flag in ("--array=0-2%3", "--cpus-per-task=1", "--mem=256MB", "--time=5", "--job-name=squares"):
        assert f"#SBATCH {flag}\n" in script, flag
    assert "--gpus-per-node" not in script and "--partition" not in script


def test_a_job_whose_function_raises_comes_back_as_its_exception(cluster, tmp_path):
    from submitit.core.utils import FailedJobError

    lines = []
    outcomes = run_jobs(functions.inverse, [1, 0, 4], TINY, tmp_path, job_name="inverses", progress=lines.append)
    assert [item for item, _ in outcomes] == [1, 0, 4]
    assert outcomes[0][1] == 1.0 and outcomes[2][1] == 0.25
    assert isinstance(outcomes[1][1], FailedJobError)
    assert "ZeroDivisionError: division by zero" in str(outcomes[1][1])
    assert slurm.failure_line(outcomes[1][1]) == "ZeroDivisionError: division by zero"
    failed = [line for line in lines if " failed " in line]
    assert len(failed) == 1 and failed[0].startswith("inverses: failed 0 (job ")
    assert failed[0].endswith("): ZeroDivisionError: division by zero")


def test_a_cancelled_job_comes_back_as_an_exception_and_the_others_return(cluster, tmp_path):
    from submitit.core.utils import FailedJobError, UncompletedJobError

    releases = [tmp_path / name for name in ("first", "second", "third")]
    for release in releases[1:]:
        release.touch()  # only the first waits (until cancelled)
    folder = tmp_path / "jobs"
    one_at_a_time = SlurmSettings(cpus_per_job=1, mem_gb=0.25, time_min=5, array_parallelism=1)
    done = {}
    waiting = threading.Thread(target=lambda: done.update(outcomes=run_jobs(
        functions.wait_for_release, [str(path) for path in releases], one_at_a_time, folder, job_name="waits",
        describe=lambda path: Path(path).name, progress=lambda line: None)))
    waiting.start()
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "first.started").exists():
            assert time.monotonic() < deadline, "the first job did not start within 60 s"
            assert waiting.is_alive(), "run_jobs ended before its first job started"
            time.sleep(0.2)
        # status: the first job runs, the two others wait for the array's one slot
        queued = study_jobs(folder)
        assert [(job["array_index"], job["state"], job["description"]) for job in queued] == [
            (0, "RUNNING", "first"), (1, "PENDING", "second"), (2, "PENDING", "third")]
        assert queued[1]["reason"] == "JobArrayTaskLimit"
        assert queued[0]["job_id"] == f"{queued[0]['job_id'].split('_')[0]}_0"
        subprocess.run(["scancel", queued[0]["job_id"]], check=True)
        waiting.join(90)
        assert not waiting.is_alive(), "run_jobs still waits 90 s after the cancel"
    finally:
        releases[0].touch()  # whatever happened, the first job ends
    outcomes = done["outcomes"]
    assert [Path(item).name for item, _ in outcomes] == ["first", "second", "third"]
    cancelled = outcomes[0][1]
    assert type(cancelled) is UncompletedJobError and not isinstance(cancelled, FailedJobError)
    assert f"Slurm job {queued[0]['job_id']} (first) ended without a result" in str(cancelled)
    assert "CANCELLED AT" in str(cancelled)
    assert [outcome for _, outcome in outcomes[1:]] == ["released: second", "released: third"]


def test_a_request_the_cluster_cannot_satisfy_is_one_line(cluster, tmp_path):
    too_big = SlurmSettings(mem_gb=100_000)  # 100 TB: more than the node has
    with pytest.raises(SlurmError) as refused:
        run_jobs(functions.square, [1, 2], too_big, tmp_path, job_name="big")
    assert str(refused.value) == ("sbatch refused the job array 'big': sbatch: error: Batch job submission failed: "
                                  "Requested node configuration is not available")
    assert study_jobs(tmp_path) == []  # nothing submitted, nothing recorded


@pytest.mark.parametrize("settings, problem", [
    (dict(cpus_per_job=0), "slurm.cpus_per_job: must be an integer >= 1, not 0"),
    (dict(gpus_per_job=-1), "slurm.gpus_per_job: must be an integer >= 0, not -1"),
    (dict(mem_gb=0), "slurm.mem_gb: must be a number > 0, not 0"),
    (dict(time_min=1.5), "slurm.time_min: must be an integer >= 1, not 1.5"),
    (dict(extra={"--account": "nlp"}), "slurm.extra: must be a table of sbatch parameters without their '--' "
                                       "(e.g. {account = \"nlp\"}), not {'--account': 'nlp'}"),
])
def test_settings_out_of_range_are_refused_naming_the_key(settings, problem):
    with pytest.raises(ValueError) as refused:
        SlurmSettings(**settings)
    assert str(refused.value) == problem


def test_the_settings_become_submitits_parameters():
    settings = SlurmSettings(partition="gpu", cpus_per_job=4, gpus_per_job=1, mem_gb=16, time_min=600,
                             array_parallelism=8, extra={"account": "nlp", "qos": 2})
    assert settings.submitit_parameters("study") == {
        "name": "study", "nodes": 1, "tasks_per_node": 1, "cpus_per_task": 4, "mem_gb": 16, "timeout_min": 600,
        "slurm_array_parallelism": 8, "gpus_per_node": 1, "slurm_partition": "gpu",
        "slurm_additional_parameters": {"account": "nlp", "qos": "2"}}
