"""bench/cuda/window.sh: each step's CPU dry run leaves what it promises; step 4 brings back runs, never checkpoints."""
import json
import os
import re
import shutil
import subprocess
import sys
from xml.etree import ElementTree

import pytest
import torch
from conftest import REPO

from fairseq_syntax.methods import METHODS
from study.test_prepare import corpus  # noqa: F401 (the fixture: the demo corpus and its parse archive)
from study.tiny_study_file import SETTINGS
from test_script_options import shell_code

sys.path.insert(0, os.path.join(REPO, "bench"))
import report
import run

WINDOW = os.path.join(REPO, "bench", "cuda", "window.sh")


def sh(args, **kwargs):
    """A command's CompletedProcess, its output as text (the caller checks its exit status)."""
    return subprocess.run(args, check=False, capture_output=True, text=True, **kwargs)


def succeeded(result):
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


ROW_KEYS = ("arch", "form", "src_words", "model", "tokens_per_s_ratio", "peak_mem_ratio", "generate_ratio", "device")


def dry_run(step, tmp_path, *flags, **env):
    """``window.sh STEP OUT --device cpu --tiny FLAGS...`` with the step's time limit raised to 1500 s: it succeeds
    and leaves at most 8 files in OUT; returns OUT and their names."""
    out = tmp_path / "out"
    result = sh(["bash", WINDOW, str(step), str(out), "--device", "cpu", "--tiny", "--work", str(out) + "-work",
                 "--step-seconds", "1500", *flags], cwd=REPO, timeout=1800, env={**os.environ, **env})
    succeeded(result)
    files = sorted(os.listdir(out))
    assert len(files) <= 8, files
    return out, files


def test_step1_runs_the_set_up_check_and_names_every_cuda_variant_and_the_structure_test(tmp_path):
    out, files = dry_run(1, tmp_path)
    assert files == ["logs.tgz", "setup.txt", "tests.log", "tests.xml"]
    assert "set-up check: passed" in (out / "setup.txt").read_text()
    cases = ElementTree.parse(out / "tests.xml").getroot().iter("testcase")
    names = {case.get("name"): case for case in cases}
    assert "test_cuda_gives_the_same_results_as_cpu" in names
    for method in METHODS:
        for variant in method.cuda_variants:
            assert any("".join(variant) in name for name in names), (method.name, variant)
    assert any("mask-biasgather" in name for name in names)  # the gather, the one-hot product's alternative on CUDA
    assert all(case.find("failure") is None and case.find("error") is None for case in names.values())
    if not torch.cuda.is_available():  # on a CPU each CUDA test is collected and skipped; the CPU-side ones run
        for name, case in names.items():
            assert (case.find("skipped") is None) == name.startswith("test_the_comparison_runs_with_the_cpu"), name


def test_step2_profiles_and_benchmarks_with_decoding_ratios(tmp_path):
    archs = "transformer_syntax_mask,transformer_syntax_mask:one_hot"
    out, files = dry_run(2, tmp_path, "--archs", archs)
    assert files == ["RESULTS.details.json.gz", "RESULTS.json", "RESULTS.md", "bench.log", "logs.tgz",
                     "profile.json", "profile.txt"]
    profiled = json.loads((out / "profile.json").read_text())
    assert [r["system"] for r in profiled] == ["transformer (preorder)", "transformer_syntax_mask (preorder)",
                                               "transformer_syntax_mask (one-hot bias) (preorder)"]
    assert all(r["step_ms"] > r["collate_ms"] > 0 and r["aten_calls"] > 0 and r["top"] for r in profiled)
    profile = (out / "profile.txt").read_text()
    assert "| transformer_syntax_mask (one-hot bias) (preorder) |" in profile and "aten::" in profile
    rows = report.read_rows(out / "RESULTS.json")
    assert [r["arch"] for r in rows] == ["transformer_syntax_mask_tiny", "transformer_syntax_mask_tiny (one-hot bias)"]
    for row in rows:
        assert all(key in row for key in ROW_KEYS), row
        assert (row["model"], row["device"], row["src_words"]) == ("tiny", "cpu", 8)
        assert row["generate_ratio"] > 0 and row["tokens_per_s_ratio"] > 0
    assert (out / "bench.log").read_text().startswith("# command: python3 bench/run.py --device cpu")


