"""The curve's sentences in the README's sizes answer, from hand-made verdicts and the committed curve; the curve's
numbers read from each size's report, where alone they are stored."""
import json
from pathlib import Path

import pytest

from fairseq_syntax.evaluation.curve import (
    README_BEGIN,
    README_END,
    curve_data,
    curve_markdown,
    load_curve,
    method_sentences,
    readme_block,
    replace_block,
)

ROOT = Path(__file__).resolve().parents[2]


def verdict(name: str) -> dict:
    return {"BLEU": {"delta": 1.0, "delta_ci": [0.1, 1.9]}, "verdict": name, "borderline": False, "seeds": 3}


def hand_curve() -> dict:
    """mask: better at 1,000 and 2,500, no difference at 5,000, unscored at 10,000; udp: worse at 1,000."""
    sizes = [1000, 2500, 5000, 10000]
    return {
        "sizes": sizes, "baseline": "sequence", "methods": {"mask": ["mask_random"], "udp": ["udp_random"]},
        "systems": {
            "mask": {"1000": verdict("better"), "2500": verdict("better"),
                     "5000": verdict("no measurable difference"), "10000": None},
            "udp": {"1000": verdict("worse"), "2500": None, "5000": None, "10000": None}},
        "vs_control": {
            "mask": {"mask_random": {"1000": verdict("better"), "2500": verdict("no measurable difference"),
                                     "5000": verdict("no measurable difference"), "10000": None}},
            "udp": {"udp_random": {"1000": verdict("no measurable difference"), "2500": None, "5000": None,
                                   "10000": None}}},
        "planned": {"1000": {"mask": 3, "udp": 3}, "2500": {"mask": 3}, "5000": {"mask": 5}, "10000": {}},
    }


def test_each_methods_sentence_names_where_it_helps_and_whether_its_control_does_as_well():
    assert method_sentences(hand_curve()) == [
        "**mask**: better than the words at 1,000 and 2,500 pairs, no clear difference at 5,000 pairs; there the "
        "parse beats mask_random at 1,000; mask_random is not measurably worse at 2,500 (3 of 5 seeds so far at 5,000; "
        "no result yet at 10,000).",
        "**udp**: worse than the words at 1,000 pairs (no result yet at 2,500, 5,000 and 10,000).",
    ]


def test_a_tables_cell_on_fewer_seeds_than_planned_says_so():
    data = {**hand_curve(), "baseline_scores": {"1000": {}, "2500": {}, "5000": {}, "10000": {}}}
    assert [line for line in curve_markdown(data) if line.startswith("| mask |")][0] == (
        "| mask | +1.00 [+0.10, +1.90] better | +1.00 [+0.10, +1.90] better | +1.00 [+0.10, +1.90] no measurable "
        "difference (3 of 5 seeds) | no result yet |")


def test_a_side_with_all_its_planned_seeds_is_not_short_though_the_other_plans_fewer():
    """5,000 pairs: mask planned 5 seeds, sequence 3; each side is compared with its own plan."""
    data = hand_curve()
    data["planned"]["5000"] = {"mask": 5, "sequence": 3}
    head = ("**mask**: better than the words at 1,000 and 2,500 pairs, no clear difference at 5,000 pairs; there the "
            "parse beats mask_random at 1,000; mask_random is not measurably worse at 2,500 (")
    notes = {}
    for seeds in ([5, 3], [3, 3], [5, 2], [4, 1]):
        data["systems"]["mask"]["5000"] = {**verdict("no measurable difference"), "seeds": seeds}
        sentence = method_sentences(data)[0]
        assert sentence.startswith(head)
        notes[str(seeds)] = sentence[len(head):]
    assert notes == {"[5, 3]": "no result yet at 10,000).",
                     "[3, 3]": "3 of 5 seeds so far at 5,000; no result yet at 10,000).",
                     "[5, 2]": "sequence 2 of 3 seeds so far at 5,000; no result yet at 10,000).",
                     "[4, 1]": "4 of 5 seeds; sequence 1 of 3 seeds so far at 5,000; no result yet at 10,000)."}


def test_the_block_replaces_the_old_one_in_place_and_a_file_without_markers_is_named():
    block = readme_block(hand_curve(), "sizes/RESULTS.md", "sizes/curve.png", "demo-sizes")
    text = f"before\n{README_BEGIN} demo-sizes -->\nstale\n{README_END}\nafter"
    replaced = replace_block(text, block, "README.md").split("\n")
    assert replaced[0] == "before" and replaced[-1] == "after" and replaced[1:-1] == block
    with pytest.raises(ValueError, match="^README.md: no sizes answer to replace"):
        replace_block("no block here", block, "README.md")


