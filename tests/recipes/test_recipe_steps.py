"""The recipes' shared steps (examples/common.sh, as the shell recipes use them): resuming a run, its loader
workers, the files run_system keeps, a packed run not trained again, records that name no folder of the machine; and
the SST recipe's table over seeds. A study's runs over seeds are fairseq-syntax-study's (tests/study/)."""
import gzip
import os
import subprocess
import sys

from conftest import REPO


def test_sst_results_give_mean_and_sd_over_seeds():
    import importlib.util

    spec = importlib.util.spec_from_file_location("sst_results", os.path.join(REPO, "examples", "sst", "results.py"))
    sst = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sst)
    # dev accuracies per evaluation (epoch, updates, accuracy, node accuracy); best 42 / 44, last 40 / 44
    runs = [sst.Run("sst5.hier-nodes.15k.seed1", "sst5", {}, valid=[(1, 10, 42.0, None), (2, 20, 40.0, None)]),
            sst.Run("sst5.hier-nodes.15k.seed2", "sst5", {}, valid=[(1, 10, 41.0, None), (2, 20, 44.0, None)]),
            sst.Run("sst5.transformer.15k.seed1", "sst5", {}, valid=[(1, 10, 30.0, None)])]  # one seed: no row
    lines, values = sst.seed_table(runs)
    assert "| sst5.hier-nodes.15k.seed* | 2 | 43.00 ± 1.41 | 42.00 ± 2.83 |" in lines
    assert values["rows"] == [{"runs": "sst5.hier-nodes.15k", "seeds": 2,
                               "dev accuracy, best epoch (mean ± sd)": {"mean": 43.0, "sd": 2 ** 0.5},
                               "dev accuracy, last (mean ± sd)": {"mean": 42.0, "sd": 8 ** 0.5}}]


def test_a_run_resumes_under_a_larger_budget_or_other_loader_workers_but_not_other_settings():
    """run_system resumes a checkpoint only for the same command, up to its budget and --num-workers (who loads the
    batches, not which): what examples/common.sh's resume_key compares."""
    started = "fairseq-train data --arch transformer --max-epoch 20 --seed 1 --cpu"
    script = f"""
source examples/common.sh
same() {{ [ "$(resume_key "$1")" = "$(resume_key "{started}")" ] && echo same || echo other; }}
same "fairseq-train data --arch transformer --max-epoch 30 --seed 1 --cpu --num-workers 0"
same "fairseq-train data --arch transformer --max-epoch 20 --seed 2 --cpu"
same "fairseq-train data --arch transformer --max-epoch 20 --seed 1 --cpu --max-tokens 10"
"""
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=False)
    assert result.stdout.split() == ["same", "other", "other"], result.stderr


def test_a_cpu_run_loads_its_batches_in_the_training_process_unless_it_chooses_its_loader_workers():
    """run_system adds --num-workers 0 to a --cpu run that does not choose its own (fairseq's persistent loader
    workers pile up, one pair an epoch): what examples/common.sh's main_process_loader decides."""
    script = """
source examples/common.sh
for args in "--arch transformer --cpu --seed 1" "--cpu --num-workers 2" "--cpu --num-workers=2" "--arch transformer" \\
            "--cpu-bf16-autocast"; do
  if main_process_loader $args; then echo added; else echo kept; fi
done
"""
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=False)
    assert result.stdout.split() == ["added", "kept", "kept", "kept", "kept"], result.stderr


