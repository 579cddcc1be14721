"""study.local: a run's cores are its own across pools, held by its process until it ends; the time left."""
import os
import subprocess
import sys
import tempfile

import pytest

from fairseq_syntax.study import local


@pytest.fixture
def two_cores(monkeypatch, tmp_path):
    """Cores 0 and 1, claims in tmp_path."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    return tmp_path


def test_claims_take_free_cores_and_none_when_fewer_are_free(two_cores):
    first = local.claim_cores(1)
    assert first[0] == {0} and local.claim_cores(2) is None
    assert local.claim_cores(1)[0] == {1} and local.claim_cores(1) is None
    for descriptor in first[1]:
        os.close(descriptor)
    assert local.claim_cores(1)[0] == {0}
    assert local.core_claims_folder() == two_cores / f"fairseq-syntax-study-cores-{os.getuid()}"


def test_a_claim_passed_to_a_process_is_held_until_that_process_ends(two_cores):
    cores, held = local.claim_cores(1)
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                             pass_fds=tuple(held))
    for descriptor in held:
        os.close(descriptor)
    try:
        assert local.claim_cores(2) is None
    finally:
        child.communicate(b"")
    assert local.claim_cores(2)[0] == {0, 1}


def test_the_time_left_is_estimated_from_the_studys_records_until_a_run_of_the_pool_ends():
    assert local._eta(elapsed=600, finished=0, remaining=4) == "?"
    # 4 h over 2 slots, 10 min in: 110 min
    assert local._eta(elapsed=600, finished=0, remaining=4, expected_seconds=4 * 3600, jobs=2) == "1.8 h"
    assert local._eta(elapsed=9000, finished=0, remaining=4, expected_seconds=3600, jobs=1) == "0 min"
    # 1 ended in 50 min, 3 left: 150 min
    assert local._eta(elapsed=3000, finished=1, remaining=3, expected_seconds=4 * 3600, jobs=2) == "2.5 h"


def test_a_cpu_run_is_recorded_with_the_processors_model(tmp_path):
    """The device line it is part of: test_devices' test_the_record_names_the_device_the_runs_process_measured."""
    from fairseq_syntax.study.runner import cpu_model

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6430\n"
                       "flags\t\t: fpu avx2\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Gold 6430\n")
    assert cpu_model(str(cpuinfo)) == "Intel(R) Xeon(R) Gold 6430"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: \n")
    assert cpu_model(str(cpuinfo)) and cpu_model(str(tmp_path / "none")) == cpu_model(str(cpuinfo))
