"""A tiny study end to end, through the installed command as a user runs it (``fairseq-syntax-study``): the demo
generator's corpus (its gold parses as a parse archive), Sequence and Mask with Mask's random-tree control, two seeds
each, tiny models, ``--jobs 2``; then a run killed partway and ``run`` again, two ``run`` commands at once, and the
refusals (a changed setting, another study's record, an unknown system, a missing file), each one line, nothing
trained. The verdicts are checked against a hand computation from the decodes."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU

from conftest import REPO
from study.forbid_torch import study_forbidding_torch
from study.tiny_study_file import SETTINGS
from study.test_prepare import corpus  # noqa: F401 (the fixture: the demo corpus and its parse archive)

STUDY = SETTINGS + """\
[[systems]]
name = "sequence"
[[systems]]
name = "mask"
controls = ["random"]
"""
RUNS = ["sequence.seed1", "sequence.seed2", "mask.seed1", "mask.seed2", "mask_random.seed1", "mask_random.seed2"]


#: the tiny study's runs claim their cores here (fairseq_syntax.study.local), not beside this machine's real runs,
#: whose claims would keep them waiting; this module's runs still compete with each other for the cores
CORE_CLAIMS = tempfile.mkdtemp(prefix="tiny-study-cores-")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": CORE_CLAIMS}


def study(*args, cwd, timeout=900, check=True):
    result = subprocess.run(["fairseq-syntax-study", *args], cwd=cwd, capture_output=True, text=True,
                            timeout=timeout, env=ENV)
    if check:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def finished(corpus, tmp_path_factory):  # noqa: F811
    """The tiny study run to its end with --jobs 2, and its report: the study's folder."""
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


def test_run_trains_every_run_two_at_once_and_plan_shows_them_done(finished):
    folder, _, run, _ = finished
    assert "== 0 runs done, 6 to run" in run.stdout
    assert run.stdout.count("== start ") == 6 and "== 6 of 6 runs done" in run.stdout
    # two slots: the first two runs start before either ends
    starts = [line for line in run.stdout.splitlines() if line.startswith("== start ") or ": done" in line]
    assert starts[0].startswith("== start sequence.seed1") and starts[1].startswith("== start sequence.seed2")
    after = study("plan", "study.toml", cwd=folder).stdout
    assert after.count(" done ") == 6 and "6 done" in after
    for name in RUNS:
        record = json.loads((folder / "runs" / f"{name}.run.json").read_text())
        assert record["dataset"] == "tiny" and record["study"]["name"] == "tiny"
        assert (folder / "runs" / f"{name}.gen.gz").is_file()
        # each command as the words it ran with, the display string beside it; the settings by their keys
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
    """BLEU of a run's hypotheses as decoded (a corpus of tokenized text is scored on its tokens) against the test
    reference's tokens (the corpus's, with no entity to unescape)."""
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
    # each verdict is the rule applied to the recorded deltas and p-values
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
        # the difference is that of the hand-computed means
        mine = sum(tokenized_bleu(folder, f"{method['system']}.seed{s}") for s in (1, 2)) / 2
        base = sum(tokenized_bleu(folder, f"sequence.seed{s}") for s in (1, 2)) / 2
        assert found["BLEU"]["delta"] == pytest.approx(mine - base, abs=1e-6)
    assert "## Runaway hypotheses" in (folder / "report" / "RESULTS.md").read_text()
    assert "wrote the study answer into README.md" in report.stdout
    readme = (folder / "README.md").read_text()
    assert readme.startswith("# Mine\n") and readme.endswith("\n\nkept\n") and "\nold\n" not in readme
    assert "| mask | 2 of 2 |" in readme and "[report/RESULTS.md](report/RESULTS.md)" in readme


def test_plan_status_and_report_of_the_finished_study_import_neither_torch_nor_fairseq(finished, tmp_path):
    """The commands that only read files, each with torch and fairseq forbidden (tests/study/forbid_torch.py), on the
    trained study: plan shows every run done, status nothing running, and report writes the same RESULTS.json."""
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