def test_run_system_keeps_the_decode_hypotheses_and_gzipped_logs(tmp_path):
    """run_system's files once a run is decoded, with fairseq-train, fairseq-generate and fairseq-syntax-score
    replaced by scripts that print what the real ones would: the decode keeps its H- lines in id order (its D- lines
    repeat them; S-, T-, P- are dropped), the logs are gzipped, the plain files are gone."""
    bin_dir, runs = tmp_path / "bin", tmp_path / "runs"
    bin_dir.mkdir()
    stubs = {
        "fairseq-train": 'echo "epoch 001 | valid on \'valid\' subset | loss 4.1"',
        "fairseq-generate": "printf 'S-1\\tb\\nT-1\\tB\\nH-1\\t-0.25\\tzwei\\nD-1\\t-0.25\\tzwei\\nP-1\\t-0.2 -0.3\\n"
                            "S-0\\ta\\nT-0\\tA\\nH-0\\t-0.123456\\teins\\nD-0\\t-0.123456\\teins\\nP-0\\t-0.1\\n"
                            "Generate test with beam=5: BLEU4 = 50.00\\n'; echo 'generate log' >&2",
        "fairseq-syntax-score": 'echo "$@" > "$SCORED"',
    }
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    script = f"""
source examples/common.sh
run_system mask transformer_syntax_mask {tmp_path}/data {tmp_path}/test.de {runs} -- --seed 1 --cpu
"""
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", SCORED=str(tmp_path / "scored"))
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=False, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(path.name for path in runs.iterdir()) == ["ckpt-mask", "mask.gen.gz", "mask.gen.log.gz",
                                                             "mask.train.log.gz"]
    with gzip.open(runs / "mask.gen.gz", "rt", encoding="utf-8") as kept:
        assert kept.read() == ("H-0\t\teins\nH-1\t\tzwei\n"
                               "Generate test with beam=5: BLEU4 = 50.00\n")
    with gzip.open(runs / "mask.gen.log.gz", "rt", encoding="utf-8") as log:
        assert log.read() == "generate log\n"
    assert f"{runs}/mask.gen.gz {tmp_path}/test.de" in (tmp_path / "scored").read_text()


def test_a_packed_run_is_not_trained_again_even_with_its_checkpoint_left_and_an_unreadable_archive_stops(tmp_path):
    """run_system on a finished run (its outputs packed) whose checkpoint is still there: it says so and trains
    nothing (resuming would train a finished run on); with an archive it cannot read, the script stops."""
    runs, bin_dir = tmp_path / "runs", tmp_path / "bin"
    runs.mkdir()
    bin_dir.mkdir()
    for suffix in (".gen.gz", ".gen.log.gz", ".train.log.gz"):
        (runs / f"mask{suffix}").write_bytes(gzip.compress(b"kept\n"))
    (runs / "mask.run.json").write_text('{"system": "mask"}\n')
    subprocess.run([sys.executable, os.path.join(REPO, "examples", "pack_runs.py"), "pack", str(runs)], check=True,
                   capture_output=True)
    (runs / "ckpt-mask").mkdir()
    (runs / "ckpt-mask" / "checkpoint_last.pt").write_bytes(b"")
    (bin_dir / "fairseq-train").write_text(f"#!/usr/bin/env bash\ntouch {tmp_path}/trained\n")
    (bin_dir / "fairseq-train").chmod(0o755)
    script = f"""
set -euo pipefail
source examples/common.sh
run_system mask transformer_syntax_mask {tmp_path}/data {tmp_path}/test.de {runs} -- --seed 1 --cpu || echo "returned $?"
"""
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=False, env=env)
    assert result.stdout.strip() == "returned 1", result.stdout + result.stderr
    assert f"mask's outputs are packed in {runs}/packed.tar.xz" in result.stderr
    assert not (tmp_path / "trained").exists()
    (runs / "SHA256SUMS").write_text(f"{'0' * 64}  packed.tar.xz\n")  # not the archive's checksum
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=False, env=env)
    assert result.returncode == 2 and "returned" not in result.stdout, result.stdout + result.stderr
    assert f"error: cannot tell whether {runs}/mask.gen is kept (the error above): stopped" in result.stderr
    assert "its SHA-256 is not the one" in result.stderr and not (tmp_path / "trained").exists()


def test_records_name_paths_relative_to_the_repository_that_holds_the_runs_folder(tmp_path):
    """A lane run from a worktree writes into another checkout's runs folder: its records' paths are made relative
    to that checkout (they named the folder by its absolute path); a runs folder outside any repository keeps the
    recipe's own repository as the root."""
    checkout = tmp_path / "checkout"
    runs = checkout / "examples" / "multi30k" / "runs"
    runs.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    script = f"""
source examples/common.sh
portable_paths {runs}; echo "${{PORTABLE_PATHS[@]}}"
portable_paths {outside}; echo "${{PORTABLE_PATHS[@]}}"
"""
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=True,
                            env={k: v for k, v in os.environ.items() if k != "OUT_DIR"})
    assert result.stdout.splitlines() == [f"--repo-root {checkout.resolve()}", f"--repo-root {REPO}"]