def test_step3_benchmarks_what_it_is_given_at_the_large_size(tmp_path):
    # a system that reads parser side data, in bf16 (bench/run.py --precision: fairseq's --bf16)
    out, files = dry_run(3, tmp_path, "--archs", "transformer_ldd", "--precision", "bf16")
    assert files == ["RESULTS.details.json.gz", "RESULTS.json", "RESULTS.md", "bench.log", "logs.tgz"]
    rows = report.read_rows(out / "RESULTS.json")
    # the system against the transformer on its form, and (context) that transformer against the one on preorder
    assert [(r["arch"], r["form"], r["baseline"]) for r in rows] == [
        ("transformer_ldd_tiny", "sequence", "transformer_tiny (sequence)"),
        ("transformer_tiny", "sequence", "transformer_tiny (preorder)")]
    command = (out / "bench.log").read_text().splitlines()[0]
    assert "--precision bf16" in command and "--model-size large" in command
    # what --model-size large trains outside the dry run: the papers' 6+6 layers, d=512
    options = run.model_args(run.System("transformer_ldd", run.Form("sequence")), run.Settings(model_size="large"))
    assert options[options.index("--encoder-layers") + 1] == "6"
    assert options[options.index("--encoder-embed-dim") + 1] == "512"


def test_step2_benchmarks_registered_systems_the_mask_model_among_them():
    with open(WINDOW) as script:
        text = script.read()
    archs = re.search(r"^STEP2_ARCHS=(\S+)$", text, re.MULTILINE)[1].split(",")
    known = {arch.key for arch in run.benchmark_archs()}
    assert set(archs) <= known and "transformer_syntax_mask" in archs
    # no step reads the data beside the repository: only `prepare` does (its --data), on the development machine
    code = [line.strip() for line in shell_code(text)]  # without comments and the usage text
    assert [line for line in code if "../shared" in line] == ["DATA=$ROOT/../shared/data"]
    prepare = re.search(r"^prepare\(\) \{\n(.*?)^\}$", text, re.MULTILINE | re.DOTALL)[1]
    readers = [line for line in code if re.search(r"\$\{?DATA\b", line)]
    assert readers == ["local shared=$DATA"] and "local shared=$DATA" in prepare


def test_a_step_leaves_at_most_eight_files_whatever_it_made(tmp_path):
    """A step whose outputs outgrow 8 files brings them back as one step archive."""
    fake = tmp_path / "repo"
    shutil.copytree(os.path.join(REPO, "bench", "cuda"), fake / "bench" / "cuda")
    script = (fake / "bench" / "cuda" / "window.sh").read_text()
    many = 'step1() {\n  for k in $(seq 1 12); do echo "$k" > "$OUTDIR/file$k.txt"; done\n}\n'
    (fake / "bench" / "cuda" / "window.sh").write_text(script.replace("step1() {", many + "original_step1() {", 1))
    out = tmp_path / "out"
    # the folders given relative to the caller's folder (the script runs in the repository's root)
    result = sh(["bash", str(fake / "bench" / "cuda" / "window.sh"), "1", "out", "--device", "cpu", "--work", "w"],
                timeout=300, cwd=tmp_path)
    succeeded(result)
    assert os.listdir(out) == ["step1.tgz"] and (tmp_path / "w").is_dir()
    listed = sh(["tar", "tzf", str(out / "step1.tgz")]).stdout
    assert "./file12.txt" in listed and "./logs.tgz" in listed


