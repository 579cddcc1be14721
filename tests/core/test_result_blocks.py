"""No hand-written result numbers: the README and the docs hold results only in blocks generated from RESULTS.json."""
import json
import re
from pathlib import Path

import pytest

from fairseq_syntax.evaluation import result_blocks
from fairseq_syntax.evaluation.result_blocks import (
    END,
    begin_line,
    comparison_lines,
    find_blocks,
    generated_lines,
    induction_lines,
    rewrite,
    runaway_lines,
)
from fairseq_syntax.evaluation.study_answer import README_BEGIN, README_END, readme_block, replace_readme_block
from fairseq_syntax.evaluation.tables import load_results_json

ROOT = Path(__file__).resolve().parents[2]

_METRIC = r"(?:BLEU|chrF|TER|RIBES|F1|UAS|LAS)"
_DECIMAL = r"[+\-−]?\d+\.\d+"
#: a result number in prose (a score with its metric, a p-value, a mean ± sd), each named for the failure
RESULT_PATTERNS = {
    "a score with its metric": re.compile(
        rf"(?<![\w.]){_DECIMAL}(?: ?/ ?{_DECIMAL})*%? (?:sentence |corpus |tokenized )?{_METRIC}\b"),
    "a metric with its score": re.compile(rf"\b{_METRIC}:? {_DECIMAL}"),
    "an accuracy": re.compile(rf"(?<![\w.]){_DECIMAL} ?% (?:accuracy|acc\.)|\b(?:accuracy|acc\.):? {_DECIMAL}"),
    "a p-value": re.compile(r"\bp(?: ?=| of| value| is)? ?0\.\d+|\bp-values? (?:of )?0\.\d+"),
    "a Welch p": re.compile(r"\bWelch(?:'s)?(?: t-test| t| p)?:? 0\.\d+"),
    "a mean ± sd": re.compile(r"\d\.\d+ ?± ?\d+\.\d+"),
    "a count of shared runaways": re.compile(r"\b\d+ (?:runaway sentences )?shared\b(?! (?:CPU|cores?|memory))"),
}


def result_numbers(text: str, name: str) -> list[str]:
    """``name:LINE: KIND: 'MATCH' in: LINE`` for each result number of ``text`` outside its generated blocks,
    fenced code and inline code."""
    generated = generated_lines(text)
    found, fenced = [], False
    for number, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or number in generated:
            continue
        prose = re.sub(r"`[^`]*`", "", line)
        for kind, pattern in RESULT_PATTERNS.items():
            found += [f"{name}:{number}: {kind}: {match.group(0)!r} in: {line.strip()}"
                      for match in pattern.finditer(prose)]
    return found


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").glob("*/README.md"))]


def test_no_result_number_stands_outside_a_generated_block():
    found = [line for path in documents()
             for line in result_numbers(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))]
    assert not found, ("result numbers written by hand (say what to look at, or put them in a block of python -m "
                       "fairseq_syntax.evaluation.result_blocks):\n" + "\n".join(found))


@pytest.mark.parametrize("prose", [
    # the README's and docs/results.md's drifted sentences of issue 68
    "and +0.16 BLEU / +0.77 chrF above the words (p 0.70 / 0.041, mixed)",
    "score the same (-0.06 BLEU / +0.01 chrF, p 0.96 / 0.98, three seeds)",
    "loop in other systems' runs too (63 shared over all pairs of runs where 0.8 would be by chance)",
    "from *no measurable difference* to *mixed* (chrF -0.93, p",
    "McDonald & Chiang's masks are +0.27 BLEU over Sequence",
    "(BLEU 0.316±0.007, chrF 0.056±0.003; Welch 0.311 / 0.079)",
    "raised its mean to 31.37 ± 0.79 / 56.37 ± 1.10",
    "induced trees score 31.6 / 48.6 sentence F1 on the PTB sample",
    "SuPar's biaffine parser (UD EWT dev, UAS 86.42 / LAS 81.43 after 12 epochs)",
    "the tagger reaches 96.34% accuracy",
    "test BLEU 31.77, 31.89 and 31.58",
])
def test_the_scan_finds_result_numbers(prose):
    assert result_numbers(prose, "doc.md")


