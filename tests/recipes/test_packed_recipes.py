"""The recipes whose logs are packed (examples/sst/logs/packed.tar.xz, examples/ptb_induction/packed.tar.xz with its
six run folders, examples/demo/runs/packed.tar.xz, examples/multi30k/runs/packed.tar.xz) regenerate their committed
RESULTS.md and RESULTS.json from the archives byte for byte: every reader finds the packed logs, scores and decodes
as it found the gzipped files, and none is listed twice or left out."""
import os
import subprocess
import sys

import pytest

from conftest import REPO

COMMANDS = {
    "sst": [sys.executable, "examples/sst/results.py", "examples/sst/logs", "--out"],
    "ptb_induction": [sys.executable, "examples/ptb_induction/make_results.py", "--out"],
    # a study's report (docs/study.md) into a folder of its own: RESULTS.md, RESULTS.json and seeds.png
    "demo": [sys.executable, "-m", "fairseq_syntax.cli.study", "report", "examples/demo/our-run.toml", "--out"],
    "multi30k": [sys.executable, "-m", "fairseq_syntax.cli.study", "report", "examples/multi30k/study.toml", "--out"],
}


@pytest.mark.parametrize("recipe", sorted(COMMANDS))
def test_a_recipe_regenerates_its_results_from_its_packed_logs(recipe, tmp_path):
    folder = os.path.join(REPO, "examples", recipe)
    # the recipe's logs are packed (and no longer there gzipped), so this reads them from the archive
    archives = [path for path in (os.path.join(folder, *below, "packed.tar.xz") for below in ((), ("logs",), ("runs",)))
                if os.path.exists(path)]
    assert len(archives) == 1, recipe
    out = tmp_path if "report" in COMMANDS[recipe] else tmp_path / "RESULTS.md"
    result = subprocess.run(COMMANDS[recipe] + [str(out)], cwd=REPO, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("RESULTS.md", "RESULTS.json"):
        with open(os.path.join(folder, name), encoding="utf-8") as committed:
            assert (tmp_path / name).read_text(encoding="utf-8") == committed.read(), f"{recipe}/{name}"
