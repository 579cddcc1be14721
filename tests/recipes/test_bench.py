"""bench/: the --quick run's rows and schema, its systems from the registry, and its pieces against hand values."""
import gzip
import json
import math
import os
import random
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from conftest import REPO, TRANSLATION, build_on_cpu

sys.path.insert(0, os.path.join(REPO, "bench"))
import from_logs  # noqa: E402
import measure  # noqa: E402
import precision  # noqa: E402
import profile_step  # noqa: E402
import report  # noqa: E402
import run  # noqa: E402
import synthetic  # noqa: E402

from fairseq_syntax.core import trees  # noqa: E402
from fairseq_syntax.parsing.dependency import read_arc_distributions  # noqa: E402

ROW_KEYS = {"arch": str, "src_words": int, "tokens_per_s_ratio": float, "peak_mem_ratio": float, "repeats": int}


def test_quick_run_writes_one_row_per_length_with_the_schema(tmp_path):
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "bench/run.py", "--quick", "--out", str(out)], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = report.read_rows(out / "RESULTS.json")
    assert len(rows) == 1  # one arch (the table's first, tiny), one length, no context
    row = rows[0]
    for key, kind in ROW_KEYS.items():
        assert isinstance(row[key], kind), (key, row)
    assert (row["arch"], row["src_words"], row["repeats"]) == ("transformer_syntax_mask_tiny", 8, 1)
    assert row["baseline"] == "transformer_tiny (preorder)"
    for key in ("tokens_per_s_ratio", "peak_mem_ratio", "generate_ratio"):  # decoding: beam 5, fairseq-generate's
        assert math.isfinite(row[key]) and row[key] > 0
    assert (row["model"], row["device"]) == ("tiny", "cpu")
    assert "| transformer_syntax_mask_tiny | preorder | 8 | tiny |" in (out / "RESULTS.md").read_text()
    details = json.loads(gzip.decompress((out / "RESULTS.details.json.gz").read_bytes()))
    assert details["side_data_bytes_per_sentence"]["8"]["preorder"]["parents"] > 0
    fp32 = [run for m in details["measurements"] if m["option"] == "fp32" for run in m["runs"]]
    assert len(fp32) == 2 and all(run["generate_tokens_per_s"] > 0 and run["generate_sentences"] > 0 for run in fp32)
    # every bf16 variant trained: the arch with two, the transformer with three, each a finite loss
    speed = {(r["arch"], r["option"]): r for r in details["speed_options"]}
    assert sorted(speed) == [("transformer_syntax_mask_tiny", "bf16_autocast"),
                             ("transformer_syntax_mask_tiny", "bf16_weights"),
                             ("transformer_tiny", "bf16_autocast"), ("transformer_tiny", "bf16_autocast_layers"),
                             ("transformer_tiny", "bf16_weights")]
    assert all(math.isfinite(r["last_loss"]) and r["tokens_per_s_ratio"] > 0 for r in speed.values())


def test_ratios_are_paired_within_rounds_before_the_median():
    system = [{"speed": 2.0}, {"speed": 3.0}, {"speed": 10.0}]
    baseline = [{"speed": 1.0}, {"speed": 3.0}, {"speed": 2.0}]
    # round ratios 2, 1, 5 -> median 2 (the ratio of medians would be 3 / 2)
    assert report.median_ratio(system, baseline, "speed") == 2.0
    with pytest.raises(ValueError, match="same number"):
        report.median_ratio(system, baseline[:2], "speed")


def test_batches_are_fairseqs_batch_by_size_over_length_sorted_ids():
    sizes = run.np.array([5, 3, 9, 5, 3, 5])
    # sorted ids 1, 4 (3 tokens), 0, 3, 5 (5), 2 (9); at most 10 tokens = longest x sentences
    assert run.make_batches(sizes, max_tokens=10, count=3) == [[1, 4], [0, 3], [5]]
    with pytest.raises(SystemExit, match="gives 4 batches"):
        run.make_batches(sizes, max_tokens=10, count=5)