def test_prepare_copies_the_data_beside_the_repository_for_the_window(tmp_path):
    repo, shared = tmp_path / "repo", tmp_path / "shared"
    shutil.copytree(os.path.join(REPO, "bench", "cuda"), repo / "bench" / "cuda")
    (repo / ".devpkgs").mkdir()  # made already (make_devpkgs.sh needs the package registry)
    (shared / "multi30k").mkdir(parents=True)
    (shared / "multi30k" / "val.en.gz").write_bytes(b"x")
    os.chmod(shared / "multi30k" / "val.en.gz", 0o444)  # the shared data are read-only
    result = sh(["bash", str(repo / "bench" / "cuda" / "window.sh"), "prepare", "--data", str(shared)], timeout=120)
    succeeded(result)
    assert (repo / ".window" / "data" / "multi30k" / "val.en.gz").read_bytes() == b"x"
    assert (repo / ".window" / "commit.txt").exists() and "carry: .devpkgs .window" in result.stdout


#: a tiny study on the demo generator's corpus: Sequence, two seeds, one epoch
STEP4_STUDY = SETTINGS.format(epochs=1).replace('name = "tiny"', 'name = "window-tiny"').replace(
    'raw = "raw"', 'raw = "raw-elsewhere"') + '[[systems]]\nname = "sequence"\n'


def own_tmpdir(tmp_path) -> str:
    """A TMPDIR of the step's own, where its runs claim their cores (not beside this machine's other runs)."""
    folder = tmp_path / ("claims-" + "x" * 60)
    folder.mkdir()
    return str(folder)