@pytest.mark.parametrize("prose", [
    "`--lr 1e-3`, inverse square root after 1,000 warm-up updates, label smoothing 0.1, dropout 0.3",
    "better (worse) when BLEU and chrF are both higher (lower), each with p < 0.05",
    "10,000 of the 29,000 training pairs; seeds 1, 2 and 3; 5 seeds where the answer was close",
    "It takes 6 to 8 minutes on 2 cores; 1.8x faster than fp32; 170 sentences/s; on the 2 shared CPU cores",
    "the parse's trees have 9.80 phrases, the random binary control 12.06",
    "a BLEU-4, BLEU-1, chrF, TER and RIBES table; BLEU of each system over its seeds",
    "the paper's Table 2 (131k lines, tokenized BLEU): Sequence 31.99, Linearized 31.06, Mask 31.75",
    "sqrt(k/(k-1)), ±0.003 at 0.05 where 1,000 rounds gave ±0.01",
])
def test_the_scan_leaves_other_numbers(prose):
    assert result_numbers(prose, "doc.md") == []


def test_generated_blocks_code_and_inline_code_are_not_scanned():
    text = "\n".join([
        "before",
        begin_line("RESULTS.json", "runaway"), "63 shared", END,
        f"{README_BEGIN} RESULTS.json` -->", "| mask | +1.14 BLEU (p 0.074) |", README_END,
        "```", "fairseq-syntax-score --json p 0.5 BLEU 1.0", "```",
        "a command `echo +1.00 BLEU` in prose",
        "after: p 0.5"])
    assert result_numbers(text, "doc.md") == ["doc.md:12: a p-value: 'p 0.5' in: after: p 0.5"]
    assert generated_lines(text) == {2, 3, 4, 5, 6, 7}


def compared(delta: float, p_value: float, mc_error: float, welch_p: float, interval=None, borderline=False) -> dict:
    """One metric of a comparison as the study answer's JSON holds it."""
    return {"delta": delta, "p_value": p_value, "p_mc_se": mc_error, "delta_ci": interval, "borderline": borderline,
            "welch": {"t": 1.5, "df": 4.0, "p_value": welch_p}}


#: a seeds table's RESULTS.json: tree against words and against its random control; its struct control not run yet;
#: the random control not yet compared with words
STUDY = {"datasets": {"toy": {
    "seeds": True,
    "comparisons": {"baseline": "words", "metrics": ["BLEU", "chrF"], "alpha": 0.05,
                    "controls": {"tree_random": {"method": "tree", "kind": "random"},
                                 "tree_struct": {"method": "tree", "kind": "struct"}}},
    "answer": {
        "systems": [{"system": "tree", "seeds": [1, 2, 3], "vs_baseline": {
            "against": "words", "seeds": [3, 3], "verdict": "mixed", "borderline": False,
            "BLEU": compared(1.25, 0.0301, 0.0017, 0.049, [0.1, 2.4]),
            "chrF": compared(-0.5, 0.2, 0.006, 0.25, [-1.2, 0.2])},
            "controls": [{"control": "tree_random", "structure": "random", "comparison": {
                "against": "tree_random", "seeds": [3, 2], "verdict": "better", "borderline": True,
                "BLEU": compared(2.0, 0.046, 0.003, 0.04, borderline=True),
                "chrF": compared(1.0, 0.0004, 0.0002, 0.001)}},
                {"control": "tree_struct", "structure": "struct", "comparison": None}]}],
        "controls": [{"system": "tree_random", "vs_baseline": None}],
        "no_run_finished": ["tree_struct"]}}},
    "runaway_hypotheses": {
        "sentences": [3, 7, 9], "shared_in_two_or_more": [7], "pairs_shared": 2, "pairs_expected_by_chance": 0.3,
        "source_lengths": {"mean_all": 11.0, "mean_runaway": 20.0, "median_all": 10.0, "above_median_runaway": 2 / 3},
        "runs": {"tree": {"1": {"count": 2, "BLEU": 30.0, "BLEU_cut": 30.5, "length_ratio": 1.05,
                                "length_ratio_cut": 1.01},
                          "2": {"count": 1, "BLEU": 31.004, "BLEU_cut": 31.2, "length_ratio": 0.9996,
                                "length_ratio_cut": 0.99}},
                 "words": {"1": {"count": 0, "BLEU": 31.0, "BLEU_cut": 31.0, "length_ratio": 1.0,
                                 "length_ratio_cut": 1.0}}}}}

