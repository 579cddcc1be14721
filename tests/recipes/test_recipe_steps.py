"""The steps of one study run (fairseq_syntax.study.runner), and the SST recipe's table over seeds."""
import gzip
import json
import os
import runpy
import subprocess
import sys

import pytest

from conftest import REPO

from fairseq_syntax.study import runner
from fairseq_syntax.study.records import StudyError, checkpoints_dir, runs_dir, work_dir
from fairseq_syntax.study.config import load_study
from fairseq_syntax.study.grid import study_identity, study_runs, train_arguments

STUDY = """\
[study]
name = "steps"
[corpus]
raw = "raw"
[training]
max_epoch = 20
{extra}
[[systems]]
name = "sequence"
[[systems]]
name = "mask"
"""


def test_sst_results_give_mean_and_sd_over_seeds():
    sst = runpy.run_path(os.path.join(REPO, "examples", "sst", "results.py"))
    # dev accuracies per evaluation (epoch, updates, accuracy, node accuracy); best 42 / 44, last 40 / 44
    run = sst["Run"]
    runs = [run("sst5.hier-nodes.15k.seed1", "sst5", {}, valid=[(1, 10, 42.0, None), (2, 20, 40.0, None)]),
            run("sst5.hier-nodes.15k.seed2", "sst5", {}, valid=[(1, 10, 41.0, None), (2, 20, 44.0, None)]),
            run("sst5.transformer.15k.seed1", "sst5", {}, valid=[(1, 10, 30.0, None)])]  # one seed: no row
    lines, values = sst["seed_table"](runs)
    assert "| sst5.hier-nodes.15k.seed* | 2 | 43.00 ± 1.41 | 42.00 ± 2.83 |" in lines
    from fairseq_syntax.evaluation.tables import table_rows

    assert table_rows(values) == [{"runs": "sst5.hier-nodes.15k", "seeds": 2,
                                   "dev accuracy, best epoch (mean ± sd)": {"mean": 43.0, "sd": 2 ** 0.5},
                                   "dev accuracy, last (mean ± sd)": {"mean": 42.0, "sd": 8 ** 0.5}}]


@pytest.fixture
def study(tmp_path):
    """A study of Sequence and Mask in tmp_path (its work and runs folders there), and its Mask run, whose
    checkpoints folder and the runs folder are made."""
    def make(extra: str = ""):
        (tmp_path / "study.toml").write_text(STUDY.format(extra=extra), encoding="utf-8")
        config = load_study(tmp_path / "study.toml")
        run = next(run for run in study_runs(config) if run.system.name == "mask")
        checkpoints_dir(config, run.name).mkdir(parents=True)
        runs_dir(config).mkdir()
        return config, run
    return make


def test_a_run_resumes_under_a_larger_budget_or_other_loader_workers_but_not_other_settings():
    started = ["fairseq-train", "data", "--arch", "transformer", "--max-epoch", "20", "--seed", "1", "--cpu"]
    assert runner.resume_key(started) == ["fairseq-train", "data", "--arch", "transformer", "--seed", "1", "--cpu"]
    assert runner.resume_key([*started[:4], "--max-epoch=30", *started[6:], "--num-workers", "0"]) \
        == runner.resume_key(started)
    assert runner.resume_key([*started[:7], "2", "--cpu"]) != runner.resume_key(started)
    assert runner.resume_key([*started, "--max-tokens", "10"]) != runner.resume_key(started)
    # a word that holds a space is one word: Adam's betas quoted or not are other commands
    betas = [*started, "--adam-betas", "(0.9, 0.98)"]
    assert runner.resume_key([*started, "--adam-betas", "(0.9,", "0.98)"]) != runner.resume_key(betas)


@pytest.mark.parametrize("extra,added,options", [("", True, 1), ('extra_args = ["--num-workers", "2"]', False, 1),
                                                 ('extra_args = ["--num-workers=2"]', False, 1),
                                                 ('device = "cuda"', False, 0)])