def step4_study(corpus, tmp_path, study=STEP4_STUDY, seconds=1100):
    """The corpus's parses with ``study`` beside them: its folder, and step 4's environment and flags."""
    folder = tmp_path / "study"
    shutil.copytree(corpus / "parses", folder / "parses")
    (folder / "study.toml").write_text(study, encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": own_tmpdir(tmp_path)}
    return folder, env, ["--study", str(folder / "study.toml"), "--raw", str(corpus / "raw"), "--jobs", "2",
                         "--work", str(tmp_path / "work"), "--step-seconds", str(seconds)]


def step4(out, flags, env=None):
    result = sh(["bash", WINDOW, "4", str(out), "--device", "cpu", *flags], timeout=1200, env=env)
    files = sorted(os.listdir(out))
    listed = sorted(sh(["tar", "tzf", str(out / "study-runs.tgz")]).stdout.split()) if "study-runs.tgz" in files else []
    return result, files, listed


def test_step4_runs_the_studys_pending_runs_and_brings_back_what_they_wrote_never_checkpoints(corpus, tmp_path):
    folder, env, flags = step4_study(corpus, tmp_path)
    result, files, listed = step4(tmp_path / "out1", flags, env)
    succeeded(result)
    assert files == ["logs.tgz", "status.txt", "study-runs.tgz"]
    assert "2 to do; 2 at once until the step's deadline" in result.stdout
    assert "run: exit 0 (2 runs done in this step" in result.stdout
    status = (tmp_path / "out1" / "status.txt").read_text()
    assert [line.split()[:2] for line in status.splitlines() if line.startswith("  sequence.")] == [
        ["sequence.seed1", "done"], ["sequence.seed2", "done"]]
    assert listed == [f"runs-gpu/sequence.seed{seed}.{kind}" for seed in (1, 2)
                      for kind in ("gen.gz", "gen.log.gz", "run.json", "train.log.gz")] + [
        "runs-gpu/sequence.seeds.run.json", "runs-gpu/test.de.ref.gz", "runs-gpu/test.en.src.gz"]  # no checkpoint
    assert list((tmp_path / "work" / "study" / "ckpt").rglob("checkpoint_best.pt"))  # they stay in WORK
    record = json.loads((folder / "runs-gpu" / "sequence.seed1.run.json").read_text())
    assert record["dataset"] == "window-tiny" and record["device"].startswith("cpu")
    assert not list(folder.glob(".window-*"))  # the window's study file is gone with the step
    # the records are the study's own: the study file read with these runs takes them as done, refusing none
    (folder / "gpu.toml").write_text(f'[study]\nbase = "study.toml"\nruns = "runs-gpu"\n[corpus]\nraw = '
                                     f'"{corpus / "raw"}"\n', encoding="utf-8")
    plan = sh(["fairseq-syntax-study", "plan", "gpu.toml"], cwd=folder)
    assert plan.returncode == 0 and "2 done" in plan.stdout, plan.stdout + plan.stderr
    # the next window: nothing left, nothing trained again, nothing brought back
    kept = {path: path.stat().st_mtime_ns for path in (folder / "runs-gpu").iterdir()}
    result, files, listed = step4(tmp_path / "out2", flags, env)
    succeeded(result)
    assert "2 done; 2 at once" in result.stdout and "0 runs done in this step" in result.stdout and listed == []
    assert {path: path.stat().st_mtime_ns for path in (folder / "runs-gpu").iterdir()} == kept


def test_step4_stops_its_runs_at_the_deadline_and_leaves_none_running(corpus, tmp_path):
    import psutil

    endless = STEP4_STUDY.replace("patience = 1\nmax_epoch = 1\n", "patience = 1000\nmax_epoch = 100000\n")
    folder, env, flags = step4_study(corpus, tmp_path, endless, seconds=120)
    result, files, _ = step4(tmp_path / "out", flags, env)
    succeeded(result)
    assert "run: exit 124, stopped at the deadline (0 runs done in this step" in result.stdout
    status = (tmp_path / "out" / "status.txt").read_text()
    assert not any(line.split()[1:2] == ["done"] for line in status.splitlines() if line.startswith("  sequence."))
    left = [process for process in psutil.process_iter(["cmdline"])
            if any(str(tmp_path) in part for part in process.info["cmdline"] or [])]
    assert left == [], [process.info["cmdline"] for process in left]  # no run outlives its step


def test_step4_names_a_missing_study_file_or_corpus(tmp_path):
    flags = ["--tiny", "--work", str(tmp_path / "w")]
    result, _, _ = step4(tmp_path / "out1", [*flags, "--study", str(tmp_path / "none.toml")])
    assert result.returncode == 1 and f"error: {tmp_path / 'none.toml'}: no such study file" in result.stdout
    (tmp_path / "study.toml").write_text(STEP4_STUDY, encoding="utf-8")
    result, _, _ = step4(tmp_path / "out2", [*flags, "--study", str(tmp_path / "study.toml"), "--raw",
                                             str(tmp_path / "no-corpus")])
    assert result.returncode == 1 and f"error: {tmp_path / 'no-corpus'}: no corpus (run bench/cuda/window.sh " \
        "prepare and carry .window)" in result.stdout


@pytest.mark.skipif("not config.getoption('--step4-on-parses')",
                    reason="step 4 on the committed Multi30k parses (10 minutes on 2 cores): --step4-on-parses")
def test_step4_tiny_trains_the_gpu_studys_first_run_on_the_committed_parses(tmp_path):
    # a copy of the study's folder, so that the window's study file and runs are the copy's
    folder = tmp_path / "multi30k"
    shutil.copytree(os.path.join(REPO, "examples", "multi30k"), folder,
                    ignore=shutil.ignore_patterns("work*", "runs*", "analysis", "logs"))
    window = tmp_path / "window"
    shutil.copytree(os.path.join(REPO, "..", "shared", "data", "multi30k"), window / "data" / "multi30k")
    out, files = dry_run(4, tmp_path, "--study", str(folder / "study-gpu.toml"), "--window-dir", str(window),
                         TMPDIR=own_tmpdir(tmp_path))
    assert files == ["logs.tgz", "status.txt", "study-runs.tgz"]
    listed = sh(["tar", "tzf", str(out / "study-runs.tgz")]).stdout.split()
    assert "runs-gpu/sequence.seed1.run.json" in listed and not any(name.endswith(".pt") for name in listed)
