"""study.record_checks: plan, run and report refuse a record of another study or setting in one line a record,
naming each differing key, and write nothing; records of the old form are compared by their words."""
import contextlib
import gzip
import io
import json
import shutil
from pathlib import Path

import pytest

from study.tiny_study_file import SETTINGS

from fairseq_syntax.cli.study import main
from fairseq_syntax.evaluation.run_commands import command_fields, command_text
from fairseq_syntax.study.config import load_study
from fairseq_syntax.study.grid import settings_digest, study_identity, study_runs, train_arguments

STUDY = SETTINGS.format(epochs=2) + """\
[[systems]]
name = "sequence"
[[systems]]
name = "mask"
seeds = 1
"""
KEPT = ["sequence.seed1", "sequence.seed2", "mask.seed1"]


def study(*args, cwd) -> tuple[int, str, str]:
    """``fairseq-syntax-study ARGS`` in ``cwd``, in this process: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        return main(list(args)), out.getvalue(), err.getvalue()


def record_of(config, name: str, **changes) -> dict:
    """The record a run ``name`` (SYSTEM.seedK, or SYSTEM.seeds over seeds 1-2) of ``config`` leaves."""
    system, _, seed = name.partition(".seed")
    first = 1 if seed == "s" else int(seed)
    run = next(run for run in study_runs(config) if run.system.name == system and run.seed == first)
    record = {"dataset": config.name, "system": system, "arch": run.system.arch,
              **({"seeds": 2, "seed_list": [1, 2]} if seed == "s" else {"seed": first}),
              **command_fields("command", ["fairseq-train", *train_arguments(config, run, "OUT_DIR")]),
              "updates": 20, "epochs": 2, "wall_time_s": 3.0, "train_log": f"runs/{run.name}.train.log.gz",
              "metrics": {"BLEU": 1.5}, "significance": {}, "study": study_identity(config)}
    return {**record, **changes}


def keep(folder: Path, name: str, record: dict) -> Path:
    """``record`` kept as RUNS/NAME.run.json, a run's with a decode beside it."""
    runs = folder / "runs"
    runs.mkdir(exist_ok=True)
    if not name.endswith(".seeds"):
        (runs / f"{name}.gen.gz").write_bytes(gzip.compress(b"H-0\t\tein Hund\n"))
    path = runs / f"{name}.run.json"
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def tiny(corpus, tmp_path):
    """A tiny study with three runs' records and Sequence's over its seeds."""
    for name in ("raw", "parses"):
        shutil.copytree(corpus / name, tmp_path / name)
    (tmp_path / "study.toml").write_text(STUDY, encoding="utf-8")
    config = load_study(tmp_path / "study.toml")
    for name in [*KEPT, "sequence.seeds"]:
        keep(tmp_path, name, record_of(config, name))
    return tmp_path, config


def files(folder: Path) -> dict:
    return {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in folder.rglob("*") if path.is_file()}


def refusals(folder: Path, study_file: str = "study.toml", commands=("plan", "run", "report")) -> list[str]:
    """The lines each of ``commands`` refuses with (the same for each, rc 2), no file changed."""
    before = files(folder)
    found = {}
    for command in commands:
        status, out, err = study(command, study_file, cwd=folder)
        assert (status, out) == (2, ""), (command, out, err)
        found[command] = err.splitlines()
    assert len({tuple(lines) for lines in found.values()}) == 1, found
    assert files(folder) == before
    return found[commands[0]]


def refusal(folder: Path, name: str, *differences: str, study_file: str = "study.toml") -> str:
    return (f"error: {folder / 'runs' / name}.run.json: not a record of this study ({study_file}): "
            + "; ".join(differences))


def test_a_changed_setting_is_refused_by_plan_run_and_report_naming_its_key(tiny):
    folder, _ = tiny
    (folder / "changed.toml").write_text(STUDY.replace("max_epoch = 2", "max_epoch = 3"), encoding="utf-8")
    lines = refusals(folder, "changed.toml")
    assert sorted(lines) == sorted(refusal(folder, name, "training.max_epoch: 2 (file: 3)", study_file="changed.toml")
                                   for name in [*KEPT, "sequence.seeds"])
    (folder / "changed.toml").write_text(STUDY.replace("max_epoch = 2", "max_epoch = 3").replace("lr = 5e-3",
                                                                                              "lr = 1e-3"))
    assert refusals(folder, "changed.toml", ("plan",))[0] == refusal(
        folder, "mask.seed1", "training.lr: 0.005 (file: 0.001)", "training.max_epoch: 2 (file: 3)",
        study_file="changed.toml")


def test_a_record_over_seeds_of_another_study_is_refused_and_not_rewritten(tiny):
    folder, config = tiny
    other = config.with_changes("study", name="other")
    keep(folder, "mask.seeds", record_of(other, "mask.seeds", dataset="other"))
    assert refusals(folder) == [refusal(folder, "mask.seeds", "study 'other', not 'tiny'")]


#: the fields of a record over seeds that holds its seeds' facts nowhere, and of one that holds only what is over them
SEEDS_RECORD_FORMS = {"without its seeds' facts": lambda key: key not in ("study", "command", "command_argv"),
                      "what is over its seeds only": lambda key: key in ("system", "significance", "seed_list")}