def test_a_study_with_no_runaway_hypothesis_reports_none(finished, tmp_path):
    """Every decode's hypotheses made its references: the runaway section says no sentence runs
    away and, with no looping source to average, has no source-length line (it had formatted None: a traceback on the
    De->En study's first run, which had no runaway)."""
    import gzip

    from fairseq_syntax.study.config import load_study
    from fairseq_syntax.study.report import runaway_section

    folder, _, _, _ = finished
    shutil.copytree(folder / "raw", tmp_path / "raw")
    (tmp_path / "runs").mkdir()
    references = (folder / "raw" / "test.de").read_text(encoding="utf-8").splitlines()
    for decode in (folder / "runs").glob("*.seed[12].gen.gz"):
        # a kept decode holds its H lines (id, score, words) and fairseq's summary line: each hypothesis becomes its
        # (tokenized) reference
        lines = gzip.decompress(decode.read_bytes()).decode().splitlines()
        assert {line.split("\t")[0] for line in lines[:-1]} == {f"H-{index}" for index in range(len(references))}
        clean = "".join(f"H-{index}\t\t{words}\n" for index, words in enumerate(references)) + lines[-1] + "\n"
        (tmp_path / "runs" / decode.name).write_bytes(gzip.compress(clean.encode()))
    for record in (folder / "runs").glob("*.seed[12].run.json"):
        shutil.copy(record, tmp_path / "runs" / record.name)
    (tmp_path / "study.toml").write_text(STUDY.format(epochs=2), encoding="utf-8")
    lines, info = runaway_section(load_study(tmp_path / "study.toml"))
    assert info["sentences"] == [] and info["pairs_shared"] == 0 and "source_lengths" not in info
    assert set(info["runs"]) == {"sequence", "mask", "mask_random"}
    assert all(found["count"] == 0 and found["cost"] == 0.0 for runs in info["runs"].values()
               for found in runs.values())
    assert "0 test sentences run away in some run; 0 of them in two runs or more." in "\n".join(lines)
    assert not any(line.startswith("Their sources average") for line in lines)


def test_a_second_run_trains_nothing_and_keeps_every_file(finished):
    folder, _, _, _ = finished
    kept = {path: path.stat().st_mtime_ns for path in (folder / "runs").glob("*.seed*.*")}
    again = study("run", "study.toml", cwd=folder)
    assert "== 6 runs done, 0 to run" in again.stdout
    assert {path: path.stat().st_mtime_ns for path in (folder / "runs").glob("*.seed*.*")} == kept


def test_refusals_are_one_line_and_train_nothing(finished, tmp_path):
    folder, _, _, _ = finished
    # a changed setting: every record, each run's and each system's over its seeds, names the key that changed
    changed = folder / "changed.toml"
    changed.write_text(STUDY.format(epochs=2).replace("lr = 5e-3", "lr = 1e-3"), encoding="utf-8")
    result = study("run", "changed.toml", cwd=folder, check=False)
    assert result.returncode == 2 and result.stdout.count("== start") == 0
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 9 and all(line.endswith(": not a record of this study (changed.toml): "
                                                  "training.lr: 0.005 (file: 0.001)") for line in errors), result.stderr
    # another study's records: the same runs under another name
    other = folder / "other.toml"
    other.write_text(STUDY.format(epochs=2).replace('name = "tiny"', 'name = "other"'), encoding="utf-8")
    result = study("report", "other.toml", cwd=folder, check=False)
    assert result.returncode == 2 and "study 'tiny', not 'other'" in result.stderr
    assert not (folder / "report-other").exists()
    # an unknown system, and a missing file
    unknown = folder / "unknown.toml"
    unknown.write_text(STUDY.format(epochs=2) + '[[systems]]\nname = "treelstm"\n', encoding="utf-8")
    result = study("plan", "unknown.toml", cwd=folder, check=False)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "systems[3] (treelstm).name: 'treelstm' is no system of the method registry" in result.stderr
    result = study("plan", "none.toml", cwd=folder, check=False)
    assert result.returncode == 2 and result.stderr == f"error: none.toml: no such file\n"


def test_a_killed_run_resumes_and_two_runs_at_once_train_it_once(finished, tmp_path):
    """One more seed for Sequence: ``run`` killed during its training, then two ``run`` at once: one trains it from
    its checkpoint, the other finds it held; the finished runs are untouched."""
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
    # the command, the runner it started (a session of its own) and the training: as if the machine were gone
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
    assert "loaded checkpoint" in text.lower()  # fairseq went on from the killed run's checkpoint
    assert {path: path.stat().st_mtime_ns for path in (folder / "runs").glob("*.seed[12].*")} == kept


def test_the_study_through_a_real_slurm_a_cancelled_job_recovered_by_run(finished, slurm_cluster, tmp_path):
    """``run --executor slurm`` on a real single-node Slurm: the one missing run (a third seed of Mask's control) as a
    job; the job cancelled with ``scancel`` while it runs comes back failed, the run left partway or to do; ``run``
    again finishes it; ``status`` lists the job while it is queued."""
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
