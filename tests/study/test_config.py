"""The study file (fairseq_syntax/study/config.py) and the grid it gives (fairseq_syntax/study/grid.py): every key
with its default, one line per problem naming the key, the runs and their commands, the study's identity."""
import dataclasses
from pathlib import Path

import pytest

from conftest import REPO
from fairseq_syntax.study.config import SECTIONS, ConfigError, key_tables, load_study, template
from fairseq_syntax.study.grid import (
    Run,
    control_pairs,
    planned_seeds,
    registry_systems,
    settings_digest,
    study_settings,
    study_runs,
    compared_with,
    decode_arguments,
    train_arguments,
)

MINIMAL = """
[study]
name = "tiny"
[corpus]
raw = "raw"
[[systems]]
name = "sequence"
[[systems]]
name = "mask"
seeds = 2
controls = ["random", "struct"]
control_seeds = {struct = 1}
"""


def write(tmp_path, text: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(tmp_path, text: str) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        load_study(write(tmp_path, text))
    return raised.value.problems


def test_template_holds_every_key_with_its_default(tmp_path):
    text = template()
    for section, keys in SECTIONS.items():
        assert f"[{section}]" in text
        for key in dataclasses.fields(keys):
            assert any(line.startswith(f"{key.name} = ") for line in text.splitlines()), (section, key.name)
    filled = text.replace('name = ""  # REQUIRED', 'name = "mine"  # REQUIRED', 1).replace(
        'raw = ""  # REQUIRED', 'raw = "data"  # REQUIRED', 1)
    config = load_study(write(tmp_path, filled))
    assert config.training.patience == 5 and config.bpe.merges == 10000
    assert config["training"]["patience"] == 5 and dict(config.bpe) == {"merges": 10000}
    assert [entry.name for entry in config.systems] == ["sequence", "mask"]
    assert config.systems[1].controls == {"random": 3}
    assert "\n| `patience` | `5` | stop once validation nll_loss has not improved for this many epochs |\n" \
        in key_tables()
    assert key_tables() in (Path(REPO) / "docs" / "study.md").read_text(encoding="utf-8"), \
        "regenerate docs/study.md's key tables: python -m fairseq_syntax.study.config"


def test_init_refuses_to_overwrite(tmp_path, capsys):
    from fairseq_syntax.cli.study import main

    target = tmp_path / "mine.toml"
    target.write_text("kept\n")
    assert main(["init", "--output", str(target)]) == 2 and target.read_text() == "kept\n"
    assert capsys.readouterr().err == f"error: {target} exists: not overwritten\n"


def test_every_problem_is_one_line_naming_its_key(tmp_path):
    text = MINIMAL.replace('raw = "raw"', 'raw = "raw"\nsubset = -1\nlanguage = "en"').replace(
        "[[systems]]\nname = \"sequence\"", "[training]\npatience = \"five\"\nprecision = \"fp8\"\n"
        "[test]\nbaseline = \"words\"\n[[systems]]\nname = \"sequence\"").replace(
        'controls = ["random", "struct"]', 'controls = ["random", "shuffled"]')
    text += '[[systems]]\nname = "no_such_method"\n'
    found = problems_of(tmp_path, text)
    where = str(tmp_path / "study.toml")
    expected = [
        f"{where}: corpus.language: unknown key",
        f"{where}: corpus.subset: must be an integer >= 0, not -1",
        f"{where}: training.patience: must be an integer >= 1, not 'five'",
        f"{where}: training.precision: must be one of fp32, bf16, fp16, not 'fp8'",
        f"{where}: systems[2] (mask).controls: 'shuffled' is no control kind",
        f"{where}: systems[2] (mask).control_seeds.struct: not one of its controls",
        f"{where}: systems[3] (no_such_method).name: 'no_such_method' is no system of the method registry",
        f"{where}: test.baseline: 'words' is not one of the study's systems",
    ]
    for start in expected:
        assert sum(problem.startswith(start) for problem in found) == 1, (start, found)
    assert len(found) == len(expected), found
    assert all("\n" not in problem for problem in found)


def test_a_control_the_registry_does_not_describe_is_refused(tmp_path):
    found = problems_of(tmp_path, MINIMAL + '[[systems]]\nname = "ldd"\ncontrols = ["random"]\n')
    assert found == [f"{tmp_path / 'study.toml'}: systems[3] (ldd).controls: the registry describes no 'random' "
                     "control of ldd (ldd_random)"]


def test_missing_file_and_bad_toml_are_one_line(tmp_path):
    with pytest.raises(ConfigError) as raised:
        load_study(tmp_path / "none.toml")
    assert raised.value.problems == [f"{tmp_path / 'none.toml'}: no such file"]
    found = problems_of(tmp_path, "[study\nname=")
    assert len(found) == 1 and found[0].startswith(f"{tmp_path / 'study.toml'}: not a TOML file")


def test_a_study_takes_the_keys_of_its_base_where_it_sets_none(tmp_path):
    write(tmp_path, MINIMAL.replace('[corpus]', '[training]\npatience = 3\nmax_epoch = 50\n[corpus]'))
    gpu = tmp_path / "gpu.toml"
    gpu.write_text('[study]\nbase = "study.toml"\nname = "tiny-gpu"\nruns = "runs-gpu"\n'
                   '[training]\ndevice = "cuda"\nmax_epoch = 20\n', encoding="utf-8")
    config = load_study(gpu)
    assert config.name == "tiny-gpu" and config.study.runs == "runs-gpu" and config.study.work == "work"
    assert (config.training.device, config.training.max_epoch, config.training.patience,
            config.training.lr) == ("cuda", 20, 3, 0.001)
    assert config.corpus.raw == "raw" and config.resolve(config.corpus.raw) == tmp_path / "raw"
    assert [(e.name, e.seeds, e.controls) for e in config.systems] == [
        ("sequence", 3, {}), ("mask", 2, {"random": 2, "struct": 1})]
    one = tmp_path / "one.toml"
    one.write_text('[study]\nbase = "gpu.toml"\n[[systems]]\nname = "sequence"\nseeds = 1\n', encoding="utf-8")
    config = load_study(one)
    assert [(e.name, e.seeds) for e in config.systems] == [("sequence", 1)]
    assert config.name == "tiny-gpu" and config.training.device == "cuda"


def test_a_missing_base_and_a_circle_of_bases_are_one_line(tmp_path):
    found = problems_of(tmp_path, '[study]\nbase = "cpu.toml"\nname = "x"\n')
    assert found == [f"{tmp_path / 'study.toml'}: study.base: cpu.toml: no such file (a base is named relative to "
                     "the file)"]
    (tmp_path / "a.toml").write_text('[study]\nbase = "study.toml"\n', encoding="utf-8")
    found = problems_of(tmp_path, '[study]\nbase = "a.toml"\nname = "x"\n')
    assert found == [f"{tmp_path / 'a.toml'}: study.base: study.toml leads back to {tmp_path / 'study.toml'}: a circle "
                     "of bases"]
    (tmp_path / "cpu.toml").write_text(MINIMAL.replace("[corpus]", "[training]\npatience = 0\n[corpus]"),
                                       encoding="utf-8")
    found = problems_of(tmp_path, '[study]\nbase = "cpu.toml"\n[bpe]\nmerges = "many"\n')
    assert found == [f"{tmp_path / 'study.toml'}: bpe.merges: must be an integer >= 1, not 'many'",
                     f"{tmp_path / 'cpu.toml'}: training.patience: must be an integer >= 1, not 0"]


def test_the_grid_its_pairs_and_its_commands(tmp_path):
    config = load_study(write(tmp_path, MINIMAL))
    names = [run.name for run in study_runs(config)]
    assert names == ["sequence.seed1", "sequence.seed2", "sequence.seed3", "mask.seed1", "mask.seed2",
                     "mask_random.seed1", "mask_random.seed2", "mask_struct.seed1"]
    assert [run.data for run in study_runs(config)][5:] == ["preorder.random", "preorder.random-s2", "preorder.struct"]
    assert control_pairs(config) == {"mask_random": ("mask", "random"), "mask_struct": ("mask", "struct")}
    assert planned_seeds(config) == {"sequence": 3, "mask": 2, "mask_random": 2, "mask_struct": 1}
    assert compared_with(config, "mask") == ["sequence", "mask_random", "mask_struct"]
    assert compared_with(config, "mask_random") == ["sequence", "mask"]
    assert compared_with(config, "sequence") == []
    run = study_runs(config)[6]
    args = train_arguments(config, run, "W")
    assert args[:6] == ["W/data-bin/preorder.random-s2", "--user-dir", "fairseq_syntax", "--task",
                        "syntax_translation", "--arch"]
    assert args[args.index("--seed") + 1] == "2"
    assert args[args.index("--save-dir") + 1] == "W/ckpt/ckpt-mask_random.seed2"
    assert args[-3:] == ["--patience", "5", "--best-checkpoint-metric", "nll_loss", "--cpu", "--num-workers", "0"][-3:]
    assert decode_arguments(config, run, "W") == [
        "W/data-bin/preorder.random-s2", "--user-dir", "fairseq_syntax", "--task", "syntax_translation", "--path",
        "W/ckpt/ckpt-mask_random.seed2/checkpoint_best.pt", "--gen-subset", "test", "--post-process", "subword_nmt",
        "--beam", "5", "--batch-size", "128", "--cpu", "--num-workers", "0"]
    on_gpu = config.with_changes("training", device="cuda")
    assert decode_arguments(on_gpu, run, "W")[-4:] == ["--beam", "5", "--batch-size", "128"]


#: a Multi30k record's training command (examples/multi30k/runs, mask_random.seed2)
RECORDED = ("fairseq-train OUT_DIR/data-bin/preorder.random --user-dir fairseq_syntax --task syntax_translation "
            "--arch transformer_syntax_mask --save-dir OUT_DIR/ckpt/ckpt-mask_random.seed2 --no-epoch-checkpoints "
            "--log-format simple --log-interval 50 --encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 256 "
            "--decoder-embed-dim 256 --encoder-ffn-embed-dim 1024 --decoder-ffn-embed-dim 1024 "
            "--encoder-attention-heads 4 --decoder-attention-heads 4 --share-all-embeddings --dropout 0.3 "
            "--weight-decay 0.0001 --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --optimizer adam "
            "--adam-betas (0.9, 0.98) --lr 1e-3 --lr-scheduler inverse_sqrt --warmup-updates 1000 --clip-norm 1.0 "
            "--seed 2 --max-source-positions 1024 --batch-size 64 --max-epoch 100 --patience 5 "
            "--best-checkpoint-metric nll_loss --cpu --num-workers 0")


def test_a_record_of_the_old_form_is_compared_word_by_word_and_each_difference_named_by_its_key(tmp_path):
    """A control run that read seed 1's structures is the same run; the run's name and data are named apart."""
    from fairseq_syntax.evaluation.run_commands import record_argv, with_argv
    from fairseq_syntax.study.record_checks import command_differences

    config = load_study(write(tmp_path, MINIMAL))
    run = study_runs(config)[6]
    assert run.name == "mask_random.seed2" and run.data == "preorder.random-s2"
    words = record_argv(with_argv({"command": RECORDED}))
    assert words[words.index("--adam-betas") + 1:words.index("--lr")] == ["(0.9,", "0.98)"]
    assert command_differences(words, config, run) == []
    changed = load_study(write(tmp_path, MINIMAL + "[training]\nlr = 5e-4\npatience = 10\nmax_epoch = 50\n"
                                                    "[model]\nshare_all_embeddings = false\n"))
    assert command_differences(words, changed, run) == [
        "model.share_all_embeddings: --share-all-embeddings (file: absent)", "training.lr: 1e-3 (file: 5e-4)",
        "training.max_epoch: 100 (file: 50)", "training.patience: 5 (file: 10)"]
    runs = {run.name: run for run in study_runs(config)}
    seed_three = Run(registry_systems()["mask_random"].for_training_seed(3), 3)
    assert seed_three.data == "preorder.random-s3"
    assert command_differences(words, config, seed_three) == [
        "the run's name and seed: OUT_DIR/ckpt/ckpt-mask_random.seed2 (file: OUT_DIR/ckpt/ckpt-mask_random.seed3)",
        "the run's name and seed: 2 (file: 3)"]
    assert command_differences(words, config, runs["mask.seed2"]) == [
        "the run's data directory: OUT_DIR/data-bin/preorder.random (file: OUT_DIR/data-bin/preorder)",
        "the run's name and seed: OUT_DIR/ckpt/ckpt-mask_random.seed2 (file: OUT_DIR/ckpt/ckpt-mask.seed2)"]


def test_a_record_names_its_settings_by_their_keys_in_the_study_file(tmp_path):
    """A record's settings are the keys that change a run (no paths, no thread counts)."""
    from fairseq_syntax.study.record_checks import settings_differences

    config = load_study(write(tmp_path, MINIMAL))
    settings = study_settings(config)
    assert settings["training.lr"] == 0.001 and settings["training.adam_betas"] == "(0.9, 0.98)"
    assert settings["model.embed_dim"] == 256 and settings["corpus.source"] == "en"
    assert not {"corpus.raw", "corpus.reference", "parses.workers", "training.threads"} & set(settings)
    assert not any(key.startswith(("study.", "seeds.", "test.", "executor.", "slurm.")) for key in settings)
    assert settings_differences(settings, config) == []
    changed = load_study(write(tmp_path, MINIMAL + "[training]\nmax_epoch = 7\nthreads = 4\n[bpe]\nmerges = 800\n"))
    assert settings_differences(settings, changed) == ["bpe.merges: 10000 (file: 800)",
                                                       "training.max_epoch: 100 (file: 7)"]
    assert settings_differences({**settings, "model.gone": 1}, config) == ["model.gone: 1 (file: absent)"]


def test_the_settings_digest_follows_what_changes_a_run(tmp_path):
    base = settings_digest(load_study(write(tmp_path, MINIMAL)))
    moved = MINIMAL.replace('raw = "raw"', 'raw = "elsewhere"') + "[training]\nthreads = 4\n[executor]\njobs = 3\n"
    assert settings_digest(load_study(write(tmp_path, moved))) == base
    for change in ("[training]\nlr = 5e-4\n", "[bpe]\nmerges = 8000\n", "[decoding]\nbeam = 4\n",
                   "[parses]\narchive = \"other\"\n"):
        assert settings_digest(load_study(write(tmp_path, MINIMAL + change))) != base, change