def test_a_cpu_run_loads_its_batches_in_the_training_process_unless_it_chooses_its_loader_workers(study, extra, added,
                                                                                                 options):
    config, run = study(extra)
    args = train_arguments(config, run, "W")
    assert (args[-2:] == ["--num-workers", "0"]) is added
    assert sum(arg.startswith("--num-workers") for arg in args) == options


def fake_fairseq(monkeypatch, generate_output: str = "") -> list:
    """runner's subprocess.run standing in for fairseq-train and fairseq-generate; the list of each call's module."""
    calls = []

    def run(argv, stdout=None, stderr=None, **_):
        module = argv[2]
        calls.append(module)
        if module == "fairseq_cli.generate":
            stdout.write(generate_output)
            stderr.write("generate log\n")
        else:
            stdout.write("epoch 001 | valid on 'valid' subset | loss 4.1\n")
        return subprocess.CompletedProcess(argv, 0)
    monkeypatch.setattr(runner.subprocess, "run", run)
    return calls


def refuses_other_command(config, run, checkpoints):
    """train stops on checkpoints of another command, in one line naming their folder."""
    with pytest.raises(StudyError, match=f"^{checkpoints} holds checkpoints of another command"):
        runner.train(config, run)


def test_a_run_killed_during_its_first_save_goes_on_from_its_checkpoint(study, monkeypatch):
    config, run = study()
    checkpoints = checkpoints_dir(config, run.name)
    argv = ["fairseq-train", *train_arguments(config, run, work_dir(config))]
    (checkpoints / "train_command.json").write_text(json.dumps(argv) + "\n")
    for name in ("checkpoint_1_5.pt", "checkpoint_best.pt"):
        (checkpoints / name).write_bytes(b"PK")
    (runs_dir(config) / f"{run.name}.train.log").write_text("epoch 1's log\n")
    calls = fake_fairseq(monkeypatch)
    assert runner.train(config, run) and calls == ["fairseq_cli.train"]
    assert sorted(path.name for path in checkpoints.glob("*.pt")) == ["checkpoint_1_5.pt", "checkpoint_best.pt"]
    log = (runs_dir(config) / f"{run.name}.train.log").read_text()
    assert log.startswith("epoch 1's log\n") and "valid on" in log  # the log goes on
    assert json.loads((checkpoints / "train_command.json").read_text()) == argv
    # checkpoints of another command (another seed) are not gone on from
    seed = argv.index("--seed") + 1
    (checkpoints / "train_command.json").write_text(json.dumps([*argv[:seed], "2", *argv[seed + 1:]]) + "\n")
    refuses_other_command(config, run, checkpoints)


def test_checkpoints_of_the_old_form_go_on_under_their_command_and_no_other(study, monkeypatch):
    config, run = study()
    checkpoints = checkpoints_dir(config, run.name)
    (checkpoints / "checkpoint_last.pt").write_bytes(b"PK")
    argv = ["fairseq-train", *train_arguments(config, run, work_dir(config))]
    assert "(0.9, 0.98)" in argv
    (checkpoints / "train_command.txt").write_text(" ".join(argv).replace("--max-epoch 20", "--max-epoch 10") + "\n")
    calls = fake_fairseq(monkeypatch)
    assert runner.train(config, run) and calls == ["fairseq_cli.train"]
    assert json.loads((checkpoints / "train_command.json").read_text()) == argv
    (checkpoints / "train_command.json").unlink()
    (checkpoints / "train_command.txt").write_text(" ".join(argv).replace("--dropout 0.3", "--dropout 0.1") + "\n")
    refuses_other_command(config, run, checkpoints)
    (checkpoints / "train_command.txt").unlink()
    refuses_other_command(config, run, checkpoints)
    assert calls == ["fairseq_cli.train"]


