"""A study over sizes 20 and 40 (a BPE sweep at 20) end to end: subsets, protocol, cost, curve by hand; refusals."""
import json
import math
import shutil
from pathlib import Path

import pytest

from fairseq_syntax.evaluation.records import load_record
from study.test_prepare import corpus  # noqa: F401
from study.test_tiny_study import tokenized_bleu, study
from study.tiny_study_file import SETTINGS

SIZES = """\
[corpus]
raw = "raw"
text = "tokenized"
subset = {sizes}
[sizes.20]
training.warmup_updates = 5
sweep.bpe.merges = [30, 60]
[seeds]
count = 1
[[systems]]
name = "sequence"
[[systems]]
name = "mask"
controls = ["random"]
"""


def tiny_settings() -> str:
    """The tiny study's settings without [corpus] and [seeds]."""
    settings = SETTINGS.format(epochs=2)
    for table in ('[corpus]\nraw = "raw"\ntext = "tokenized"\n', "[seeds]\ncount = 2\n"):
        assert table in settings
        settings = settings.replace(table, "")
    return settings


def sizes_study(sizes: str) -> str:
    return tiny_settings() + SIZES.format(sizes=sizes)


def states(plan: str, prefix: str) -> list[str]:
    return [line.split()[1] if line.split()[1] != "to" else "to do" for line in plan.splitlines()
            if line.strip().startswith(prefix)]


@pytest.fixture(scope="module")
def finished(corpus, tmp_path_factory):  # noqa: F811
    folder = tmp_path_factory.mktemp("sizes")
    for name in ("raw", "parses"):
        shutil.copytree(corpus / name, folder / name)
    (folder / "study.toml").write_text(sizes_study("[20, 40]"), encoding="utf-8")
    before = study("plan", "study.toml", cwd=folder).stdout
    run = study("run", "study.toml", "--jobs", "2", cwd=folder)
    report = study("report", "study.toml", cwd=folder)
    return folder, before, run, report


def test_plan_shows_the_sweep_and_the_grid_waiting_for_it(finished):
    _, before, _, _ = finished
    assert "size 20 (tiny.n20)" in before and "size 40 (tiny.n40)" in before
    assert "n20/sweep/merges30/sequence.seed1  to do" in before
    assert "n20/sweep/merges60/sequence.seed1  to do" in before
    assert "protocol: waits for its sweep (0 of 2 candidates run)" in before
    assert "3 runs wait for the protocol (n20/SYSTEM.seedK): sequence 1 seed, mask 1 seed, mask_random 1 seed" in before
    assert "protocol: the file's, no sweep" in before and "n40/mask_random.seed1" in before


def test_the_smaller_subset_lies_inside_the_larger(finished):
    folder = finished[0]
    small = (folder / "work/n20/raw/train.lines").read_text().split()
    large = (folder / "work/n40/raw/train.lines").read_text().split()
    assert len(small) == 20 and len(large) == 40 and set(small) < set(large)
    for merges in (30, 60):
        assert (folder / f"work/n20/sweep/merges{merges}/raw/train.lines").read_text().split() == small


def _nll_per_sentence(log: Path) -> float:
    """The best epoch's valid nll_loss (bits/token) x ln 2 x target tokens per sentence."""
    import gzip

    best = None
    for line in gzip.open(log, "rt").read().splitlines():
        if "valid on 'valid' subset" not in line:
            continue
        fields = dict(part.strip().split(" ", 1) for part in line.split(" | ")[3:] if " " in part.strip())
        value = float(fields["nll_loss"]) * math.log(2) * float(fields["wpb"]) / float(fields["bsz"])
        if best is None or float(fields["nll_loss"]) < best[0]:
            best = (float(fields["nll_loss"]), value)
    return best[1]


def test_the_protocol_is_the_sweep_candidate_of_lowest_validation_nll_per_sentence(finished):
    folder, _, run, _ = finished
    found = {merges: _nll_per_sentence(folder / f"runs/n20/sweep/merges{merges}/sequence.seed1.train.log.gz")
             for merges in (30, 60)}
    chosen = min(found, key=found.get)
    plan = study("plan", "study.toml", cwd=folder).stdout
    assert f"protocol: bpe.merges {chosen} (sweep candidate merges{chosen})" in plan
    command = load_record(folder / "runs/n20/sequence.seed1.run.json")["command"]
    assert "--warmup-updates 5 " in command
    assert json.loads((folder / "work/n20/prepared.json").read_text())["steps"]["bpe"]["recipe"]["bpe.merges"] \
        == chosen
    results = json.loads((folder / "report/RESULTS.json").read_text())
    assert results["sweeps"]["20"]["chosen"] == f"merges{chosen}"
    assert results["sweeps"]["20"]["records"] == "../runs/n20/sweep"
    assert set(json.loads((folder / "report/n20/RESULTS.json").read_text())["datasets"]) == {"tiny.n20"}
    # a size's commands are left to its records, which the sizes report names
    assert "### Commands" not in (folder / "report/n20/RESULTS.md").read_text()
    assert "each run's record holds them whole (`../runs/nN/`" in (folder / "report/RESULTS.md").read_text()
    for row in results["sweeps"]["20"]["candidates"]:
        merges = row["values"]["bpe"]["merges"]
        assert row["valid_nll_per_sentence"] == pytest.approx(found[merges], rel=1e-9)
    assert "== every size's runs are done" in run.stdout