def test_the_benchmarked_archs_are_the_registrys_translation_systems_and_the_bench_variants(capsys):
    # what the method descriptions say today: no baselines, no ablations, translation only; --list: each system's
    # --archs name, data directory, side data and what fairseq trains
    assert run.main(["--list"]) == []
    assert [line.split() for line in capsys.readouterr().out.splitlines()[1:]] == [
        ["transformer_syntax_mask", "preorder", "-", "--arch", "transformer_syntax_mask"],
        ["transformer_syntax_mask:one_hot", "preorder", "-", "--arch", "transformer_syntax_mask", "--mask-bias",
         "one_hot"],
        ["transformer_ldd", "sequence", "dependencies", "--arch", "transformer_ldd"],
        ["transformer_constituent", "sequence", "-", "--arch", "transformer_constituent"],
        ["transformer_hier_accum", "preorder-split", "-", "--arch", "transformer_hier_accum"],
        ["transformer_hier_accum:dense", "preorder-split", "-", "--arch", "transformer_hier_accum_dense"],
        ["transformer_pascal", "sequence", "dependencies", "--arch", "transformer_pascal"],
        ["transformer_dependency_supervised", "sequence", "dependencies", "--arch", "transformer_dependency_supervised",
         "--criterion", "label_smoothed_cross_entropy_with_dependency"],  # its loss reads the parses
    ]


def test_a_method_added_to_the_registry_is_benchmarked_from_its_description():
    def system(arch, form="sequence", preterminals="auto", side_inputs=(), model_args=()):
        return SimpleNamespace(arch=arch, form=form, preterminals=preterminals, side_inputs=side_inputs,
                               model_args=model_args)

    archs = run.registry_archs([
        system("transformer_new", "linearized", side_inputs=("src_ldd", "src_parents"), model_args=("--x", "1")),
        system("transformer_hier_accum", "preorder", "drop", side_inputs=("src_parents",)),
    ])
    assert [(a.key, a.form.name, a.dependencies) for a in archs] == [
        ("transformer_new", "linearized", True),
        ("transformer_hier_accum", "preorder-drop", False),
        ("transformer_hier_accum:dense", "preorder-drop", False),  # a bench variant follows its arch
    ]
    options = run.model_args(archs[0], run.QUICK)
    assert options[:2] == ["--arch", "transformer_new_tiny"] and options[-2:] == ["--x", "1"]  # its own options last
    with pytest.raises(ValueError, match="two benchmarked systems train transformer_new"):
        run.registry_archs([system("transformer_new"), system("transformer_new", model_args=("--x", "2"))])


def test_a_precision_on_the_cpu_goes_with_no_speed_options_and_is_refused_with_them():
    """bench/cuda/window.sh's CPU dry run of steps 2-3 passes --no-speed-options --precision bf16 --quick."""
    settings = run.settings_from(run.parse_args(["--quick", "--no-speed-options", "--precision", "bf16"]))
    assert (settings.precision, settings.speed_length) == ("bf16", None)
    with pytest.raises(SystemExit, match="--precision with the CPU speed options: add --no-speed-options"):
        run.settings_from(run.parse_args(["--quick", "--precision", "bf16"]))
    with pytest.raises(SystemExit, match="--precision fp16 needs --device cuda"):
        run.settings_from(run.parse_args(["--quick", "--no-speed-options", "--precision", "fp16"]))


def test_a_variant_trains_its_own_arch_against_the_same_baseline(capsys):
    args = run.parse_args(["--archs", "transformer_hier_accum,transformer_hier_accum:dense"])
    # an arch fairseq does not know is skipped and reported; a variant needs its own arch registered
    archs, skipped = run.choose_archs(args, {"transformer_hier_accum_tiny"}, run.QUICK)
    assert [a.key for a in archs] == ["transformer_hier_accum"] and skipped == ["transformer_hier_accum:dense"]
    assert "skipped transformer_hier_accum:dense: fairseq has no arch transformer_hier_accum_dense_tiny registered" \
        in capsys.readouterr().out
    with pytest.raises(SystemExit, match="not benchmarked architectures"):
        run.choose_archs(run.parse_args(["--archs", "transformer_nope"]), set(), run.Settings())
    fast, dense = run.choose_archs(args, {"transformer_hier_accum_tiny", "transformer_hier_accum_dense_tiny"},
                                   run.QUICK)[0]
    assert fast.form == dense.form == run.Form("preorder", "split")
    assert fast.arch == dense.arch == "transformer_hier_accum"
    assert fast.row_name(run.QUICK) == "transformer_hier_accum_tiny"
    assert dense.row_name(run.QUICK) == "transformer_hier_accum_tiny (dense, naive)"
    assert dense.label == "transformer_hier_accum (dense, naive) (preorder-split)"  # what from_logs.py parses
    assert run.model_args(dense, run.QUICK)[:2] == ["--arch", "transformer_hier_accum_dense_tiny"]
    assert run.model_args(fast, run.QUICK)[:2] == ["--arch", "transformer_hier_accum_tiny"]
    assert run.model_args(dense, run.QUICK)[2:] == run.model_args(fast, run.QUICK)[2:]
    assert dense.variant_options(run.Settings()) == "--arch transformer_hier_accum_dense"
    # fp32 only: the bf16 options are tried on the plain arch, not on its variant
    assert run.speed_option_applies(fast, "archs") and not run.speed_option_applies(dense, "archs")


