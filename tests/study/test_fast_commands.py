"""init, plan, status and report import neither torch nor fairseq; the plugin still loads with fairseq; plan's cost
and, over sizes, run's first estimate of the time left."""
import json
import statistics
import subprocess
import sys
from types import SimpleNamespace

from conftest import REPO
from study.forbid_torch import forbidding_torch, study_forbidding_torch
from study.tiny_study_file import SETTINGS

from fairseq_syntax.study.commands import cost_text, expected_means
from fairseq_syntax.study.config import template
from fairseq_syntax.study.local import _eta, time_left
from fairseq_syntax.study.over_sizes import queued_prices, scaled_walls
from fairseq_syntax.study.runner import RunTask

STUDY = SETTINGS.format(epochs=2) + '[[systems]]\nname = "sequence"\n[[systems]]\nname = "mask"\n' \
    'controls = ["struct"]\n'


def test_the_guard_refuses_the_plugin_and_lets_the_method_registry_through():
    plugin = forbidding_torch("fairseq_syntax.plugin", cwd=REPO)
    assert plugin.returncode == 3
    assert "forbid_torch: import of torch refused; asked by:" in plugin.stderr
    assert "fairseq_syntax/core/checkpoints.py" in plugin.stderr
    registry = forbidding_torch("fairseq_syntax.methods.__main__:main", "systems", cwd=REPO)
    assert registry.returncode == 0, registry.stderr
    assert len(registry.stdout.splitlines()) == 12 and registry.stdout.startswith("sequence:transformer:sequence\n")


