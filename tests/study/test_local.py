"""fairseq_syntax.study.local's core claims: a run's cores are its own across pools (two studies run at once on
one machine had both pinned their first run to core 0), held by the run's process until it ends."""
import os
import subprocess
import sys
import tempfile

import pytest

from fairseq_syntax.study import local


@pytest.fixture
def two_cores(monkeypatch, tmp_path):
    """A machine of cores 0 and 1, its claims in a folder of this test's own."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    return tmp_path


def test_claims_take_free_cores_and_none_when_all_are_held(two_cores):
    first = local.claim_cores(1)
    second = local.claim_cores(1)
    assert first[0] == {0} and second[0] == {1}  # the second pool gets the core the first did not claim
    assert local.claim_cores(1) is None  # both held: a third run waits
    for descriptor in first[1]:
        os.close(descriptor)
    assert local.claim_cores(1)[0] == {0}  # released with its holder
    assert local.core_claims_folder() == two_cores / f"fairseq-syntax-study-cores-{os.getuid()}"


def test_a_run_needing_more_cores_than_are_free_claims_none(two_cores):
    held = local.claim_cores(1)
    assert held[0] == {0}
    assert local.claim_cores(2) is None
    # what it tried is not kept: core 1 is still free for a run of one thread
    assert local.claim_cores(1)[0] == {1}


def test_a_claim_passed_to_a_process_is_held_until_that_process_ends(two_cores):
    cores, held = local.claim_cores(1)
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                             pass_fds=tuple(held))
    for descriptor in held:  # as the pool does once the run's process is started
        os.close(descriptor)
    try:
        assert local.claim_cores(2) is None  # core 0 is still the child's
    finally:
        child.communicate(b"")
    assert local.claim_cores(2)[0] == {0, 1}


def test_the_time_left_is_estimated_from_the_studys_records_until_a_run_of_the_pool_ends():
    # nothing to go on: no ended run, no record
    assert local._eta(elapsed=600, finished=0, remaining=4) == "?"
    # 4 runs expected to take 1 h each (4 h summed), 2 at once, 10 min in: 2 h - 10 min = 110 min left
    assert local._eta(elapsed=600, finished=0, remaining=4, expected_seconds=4 * 3600, jobs=2) == "1.8 h"
    # past the estimate, it says none left rather than a negative time
    assert local._eta(elapsed=9000, finished=0, remaining=4, expected_seconds=3600, jobs=1) == "0 min"
    # once a run has ended, the pool's own pace: 1 ended in 50 min, 3 left -> 150 min
    assert local._eta(elapsed=3000, finished=1, remaining=3, expected_seconds=4 * 3600, jobs=2) == "2.5 h"


def test_a_cpu_run_is_recorded_with_the_processors_model_and_vector_instructions(tmp_path):
    from fairseq_syntax.study.config import load_study
    from fairseq_syntax.study.runner import cpu_model, device_text

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6430\n"
                       "flags\t\t: fpu avx2\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Gold 6430\n")
    assert cpu_model(str(cpuinfo)) == "Intel(R) Xeon(R) Gold 6430"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: \n")  # no name given: Python's word for it, never empty
    assert cpu_model(str(cpuinfo)) and cpu_model(str(tmp_path / "none")) == cpu_model(str(cpuinfo))
    (tmp_path / "study.toml").write_text('[study]\nname = "x"\n[corpus]\nraw = "raw"\n[training]\nthreads = 2\n'
                                         '[[systems]]\nname = "sequence"\n', encoding="utf-8")
    import torch

    assert device_text(load_study(tmp_path / "study.toml")) == (
        f"cpu ({cpu_model()}, {torch.backends.cpu.get_cpu_capability()}, {os.cpu_count()} cores, 2 thread(s) per run)")