def test_the_measuring_server_registers_the_dense_arch():
    """What measure.py's server lists first (its ARCHS line, which run.py's Measurer reads in the quick run)."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    measure.import_models()
    assert {"transformer_hier_accum_dense", "transformer_hier_accum_dense_tiny", "transformer_hier_accum_tiny",
            "transformer_syntax_mask_tiny"} <= set(ARCH_MODEL_REGISTRY)


@pytest.mark.parametrize("n_words", [1, 2, 7, 30])
def test_random_trees_have_exactly_the_words_each_under_its_own_preterminal(n_words):
    rng = random.Random(n_words)
    words = [f"w{i}" for i in range(n_words)]
    tree = synthetic.random_tree(rng, words)
    assert tree.label == "S" and tree.leaves() == words
    assert trees.parse_tree(trees.to_bracketed(tree)) == tree

    def preterminals(node):
        return [node] if node.is_preterminal else [p for child in node.children for p in preterminals(child)]

    assert [p.children for p in preterminals(tree)] == [[trees.Tree(w)] for w in words]
    assert all(len(node.children) <= 4 for node in [tree] + [c for c in tree.children])


def test_sentence_source_target_and_bpe():
    vocab = synthetic.vocabulary()
    assert len(set(vocab)) == synthetic.VOCABULARY_SIZE and vocab == synthetic.vocabulary()
    assert synthetic.bpe_pieces("karomi", 0) == ["kar@@", "omi"]  # type 0 is split, type 1 is not
    assert synthetic.bpe_pieces("karomi", 1) == ["karomi"]
    drawn = synthetic.sentence(random.Random(1), 12, vocab)
    words = drawn.tree.leaves()
    assert len(words) == 12 and drawn.arcs["words"] == words
    assert "".join(drawn.source).replace("@@", "") == "".join(words)
    assert "".join(drawn.target).replace("@@", "") == "".join(w[::-1] for w in reversed(words))


def test_parser_side_data_passes_the_projects_reader_with_full_head_mass(tmp_path):
    prefix = str(tmp_path / "train")
    synthetic.write_corpus(prefix, [1, 3, 6], seed=2)
    records = list(read_arc_distributions(prefix + ".arcs.jsonl"))  # raises on malformed records
    assert [len(r["words"]) for r in records] == [1, 3, 6]
    for record in records:
        n = len(record["words"])
        heads = {d: {} for d in range(1, n + 1)}
        for dependent, head, probability, labels in record["arcs"]:
            heads[dependent][head] = probability
            assert math.isclose(sum(labels.values()), 1.0)
        # candidates: the root word gets the root; 1 word -> 1, 3 words -> 3 / 2, 6 words -> 3 each
        assert sorted(len(h) for h in heads.values()) == {1: [1], 3: [2, 2, 3], 6: [3] * 6}[n]
        assert all(math.isclose(sum(h.values()), 1.0) for h in heads.values())
        assert sum(max(h, key=h.get) == 0 for h in heads.values()) == 1  # one word has the root as main head


def test_layer_outputs_leave_autocast_as_fp32_and_keep_other_values():
    bf16 = torch.ones(2, dtype=torch.bfloat16)
    out = precision.to_float32((bf16, {"attn": [bf16]}, None, torch.tensor([3])))
    assert out[0].dtype == torch.float32 and out[1]["attn"][0].dtype == torch.float32
    assert out[2] is None and out[3].dtype == torch.int64


def line(round_index, system, tokens, mem=100.0, generated=None):
    """A progress line of bench/run.py's log at 16 words (from_logs.py reads them)."""
    result = {"tokens_per_s": tokens, "wall_tokens_per_s": tokens, "peak_mem_mb": mem}
    result.update({} if generated is None else {"generate_tokens_per_s": generated})
    return f"[bench 06:49:26] {report.progress_line(round_index, 3, 16, system, 'fp32', result)}\n"