def test_each_sizes_cost_is_its_records_wall_times(finished):
    """A size's cost: its sweep's and grid's wall times summed, in hours."""
    folder, _, _, _ = finished
    cost = json.loads((folder / "report/RESULTS.json").read_text())["cost"]
    walls = {kind: [json.loads(path.read_text())["wall_time_s"] for path in (folder / "runs/n20").glob(pattern)]
             for kind, pattern in (("sweep", "sweep/*/sequence.seed1.run.json"), ("grid", "*.seed1.run.json"))}
    assert len(walls["sweep"]) == 2 and len(walls["grid"]) == 3
    assert cost["20"]["sweep_runs"] == 2 and cost["20"]["sweep_hours"] == pytest.approx(sum(walls["sweep"]) / 3600)
    assert cost["20"]["grid"]["runs"] == 3
    assert cost["20"]["grid"]["hours"] == pytest.approx(sum(walls["grid"]) / 3600)
    assert cost["40"]["sweep_runs"] == 0 and cost["40"]["grid"]["runs"] == 3
    assert "## What each size cost" in (folder / "report/RESULTS.md").read_text()


def test_the_curve_is_the_decodes_differences(finished):
    folder, _, _, report = finished
    results = json.loads((folder / "report/RESULTS.json").read_text())
    curve = results["curve"]
    assert curve["sizes"] == [20, 40] and curve["methods"] == {"mask": ["mask_random"]}
    for size in (20, 40):
        runs = folder / f"runs/n{size}"
        base = tokenized_bleu(runs.parent.parent, f"n{size}/sequence.seed1")
        for system in ("mask", "mask_random"):
            mine = tokenized_bleu(runs.parent.parent, f"n{size}/{system}.seed1")
            found = curve["systems"][system][str(size)]
            assert found["BLEU"]["delta"] == pytest.approx(mine - base, abs=1e-6)
            low, high = found["BLEU"]["delta_ci"]
            assert low <= found["BLEU"]["delta"] <= high
        versus = curve["vs_control"]["mask"]["mask_random"][str(size)]
        assert versus["BLEU"]["delta"] == pytest.approx(
            tokenized_bleu(runs.parent.parent, f"n{size}/mask.seed1")
            - tokenized_bleu(runs.parent.parent, f"n{size}/mask_random.seed1"), abs=1e-6)
    assert (folder / "report/curve.png").stat().st_size > 0
    assert (folder / "report/n20/RESULTS.md").is_file() and (folder / "report/n40/RESULTS.md").is_file()
    assert "wrote" in report.stdout and "curve.png" in report.stdout


def test_a_third_size_leaves_the_others_done_and_a_given_study_is_read_as_it_is(finished):
    folder = finished[0]
    (folder / "third.toml").write_text(sizes_study("[20, 30, 40]"), encoding="utf-8")
    plan = study("plan", "third.toml", cwd=folder).stdout
    assert states(plan, "n20/") == ["done"] * 5 and states(plan, "n40/") == ["done"] * 3
    assert "size 30 (tiny.n30)" in plan and states(plan, "n30/") == ["to do"] * 3
    one = tiny_settings().replace('name = "tiny"', 'name = "tiny.n40"').replace(
        'work = "work"', 'work = "work/n40"').replace('runs = "runs"', 'runs = "runs/n40"')
    one += '[corpus]\nraw = "raw"\ntext = "tokenized"\nsubset = 40\n[seeds]' + SIZES.split("[seeds]")[1]
    (folder / "one.toml").write_text(one, encoding="utf-8")
    given = sizes_study("[20, 40]").replace("[seeds]", '[sizes.40]\nstudy_file = "one.toml"\n[seeds]')
    (folder / "given.toml").write_text(given, encoding="utf-8")
    plan = study("plan", "given.toml", cwd=folder).stdout
    assert "size 40: the runs of one.toml (tiny.n40), read as they are" in plan
    assert states(plan, "n40/") == ["done"] * 3


TABLE = "[sizes.20]\ntraining.warmup_updates = 5\nsweep.bpe.merges = [30, 60]\n"


@pytest.mark.parametrize("sizes, old, new, problems", [
    ("[20, 100]", "", "", ["corpus.subset: 100 above the corpus's 60 training pairs"]),
    ("[20, 20]", TABLE, "", ["corpus.subset: lists 20 twice"]),
    ("[20, 0]", TABLE, "", ["corpus.subset: must be a list of positive integers (training pairs), not [20, 0]"]),
    ("[20, 40]", "[30, 60]", "[30]\nsweep.model.heads = [2, 'four']\n[sizes.50]\nbpe.merges = 10",
     ["sizes.20.sweep.bpe.merges: must list two or more candidates, not [30]",
      "sizes.20.sweep.model.heads: a candidate must be an integer >= 1, not 'four'",
      "sizes.50: not one of corpus.subset's sizes ([20, 40])"]),
])
def test_plan_refuses_bad_sizes_a_line_each(corpus, tmp_path, sizes, old, new, problems):  # noqa: F811
    for name in ("raw", "parses"):
        shutil.copytree(corpus / name, tmp_path / name)
    (tmp_path / "study.toml").write_text(sizes_study(sizes).replace(old, new) if old else sizes_study(sizes))
    result = study("plan", "study.toml", cwd=tmp_path, check=False)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == len(problems) and all(any(p in line for line in lines) for p in problems), lines
    assert not (tmp_path / "work").exists()


def test_run_study_refuses_a_study_over_sizes_before_anything_is_made(tmp_path):
    from fairseq_syntax.study.commands import run_study
    from fairseq_syntax.study.config import load_study
    from fairseq_syntax.study.records import StudyError

    (tmp_path / "study.toml").write_text(sizes_study("[40, 20]"))
    with pytest.raises(StudyError, match=r"corpus.subset lists sizes \[20, 40\]: a study over sizes is run size by"):
        run_study(load_study(tmp_path / "study.toml"), "local", 1)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["study.toml"]
