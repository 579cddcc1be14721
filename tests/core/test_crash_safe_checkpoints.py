"""Checkpoints a kill cannot break: writes go to NAME.tmp then rename; a cut-short one is found and refused."""
import logging
import os
import shutil
import types

import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.dataclass.configs import CheckpointConfig

import fairseq_syntax  # noqa: F401  (routes fairseq's checkpoint code through the crash-safe writes and checks)
from fairseq_syntax.core.checkpoints import CrashSafePathManager, cut_short


class Killed(Exception):
    """Stands for the kill that interrupts a write."""


def test_fairseqs_copy_onto_checkpoint_last_is_atomic(tmp_path, monkeypatch):
    # save_checkpoint copies checkpoint_1_41.pt onto checkpoint_last.pt; a kill mid-copy cut it short
    assert checkpoint_utils.PathManager is CrashSafePathManager
    new, last = str(tmp_path / "checkpoint_1_41.pt"), str(tmp_path / "checkpoint_last.pt")
    torch.save({"num_updates": 41}, new)
    torch.save({"num_updates": 40}, last)

    def killed_after_a_few_bytes(source, target, *args):
        target.write(source.read(10))
        raise Killed

    monkeypatch.setattr(shutil, "copyfileobj", killed_after_a_few_bytes)
    with pytest.raises(Killed):
        checkpoint_utils.PathManager.copy(new, last, overwrite=True)
    assert torch.load(last) == {"num_updates": 40}
    monkeypatch.undo()
    assert checkpoint_utils.PathManager.copy(new, last, overwrite=True)
    assert torch.load(last) == {"num_updates": 41}
    assert sorted(os.listdir(tmp_path)) == ["checkpoint_1_41.pt", "checkpoint_last.pt"]