def test_ratio_table_from_logs_pairs_each_system_with_its_baseline_within_a_log_and_round(tmp_path):
    mask, baseline = "transformer_syntax_mask (preorder)", "transformer (preorder)"
    naive = "transformer_hier_accum (dense, naive) (preorder-split)"
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    first.write_text("noise\n" + line(1, mask, 500) + line(1, baseline, 1000, 50) + line(2, mask, 900)
                     + line(2, baseline, 1000) + line(3, mask, 50))  # round 3: no baseline, not counted
    second.write_text(line(1, baseline, 1000) + line(1, mask, 800) + line(1, naive, 300)
                      + line(1, "transformer (preorder-split)", 600))
    table = from_logs.rows(from_logs.read_logs([str(first), str(second)])[1])
    by_arch = {row["arch"]: row for row in table}
    # ratios 0.5, 0.9, 0.8 -> median 0.8; memory 100/50, 100/100, 100/100 -> 1.0
    assert by_arch["transformer_syntax_mask"]["rounds"] == 3
    assert by_arch["transformer_syntax_mask"]["tokens_per_s_ratio"] == 0.8
    assert by_arch["transformer_syntax_mask"]["peak_mem_ratio"] == 1.0
    assert by_arch["transformer_hier_accum (dense, naive)"]["tokens_per_s_ratio"] == 0.5
    assert by_arch["transformer_hier_accum (dense, naive)"]["baseline"] == "transformer (preorder-split)"
    assert by_arch["transformer"]["form"] == "preorder-split" and by_arch["transformer"]["tokens_per_s_ratio"] == 0.6
    (tmp_path / "empty.log").write_text("nothing\n")
    with pytest.raises(SystemExit, match="no fp32 measurement"):
        from_logs.read_logs([str(tmp_path / "empty.log")])


# --- cut short: round pairs, from_logs
def test_a_time_budget_stops_the_rounds_and_ratios_pair_only_rounds_both_sides_ran(monkeypatch):
    clock = SimpleNamespace(now=1000.0)
    monkeypatch.setattr(run.time, "time", lambda: clock.now)
    monkeypatch.setattr(run, "log", lambda message: None)

    class Measurer:
        def measure(self, system, data, batches, settings, options):
            clock.now += 10  # every measurement takes 10 s
            return {"tokens_per_s": 100.0 if system.arch == "mine" else 200.0, "wall_tokens_per_s": 1.0,
                    "peak_mem_mb": 50.0, "device": "cpu", "generate_tokens_per_s": 30.0, "source_tokens": 10,
                    "sentences": 2, "updates": 1}

    mine, baseline = run.System("mine", run.Form("preorder")), run.System(run.BASELINE, run.Form("preorder"))
    settings = run.Settings(lengths=(8,), repeats=3, speed_length=None, time_budget_min=0.5)
    measurements, stopped = run.run_rounds(Measurer(), [mine, baseline], {8: {"preorder": "data"}}, {8: []},
                                           settings, started=1000.0)
    # t = 0: mine, 10: baseline (round 1); round 2 runs backwards: 20: baseline; at 30 s the next would end at 40
    assert stopped
    assert [(s.arch, r["round"]) for (s, _, _), runs in measurements.items() for r in runs] == [
        ("mine", 1), (run.BASELINE, 1), (run.BASELINE, 2)]
    rows = run.result_rows([mine], [run.Form("preorder")], measurements, settings)
    assert len(rows) == 1 and rows[0]["repeats"] == 1
    assert (rows[0]["tokens_per_s_ratio"], rows[0]["generate_ratio"], rows[0]["model"]) == (0.5, 1.0, "recipe")


def test_each_baseline_is_measured_next_to_the_systems_on_its_form():
    mask, ldd = run.System("transformer_syntax_mask", run.Form("preorder")), run.System("transformer_ldd",
                                                                                         run.Form("sequence"))
    systems = run.measured_systems([ldd, mask], [run.Form("preorder"), run.Form("sequence")])
    assert [s.label for s in systems] == ["transformer (preorder)", "transformer_syntax_mask (preorder)",
                                          "transformer (sequence)", "transformer_ldd (sequence)"]


def test_decoding_ratio_only_where_both_sides_decoded():
    with_decoding = [{"round": 1, "tokens_per_s": 1.0, "wall_tokens_per_s": 1.0, "peak_mem_mb": 1.0,
                      "generate_tokens_per_s": 4.0, "source_tokens": 1, "sentences": 1, "updates": 1}]
    without = [{key: value for key, value in with_decoding[0].items() if key != "generate_tokens_per_s"}]
    assert report.ratio_row(with_decoding, with_decoding)["generate_ratio"] == 1.0
    assert "generate_ratio" not in report.ratio_row(with_decoding, without)


