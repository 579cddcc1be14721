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


def test_the_time_left_fills_the_free_slots_in_order_and_counts_a_resumed_runs_epochs_as_done():
    # running: 1200 s x (1 - 15/30) = 600 and 600 s x (1 - 5/20) = 450 left; the queued 600, 300, 900 go to the
    # first free slot: 450+600 = 1050, 600+300 = 900, 900+900 = 1800
    running = [(1200, 30, 15), (600, 20, 5)]
    assert local.time_left([600, 300, 900], running, 2) == 1800
    assert local.time_left([600, 300, 900], running, 2, pace=1.5) == 2700  # this machine 1.5x slower
    assert local.time_left([], [(1200, 30, 24)], 2) == pytest.approx(240)  # resumed at epoch 24 of 30: a fifth left
    assert local.time_left([100], [(1200, 30, 33)], 2) == 100  # past its expected epochs: none left
    assert local.time_left([600, 300], [], 1) == 900
    assert [local._eta(None), local._eta(1800), local._eta(5400)] == ["?", "30 min", "1.5 h"]
    # epochs 11 to 14 validated here, 150 s apart against its price's 3000 s / 30 epochs; one epoch: no pace yet
    assert local.run_pace([(11, 100.0), (12, 250.0), (14, 550.0)], (3000, 30)) == 1.5
    assert local.run_pace([(11, 100.0)], (3000, 30)) is None and local.run_pace([(11, None), (12, None)], (3000, 30)) \
        is None


def test_a_training_logs_validations_are_read_with_their_times(tmp_path):
    log = tmp_path / "run.train.log"
    log.write_text("2026-12-07 23:17:36 | INFO | train_inner | epoch 001:     50 / 79 loss=13.168\n"
                   "2026-12-07 23:18:06 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 11.027\n"
                   "2026-12-07 23:19:16 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 9.859\n"
                   "epoch 003 | valid on 'valid' subset | loss 9.1\n")
    found = local.validations(log)
    assert [epoch for epoch, _ in found] == [1, 2, 3] and found[2][1] is None
    assert found[1][1] - found[0][1] == 70  # 23:18:06 to 23:19:16
    assert local.current_epoch(log) == 3 and local.current_epoch(tmp_path / "none.log") is None


def test_a_cpu_run_is_recorded_with_the_processors_model(tmp_path):
    """The device line it is part of: test_devices' test_the_record_names_the_device_the_runs_process_measured."""
    from fairseq_syntax.study.runner import cpu_model

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6430\n"
                       "flags\t\t: fpu avx2\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Gold 6430\n")
    assert cpu_model(str(cpuinfo)) == "Intel(R) Xeon(R) Gold 6430"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: \n")
    assert cpu_model(str(cpuinfo)) and cpu_model(str(tmp_path / "none")) == cpu_model(str(cpuinfo))