COMPARISONS_LEAD = ("Each comparison of toy: per metric, the difference of the means over seeds (first system minus "
                    "second) with its 95% interval, the seed-aware bootstrap's p ± its Monte-Carlo error and Welch's "
                    "t-test's p (t); then the verdict.")


def test_the_comparisons_block_has_one_line_a_comparison():
    assert comparison_lines(STUDY) == [
        COMPARISONS_LEAD, "",
        # p 0.0301 -> 0.030 (3 decimals), its error 0.0017 -> 0.002; the interval with its signs
        ("- **tree** vs words (3 vs 3 seeds): BLEU +1.25 (+0.10 to +2.40; p 0.030±0.002, t 0.049), chrF -0.50 "
         "(-1.20 to +0.20; p 0.200±0.006, t 0.250): mixed"),
        # no interval recorded: none shown; p below 0.001 with 4 decimals; a finding in bold, borderline after it
        ("- **tree** vs tree_random (3 vs 2 seeds): BLEU +2.00 (p 0.046±0.003, t 0.040), chrF +1.00 "
         "(p 0.0004±0.0002, t 0.001): **better** (borderline)"),
        "- **tree** vs tree_struct: no run of tree_struct yet",
        "- **tree_random** vs words: not compared yet (waiting for the seeds of one side)"]
    # the comparisons whose first system is listed; a system the table has no row of is named
    assert comparison_lines(STUDY, ["tree_random"]) == [
        COMPARISONS_LEAD, "", "- **tree_random** vs words: not compared yet (waiting for the seeds of one side)"]
    with pytest.raises(ValueError, match=r"^mask: no row of dataset 'toy' \(its rows: tree, tree_random\)$"):
        comparison_lines(STUDY, ["mask"])
    with pytest.raises(ValueError, match="no seeds table for dataset 'other'"):
        comparison_lines(STUDY, dataset="other")


def test_the_runaway_block_counts_shared_runaways_and_each_listed_systems_runs():
    summary = ("3 test sentences ran away (looped up to the length cap) in some run, 1 of them in two runs or more; "
               "over all pairs of runs, 2 runaway sentences are shared, where runs that loop independently of their "
               "inputs would share 0.3. Their sources average 20.0 words against 11.0 for all test sentences; 67% "
               "are longer than the median (10 words).")
    assert runaway_lines(STUDY) == [summary]
    assert runaway_lines(STUDY, ["tree"]) == [
        summary, "",
        ("- **tree**, seeds 1 / 2: runaway hypotheses 2 / 1; BLEU as decoded -> with each runaway cut to its "
         "reference's length 30.00 -> 30.50, 31.00 -> 31.20; length ratio 1.050 -> 1.010, 1.000 -> 0.990")]
    with pytest.raises(ValueError, match=r"^mask: no runs in runaway_hypotheses \(its systems: tree, words\)$"):
        runaway_lines(STUDY, ["mask"])
    with pytest.raises(ValueError, match="no runaway_hypotheses"):
        runaway_lines({"datasets": {}})