def test_from_logs_reads_device_model_command_and_decoding_from_the_log(tmp_path):
    log = tmp_path / "bench.log"
    pascal, baseline = "transformer_pascal (sequence)", "transformer (sequence)"
    log.write_text("# command: python3 bench/run.py --model-size large\n[bench 06:40:00] model size: large\n"
                   "[bench 06:41:00] device: NVIDIA H100\n" + line(1, pascal, 800, 10, 90)
                   + line(1, baseline, 1000, 10, 100) + line(2, baseline, 1000, 10, 100))  # round 2: no pascal
    out, rows_json = tmp_path / "RESULTS.md", tmp_path / "RESULTS.json"
    from_logs.main([str(log), "--out", str(out), "--json", str(rows_json)])
    rows = report.read_rows(rows_json)
    assert rows == [{"arch": "transformer_pascal", "form": "sequence", "src_words": 16, "model": "large",
                     "baseline": "transformer (sequence)", "rounds": 1, "tokens_per_s_ratio": 0.8,
                     "peak_mem_ratio": 1.0, "generate_ratio": 0.9, "tokens_per_s": 800, "baseline_tokens_per_s": 1000,
                     "peak_mem_mb": 10, "device": "NVIDIA H100"}]
    text = out.read_text()
    assert "Device: NVIDIA H100. Model size: large" in text and "`python3 bench/run.py --model-size large`" in text


# --- decoding at a fixed length
def test_decoding_is_held_at_the_longest_references_length(data_dirs):
    task, model, _, _, _ = build_on_cpu([data_dirs["preorder"], *TRANSLATION, "--arch",
                                         "transformer_syntax_mask_tiny"])
    task.load_dataset("train")
    collate = measure.batch_maker(task)
    batches = [list(range(8)), list(range(8, 20)), list(range(20, 25))]
    speed = measure.generation_speed(task, model, collate, measure.HostMeter(), {"batches": batches, "warmup": 1},
                                     "cpu")
    # targets are "die N V-t die N .": hypotheses held at 6 tokens and EOS over the 17 timed sentences
    assert speed["generate_sentences"] == 17 and speed["generate_tokens"] == 17 * 7
    assert speed["generate_tokens_per_s"] > 0


def test_the_table_names_the_command_that_measures_it_without_places_or_time_limits():
    assert (run.reproducing_command(["--no-speed-options", "--repeats", "2", "--time-budget", "110", "--out", "x",
                                     "--work=y", "--deadline", "5"])
            == "python3 bench/run.py --no-speed-options --repeats 2")
    assert run.reproducing_command(["--device", "cuda", "--lengths", "16"]) == \
        "python3 bench/run.py --device cuda --lengths 16 --out bench/cuda"
    assert run.reproducing_command(["--out", "x", "--words", "16", "--work=w"], "bench/ops/count.py") == \
        "python3 bench/ops/count.py --words 16"


def test_the_profile_summary_sets_each_step_against_the_transformer_on_its_form_with_and_without_collation():
    def record(system, form, baseline, step_ms, collate_ms, kernels):
        return {"system": system, "form": form, "baseline": baseline, "step_ms": step_ms, "collate_ms": collate_ms,
                "kernels": kernels, "aten_calls": 10 * kernels}

    rows = profile_step.summary_rows([
        record("transformer (sequence)", "sequence", True, 40.0, 4.0, 100),
        record("transformer_ldd (sequence)", "sequence", False, 60.0, 15.0, 110),
        record("transformer_hier_accum (preorder-split)", "preorder-split", False, 50.0, 5.0, 120),  # no baseline
    ])
    # 60 / 40 = 1.5 with collation; (60 - 15) / (40 - 4) = 1.25 without; 110 / 100 kernels
    assert rows[1] == {"system": "transformer_ldd (sequence)", "step_ms": 60.0, "collate_ms": 15.0, "kernels": 110,
                       "aten_calls": 1100, "step_time_ratio": 1.5, "step_without_collate_ratio": 1.25,
                       "kernels_ratio": 1.1}
    assert "step_time_ratio" not in rows[0] and "step_time_ratio" not in rows[2]


def test_the_collation_table_sets_each_system_against_the_transformer_on_its_form(tmp_path):
    records = [{"system": "transformer (sequence)", "form": "sequence", "baseline": True, "collate_ms": 1.25},
               {"system": "transformer_ldd (sequence)", "form": "sequence", "baseline": False, "collate_ms": 10.0}]
    profile_step.write_collation(str(tmp_path), records, 64)
    table = (tmp_path / "collate.txt").read_text()
    assert "| transformer_ldd (sequence) | 10.00 | 8.00 |" in table  # 10 / 1.25
    assert "| transformer (sequence) | 1.25 |  |" in table
    assert json.loads((tmp_path / "collate.json").read_text()) == records
