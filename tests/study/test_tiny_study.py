"""A tiny study end to end through fairseq-syntax-study: plan, run --jobs 2, report checked by hand, resume."""
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU

from fairseq_syntax.evaluation.records import load_record
from study.forbid_torch import study_forbidding_torch
from study.tiny_study_file import SETTINGS
from study.test_prepare import corpus  # noqa: F401

STUDY = SETTINGS + """\
[[systems]]
name = "sequence"
[[systems]]
name = "mask"
controls = ["random"]
"""
RUNS = ["sequence.seed1", "sequence.seed2", "mask.seed1", "mask.seed2", "mask_random.seed1", "mask_random.seed2"]
#: core claims apart from this machine's real runs
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": tempfile.mkdtemp(prefix="tiny-study-cores-")}


def study(*args, cwd, timeout=900, check=True):
    result = subprocess.run(["fairseq-syntax-study", *args], cwd=cwd, capture_output=True, text=True,
                            timeout=timeout, env=ENV)
    if check:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def finished(corpus, tmp_path_factory):  # noqa: F811
    """(folder, plan before, run, report) of the tiny study run with --jobs 2."""
    folder = tmp_path_factory.mktemp("tiny")
    for name in ("raw", "parses"):
        shutil.copytree(corpus / name, folder / name)
    (folder / "study.toml").write_text(STUDY.format(epochs=2), encoding="utf-8")
    before = study("plan", "study.toml", cwd=folder).stdout
    assert before.count(" to do ") == len(RUNS)
    run = study("run", "study.toml", "--jobs", "2", cwd=folder)
    from fairseq_syntax.evaluation.study_answer import README_BEGIN, README_END

    (folder / "README.md").write_text(f"# Mine\n\n{README_BEGIN} -->\nold\n{README_END}\n\nkept\n", encoding="utf-8")
    report = study("report", "study.toml", "--readme", "README.md", cwd=folder)
    return folder, before, run, report


def test_plan_lists_every_run_of_the_grid(finished):
    folder, before, _, _ = finished
    listed = [line.split()[0] for line in before.splitlines()[1:-2]]
    assert listed == RUNS
    assert "cost: 6 runs left; no finished run to estimate their cost from yet" in before


def test_run_trains_every_run_two_at_once(finished):
    folder, _, run, _ = finished
    assert "== 0 runs done, 6 to run" in run.stdout
    assert run.stdout.count("== start ") == 6 and "== 6 of 6 runs done" in run.stdout
    starts = [line for line in run.stdout.splitlines() if line.startswith("== start ") or ": done" in line]
    assert starts[0].startswith("== start sequence.seed1") and starts[1].startswith("== start sequence.seed2")
    for name in RUNS:
        assert "command" not in json.loads((folder / "runs" / f"{name}.run.json").read_text())  # the words only
        record = load_record(folder / "runs" / f"{name}.run.json")
        assert record["dataset"] == "tiny" and record["study"]["name"] == "tiny"
        assert (folder / "runs" / f"{name}.gen.gz").is_file()
        checkpoints = folder / "work" / "ckpt" / f"ckpt-{name}"
        train = json.loads((checkpoints / "train_command.json").read_text())
        assert train[0] == "fairseq-train" and record["command_argv"] == [
            word.replace(str(folder / "work"), "OUT_DIR") for word in train]
        assert record["command_argv"][record["command_argv"].index("--adam-betas") + 1] == "(0.9, 0.98)"
        assert "--adam-betas '(0.9, 0.98)'" in record["command"]
        assert record["decode_command_argv"][0] == "fairseq-generate" and record["score_command_argv"][0] == \
            "fairseq-syntax-score"
        assert record["study"]["settings"]["training.max_epoch"] == 2


def tokenized_bleu(folder: Path, name: str) -> float:
    """BLEU of a run's decoded hypotheses against the tokenized test reference."""
    from fairseq_syntax.evaluation.scoring import read_generate_output

    refs = (folder / "raw" / "test.de").read_text().splitlines()
    hyps = read_generate_output(str(folder / "runs" / f"{name}.gen.gz"), len(refs), field="H")
    return BLEU().corpus_score(hyps, [refs]).score


