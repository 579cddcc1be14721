"""The tiny study (40 pairs; sequence, mask and the installed tests/study/depth_method) end to end through
fairseq-syntax-study, then a study over sizes 20 and 40 whose size 40 is it: plan, run --jobs 2, reports checked by
hand, resume, Slurm; the sizes' refusals."""
import gzip
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU

from conftest import REPO
from fairseq_syntax.evaluation.records import absolute_paths, load_record
from fairseq_syntax.study.config import load_study
from fairseq_syntax.study.record_checks import record_problems
from fairseq_syntax.study.sizes import point_config, point_of, sweep_twin
from study.forbid_torch import study_forbidding_torch
from study.test_record_checks import study as in_process
from study.tiny_study_file import SETTINGS

MASK = '[[systems]]\nname = "mask"\ncontrols = ["random"]\n'
STUDY = SETTINGS.replace('text = "tokenized"\n', 'text = "tokenized"\nsubset = 40\n') + \
    '[[systems]]\nname = "sequence"\n' + MASK + '[[systems]]\nname = "depth"\ncontrols = ["random"]\nseeds = 1\n'
SEEDS = {"sequence": 2, "mask": 2, "mask_random": 2, "depth": 1, "depth_random": 1}
RUNS = [f"{system}.seed{seed}" for system, count in SEEDS.items() for seed in range(1, count + 1)]
DATA = ["sequence"] * 2 + ["preorder"] * 2 + ["preorder.random", "preorder.random-s2", "sequence", "sequence.random"]
SIZES = """\
[study]
base = "study.toml"
name = "tiny-sizes"
work = "work-sizes"
runs = "runs-sizes"
report = "sizes"
[corpus]
subset = {sizes}
[sizes.20]
training.warmup_updates = 5
sweep.bpe.merges = [30, 60]
[seeds]
count = 1
[[systems]]
name = "sequence"
""" + MASK
GIVEN = '[sizes.40]\nstudy_file = "study.toml"\n'
METHOD_FOLDER = Path(__file__).parent / "depth_method"


def install(site: Path) -> Path:
    """depth_method in ``site`` with a dist-info declaring its entry point, as pip would."""
    shutil.copytree(METHOD_FOLDER, site / "depth_method", ignore=shutil.ignore_patterns("__pycache__"))
    info = site / "depth_method-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: depth-method\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[fairseq_syntax.methods]\ndepth = depth_method:METHOD\n",
                                           encoding="utf-8")
    return site


#: the method installed; core claims apart from this machine's real runs
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": tempfile.mkdtemp(prefix="tiny-study-cores-"),
       "PYTHONPATH": os.pathsep.join([str(install(Path(tempfile.mkdtemp(prefix="depth-method-")))),
                                      *filter(None, [os.environ.get("PYTHONPATH")])])}


