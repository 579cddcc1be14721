"""tests/study/depth_method installed by entry point: a study of it plans without torch, makes src_depth (checked
against depths by hand), trains, decodes and reports."""
import gzip
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import REPO
from study.forbid_torch import study_forbidding_torch
from study.tiny_study_file import SETTINGS
from study.test_prepare import corpus  # noqa: F401

STUDY = SETTINGS.replace("count = 2", "count = 1") + """\
[[systems]]
name = "sequence"
[[systems]]
name = "depth"
controls = ["random"]
"""
RUNS = ["sequence.seed1", "depth.seed1", "depth_random.seed1"]
METHOD_FOLDER = Path(__file__).parent / "depth_method"


def test_the_docs_show_the_folders_code():
    from recipes.test_docs import fenced_blocks

    sources = "".join(path.read_text(encoding="utf-8") for path in sorted(METHOD_FOLDER.glob("*.py")))
    shown = [lines for language, lines in fenced_blocks((Path(REPO) / "docs/adding-a-method.md").read_text())
             if language == "python"]
    assert len(shown) == 2 and all("\n".join(lines) in sources for lines in shown)


def install(site: Path) -> None:
    """depth_method in ``site`` with a dist-info declaring its entry point, as pip would."""
    shutil.copytree(METHOD_FOLDER, site / "depth_method", ignore=shutil.ignore_patterns("__pycache__"))
    info = site / "depth_method-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: depth-method\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[fairseq_syntax.methods]\ndepth = depth_method:METHOD\n",
                                           encoding="utf-8")


@pytest.fixture(scope="module")
def finished(corpus, tmp_path_factory):  # noqa: F811
    """(folder, environment with the method installed, plan before the run) of the study run and reported."""
    folder = tmp_path_factory.mktemp("new-method")
    install(folder / "site")
    for name in ("raw", "parses"):
        shutil.copytree(corpus / name, folder / name)
    (folder / "study.toml").write_text(STUDY.format(epochs=2), encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": tempfile.mkdtemp(prefix="new-method-cores-"),
           "PYTHONPATH": os.pathsep.join([str(folder / "site"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    plan = study_forbidding_torch("plan", "study.toml", cwd=folder, env=env)
    assert plan.returncode == 0, plan.stdout[-2000:] + plan.stderr[-3000:]
    for command in (["run", "study.toml", "--jobs", "2"], ["report", "study.toml"]):
        done = subprocess.run(["fairseq-syntax-study", *command], cwd=folder, env=env, capture_output=True, text=True,
                              timeout=1200)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return folder, env, plan.stdout


def test_the_study_finds_the_installed_method_and_plans_its_runs_without_torch(finished):
    _, _, plan = finished
    assert [line.split()[:2] for line in plan.splitlines()[1:1 + len(RUNS)]] == [[run, "to"] for run in RUNS]


def hand_depths(arcs: Path, source: Path) -> list[list[int]]:
    """Each BPE token's depth: steps from its word up the 1-best heads to the root."""
    depths = []
    with gzip.open(arcs, "rt", encoding="utf-8") as records, open(source, encoding="utf-8") as lines:
        for record, line in zip(records, lines):
            heads = [head for head, _ in json.loads(record)["best"]]
            words = []
            for word in range(1, len(heads) + 1):
                steps, at = 0, word
                while at:
                    steps, at = steps + 1, heads[at - 1]
                words.append(steps)
            tokens, word = [], 0
            for token in line.split():
                tokens.append(words[word])
                word += not token.endswith("@@")
            depths.append(tokens)
    return depths


def test_the_maker_made_the_depths_where_the_systems_read_them(finished):
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    folder, _, _ = finished
    work = folder / "work"
    assert sorted(path.name for path in (work / "data-bin").iterdir()) == ["sequence", "sequence.random"]
    for name, structures in (("sequence", work / "tok"), ("sequence.random", work / "bpe" / "random")):
        meta = json.loads((work / "data-bin" / name / "syntax.json").read_text())
        assert set(meta["side_data"]) == {"depth"} and set(meta["side_data"]["depth"]) == {"train", "valid", "test"}
        for split in ("train", "test"):
            made = MMapIndexedDataset(str(work / "data-bin" / name / f"{split}.en-de.en.depth"))
            expected = hand_depths(structures / f"{split}.arcs.jsonl.gz", work / "bpe" / f"{split}.en")
            assert [made[k].tolist() for k in range(len(made))] == expected
    real = hand_depths(work / "tok/train.arcs.jsonl.gz", work / "bpe/train.en")
    control = hand_depths(work / "bpe/random/train.arcs.jsonl.gz", work / "bpe/train.en")
    assert real != control
    recipe = json.loads((work / "prepared.json").read_text())["steps"]["data-bin/sequence"]["recipe"]
    assert recipe["depth"] is True and recipe["ldd"] is False
    assert recipe["depth_deepest"] == max(max(sentence) for sentence in real)
    assert recipe["parsers"]["roles"] == ["dependency"]


def test_plan_of_the_finished_study_loads_neither_torch_nor_fairseq(finished):
    folder, env, _ = finished
    plan = study_forbidding_torch("plan", "study.toml", cwd=folder, env=env)
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert [line.split()[:2] for line in plan.stdout.splitlines()[1:1 + len(RUNS)]] == [[run, "done"] for run in RUNS]


def test_its_runs_are_trained_decoded_and_reported(finished):
    folder, _, _ = finished
    for run in RUNS:
        record = json.loads((folder / "runs" / f"{run}.run.json").read_text())
        assert record["study"]["name"] == "tiny" and (folder / "runs" / f"{run}.gen.gz").is_file()
    log = gzip.decompress((folder / "runs" / "depth.seed1.train.log.gz").read_bytes()).decode()
    assert "transformer_depth" in log and "embed_depth" in log
    entry = json.loads((folder / "report" / "RESULTS.json").read_text())["datasets"]["tiny"]
    assert entry["comparisons"]["controls"] == {"depth_random": {"method": "depth", "kind": "random"}}
    assert [row["System"] for row in entry["table"]["rows"]] == ["sequence", "depth", "depth_random"]
