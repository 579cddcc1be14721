"""The PTB recipe takes flags: RESULTS.jsons command makes the kept logs training commands; settings reach training."""
import json
import os
import time

import pytest

from conftest import REPO
from fairseq_syntax.core.cpu_autocast import default_cpu_precision
from fairseq_syntax.evaluation.packed_runs import read_bytes
from fairseq_syntax.evaluation.tables import table_rows
from test_script_options import fake_recipe, run_script

HERE = os.path.join(REPO, "examples", "ptb_induction")


def commands(log: str) -> list[str]:
    """The ``# command:`` lines of a step's log, without the prefix."""
    return [line[len("# command: "):] for line in log.splitlines() if line.startswith("# command: ")]


@pytest.fixture
def checkout(tmp_path):
    """(examples/ptb_induction of fake_recipe's checkout, an empty data folder, fake_recipe's environment)."""
    root, env = fake_recipe(tmp_path, "ptb_induction")
    (tmp_path / "data").mkdir()
    return root / "examples" / "ptb_induction", tmp_path / "data", env


@pytest.fixture
def recipe(checkout):
    """(run LOG NAME: the recipe's step commands; the run's result) of run.sh with ARGS in a fake checkout."""
    here, data, env = checkout

    def run(*args):
        result = run_script(here / "run.sh", *args, str(data), **env)
        assert result.returncode == 1 and "training failed: see " in result.stderr, result.stdout + result.stderr
        folders = [path for path in here.iterdir() if path.name.startswith("logs")]
        assert len(folders) == 1, folders
        logs = {path.name: path.read_text() for path in folders[0].iterdir()}
        for path in folders[0].iterdir():
            path.unlink()
        folders[0].rmdir()
        # paths relative to the checkout, as the kept logs have them
        return folders[0].name, {name: text.replace(f"{here.parents[1]}/", "").replace(str(data), "DATA")
                                 for name, text in logs.items()}
    return run


def kept_runs() -> list[tuple[str, str]]:
    """(folder, command) of each run.sh run RESULTS.json lists (not those made by hand), but those renamed
    *-repeated-masks after issue 53's fix (made by the recipe of their day, their options in another order)."""
    with open(os.path.join(HERE, "RESULTS.json")) as file:
        rows = table_rows(json.load(file)["rows"])
    return [(row["setting"], row["reproduce"]) for row in rows
            if row["reproduce"].startswith("examples/ptb_induction/run.sh ")
            and not row["setting"].endswith("-repeated-masks")]


def test_the_kept_runs_are_the_headline_and_its_medium_size():
    assert [run for run, _ in kept_runs()] == ["logs-ptb-text-diagonal-zero-authors-optimiser",
                                              "logs-ptb-text-diagonal-zero-authors-optimiser-medium"]


@pytest.mark.parametrize("name,command", kept_runs())
def test_a_kept_runs_command_makes_the_training_commands_of_its_logs(recipe, name, command):
    command = command.split()
    assert command[:1] == ["examples/ptb_induction/run.sh"]
    folder, logs = recipe(*command[1:])
    assert folder == name
    for arch in ("tree_transformer_lm", "roberta_prenorm"):
        kept = read_bytes(os.path.join(HERE, name, f"train_{arch}.log")).decode()
        assert commands(logs[f"train_{arch}.log"]) == commands(kept)[-1:]
    assert logs["train_tree_transformer_lm.log"].splitlines()[1] == "nice 10: fairseq-train"
    work = name.replace("logs", "work", 1)
    assert commands(logs["make_corpus.log"]) == ["python3 examples/ptb_induction/make_corpus.py --data DATA --out "
                                                 f"examples/ptb_induction/{work}/corpus --text ptb"]


def training(logs, arch="tree_transformer_lm"):
    return " " + commands(logs[f"train_{arch}.log"])[0] + " "