def test_init_plan_systems_and_report_import_neither_torch_nor_fairseq(corpus, tmp_path):
    for name in ("raw", "parses"):
        (tmp_path / name).symlink_to(corpus / name)
    (tmp_path / "study.toml").write_text(STUDY, encoding="utf-8")
    init = study_forbidding_torch("init", cwd=tmp_path)
    assert (init.returncode, init.stdout, init.stderr) == (0, template(), "")
    written = study_forbidding_torch("init", "-o", "new.toml", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert (tmp_path / "new.toml").read_text(encoding="utf-8") == template()

    # plan and status without torch, before and after a study's runs: test_tiny_study
    systems = study_forbidding_torch("plan", "study.toml", "--systems", cwd=tmp_path)
    assert systems.stdout.splitlines() == ["sequence:transformer:sequence", "mask:transformer_syntax_mask:preorder",
                                           "mask_struct:transformer_syntax_mask:preorder.struct"]

    report = study_forbidding_torch("report", "study.toml", cwd=tmp_path)
    assert (report.returncode, report.stdout) == (2, "")
    assert report.stderr == ("error: study.toml: no run of the study has finished yet (6 to do): nothing to report; "
                             "fairseq-syntax-study run study.toml trains them\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["new.toml", "parses", "raw", "study.toml"]


def test_fairseq_loads_the_plugin_with_the_user_dir_and_register_loads_it_after_the_package():
    registries = """
import sys
from fairseq.criterions import CRITERION_REGISTRY
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.tasks import TASK_REGISTRY
from fairseq import checkpoint_utils
from fairseq_syntax.core.side_inputs import SIDE_INPUTS
print(sorted({"transformer_syntax_mask_tiny", "transformer_ldd", "tree_transformer_lm"} & set(ARCH_MODEL_REGISTRY)),
      sorted({"syntax_translation", "sentence_masked_lm"} & set(TASK_REGISTRY)),
      "label_smoothed_cross_entropy_with_dependency" in CRITERION_REGISTRY, sorted(SIDE_INPUTS),
      checkpoint_utils.PathManager.__name__)
"""
    expected = ("['transformer_ldd', 'transformer_syntax_mask_tiny', 'tree_transformer_lm'] "
                "['sentence_masked_lm', 'syntax_translation'] True ['src_ldd', 'src_parents'] CrashSafePathManager\n")
    ways = {
        "user dir": "from argparse import Namespace\nfrom fairseq import utils\n"
                    "utils.import_user_module(Namespace(user_dir='fairseq_syntax'))\n",
        "after fairseq": "import fairseq\nimport fairseq_syntax.study\n",
        "register": "import sys, fairseq_syntax\nassert 'torch' not in sys.modules\nfairseq_syntax.register()\n",
    }
    for way, code in ways.items():
        result = subprocess.run([sys.executable, "-c", code + registries], cwd=REPO, capture_output=True, text=True,
                                timeout=300)
        assert (result.returncode, result.stdout) == (0, expected), (way, result.stderr[-3000:])
    alone = subprocess.run([sys.executable, "-c", "import sys, fairseq_syntax.study.grid, fairseq_syntax.methods\n"
                            "print(sorted(name for name in ('torch', 'fairseq') if name in sys.modules))"],
                           cwd=REPO, capture_output=True, text=True, timeout=300)
    assert (alone.returncode, alone.stdout) == (0, "[]\n"), alone.stderr


def test_the_benchmark_times_each_command_and_writes_its_table(corpus, tmp_path):
    for name in ("raw", "parses"):
        (tmp_path / name).symlink_to(corpus / name)
    (tmp_path / "study.toml").write_text(STUDY, encoding="utf-8")
    out = tmp_path / "bench"
    result = subprocess.run([sys.executable, "bench/study_commands.py", "--study", str(tmp_path / "study.toml"),
                             "--commands", "init", "plan", "status", "--repeats", "2", "--out", str(out)],
                            cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    table = json.loads((out / "RESULTS.json").read_text())
    rows = [dict(zip(table["columns"], row)) for row in table["rows"]]
    assert [row["command"] for row in rows] == ["init", "plan", "status", "import of the plugin"]
    for row in rows:
        assert len(row["wall_seconds"]) == 2 and all(seconds > 0 for seconds in row["wall_seconds"])
        # RESULTS.json holds 6 significant digits (tables.results_text)
        assert row["median_wall_seconds"] == float(f"{statistics.median(row['wall_seconds']):.6g}")
    assert [row["imports_torch"] for row in rows] == [False, False, False, True]
    assert table["facts"]["study"] == "study.toml" and "cores" in table["facts"]["machine"]
    markdown = (out / "RESULTS.md").read_text()
    assert "| plan |" in markdown and "| import of the plugin |" in markdown


def test_plans_cost_scales_the_baseline_by_each_systems_ratio_at_the_nearest_size_both_finished():
    runs = [SimpleNamespace(system=SimpleNamespace(name=name)) for name in ("mask", "udp", "dbsa", "tree")]
    walls = {1000: {"sequence": [10], "udp": [30], "dbsa": [5]}, 2500: {"sequence": [100, 300], "udp": [600]},
             5000: {"sequence": [400], "mask": [900]}, 10000: {"sequence": [50], "udp": [5], "dbsa": [100]}}
    # udp: 2500 and 10000 tie (x2), the smaller counts: 400 * 600/200; dbsa: 10000 (x2), not 1000 (x5): 400 * 2
    scaled, how = scaled_walls(walls, 5000, "sequence", runs)
    assert scaled == {"udp": 1200, "dbsa": 800}
    assert how == " and the systems' ratios to sequence at 2,500 and 10,000 pairs"
    assert scaled_walls({**walls, 5000: {"mask": [900]}}, 5000, "sequence", runs) == ({}, "")
    # tree, with no ratio: the mean of the size's runs, 650; 3550 s x 2 threads
    assert expected_means(walls[5000], runs, scaled) == [900, 1200, 800, 650]
    assert cost_text(walls[5000], runs, SimpleNamespace(device="cpu", threads=2), " of this size", scaled, how) \
        == "4 runs left: about 2.0 CPU thread-hours, from 2 finished runs of this size" + how


def test_run_over_sizes_prices_its_queued_runs_as_plan_does_for_the_time_left():
    runs = {f"{name}.seed1": SimpleNamespace(system=SimpleNamespace(name=name))
            for name in ("sequence", "mask", "udp", "dbsa", "tree")}
    walls = {1000: {"sequence": [10], "udp": [30], "dbsa": [5]}, 2500: {"sequence": [100, 300], "udp": [600]},
             5000: {"sequence": [400], "mask": [900]}, 20000: {}}
    epochs = {1000: {"sequence": [20], "udp": [30], "dbsa": [10]}, 2500: {"sequence": [40, 60], "udp": [30]},
              5000: {"sequence": [30], "mask": [40]}, 20000: {}}
    tasks = [RunTask("study.toml", f"{name}.seed1", point) for name, point in [
        ("udp", "n5000"), ("dbsa", "n5000"), ("tree", "n5000"), ("sequence", "n5000/sweep/lr2"),
        ("mask", "n1000"), ("sequence", "n2500"), ("sequence", "n20000")]]
    # n5000: udp 400 x 600/200 (2,500), dbsa 400 x 5/10 (1,000), tree the size's mean 650, the sweep's run
    # sequence's 400, epochs the system's there, else the size's mean 35; n1000: mask 10 x 900/400 (5,000) in the
    # size's mean 20 epochs; n2500: sequence's 200 s and 50 epochs; n20000, with no finished run: none
    prices = queued_prices(walls, epochs, "sequence", runs, tasks)
    assert prices == {"n5000/udp.seed1": (1200, 35), "n5000/dbsa.seed1": (200, 35), "n5000/tree.seed1": (650, 35),
                      "n5000/sweep/lr2/sequence.seed1": (400, 30), "n1000/mask.seed1": (22.5, 20),
                      "n2500/sequence.seed1": (200, 50)}
    # two at once, in order: 1200 | 200+650 | +400 = 1250 | 1200+22.5 | +200: the last ends at 1422.5 s
    assert _eta(time_left([seconds for seconds, _ in prices.values()], [], 2)) == "24 min"