def test_fairseqs_first_write_of_a_save_is_renamed_only_when_whole(tmp_path, monkeypatch):
    path = str(tmp_path / "checkpoint_1_41.pt")
    torch.save({"num_updates": 40}, path)

    def killed(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 partial")
        raise Killed

    monkeypatch.setattr(checkpoint_utils.time, "sleep", lambda seconds: None)  # fairseq retries a failed save 3x
    monkeypatch.setattr(torch, "save", killed)
    with pytest.raises(Killed):
        checkpoint_utils.torch_persistent_save({"num_updates": 41}, path)
    monkeypatch.undo()
    assert torch.load(path) == {"num_updates": 40}


def test_cut_short_says_why_a_file_is_not_a_whole_checkpoint(tmp_path):
    whole = str(tmp_path / "whole.pt")
    torch.save({"weights": torch.zeros(100)}, whole)
    data = (tmp_path / "whole.pt").read_bytes()
    (tmp_path / "empty.pt").write_bytes(b"")
    (tmp_path / "half.pt").write_bytes(data[: len(data) // 2])
    assert cut_short(whole) is None
    assert cut_short(str(tmp_path / "missing.pt")) is None  # fairseq says it is missing
    assert cut_short(str(tmp_path / "empty.pt")) == "0 bytes"
    assert cut_short(str(tmp_path / "half.pt")) == f"{len(data) // 2} bytes, no end of its zip archive"


def save_dir_killed_while_saving(directory):
    """A save directory killed while copying update 41 onto checkpoint_last.pt (left at 0 bytes)."""
    torch.save({"num_updates": 30}, directory / "checkpoint_best.pt")
    os.utime(directory / "checkpoint_best.pt", (1000, 1000))
    torch.save({"num_updates": 41}, directory / "checkpoint_1_41.pt")
    (directory / "checkpoint_last.pt").write_bytes(b"")
    return str(directory)


class RecordingTrainer:
    """What ``checkpoint_utils.load_checkpoint`` asks of a trainer; records the file it is told to load."""

    checkpoint_suffix = ""

    def __init__(self):
        self.loaded = []

    def load_checkpoint(self, filename, *args, **kwargs):
        self.loaded.append(filename)  # and returns no state, as for a missing file: training starts at epoch 1

    def get_train_iterator(self, epoch, **kwargs):
        return types.SimpleNamespace(epoch=epoch)

    def lr_step(self, epoch):
        pass


def resumed(save_dir, **config):
    """The files ``checkpoint_utils.load_checkpoint`` of ``save_dir`` has a trainer load."""
    trainer = RecordingTrainer()
    checkpoint_utils.load_checkpoint(CheckpointConfig(save_dir=str(save_dir), **config), trainer)
    return trainer.loaded


def test_resuming_falls_back_to_the_newest_whole_checkpoint_and_says_so(tmp_path, caplog):
    save_dir = save_dir_killed_while_saving(tmp_path)
    with caplog.at_level(logging.WARNING):
        assert resumed(save_dir) == [os.path.join(save_dir, "checkpoint_1_41.pt")]
    assert (f"{save_dir}/checkpoint_last.pt is cut short (0 bytes): a run killed while writing it leaves it so; "
            f"resuming from {save_dir}/checkpoint_1_41.pt, the newest whole checkpoint beside it") in caplog.text


def test_resuming_without_a_whole_checkpoint_beside_it_stops_naming_the_file(tmp_path):
    (tmp_path / "checkpoint_last.pt").write_bytes(b"PK\x03\x04")
    trainer = RecordingTrainer()
    with pytest.raises(SystemExit, match=rf"^error: {tmp_path}/checkpoint_last.pt is cut short \(4 bytes, no end of "
                                         r"its zip archive\): .*; there is no whole checkpoint beside it; remove it "
                                         r"to start afresh$"):
        checkpoint_utils.load_checkpoint(CheckpointConfig(save_dir=str(tmp_path)), trainer)
    assert trainer.loaded == []


def test_loading_a_cut_short_checkpoint_by_name_names_the_whole_one(tmp_path):
    # fairseq-generate --path, fairseq-train --restore-file: the file asked for is not swapped for another
    save_dir = save_dir_killed_while_saving(tmp_path)
    with pytest.raises(SystemExit, match=rf"^error: {save_dir}/checkpoint_last.pt is cut short \(0 bytes\): .*; the "
                                         rf"newest whole checkpoint beside it is {save_dir}/checkpoint_1_41.pt$"):
        checkpoint_utils.load_checkpoint_to_cpu(os.path.join(save_dir, "checkpoint_last.pt"))


def test_resuming_without_checkpoint_last_goes_on_from_the_newest_whole_checkpoint(tmp_path, caplog):
    """Killed during the first save (checkpoint_1_5.pt and best whole, no last): the rerun goes on from them."""
    torch.save({"num_updates": 5}, tmp_path / "checkpoint_1_5.pt")
    os.utime(tmp_path / "checkpoint_1_5.pt", (1000, 1000))
    torch.save({"num_updates": 5}, tmp_path / "checkpoint_best.pt")  # fairseq copies the first file onto it
    os.utime(tmp_path / "checkpoint_best.pt", (1001, 1001))
    (tmp_path / "checkpoint_last.pt.tmp").write_bytes(b"PK\x03\x04")  # the copy a kill cut short
    with caplog.at_level(logging.WARNING):
        assert resumed(tmp_path) == [f"{tmp_path}/checkpoint_best.pt"]
    assert (f"{tmp_path}/checkpoint_last.pt does not exist, but {tmp_path}/checkpoint_best.pt does: a run killed "
            "during its first save (or run with --no-last-checkpoints) leaves them so; resuming from "
            f"{tmp_path}/checkpoint_best.pt, the newest whole checkpoint beside it (to start afresh, give another "
            "--save-dir or remove them)") in caplog.text
    # a cut-short one is not resumed from
    (tmp_path / "checkpoint_best.pt").write_bytes(b"")
    assert resumed(tmp_path) == [f"{tmp_path}/checkpoint_1_5.pt"]


def test_a_first_run_and_a_fine_tuning_run_without_checkpoint_last(tmp_path):
    assert resumed(tmp_path) == [f"{tmp_path}/checkpoint_last.pt"]  # nothing saved: fairseq's own, a fresh start
    torch.save({"num_updates": 5}, tmp_path / "checkpoint_1_5.pt")
    pretrained = tmp_path / "pretrained.pt"
    torch.save({"num_updates": 100}, pretrained)
    with pytest.raises(SystemExit) as error:
        resumed(tmp_path, finetune_from_model=str(pretrained))
    assert str(error.value) == (
        f"error: {tmp_path} holds checkpoints of a run (the newest {tmp_path}/checkpoint_1_5.pt) but no "
        f"checkpoint_last.pt: to go on with it, give --restore-file {tmp_path}/checkpoint_1_5.pt without "
        "--finetune-from-model; to start afresh, give another --save-dir or remove them")


def test_a_missing_checkpoint_to_decode_with_is_one_line(tmp_path):
    """fairseq-generate/-interactive --path a missing file."""
    with pytest.raises(SystemExit) as error:
        checkpoint_utils.load_model_ensemble_and_task([str(tmp_path / "missing.pt")])
    assert str(error.value) == f"error: {tmp_path}/missing.pt: no such checkpoint"
    with pytest.raises(SystemExit) as error:
        checkpoint_utils.load_model_ensemble([str(tmp_path)])  # what fairseq-generate calls
    assert str(error.value) == f"error: {tmp_path}: a directory, not a checkpoint file"