def metric(delta: float, low: float, high: float, p: float) -> dict:
    """A metric's comparison as a size's answer holds it: the curve keeps delta, interval and p of it."""
    return {"delta": delta, "p_value": p, "p_mc_se": 0.0002, "welch": {"t": -9.0, "df": 3.9, "p_value": 0.001},
            "delta_ci": [low, high], "borderline": False}


def test_the_curve_reads_each_sizes_numbers_from_its_report_and_stores_none(tmp_path):
    """Size 1,000 scored (its report in n1000/, another dataset beside), size 2,500 not yet."""
    bleu, chrf, versus = metric(-4.39, -5.69, -3.11, 0.0002), metric(-6.01, -7.23, -4.56, 0.0002), \
        metric(0.05, -1.11, 1.16, 0.051)
    report = {"datasets": {"other": {}, "demo.n1000": {
        "seeds": True, "comparisons": {"baseline": "sequence", "planned_seeds": {"sequence": 3, "mask": 2}},
        "table": {"columns": ["System", "Structure read", "BLEU (mean ± sd)"], "rows": [
            {"System": "sequence", "Structure read": "none (words only)",
             "BLEU (mean ± sd)": {"mean": 11.88, "sd": 0.67, "per_seed": [12.42, 12.07, 11.14]}},
            {"System": "mask", "Structure read": "parse",
             "BLEU (mean ± sd)": {"mean": 7.49, "sd": 0.68, "per_seed": [6.75, 8.10, 7.63]}}]},
        "answer": {
            "systems": [{"system": "mask", "vs_baseline": {"against": "sequence", "seeds": [3, 3], "BLEU": bleu,
                                                           "chrF": chrf, "verdict": "worse", "borderline": False},
                         "controls": [{"control": "mask_random", "comparison": {
                             "against": "mask_random", "seeds": [3, 3], "BLEU": versus,
                             "verdict": "no measurable difference", "borderline": True}}]}],
            "controls": [{"system": "mask_random"}]}}}}
    (tmp_path / "n1000").mkdir()
    (tmp_path / "n1000/RESULTS.json").write_text(json.dumps(report), encoding="utf-8")
    curve = {"sizes": [1000, 2500], "baseline": "sequence", "methods": {"mask": ["mask_random"]},
             "reports": {"1000": {"results": "n1000/RESULTS.json", "dataset": "demo.n1000"}}}
    (tmp_path / "RESULTS.json").write_text(json.dumps({"study": "demo", "curve": curve}), encoding="utf-8")
    data = load_curve(tmp_path / "RESULTS.json")
    assert data == curve_data(curve, tmp_path) and {key: data[key] for key in curve} == curve
    assert data["baseline_scores"] == {"1000": {"BLEU": {"mean": 11.88, "sd": 0.67, "seeds": 3}}, "2500": {}}
    assert data["planned"] == {"1000": {"sequence": 3, "mask": 2}, "2500": {}}
    assert data["systems"] == {
        "mask": {"1000": {"BLEU": {"delta": -4.39, "delta_ci": [-5.69, -3.11], "p_value": 0.0002},
                          "chrF": {"delta": -6.01, "delta_ci": [-7.23, -4.56], "p_value": 0.0002},
                          "verdict": "worse", "borderline": False, "seeds": [3, 3]}, "2500": None},
        "mask_random": {"1000": None, "2500": None}}
    assert data["vs_control"] == {"mask": {"mask_random": {
        "1000": {"BLEU": {"delta": 0.05, "delta_ci": [-1.11, 1.16], "p_value": 0.051},
                 "verdict": "no measurable difference", "borderline": True, "seeds": [3, 3]}, "2500": None}}}


def test_the_readmes_sizes_answer_is_the_committed_curves():
    results = json.loads((ROOT / "examples/multi30k/sizes/RESULTS.json").read_text(encoding="utf-8"))
    assert set(results["curve"]) == {"sizes", "baseline", "methods", "reports"}  # each number in its size's report
    assert results["curve"]["reports"]["10000"] == {"results": "../RESULTS.json", "dataset": "multi30k-10k"}
    block = readme_block(load_curve(ROOT / "examples/multi30k/sizes/RESULTS.json"),
                         "examples/multi30k/sizes/RESULTS.md", "examples/multi30k/sizes/curve.png", results["study"])
    lines = (ROOT / "README.md").read_text(encoding="utf-8").split("\n")
    start = lines.index(block[0])
    assert lines[start:start + len(block)] == block, (
        "regenerate it: fairseq-syntax-study report examples/multi30k/study-sizes.toml --readme README.md")