def test_the_defaults_and_each_setting_reach_the_training(recipe):
    folder, logs = recipe()
    assert folder == "logs-ptb-text"
    tree = training(logs)
    assert " --encoder-layers 6 --encoder-embed-dim 128 --encoder-ffn-embed-dim 512 --encoder-attention-heads 4 " \
        in tree
    assert " --lr 1e-3 --lr-scheduler inverse_sqrt --warmup-updates 100 --clip-norm 1.0 --max-tokens 4096 " in tree
    assert " --max-update 450 --seed 1 " in tree and " --constituent-diagonal one " in tree
    assert ("--cpu --cpu-bf16-autocast" in tree) == (default_cpu_precision() == "bf16") and " --cpu " in tree
    assert "--stop-time-hours" not in tree and "--constituent-diagonal" not in training(logs, "roberta_prenorm")

    folder, logs = recipe("--text", "mixed", "--eval-text", "--model-size", "medium", "--seed", "2", "--updates",
                          "30", "--precision", "bf16", "--stop-hours", "0.5", "--nice", "5")
    assert folder == "logs-eval-text-medium-seed2"
    assert commands(logs["make_corpus.log"])[0].endswith(" --text mixed --train-on-eval-text")
    tree = training(logs)
    assert " --encoder-layers 8 --encoder-embed-dim 256 --encoder-ffn-embed-dim 1024 " in tree
    assert " --max-update 30 --seed 2 " in tree and " --stop-time-hours 0.5 " in tree
    assert " --cpu --cpu-bf16-autocast " in tree
    assert logs["train_tree_transformer_lm.log"].splitlines()[1] == "nice 5: fairseq-train"

    folder, logs = recipe("--model-size", "paper", "--device", "cuda", "--diagonal", "zero")
    assert folder == "logs-ptb-text-diagonal-zero-paper"
    tree = training(logs)
    assert " --encoder-layers 10 --encoder-embed-dim 512 " in tree and " --encoder-attention-heads 8 " in tree
    assert " --cpu" not in tree and " --constituent-diagonal zero " in tree


def test_run_gpu_starts_one_run_per_seed_at_the_papers_scale_detached(checkout, tmp_path):
    here, data, env = checkout
    (here / "run.sh").write_text('#!/usr/bin/env bash\necho "run.sh $*"\n')  # what each seed's run is given
    result = run_script(here / "run_gpu.sh", "--seeds", "4,5", "--updates", "100", "--log", str(tmp_path / "gpu.log"),
                        str(data), **env)
    assert result.returncode == 0 and result.stdout.startswith("started (pid "), result.stdout + result.stderr
    for _ in range(100):  # the detached job: it returns at once, the job writes its log
        if "done in" in (tmp_path / "gpu.log").read_text():
            break
        time.sleep(0.1)
    assert "done in" in (tmp_path / "gpu.log").read_text()
    for seed in (4, 5):
        assert (here / f"run_gpu.seed{seed}.log").read_text() == (
            "run.sh --text ptb --model-size paper --diagonal zero --optimiser authors --device cuda --updates 100 "
            f"--stop-hours 0.4 --seed {seed} {data}\n")
    assert not (here / "run_gpu.seed1.log").exists()
    # in the foreground, the defaults: seeds 1-3, 60000 updates; run.sh's own default data
    (tmp_path / "shared" / "data").mkdir(parents=True)  # ../shared/data beside the checkout
    result = run_script(here / "run_gpu.sh", "--foreground", **env)
    assert result.returncode == 0 and "done in" in result.stdout, result.stdout + result.stderr
    assert (here / "run_gpu.seed3.log").read_text().endswith("--updates 60000 --stop-hours 0.4 --seed 3\n")


def test_a_run_killed_during_its_first_save_goes_on_and_restart_starts_afresh(checkout):
    """Any whole checkpoint is one to go on from (a kill during the first save leaves the epoch's checkpoint and
    checkpoint_best.pt, no checkpoint_last.pt): its training log goes on; --restart removes both."""
    here, data, env = checkout
    tree = here / "work-ptb-text" / "checkpoints" / "tree_transformer_lm"
    tree.mkdir(parents=True)
    (tree / "checkpoint_1_5.pt").write_bytes(b"PK")
    (tree / "checkpoint_best.pt").write_bytes(b"PK")
    plain = here / "work-ptb-text" / "checkpoints" / "roberta_prenorm"
    plain.mkdir()
    (plain / "train_command.txt").write_text("fairseq-train\n")  # no checkpoint: it starts afresh
    logs = here / "logs-ptb-text"
    logs.mkdir()
    for arch in ("tree_transformer_lm", "roberta_prenorm"):
        (logs / f"train_{arch}.log").write_text("# command: fairseq-train (the first part)\n")
    result = run_script(here / "run.sh", "--precision", "fp32", str(data), **env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert len(commands((logs / "train_tree_transformer_lm.log").read_text())) == 2  # the log goes on
    assert sorted(os.listdir(tree)) == ["checkpoint_1_5.pt", "checkpoint_best.pt"]
    assert len(commands((logs / "train_roberta_prenorm.log").read_text())) == 1 and not plain.exists()
    result = run_script(here / "run.sh", "--precision", "fp32", "--restart", str(data), **env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert len(commands((logs / "train_tree_transformer_lm.log").read_text())) == 1 and not tree.exists()