def test_the_report_equals_a_hand_computation_from_the_decodes(finished):
    folder, _, _, report = finished
    results = json.loads((folder / "report" / "RESULTS.json").read_text())
    entry = results["datasets"]["tiny"]
    assert entry["comparisons"]["baseline"] == "sequence"
    assert entry["comparisons"]["controls"] == {"mask_random": {"method": "mask", "kind": "random"}}
    rows = {row["System"]: row for row in entry["table"]["rows"]}
    for system in ("sequence", "mask", "mask_random"):
        per_seed = [tokenized_bleu(folder, f"{system}.seed{seed}") for seed in (1, 2)]
        cell = rows[system]["BLEU (mean ± sd)"]
        assert cell["per_seed"] == pytest.approx(per_seed, abs=1e-6)
        assert cell["mean"] == pytest.approx(sum(per_seed) / 2, abs=1e-6)
    for method in entry["answer"]["systems"]:
        found = method["vs_baseline"]
        significant = {metric: found[metric]["p_value"] < 0.05 for metric in ("BLEU", "chrF")}
        deltas = {metric: found[metric]["delta"] for metric in ("BLEU", "chrF")}
        if not any(significant.values()):
            expected = "no measurable difference"
        elif all(significant.values()) and all(d > 0 for d in deltas.values()):
            expected = "better"
        elif all(significant.values()) and all(d < 0 for d in deltas.values()):
            expected = "worse"
        else:
            expected = "mixed"
        assert found["verdict"] == expected
        mine = sum(tokenized_bleu(folder, f"{method['system']}.seed{s}") for s in (1, 2)) / 2
        base = sum(tokenized_bleu(folder, f"sequence.seed{s}") for s in (1, 2)) / 2
        assert found["BLEU"]["delta"] == pytest.approx(mine - base, abs=1e-6)
    assert "## Runaway hypotheses" in (folder / "report" / "RESULTS.md").read_text()
    assert "wrote the study answer into README.md" in report.stdout
    readme = (folder / "README.md").read_text()
    assert readme.startswith("# Mine\n") and readme.endswith("\n\nkept\n") and "\nold\n" not in readme
    assert "| mask | 2 of 2 |" in readme and "[report/RESULTS.md](report/RESULTS.md)" in readme


def test_plan_status_and_report_of_the_finished_study_import_neither_torch_nor_fairseq(finished, tmp_path):
    """Without torch: plan shows every run done, status nothing running, report the same RESULTS.json."""
    folder, _, _, _ = finished
    plan = study_forbidding_torch("plan", "study.toml", cwd=folder)
    assert plan.returncode == 0, plan.stderr
    assert [line.split()[:2] for line in plan.stdout.splitlines()[1:1 + len(RUNS)]] == [[run, "done"] for run in RUNS]
    status = study_forbidding_torch("status", "study.toml", cwd=folder)
    assert (status.returncode, status.stdout) == (0, "study tiny: nothing in training or queued\n"), status.stderr
    report = study_forbidding_torch("report", "study.toml", "--out", str(tmp_path / "again"), cwd=folder)
    assert report.returncode == 0, report.stderr
    assert (json.loads((tmp_path / "again" / "RESULTS.json").read_text())
            == json.loads((folder / "report" / "RESULTS.json").read_text()))


def test_a_second_run_trains_nothing_and_keeps_every_file(finished):
    folder, _, _, _ = finished
    kept = {path: path.stat().st_mtime_ns for path in (folder / "runs").glob("*.seed*.*")}
    again = study("run", "study.toml", cwd=folder)
    assert "== 6 runs done, 0 to run" in again.stdout
    assert {path: path.stat().st_mtime_ns for path in (folder / "runs").glob("*.seed*.*")} == kept


def test_a_changed_setting_is_refused_for_every_record_and_trains_nothing(finished):
    """Another study's records, unknown systems, missing files: test_record_checks.py, test_config.py."""
    folder, _, _, _ = finished
    changed = folder / "changed.toml"
    changed.write_text(STUDY.format(epochs=2).replace("lr = 5e-3", "lr = 1e-3"), encoding="utf-8")
    result = study("run", "changed.toml", cwd=folder, check=False)
    assert result.returncode == 2 and result.stdout.count("== start") == 0
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 9 and all(line.endswith(": not a record of this study (changed.toml): "
                                                  "training.lr: 0.005 (file: 0.001)") for line in errors), result.stderr


