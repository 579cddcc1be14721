"""Recipes whose logs are packed regenerate their committed RESULTS.md and RESULTS.json byte for byte."""
import os
import subprocess
import sys

import pytest

from conftest import REPO
from fairseq_syntax.evaluation import packed_runs

COMMANDS = {
    "sst": [sys.executable, "examples/sst/results.py", "examples/sst/logs", "--out"],
    "ptb_induction": [sys.executable, "examples/ptb_induction/make_results.py", "--out"],
    # a study's report (docs/study.md) into a folder of its own: RESULTS.md, RESULTS.json and seeds.png
    "demo": [sys.executable, "-m", "fairseq_syntax.cli.study", "report", "examples/demo/our-run.toml", "--out"],
    "multi30k": [sys.executable, "-m", "fairseq_syntax.cli.study", "report", "examples/multi30k/study.toml", "--out"],
    "multi30k_de_en": [sys.executable, "-m", "fairseq_syntax.cli.study", "report", "examples/multi30k_de_en/study.toml",
                       "--out"],
}


#: the folder below the recipe's whose archive holds the logs its RESULTS are made from
PACKED_IN = {"sst": ("logs",), "ptb_induction": (), "demo": ("runs",), "multi30k": ("runs",),
             "multi30k_de_en": ("runs",)}


@pytest.mark.parametrize("recipe", sorted(COMMANDS))
def test_a_recipe_regenerates_its_results_from_its_packed_logs(recipe, tmp_path):
    folder = os.path.join(REPO, "examples", recipe)
    # the recipe's logs are read from the archive: a study's in its runs folder
    archive = os.path.join(folder, *PACKED_IN[recipe], "packed.tar.xz")
    assert os.path.exists(archive), archive
    assert not packed_runs.glob(os.path.join(folder, *PACKED_IN[recipe], "*.gz")), recipe
    out = tmp_path if "report" in COMMANDS[recipe] else tmp_path / "RESULTS.md"
    result = subprocess.run(COMMANDS[recipe] + [str(out)], cwd=REPO, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("RESULTS.md", "RESULTS.json"):
        with open(os.path.join(folder, name), encoding="utf-8") as committed:
            assert (tmp_path / name).read_text(encoding="utf-8") == committed.read(), f"{recipe}/{name}"


@pytest.mark.parametrize("recipe", sorted(name for name, command in COMMANDS.items() if "report" in command))
def test_a_study_keeps_the_test_set_its_runs_were_scored_on(recipe):
    from fairseq_syntax.evaluation.scoring import read_lines
    from fairseq_syntax.study.config import load_study
    from fairseq_syntax.study.records import kept, kept_test_set, read_record, runs_dir

    config = load_study(os.path.join(REPO, COMMANDS[recipe][COMMANDS[recipe].index("report") + 1]))
    record = read_record(runs_dir(config) / f"{config.baseline}.seeds.run.json")
    sentences = record["per_seed_metrics"]["n_sentences"][0]  # as many as the runs were scored on
    for name in kept_test_set(config):
        assert kept(name) is not None, f"{name}.gz: not kept with the runs"
        assert len(read_lines(kept(name))) == sentences, name