def test_a_decode_keeps_its_hypotheses_and_gzipped_logs(study, monkeypatch):
    """fairseq-generate's output kept as its H- lines in id order, both logs gzipped, the plain files gone."""
    config, run = study()
    runs = runs_dir(config)
    (runs / f"{run.name}.train.log").write_text("training\n")
    calls = fake_fairseq(monkeypatch, "S-1\tb\nT-1\tB\nH-1\t-0.25\tzwei\nD-1\t-0.25\tzwei\nP-1\t-0.2 -0.3\n"
                                      "S-0\ta\nT-0\tA\nH-0\t-0.123456\teins\nD-0\t-0.123456\teins\nP-0\t-0.1\n"
                                      "Generate test with beam=5: BLEU4 = 50.00\n")
    assert runner.decode(config, run) and calls == ["fairseq_cli.generate"]
    assert sorted(path.name for path in runs.iterdir()) == [f"{run.name}.gen.gz", f"{run.name}.gen.log.gz",
                                                            f"{run.name}.train.log.gz"]
    assert gzip.decompress((runs / f"{run.name}.gen.gz").read_bytes()).decode() == (
        "H-0\t\teins\nH-1\t\tzwei\nGenerate test with beam=5: BLEU4 = 50.00\n")
    assert gzip.decompress((runs / f"{run.name}.gen.log.gz").read_bytes()).decode() == "generate log\n"


def test_a_packed_run_is_finished_and_not_trained_again_even_with_its_checkpoint_left(study, monkeypatch):
    config, run = study()
    runs = runs_dir(config)
    for suffix in (".gen.gz", ".gen.log.gz", ".train.log.gz"):
        (runs / f"{run.name}{suffix}").write_bytes(gzip.compress(b"kept\n"))
    record = {"dataset": "steps", "system": "mask", "arch": run.system.arch, "seed": 1, "command": "fairseq-train",
              "command_argv": ["fairseq-train"], "updates": 1, "epochs": 1, "wall_time_s": 1.0, "train_log": "l",
              "metrics": {}, "significance": {}, "study": study_identity(config)}
    (runs / f"{run.name}.run.json").write_text(json.dumps(record))
    subprocess.run([sys.executable, os.path.join(REPO, "examples", "pack_runs.py"), "pack", str(runs)], check=True,
                   capture_output=True)
    assert not (runs / f"{run.name}.gen.gz").exists() and (runs / "packed.tar.xz").is_file()
    (checkpoints_dir(config, run.name) / "checkpoint_last.pt").write_bytes(b"PK")
    calls = fake_fairseq(monkeypatch)
    outcome = runner.execute(runner.RunTask(str(config.path), run.name))
    assert (outcome.state, calls) == ("finished", [])


def test_a_run_keeps_its_test_set_before_training_and_a_size_of_a_study_over_sizes_keeps_none(study, monkeypatch):
    config, run = study()
    raw = config.resolve("raw")
    raw.mkdir()
    (raw / "test.de").write_text("ein hund\n", encoding="utf-8")
    (raw / "test.en").write_text("a dog\n", encoding="utf-8")
    data = work_dir(config) / "data-bin" / run.data
    data.mkdir(parents=True)
    (data / "syntax.json").write_text("{}", encoding="utf-8")
    trained = []
    monkeypatch.setattr(runner, "train", lambda config, run: trained.append(run.name))  # None: the run fails there
    assert runner.execute(runner.RunTask(str(config.path), run.name)).state == "failed" and trained == [run.name]
    kept = {name: gzip.decompress((runs_dir(config) / f"{name}.gz").read_bytes())
            for name in ("test.de.ref", "test.en.src")}
    assert kept == {"test.de.ref": b"ein hund\n", "test.en.src": b"a dog\n"}
    for name in kept:
        (runs_dir(config) / f"{name}.gz").unlink()
    monkeypatch.setattr(runner.RunTask, "study", lambda task: config)  # a size's study, its own runs folder
    assert runner.execute(runner.RunTask(str(config.path), run.name, "n1000")).state == "failed"
    assert trained == [run.name] * 2 and not list(runs_dir(config).glob("test.*"))