def test_the_induction_block_lists_the_fresh_mask_runs_beside_the_baseline_trees():
    results = {"headline": "small", "rows": [
        {"setting": "small", "masks": "fresh", "size": [6, 128], "updates": 6000, "sentence_f1_all": 31.62,
         "sentence_f1_le10": 48.58, "perplexity_ratio": 0.5588},
        {"setting": "old", "masks": "repeated", "size": [6, 128], "updates": 6000, "sentence_f1_all": 14.3,
         "sentence_f1_le10": 26.5, "perplexity_ratio": 0.64},
        {"setting": "wide", "masks": "fresh", "size": [8, 256], "updates": 600, "sentence_f1_all": 36.45,
         "sentence_f1_le10": 50.73, "perplexity_ratio": None}],
        "tables": {"headline_induction": {
            "columns": ["trees", "all sentence F1", "all corpus F1", "short sentence F1", "short corpus F1"],
            "rows": [{"trees": "Tree Transformer, Algorithm 1", "all sentence F1": 31.62, "all corpus F1": 27.9,
                      "short sentence F1": 48.58, "short corpus F1": 44.6},
                     {"trees": "right-branching", "all sentence F1": 39.917, "all corpus F1": 35.6,
                      "short sentence F1": 59.147, "short corpus F1": 55.3}]}}}
    assert induction_lines(results) == [
        "| trees | all sentence F1 | short sentence F1 | masked-word perplexity / the plain Transformer's |",
        "|---|---:|---:|---:|",
        "| Tree Transformer 6 x 128, 6,000 updates (`small/`, the headline) | 31.6 | 48.6 | 0.559 |",
        "| Tree Transformer 8 x 256, 600 updates (`wide/`) | 36.5 | 50.7 | – |",
        "| right-branching | 39.9 | 59.1 | – |"]
    with pytest.raises(ValueError, match="not the results of examples/ptb_induction/make_results.py"):
        induction_lines(STUDY)


def markdown(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def test_each_block_is_rewritten_from_its_results_json_and_the_prose_around_it_kept(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "RESULTS.json").write_text(json.dumps(STUDY))
    text = markdown("# Doc", "", "prose", begin_line("data/RESULTS.json", "comparisons tree_random"), "stale", END,
                    "between", begin_line("data/RESULTS.json", "runaway"), END, "after")
    assert rewrite(text, tmp_path, "doc.md") == markdown(
        "# Doc", "", "prose", begin_line("data/RESULTS.json", "comparisons tree_random"), COMPARISONS_LEAD, "",
        "- **tree_random** vs words: not compared yet (waiting for the seeds of one side)", END,
        "between", begin_line("data/RESULTS.json", "runaway"), *runaway_lines(STUDY), END, "after")
    assert [block[:3] for block in find_blocks(text.split("\n"), "doc.md")] == [
        (3, 5, "data/RESULTS.json"), (7, 8, "data/RESULTS.json")]


@pytest.mark.parametrize("lines, error", [
    ([begin_line("R.json", "nothing"), END], "doc.md:2: unknown kind of results block 'nothing' (the kinds: "
                                             "comparisons, runaway, induction)"),
    ([result_blocks.BEGIN + "R.json -->", END], "doc.md:2: a results block's first line must read"),
    ([begin_line("R.json", "runaway"), "text"], "doc.md:2: a results block without its last line"),
    ([begin_line("R.json", "runaway"), begin_line("R.json", "runaway"), END], "doc.md:3: a results block begins "
                                                                               "inside the one of line 2"),
    ([END], f"doc.md:2: {END} without its first line"),
    ([begin_line("missing.json", "runaway"), END], "doc.md:2: {folder}/missing.json: No such file or directory"),
    ([begin_line("bad.json", "runaway"), END], "doc.md:2: {folder}/bad.json:1: not valid JSON"),
    ([begin_line("R.json", "comparisons nobody"), END], "doc.md:2: {folder}/R.json: nobody: no row of dataset"),
    ([begin_line("R.json", "runaway dataset=toy"), END], "doc.md:2: {folder}/R.json: runaway takes system names "
                                                         "only, not dataset="),
    ([begin_line("R.json", "induction"), END], "doc.md:2: {folder}/R.json: not the results of"),
])
def test_a_block_that_cannot_be_made_is_one_error_naming_the_file_and_line(tmp_path, lines, error):
    (tmp_path / "R.json").write_text(json.dumps(STUDY))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError) as raised:
        rewrite(markdown("# Doc", *lines), tmp_path, "doc.md")
    assert str(raised.value).startswith(error.format(folder=tmp_path))