@pytest.mark.parametrize("form", SEEDS_RECORD_FORMS)
def test_a_record_over_seeds_without_its_seeds_facts_needs_each_seeds_record(tiny, form):
    folder, config = tiny  # the fixture's record over seeds holds them (the earlier form), and passes
    over = {key: value for key, value in record_of(config, "sequence.seeds").items() if SEEDS_RECORD_FORMS[form](key)}
    # no dataset in the second form: its seeds' records'
    keep(folder, "sequence.seeds", dict(over, seed_list=[1, 2, 3], **({"seeds": 3} if "seeds" in over else {})))
    assert refusals(folder) == [refusal(folder, "sequence.seeds", "the record of its seed 3, sequence.seed3.run.json, "
                                                                  "is missing (not there or packed)")]
    keep(folder, "sequence.seeds", over)
    assert study("plan", "study.toml", cwd=folder)[0] == 0


def test_a_run_record_of_another_study_outside_the_grid_is_refused(tiny):
    folder, config = tiny
    other = config.with_changes("model", embed_dim=32)
    keep(folder, "sequence.seed5", record_of(other, "sequence.seed2", seed=5))
    (folder / "runs" / "sequence.seed5.gen.gz").unlink()
    keep(folder, "ldd.seed1", record_of(config, "sequence.seed1", system="ldd"))
    (folder / "runs" / "ldd.seed1.gen.gz").unlink()
    assert sorted(refusals(folder)) == [refusal(folder, "ldd.seed1", "system 'ldd' is not one of the study's"),
                                        refusal(folder, "sequence.seed5", "model.embed_dim: 32 (file: 16)")]


def test_a_record_holding_a_machines_path_is_refused_naming_it(tiny):
    folder, config = tiny  # the study wrote it from another checkout: its own paths not made relative
    elsewhere = "/home/someone/lanes/runs/sequence.seed2.train.log.gz"
    keep(folder, "sequence.seed2", record_of(config, "sequence.seed2", train_log=elsewhere))
    assert refusals(folder) == [refusal(folder, "sequence.seed2", f"it holds the absolute path {elsewhere} (a study's "
                                        f"record names its files relative to its project, {folder}, and its work "
                                        "folder as OUT_DIR)")]


def test_a_record_may_hold_an_absolute_path_its_study_file_gives(tiny):
    folder, _ = tiny
    (folder / "study.toml").write_text(STUDY.replace('archive = "parses"', f'archive = "{folder / "parses"}"'))
    config = load_study(folder / "study.toml")
    for name in [*KEPT, "sequence.seeds"]:
        keep(folder, name, record_of(config, name))
    assert json.dumps(str(folder / "parses")) in (folder / "runs" / "mask.seed1.run.json").read_text()
    assert study("plan", "study.toml", cwd=folder)[0] == 0


def test_a_record_names_its_own_run(tiny):
    folder, config = tiny
    shutil.copy(folder / "runs" / "sequence.seed1.run.json", folder / "runs" / "mask.seed2.run.json")
    shutil.copy(folder / "runs" / "sequence.seed1.run.json", folder / "runs" / "sequence.seed3.run.json")
    assert sorted(refusals(folder, commands=("plan",))) == [
        refusal(folder, "mask.seed2", "system 'sequence', not its file name's 'mask'", "seed 1, not its file name's 2"),
        refusal(folder, "sequence.seed3", "seed 1, not its file name's 3")]


def test_records_of_the_old_form_are_read_and_compared_by_their_words(tiny):
    folder, config = tiny
    run = next(run for run in study_runs(config) if run.name == "mask.seed1")
    text = " ".join(["fairseq-train", *train_arguments(config, run, "OUT_DIR")])
    assert "--adam-betas (0.9, 0.98)" in text and text != command_text(["fairseq-train",
                                                                        *train_arguments(config, run, "OUT_DIR")])
    old = {key: value for key, value in record_of(config, "mask.seed1").items()
           if key not in ("study", "command_argv")}
    keep(folder, "mask.seed1", {**old, "command": text})
    status, plan, _ = study("plan", "study.toml", cwd=folder)
    assert status == 0 and any(line.split()[:2] == ["mask.seed1", "done"] for line in plan.splitlines())
    keep(folder, "mask.seed1", {**old, "command": text, "study": {"name": "tiny", "settings": settings_digest(config)}})
    assert study("plan", "study.toml", cwd=folder)[0] == 0
    keep(folder, "mask.seed1", {**old, "command": text.replace("--lr 5e-3", "--lr 1e-3").replace(
        "--encoder-layers 1", "--encoder-layers 3")})
    assert refusals(folder) == [refusal(folder, "mask.seed1", "model.encoder_layers: 3 (file: 1)",
                                        "training.lr: 1e-3 (file: 5e-3)")]
    merged = config.with_changes("bpe", merges=60)
    keep(folder, "mask.seed1", {**old, "command": text, "study": {"name": "tiny", "settings": settings_digest(merged)}})
    assert refusals(folder, commands=("plan",)) == [refusal(
        folder, "mask.seed1", "its settings' digest is not the file's: a setting of [corpus], [parses], [bpe] or "
        "[decoding] changed (a record of the old form keeps their digest only)")]
