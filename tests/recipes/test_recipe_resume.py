"""Recipes that go on from a run's checkpoints (issue 50, item 10): a run killed during its first save has its
epoch's checkpoint and checkpoint_best.pt but no checkpoint_last.pt; the recipes used to delete such a save
directory and train afresh. examples/common.sh's has_checkpoint decides for run_system (examples/ptb_induction/run.sh
the same way: tests/recipes/test_ptb_recipe.py)."""
import os
import subprocess

from conftest import REPO


def bash(script, **env):
    return subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=False,
                          env=dict(os.environ, **env))


def test_any_whole_checkpoint_is_one_to_go_on_from(tmp_path):
    for name in ("empty", "best", "epoch", "last"):
        (tmp_path / name).mkdir()
    (tmp_path / "best" / "checkpoint_best.pt").write_bytes(b"PK")
    (tmp_path / "epoch" / "checkpoint_1_5.pt").write_bytes(b"PK")
    (tmp_path / "last" / "checkpoint_last.pt").write_bytes(b"PK")
    (tmp_path / "empty" / "train_command.txt").write_text("fairseq-train\n")
    result = bash(f"source examples/common.sh; for d in empty best epoch last; do "
                  f"has_checkpoint {tmp_path}/$d && echo $d; done")
    assert result.stdout.split() == ["best", "epoch", "last"], result.stderr


def test_run_system_goes_on_from_a_run_killed_during_its_first_save(tmp_path):
    bin_dir, runs = tmp_path / "bin", tmp_path / "runs"
    bin_dir.mkdir()
    for name, body in {"fairseq-train": 'echo "train $*"', "fairseq-generate": "echo 'H-0\t-0.1\teins'",
                       "fairseq-syntax-score": "true"}.items():
        (bin_dir / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    script = (f"source examples/common.sh; run_system mask transformer_syntax_mask {tmp_path}/data {tmp_path}/test.de "
              f"{runs} -- --seed 1 --cpu")
    path = f"{bin_dir}:{os.environ['PATH']}"
    assert bash(script, PATH=path).returncode == 0
    ckpt = runs / "ckpt-mask"
    (ckpt / "checkpoint_1_5.pt").write_bytes(b"PK")  # what the kill left: no checkpoint_last.pt
    (ckpt / "checkpoint_best.pt").write_bytes(b"PK")
    result = bash(script, PATH=path)
    assert result.returncode == 0, result.stderr
    assert f"== resume mask from its checkpoints in {ckpt}" in result.stdout
    assert sorted(os.listdir(ckpt))[:2] == ["checkpoint_1_5.pt", "checkpoint_best.pt"]  # kept, not removed