def test_the_command_rewrites_stale_blocks_and_check_names_them(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("RESULTS.json").write_text(json.dumps(STUDY))
    Path("doc.md").write_text(markdown("prose", begin_line("RESULTS.json", "runaway"), "63 shared", END))
    assert result_blocks.main(["--check", "doc.md"]) == 1
    assert capsys.readouterr().out == ("doc.md: results blocks differ from their RESULTS.json (python -m "
                                       "fairseq_syntax.evaluation.result_blocks doc.md rewrites them)\n")
    assert "63 shared" in Path("doc.md").read_text()  # --check writes nothing
    assert result_blocks.main(["doc.md"]) == 0
    assert capsys.readouterr().out == "doc.md: 1 results block rewritten\n"
    assert Path("doc.md").read_text() == markdown("prose", begin_line("RESULTS.json", "runaway"),
                                                  *runaway_lines(STUDY), END)
    assert result_blocks.main(["--check", "doc.md"]) == 0 and capsys.readouterr().out == ""
    assert result_blocks.main(["doc.md"]) == 0 and capsys.readouterr().out == "doc.md: 1 results block unchanged\n"
    Path("doc.md").write_text(markdown(begin_line("RESULTS.json", "runaway")))
    with pytest.raises(SystemExit) as stop:
        result_blocks.main(["doc.md"])
    assert str(stop.value) == f"result_blocks: error: doc.md:1: a results block without its last line {END!r}"


def test_a_readme_with_two_studies_answers_rewrites_the_one_of_the_results_json_it_is_given():
    first, second = (f"{README_BEGIN} {name}/RESULTS.json` from the study's table -->" for name in ("en", "de"))
    text = markdown("# R", first, "en answer", README_END, "prose", second, "de answer", README_END, "end")
    assert replace_readme_block(text, [second, "new de answer", README_END]) == markdown(
        "# R", first, "en answer", README_END, "prose", second, "new de answer", README_END, "end")
    assert replace_readme_block(text, [first, "new en answer", README_END]) == markdown(
        "# R", first, "new en answer", README_END, "prose", second, "de answer", README_END, "end")
    other = f"{README_BEGIN} fr/RESULTS.json` from the study's table -->"
    with pytest.raises(ValueError, match=r"^README.md: 2 study answers, none of fr/RESULTS.json \(lines 2, 6\)$"):
        replace_readme_block(text, [other, README_END])
    # a README with one answer has it rewritten, whichever RESULTS.json it named
    assert replace_readme_block(markdown(first, "en", README_END), [other, "fr", README_END]) == markdown(
        other, "fr", README_END)


@pytest.mark.parametrize("path", documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_the_committed_blocks_are_what_their_results_json_gives(path):
    name = str(path.relative_to(ROOT))
    text = path.read_text(encoding="utf-8")
    assert rewrite(text, path.parent, name) == text, \
        f"{name}: regenerate its blocks: python -m fairseq_syntax.evaluation.result_blocks {name}"


def test_each_study_answer_of_the_readme_is_what_its_results_json_gives():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    named = [line[len(README_BEGIN):].split("`")[0].strip() for line in text.split("\n")
             if line.startswith(README_BEGIN)]
    assert named == ["examples/multi30k/RESULTS.json", "examples/multi30k_de_en/RESULTS.json"]
    for path in named:
        block = readme_block(load_results_json(ROOT / path), str(Path(path).with_suffix(".md")))
        assert "\n".join(block) in text, \
            f"regenerate it: python -m fairseq_syntax.evaluation.study_answer --readme README.md {path}"