def test_a_killed_run_resumes_and_two_runs_at_once_train_it_once(finished, tmp_path):
    """sequence.seed3 killed in training, then two runs at once: one resumes it from its checkpoint."""
    folder, _, _, _ = finished
    (folder / "study.toml").write_text(STUDY.format(epochs=2).replace(
        '[[systems]]\nname = "sequence"\n', '[[systems]]\nname = "sequence"\nseeds = 3\n'), encoding="utf-8")
    kept = {path: path.stat().st_mtime_ns for path in (folder / "runs").glob("*.seed[12].*")}
    log = folder / "runs" / "sequence.seed3.train.log"
    first = subprocess.Popen(["fairseq-syntax-study", "run", "study.toml", "--only", "sequence.seed3"], cwd=folder,
                             env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    checkpoints = folder / "work" / "ckpt" / "ckpt-sequence.seed3"
    deadline = time.time() + 300
    while time.time() < deadline and not list(checkpoints.glob("checkpoint_last.pt")):
        time.sleep(0.5)
    assert list(checkpoints.glob("checkpoint_last.pt")), "no checkpoint within 300 s"
    import psutil

    doomed = [psutil.Process(first.pid), *psutil.Process(first.pid).children(recursive=True)]
    for process in doomed:
        process.kill()
    psutil.wait_procs(doomed, timeout=30)
    first.wait()
    assert not (folder / "runs" / "sequence.seed3.run.json").exists()
    state = study("plan", "study.toml", cwd=folder).stdout
    assert any(line.split()[:2] == ["sequence.seed3", "partway"] for line in state.splitlines())
    both = [subprocess.Popen(["fairseq-syntax-study", "run", "study.toml", "--only", "sequence.seed3"], cwd=folder,
                             env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [process.communicate(timeout=600)[0] for process in both]
    assert sum("== sequence.seed3: done" in output for output in outputs) == 1, outputs
    assert log.with_name(log.name + ".gz").is_file()
    import gzip

    text = gzip.decompress(log.with_name(log.name + ".gz").read_bytes()).decode()
    assert "loaded checkpoint" in text.lower()
    assert {path: path.stat().st_mtime_ns for path in (folder / "runs").glob("*.seed[12].*")} == kept


def test_the_study_through_a_real_slurm_a_cancelled_job_recovered_by_run(finished, slurm_cluster, tmp_path):
    """run --executor slurm: status lists the job; scancel fails the run; run again finishes it."""
    folder, _, _, _ = finished
    copy = tmp_path / "tiny"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("claims"))
    (copy / "study.toml").write_text(STUDY.format(epochs=2).replace(
        'controls = ["random"]', 'controls = ["random"]\ncontrol_seeds = {random = 3}') +
        "[slurm]\nmem_gb = 2.0\ntime_min = 20\n", encoding="utf-8")
    env = {**os.environ, **slurm_cluster, "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen(["fairseq-syntax-study", "run", "study.toml", "--executor", "slurm"], cwd=copy, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline, job = time.time() + 300, None
    while time.time() < deadline and job is None:
        queued = subprocess.run(["squeue", "--noheader", "--format=%i %T"], capture_output=True, text=True,
                                env=env).stdout.split()
        if len(queued) >= 2 and queued[1] == "RUNNING":
            job = queued[0]
        time.sleep(1)
    assert job, "the run's job did not start within 300 s"
    status = subprocess.run(["fairseq-syntax-study", "status", "study.toml"], cwd=copy, env=env, capture_output=True,
                            text=True, timeout=300)
    assert f"slurm job {job.split('_')[0]}" in status.stdout, status.stdout + status.stderr
    subprocess.run(["scancel", job], env=env, check=True)
    output = first.communicate(timeout=300)[0]
    assert first.returncode == 1 and "== failed: mask_random.seed3" in output, output[-3000:]
    assert not (copy / "runs" / "mask_random.seed3.run.json").exists()
    again = subprocess.run(["fairseq-syntax-study", "run", "study.toml", "--executor", "slurm"], cwd=copy, env=env,
                           capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "== 6 runs done, 1 to run" in again.stdout and "== 7 of 7 runs done" in again.stdout
    assert json.loads((copy / "runs" / "mask_random.seed3.run.json").read_text())["seed"] == 3