def study(*args, cwd):
    result = subprocess.run(["fairseq-syntax-study", *args], cwd=cwd, capture_output=True, text=True, timeout=900,
                            env=ENV)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def with_corpus(folder: Path, corpus: Path) -> Path:
    for name in ("raw", "parses"):
        shutil.copytree(corpus / name, folder / name)
    (folder / "study.toml").write_text(STUDY.format(epochs=2), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def finished(corpus, tmp_path_factory):
    """(folder, plan before without torch, run, report) of the tiny study run with --jobs 2."""
    folder = with_corpus(tmp_path_factory.mktemp("tiny"), corpus)
    before = study_forbidding_torch("plan", "study.toml", cwd=folder, env=ENV)
    assert before.returncode == 0, before.stdout[-2000:] + before.stderr[-3000:]
    run = study("run", "study.toml", "--jobs", "2", cwd=folder)
    from fairseq_syntax.evaluation.study_answer import README_BEGIN, README_END

    (folder / "README.md").write_text(f"# Mine\n\n{README_BEGIN} -->\nold\n{README_END}\n\nkept\n", encoding="utf-8")
    report = study("report", "study.toml", "--readme", "README.md", cwd=folder)
    return folder, before.stdout, run, report


def test_plan_without_torch_lists_every_run_of_the_grid_the_installed_methods_too(finished):
    _, before, _, _ = finished
    assert before.splitlines() == ["study tiny: 8 runs (study.toml)", *(
        f"  {run:<18}  to do{' ' * 29}reads data-bin/{data}" for run, data in zip(RUNS, DATA)),
        "  8 to do", "  cost: 8 runs left; no finished run to estimate their cost from yet"]


def test_run_trains_every_run_two_at_once(finished):
    folder, _, run, _ = finished
    assert "== 0 runs done, 8 to run" in run.stdout
    assert run.stdout.count("== start ") == 8 and "== 8 of 8 runs done" in run.stdout
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
        # relative to the study's project (no git checkout holds it: its folder), not to this package's checkout
        assert record["train_log"] == f"runs/{name}.train.log.gz" and absolute_paths(record) == []
    log = gzip.decompress((folder / "runs" / "depth.seed1.train.log.gz").read_bytes()).decode()
    assert "transformer_depth" in log and "embed_depth" in log
    over = folder / "runs" / "sequence.seeds.run.json"  # what is over its seeds only: the rest is their records'
    assert list(json.loads(over.read_text())) == ["system", "significance", "score_command_argv", "seed_list"]
    seeds = [load_record(folder / "runs" / f"sequence.seed{seed}.run.json") for seed in (1, 2)]
    assert load_record(over)["command_argv"] == seeds[0]["command_argv"]
    assert load_record(over)["per_seed_metrics"]["BLEU"] == [seed["metrics"]["BLEU"] for seed in seeds]


def tokenized_bleu(folder: Path, run: str) -> float:
    """BLEU of a run's decoded hypotheses (``RUNS/NAME``) against the tokenized test reference."""
    from fairseq_syntax.evaluation.scoring import read_generate_output

    refs = (folder / "raw" / "test.de").read_text().splitlines()
    hyps = read_generate_output(str(folder / f"{run}.gen.gz"), len(refs), field="H")
    return BLEU().corpus_score(hyps, [refs]).score


def mean_bleu(folder: Path, system: str) -> float:
    return sum(tokenized_bleu(folder, f"runs/{system}.seed{k}") for k in range(1, SEEDS[system] + 1)) / SEEDS[system]


def test_the_report_equals_a_hand_computation_from_the_decodes(finished):
    folder, _, _, report = finished
    results = json.loads((folder / "report" / "RESULTS.json").read_text())
    entry = results["datasets"]["tiny"]
    assert entry["comparisons"]["baseline"] == "sequence"
    assert entry["comparisons"]["controls"] == {"mask_random": {"method": "mask", "kind": "random"},
                                                "depth_random": {"method": "depth", "kind": "random"}}
    rows = {row["System"]: row for row in entry["table"]["rows"]}
    assert set(rows) == set(SEEDS)
    for system in SEEDS:
        per_seed = [tokenized_bleu(folder, f"runs/{system}.seed{k}") for k in range(1, SEEDS[system] + 1)]
        cell = rows[system]["BLEU (mean ± sd)"]
        # RESULTS.json holds 6 significant digits
        assert cell["per_seed"] == pytest.approx(per_seed, rel=1e-5)
        assert cell["mean"] == pytest.approx(mean_bleu(folder, system), rel=1e-5)
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
        assert found["BLEU"]["delta"] == pytest.approx(
            mean_bleu(folder, method["system"]) - mean_bleu(folder, "sequence"), rel=1e-5)
    assert "## Runaway hypotheses" in (folder / "report" / "RESULTS.md").read_text()
    assert "wrote the study answer into README.md" in report.stdout
    readme = (folder / "README.md").read_text()
    assert readme.startswith("# Mine\n") and readme.endswith("\n\nkept\n") and "\nold\n" not in readme
    assert "| mask | 2 of 2 |" in readme and "[report/RESULTS.md](report/RESULTS.md)" in readme


def test_plan_status_and_report_of_the_finished_study_import_neither_torch_nor_fairseq(finished, tmp_path):
    """Without torch: plan shows every run done, status nothing running, report the same RESULTS.json."""
    folder, _, _, _ = finished
    plan = study_forbidding_torch("plan", "study.toml", cwd=folder, env=ENV)
    assert plan.returncode == 0, plan.stderr
    assert [line.split()[:2] for line in plan.stdout.splitlines()[1:1 + len(RUNS)]] == [[run, "done"] for run in RUNS]
    status = study_forbidding_torch("status", "study.toml", cwd=folder, env=ENV)
    assert (status.returncode, status.stdout) == (0, "study tiny: nothing in training or queued\n"), status.stderr
    report = study_forbidding_torch("report", "study.toml", "--out", str(tmp_path / "again"), cwd=folder, env=ENV)
    assert report.returncode == 0, report.stderr
    assert (json.loads((tmp_path / "again" / "RESULTS.json").read_text())
            == json.loads((folder / "report" / "RESULTS.json").read_text()))


def test_the_docs_show_the_method_folders_code():
    from recipes.test_docs import fenced_blocks

    sources = "".join(path.read_text(encoding="utf-8") for path in sorted(METHOD_FOLDER.glob("*.py")))
    shown = [lines for language, lines in fenced_blocks((Path(REPO) / "docs/adding-a-method.md").read_text())
             if language == "python"]
    assert len(shown) == 2 and all("\n".join(lines) in sources for lines in shown)


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


def test_the_depth_maker_made_the_depths_where_the_systems_read_them(finished):
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    work = finished[0] / "work"
    side = {path.name: json.loads((path / "syntax.json").read_text())["side_data"]
            for path in (work / "data-bin").iterdir()}
    assert {name: set(side_data) for name, side_data in side.items()} == {
        "sequence": {"depth"}, "sequence.random": {"depth"}, **dict.fromkeys(
            ["preorder", "preorder.random", "preorder.random-s2"], {"parents"})}  # mask's, without depths
    for name, structures in (("sequence", work / "tok"), ("sequence.random", work / "bpe" / "random")):
        assert set(side[name]["depth"]) == {"train", "valid", "test"}
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


def test_a_second_run_trains_nothing_and_keeps_every_file(finished):
    folder, _, _, _ = finished
    kept = {path: path.stat().st_mtime_ns for path in (folder / "runs").glob("*.seed*.*")}
    again = study("run", "study.toml", cwd=folder)
    assert "== 8 runs done, 0 to run" in again.stdout
    assert {path: path.stat().st_mtime_ns for path in (folder / "runs").glob("*.seed*.*")} == kept


def states(plan: str, prefix: str) -> list[str]:
    return [line.split()[1] if line.split()[1] != "to" else "to do" for line in plan.splitlines()
            if line.strip().startswith(prefix)]


@pytest.fixture(scope="module")
def sizes(finished):
    """(folder, plan before, run, report) of the study over sizes 20 and 40 (the tiny study), run with --jobs 2."""
    folder = finished[0]
    (folder / "sizes.toml").write_text(SIZES.format(sizes="[20, 40]") + GIVEN, encoding="utf-8")
    before = study("plan", "sizes.toml", cwd=folder).stdout
    run = study("run", "sizes.toml", "--jobs", "2", cwd=folder)
    report = study("report", "sizes.toml", cwd=folder)
    return folder, before, run, report


def test_plan_shows_the_sweep_the_grid_waiting_for_it_and_the_given_size(sizes):
    _, before, _, _ = sizes
    assert "size 20 (tiny-sizes.n20)" in before
    assert "n20/sweep/merges30/sequence.seed1  to do" in before
    assert "n20/sweep/merges60/sequence.seed1  to do" in before
    assert "protocol: waits for its sweep (0 of 2 candidates run)" in before
    assert "3 runs wait for the protocol (n20/SYSTEM.seedK): sequence 1 seed, mask 1 seed, mask_random 1 seed" in before
    assert "size 40: the runs of study.toml (tiny), read as they are" in before
    assert states(before, "n40/") == ["done"] * 6


def test_the_smaller_subset_lies_inside_the_larger(sizes):
    folder = sizes[0]
    small = (folder / "work-sizes/n20/raw/train.lines").read_text().split()
    large = (folder / "work/raw/train.lines").read_text().split()
    assert len(small) == 20 and len(large) == 40 and set(small) < set(large)
    for merges in (30, 60):
        assert (folder / f"work-sizes/n20/sweep/merges{merges}/raw/train.lines").read_text().split() == small


def _nll_per_sentence(log: Path) -> float:
    """The best epoch's valid nll_loss (bits/token) x ln 2 x target tokens per sentence."""
    best = None
    for line in gzip.open(log, "rt").read().splitlines():
        if "valid on 'valid' subset" not in line:
            continue
        fields = dict(part.strip().split(" ", 1) for part in line.split(" | ")[3:] if " " in part.strip())
        value = float(fields["nll_loss"]) * math.log(2) * float(fields["wpb"]) / float(fields["bsz"])
        if best is None or float(fields["nll_loss"]) < best[0]:
            best = (float(fields["nll_loss"]), value)
    return best[1]


def sweep_nll(folder: Path) -> dict[int, float]:
    return {merges: _nll_per_sentence(folder / f"runs-sizes/n20/sweep/merges{merges}/sequence.seed1.train.log.gz")
            for merges in (30, 60)}


def chosen_run(folder: Path) -> str:
    """The chosen sweep run of size 20, by the lowest validation NLL per sentence."""
    found = sweep_nll(folder)
    return f"n20/sweep/merges{min(found, key=found.get)}"


def test_the_protocol_is_the_sweep_candidate_of_lowest_validation_nll_per_sentence(sizes):
    folder, _, run, _ = sizes
    found = sweep_nll(folder)
    chosen = min(found, key=found.get)
    plan = study("plan", "sizes.toml", cwd=folder).stdout
    assert f"protocol: bpe.merges {chosen} (sweep candidate merges{chosen})" in plan
    command = load_record(folder / "runs-sizes/n20/sequence.seed1.run.json")["command"]
    assert "--warmup-updates 5 " in command
    assert json.loads((folder / "work-sizes/n20/prepared.json").read_text())["steps"]["bpe"]["recipe"][
        "bpe.merges"] == chosen
    results = json.loads((folder / "sizes/RESULTS.json").read_text())
    assert results["sweeps"]["20"]["chosen"] == f"merges{chosen}"
    assert results["sweeps"]["20"]["records"] == "../runs-sizes/n20/sweep"
    assert set(json.loads((folder / "sizes/n20/RESULTS.json").read_text())["datasets"]) == {"tiny-sizes.n20"}
    # a size's commands are left to its records, which the sizes report names
    assert "### Commands" not in (folder / "sizes/n20/RESULTS.md").read_text()
    # and its notes (p, signatures, parses) to the sizes report, where they are said once for every size
    assert "notes" not in json.loads((folder / "sizes/n20/RESULTS.json").read_text())["datasets"]["tiny-sizes.n20"]
    assert ("- p, the signatures and the parses: in the report this one is part of (`../RESULTS.md`)."
            in (folder / "sizes/n20/RESULTS.md").read_text().splitlines())
    [notes] = results["notes"]
    assert notes["sizes"] == [20] and notes["notes"][0].startswith("p: two-sided p-value")
    said = (folder / "sizes/RESULTS.md").read_text().split("\n")
    start = said.index("**20 pairs**") + 2
    assert said[start:start + len(notes["notes"])] == [f"- {note}" for note in notes["notes"]]
    assert "each run's record holds them whole (`../runs-sizes/nN/`" in (folder / "sizes/RESULTS.md").read_text()
    for row in results["sweeps"]["20"]["candidates"]:
        merges = row["values"]["bpe"]["merges"]
        assert row["valid_nll_per_sentence"] == pytest.approx(found[merges], rel=1e-5)  # 6 digits
    assert "== every size's runs are done" in run.stdout


def test_each_sizes_cost_is_its_records_wall_times(sizes):
    """A size's cost: its sweep's and grid's wall times summed, in hours."""
    folder = sizes[0]
    cost = json.loads((folder / "sizes/RESULTS.json").read_text())["cost"]
    walls = {kind: [record["wall_time_s"] for path in (folder / "runs-sizes/n20").glob(pattern)
                    if "from_sweep" not in (record := json.loads(path.read_text()))]
             for kind, pattern in (("sweep", "sweep/*/sequence.seed1.run.json"), ("grid", "*.seed1.run.json"))}
    assert len(walls["sweep"]) == 2 and len(walls["grid"]) == 2  # mask and mask_random: sequence is the sweep's
    assert cost["20"]["sweep_runs"] == 2
    assert cost["20"]["sweep_hours"] == pytest.approx(sum(walls["sweep"]) / 3600, rel=1e-5)  # 6 digits
    assert cost["20"]["grid"]["runs"] == 2
    assert cost["20"]["grid"]["hours"] == pytest.approx(sum(walls["grid"]) / 3600, rel=1e-5)
    assert cost["40"]["sweep_runs"] == 0 and cost["40"]["grid"]["runs"] == 6
    assert "## What each size cost" in (folder / "sizes/RESULTS.md").read_text()


def test_the_curve_is_the_decodes_differences(sizes):
    folder, _, _, report = sizes
    from fairseq_syntax.evaluation.curve import load_curve

    # the curve's RESULTS.json names each size's report, which alone holds the numbers
    assert json.loads((folder / "sizes/RESULTS.json").read_text())["curve"] == {
        "sizes": [20, 40], "baseline": "sequence", "methods": {"mask": ["mask_random"]},
        "reports": {"20": {"results": "n20/RESULTS.json", "dataset": "tiny-sizes.n20"},
                    "40": {"results": "../report/RESULTS.json", "dataset": "tiny"}}}
    curve = load_curve(folder / "sizes/RESULTS.json")
    n20 = {system: tokenized_bleu(folder, f"runs-sizes/n20/{system}.seed1")
           for system in ("sequence", "mask", "mask_random")}
    for size, bleu in ((20, n20), (40, {system: mean_bleu(folder, system) for system in n20})):
        for system in ("mask", "mask_random"):
            found = curve["systems"][system][str(size)]
            assert found["BLEU"]["delta"] == pytest.approx(bleu[system] - bleu["sequence"], rel=1e-5)
            low, high = found["BLEU"]["delta_ci"]
            assert low <= found["BLEU"]["delta"] <= high
        versus = curve["vs_control"]["mask"]["mask_random"][str(size)]
        assert versus["BLEU"]["delta"] == pytest.approx(bleu["mask"] - bleu["mask_random"], rel=1e-5)
    assert (folder / "sizes/curve.png").stat().st_size > 0 and (folder / "sizes/n20/RESULTS.md").is_file()
    # the curve is the one figure over sizes: no size's seeds.png, nor a line on why none
    assert not (folder / "sizes/n20/seeds.png").exists() and "seeds.png" not in report.stdout
    assert "no figure yet" not in report.stdout
    assert "wrote" in report.stdout and "curve.png" in report.stdout


def test_a_third_size_leaves_the_others_done(sizes):
    folder = sizes[0]
    (folder / "third.toml").write_text(SIZES.format(sizes="[20, 30, 40]") + GIVEN, encoding="utf-8")
    plan = study("plan", "third.toml", cwd=folder).stdout
    assert states(plan, "n20/") == ["done"] * 5 and states(plan, "n40/") == ["done"] * 6
    assert "size 30 (tiny-sizes.n30)" in plan and states(plan, "n30/") == ["to do"] * 3


def test_the_grids_baseline_seed_1_is_the_chosen_sweep_run_taken_not_trained(sizes):
    folder, _, run, _ = sizes
    sweep = chosen_run(folder)
    assert f"== n20/sequence.seed1: taken from {sweep}, the same training (command, seed, data bytes)" in run.stdout
    assert "start n20/sequence.seed1 " not in run.stdout and "start n20/mask.seed1 " in run.stdout
    assert not (folder / "work-sizes/n20/ckpt/ckpt-sequence.seed1").exists()
    assert (folder / "work-sizes/n20/ckpt/ckpt-mask.seed1").is_dir()
    grid, theirs = folder / "runs-sizes/n20", folder / f"runs-sizes/{sweep}"
    for kept in ("gen", "gen.log", "train.log"):  # the decode byte for byte
        assert gzip.decompress((grid / f"sequence.seed1.{kept}.gz").read_bytes()) == \
            gzip.decompress((theirs / f"sequence.seed1.{kept}.gz").read_bytes())
    record, original = (load_record(where / "sequence.seed1.run.json") for where in (grid, theirs))
    assert record["from_sweep"] == sweep and record["dataset"] == record["study"]["name"] == "tiny-sizes.n20"
    assert record["train_log"] == "runs-sizes/n20/sequence.seed1.train.log.gz" and absolute_paths(record) == []
    assert record["score_command_argv"][1] == "runs-sizes/n20/sequence.seed1.gen.gz"
    assert record["study"]["settings"]["bpe.merges"] == int(sweep.rsplit("merges", 1)[1])
    same = ("metrics", "command_argv", "decode_command_argv", "seed", "wall_time_s", "valid", "device")
    assert {key: record[key] for key in same} == {key: original[key] for key in same}
    config = point_config(load_study(folder / "sizes.toml"), "n20")
    assert record_problems(config, grid / "sequence.seed1.run.json", record) == []
    plan = study("plan", "sizes.toml", cwd=folder).stdout
    assert f"  n20/sequence.seed1     done     BLEU {record['metrics']['BLEU']:.2f}, from {sweep} reads " in plan
    results = json.loads((folder / "sizes/RESULTS.json").read_text())["sweeps"]["20"]
    assert results["grid_seed1"] == "taken"
    assert "; its run is the grid's sequence seed 1 (the same training: not trained again)" in \
        (folder / "sizes/RESULTS.md").read_text()


def test_a_grids_baseline_seed_1_whose_data_differ_from_the_sweeps_is_trained(sizes, tmp_path):
    """Plan shows it to take; another command is not the sweep run's; a data file of other bytes: run trains it."""
    folder = tmp_path / "copy"
    shutil.copytree(sizes[0], folder, ignore=shutil.ignore_patterns("claims"))
    sweep = chosen_run(folder)
    for path in (folder / "runs-sizes/n20").glob("sequence.seed*"):  # its record over seeds too
        path.unlink()
    plan = study_forbidding_torch("plan", "sizes.toml", cwd=folder, env=ENV)
    assert plan.returncode == 0, plan.stderr
    assert f"  n20/sequence.seed1     to take  from {sweep}" in plan.stdout
    assert plan.stdout.split("size 40")[0].endswith("  2 done, 1 to take\n  cost: nothing left to run\n")
    path = folder / f"runs-sizes/{sweep}/sequence.seed1.run.json"
    kept, record = path.read_text(), json.loads(path.read_text())
    at = record["command_argv"].index("--dropout") + 1
    record["command_argv"][at] = "0.1"  # another training: the grid's run is not the sweep's
    path.write_text(json.dumps(record))
    assert sweep_twin(point_of(load_study(folder / "sizes.toml"), 20)) == (None, (
        f"{sweep}'s fairseq-train command differs from the grid's at word {at}: 0.1 --weight-decay (grid: 0.0 "
        "--weight-decay)"))
    path.write_text(kept)
    data = folder / f"work-sizes/{sweep}/data-bin/sequence/train.en-de.de.bin"
    data.write_bytes(data.read_bytes()[:-1] + bytes([data.read_bytes()[-1] ^ 1]))
    run = study("run", "sizes.toml", "--only", "n20/sequence.seed1", cwd=folder)
    assert (f"== n20/sequence.seed1: trained, not taken from the sweep: the data differ: the grid's "
            f"data-bin/sequence/train.en-de.de.bin is not {sweep}'s") in run.stdout
    assert "== start n20/sequence.seed1 " in run.stdout and "== every size's runs are done" in run.stdout
    assert (folder / "work-sizes/n20/ckpt/ckpt-sequence.seed1/checkpoint_best.pt").is_file()
    assert "from_sweep" not in load_record(folder / "runs-sizes/n20/sequence.seed1.run.json")


TABLE = "[sizes.20]\ntraining.warmup_updates = 5\nsweep.bpe.merges = [30, 60]\n"


@pytest.mark.parametrize("subset, old, new, problems", [
    ("[20, 100]", "", "", ["corpus.subset: 100 above the corpus's 60 training pairs"]),
    ("[20, 20]", TABLE, "", ["corpus.subset: lists 20 twice"]),
    ("[20, 0]", TABLE, "", ["corpus.subset: must be a list of positive integers (training pairs), not [20, 0]"]),
    ("[20, 40]", "[30, 60]", "[30]\nsweep.model.heads = [2, 'four']\n[sizes.50]\nbpe.merges = 10",
     ["sizes.20.sweep.bpe.merges: must list two or more candidates, not [30]",
      "sizes.20.sweep.model.heads: a candidate must be an integer >= 1, not 'four'",
      "sizes.50: not one of corpus.subset's sizes ([20, 40])"]),
    ("[20, 40]", "[seeds]\n", "systems.tree = {seeds = 2}\nsystems.mask = {seeds = 2, control_seeds = {struct = 2}}\n"
     "[sizes.40]\nstudy_file = 'study.toml'\nsystems.sequence = {seeds = 2}\n[seeds]\n",
     ["sizes.20.systems.tree: not one of the study's systems (sequence, mask)",
      "sizes.20.systems.mask.control_seeds.struct: not one of its controls (random)",
      "sizes.40: a study_file's runs have that study's protocol and seeds: no keys, sweep or seeds beside it"]),
    ("[20, 40]", "[seeds]\ncount = 1\n", "systems.mask = {seeds = 3, control_seeds = {random = 1}}\n"
     "systems.sequence = {seeds = 1}\n[seeds]\ncount = 2\n",
     ["sizes.20.systems.mask.control_seeds.random: 1 is fewer than the file's 2: a size only adds seeds",
      "sizes.20.systems.sequence.seeds: 1 is fewer than the file's 2: a size only adds seeds"]),
])
def test_plan_refuses_bad_sizes_a_line_each(corpus, tmp_path, subset, old, new, problems):
    (with_corpus(tmp_path, corpus) / "sizes.toml").write_text(SIZES.format(sizes=subset).replace(old, new))
    status, out, err = in_process("plan", "sizes.toml", cwd=tmp_path)
    assert (status, out) == (2, "")
    lines = err.splitlines()
    assert len(lines) == len(problems) and all(any(p in line for line in lines) for p in problems), lines
    assert not (tmp_path / "work-sizes").exists()


def test_a_size_may_give_a_system_and_its_controls_more_seeds_there_only(corpus, tmp_path):
    (with_corpus(tmp_path, corpus) / "sizes.toml").write_text(SIZES.format(sizes="[20, 40]").replace(
        "[seeds]\n", "systems.mask = {seeds = 3, control_seeds = {random = 2}}\n[seeds]\n")
        + "[sizes.40]\nsystems.mask = {seeds = 2}\n")
    status, plan, err = in_process("plan", "sizes.toml", cwd=tmp_path)
    assert (status, err) == (0, "")
    # size 20, waiting for its sweep: mask 3 seeds, mask_random 2; size 40: both 2 (a control follows its system);
    # sequence the file's 1 seed at both
    assert "6 runs wait for the protocol (n20/SYSTEM.seedK): sequence 1 seed, mask 3 seeds, mask_random 2 seeds" in plan
    assert [line.split()[0] for line in plan.splitlines() if line.strip().startswith("n40/")] == [
        "n40/sequence.seed1", "n40/mask.seed1", "n40/mask.seed2", "n40/mask_random.seed1", "n40/mask_random.seed2"]
    for only in ("n20/mask.seed4", "n40/mask.seed3"):
        status, out, err = in_process("run", "sizes.toml", "--only", only, cwd=tmp_path)
        assert (status, out) == (2, "") and f"--only {only}: no such run in the study" in err
    status, out, err = in_process("run", "sizes.toml", "--only", "n20/mask.seed3", cwd=tmp_path)
    assert (status, err) == (1, "")  # a run of the grid, which waits for the sweep; 6 + 5 runs not done
    assert out.splitlines() == ["== 0 runs done, 0 to run now; size 20: waits for its sweep (0 of 2 candidates run)",
                                "== 11 runs of the sizes' grids not done"]
    assert not (tmp_path / "work-sizes").exists()


def test_run_study_refuses_a_study_over_sizes_before_anything_is_made(tmp_path):
    from fairseq_syntax.study.commands import run_study
    from fairseq_syntax.study.config import load_study
    from fairseq_syntax.study.records import StudyError

    (tmp_path / "study.toml").write_text(SETTINGS.format(epochs=2) + '[[systems]]\nname = "sequence"\n' + MASK)
    (tmp_path / "sizes.toml").write_text(SIZES.format(sizes="[40, 20]"))
    with pytest.raises(StudyError, match=r"corpus.subset lists sizes \[20, 40\]: a study over sizes is run size by"):
        run_study(load_study(tmp_path / "sizes.toml"), "local", 1)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["sizes.toml", "study.toml"]


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
    # its time left priced from seeds 1 and 2 (under a minute each; "?" without a price), from the epoch it resumes at
    assert any(re.search(r"about 0 min to go; running: sequence.seed3 \(epoch [12]\)", output) for output in outputs)
    assert log.with_name(log.name + ".gz").is_file()
    text = gzip.decompress(log.with_name(log.name + ".gz").read_bytes()).decode()
    assert "loaded checkpoint" in text.lower()
    assert {path: path.stat().st_mtime_ns for path in (folder / "runs").glob("*.seed[12].*")} == kept


def test_the_study_through_a_real_slurm_a_cancelled_job_recovered_by_run(finished, slurm_cluster, tmp_path):
    """run --executor slurm: status lists the job; scancel fails the run; run again finishes it."""
    folder, _, _, _ = finished
    copy = tmp_path / "tiny"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("claims", "*-sizes"))
    more = STUDY.format(epochs=2).replace(MASK, MASK + "control_seeds = {random = 3}\n")
    (copy / "study.toml").write_text(more + "[slurm]\nmem_gb = 2.0\ntime_min = 20\n", encoding="utf-8")
    env = {**ENV, **slurm_cluster}
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
    assert "== 8 runs done, 1 to run" in again.stdout and "== 9 of 9 runs done" in again.stdout
    assert json.loads((copy / "runs" / "mask_random.seed3.run.json").read_text())["seed"] == 3
