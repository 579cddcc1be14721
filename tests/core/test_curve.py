"""The curve's sentences in the README's sizes answer, from hand-made verdicts and the committed curve."""
import json
from pathlib import Path

import pytest

from fairseq_syntax.evaluation.curve import README_BEGIN, README_END, method_sentences, readme_block, replace_block

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
    }


def test_each_methods_sentence_names_where_it_helps_and_whether_its_control_does_as_well():
    assert method_sentences(hand_curve()) == [
        "**mask**: better than the words at 1,000 and 2,500 pairs, no clear difference at 5,000 pairs; there the "
        "parse beats mask_random at 1,000; mask_random is not measurably worse at 2,500 (no result yet at 10,000).",
        "**udp**: worse than the words at 1,000 pairs (no result yet at 2,500, 5,000 and 10,000).",
    ]


def test_the_block_replaces_the_old_one_in_place_and_a_file_without_markers_is_named():
    block = readme_block(hand_curve(), "sizes/RESULTS.md", "sizes/curve.png", "demo-sizes")
    text = f"before\n{README_BEGIN} demo-sizes -->\nstale\n{README_END}\nafter"
    replaced = replace_block(text, block, "README.md").split("\n")
    assert replaced[0] == "before" and replaced[-1] == "after" and replaced[1:-1] == block
    with pytest.raises(ValueError, match="^README.md: no sizes answer to replace"):
        replace_block("no block here", block, "README.md")


def test_the_readmes_sizes_answer_is_the_committed_curves():
    results = json.loads((ROOT / "examples/multi30k/sizes/RESULTS.json").read_text(encoding="utf-8"))
    block = readme_block(results["curve"], "examples/multi30k/sizes/RESULTS.md", "examples/multi30k/sizes/curve.png",
                         results["study"])
    lines = (ROOT / "README.md").read_text(encoding="utf-8").split("\n")
    start = lines.index(block[0])
    assert lines[start:start + len(block)] == block, (
        "regenerate it: fairseq-syntax-study report examples/multi30k/study-sizes.toml --readme README.md")
