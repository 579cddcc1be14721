"""Tests for fairseq_syntax.evaluation.scoring and the fairseq-syntax-score command."""
import gzip
import itertools
import json
import math
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO
from nltk.translate.ribes_score import corpus_ribes
from sacrebleu.metrics import BLEU, CHRF

from fairseq_syntax.cli import score as score_cli
from fairseq_syntax.evaluation.kept_files import RecordError
from fairseq_syntax.evaluation.records import load_record
from fairseq_syntax.evaluation.results import render_markdown
from fairseq_syntax.evaluation.scoring import (
    ScoringInputError,
    SeedDraws,
    bleu_by_length,
    check_same_length,
    corpus_scores,
    detokenize,
    format_ids,
    kept_decode,
    mc_standard_error,
    paired_bootstrap,
    read_generate_output,
    resampled_seed_means,
    ribes,
    scores_from_statistics,
    seed_bootstrap,
    seed_scale,
    seed_scores,
    sentence_statistics,
    two_sided_bootstrap_p,
    welch_test,
    write_kept_decode,
)

REFERENCES = [
    "A man in a blue shirt is standing on a ladder.",
    "Two dogs run across the grassy field.",
    "A little girl climbs into a wooden playhouse.",
    "The woman, who is wearing a hat, sells fruit at the market.",
    "People are walking down a busy city street at night.",
    "A boy jumps into the lake.",
]
HYPOTHESES = [
    "A man in a blue shirt is standing on a ladder.",  # perfect
    "Two dogs are running across a grassy field.",
    "A girl climbs into a wooden house.",
    "The woman with a hat sells fruits on the market.",
    "People walk on a street.",
    "A boy jumps into the lake.",  # perfect
]


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def sacrebleu_cli(*args):
    """sacrebleu's own command line (the reference the scores must match)."""
    result = subprocess.run([sys.executable, "-m", "sacrebleu", *map(str, args)], capture_output=True, text=True,
                            check=True)
    return result.stdout


def generate_output(hypotheses, ids, sources=None):
    """fairseq-generate stdout for the given ids, in a shuffled order with the log lines fairseq prints."""
    lines = ["2024-01-01 12:00:00 | INFO | fairseq_cli.generate | loading model(s) from checkpoint_best.pt"]
    for sample_id in ids:
        source = sources[sample_id] if sources else f"source {sample_id}"
        lines += [f"S-{sample_id}\t{source}", f"T-{sample_id}\t{REFERENCES[sample_id]}",
                  f"H-{sample_id}\t-0.{sample_id}1\t{hypotheses[sample_id]}",
                  f"D-{sample_id}\t-0.{sample_id}1\t{hypotheses[sample_id]}",
                  f"P-{sample_id}\t-0.1 -0.2"]
    lines.append("Generate test with beam=5: BLEU4 = 51.20, 70.0/55.0/45.0/40.0 (BP=1.000)")
    return lines


@pytest.fixture
def files(tmp_path):
    return write_lines(tmp_path / "ref.txt", REFERENCES), write_lines(tmp_path / "hyp.txt", HYPOTHESES)


#: a weak baseline's three seeds: one short sentence for each reference
BASE_SEEDS = [[text] * 6 for text in ("A man.", "A dog.", "A boy.")]


@pytest.fixture
def bases(tmp_path):
    return [write_lines(tmp_path / f"base{seed}.txt", lines) for seed, lines in enumerate(BASE_SEEDS, start=1)]


@pytest.mark.parametrize("tokenize", ["13a", "none"])  # none: tokenized BLEU of tokenized text
def test_scores_match_sacrebleu_command_line(files, tokenize):
    ref, hyp = files
    expected = json.loads(sacrebleu_cli(ref, "-i", hyp, "-m", "bleu", "chrf", "ter", "--tokenize", tokenize, "-b",
                                        "-w", "4"))
    scores = corpus_scores(HYPOTHESES, REFERENCES, tokenize)
    assert [round(scores[m], 4) for m in ("BLEU", "chrF", "TER")] == expected
    assert scores["n_sentences"] == 6 and scores["tokenize"] == tokenize
    assert f"tok:{tokenize}" in scores["signatures"]["BLEU"]


def test_bleu_1_by_hand():
    # sentence 1: 3 of 3 unigrams match; sentence 2: "the" x4 clips to 1 of 4; 4 / 7 matched, BP = exp(1 - 8/7)
    hyps = ["the cat sat", "the the the the"]
    refs = ["the cat sat on the mat", "the cat"]
    expected = 100 * (4 / 7) * math.exp(1 - 8 / 7)
    assert corpus_scores(hyps, refs)["BLEU-1"] == pytest.approx(expected)


def test_ribes_by_hand_and_against_nltk():
    # "b a c" vs "a b c": ranks [1, 0, 2], tau 1/3, normalised 2/3; p1 = 1, no brevity penalty
    assert ribes(["b a c"], ["a b c"]) == pytest.approx(100 * 2 / 3)
    # The 13a tokenizer splits "mat." into "mat ." before RIBES sees the words.
    hyps, refs = ["the cat sat on the mat.", "a dog runs"], ["the cat sat on a mat.", "a big dog runs fast"]
    hand_tokens_hyps = [["the", "cat", "sat", "on", "the", "mat", "."], ["a", "dog", "runs"]]
    hand_tokens_refs = [[["the", "cat", "sat", "on", "a", "mat", "."]], [["a", "big", "dog", "runs", "fast"]]]
    assert corpus_scores(hyps, refs)["RIBES"] == pytest.approx(100 * corpus_ribes(hand_tokens_refs,
                                                                                  hand_tokens_hyps))


def test_a_decode_is_read_by_id_and_field_and_kept_as_its_hypotheses_and_log_lines(tmp_path):
    hyps = ["first", "", "third with\ta tab"]  # an empty hypothesis is still a hypothesis
    output = generate_output(hyps, [2, 0, 1])  # D- lines equal to their H- lines: generate ran without --tokenizer
    path = write_lines(tmp_path / "gen.out", output)
    assert read_generate_output(path) == hyps
    assert read_generate_output(path, field="T") == REFERENCES[:3]
    assert read_generate_output(path, field="S") == ["source 0", "source 1", "source 2"]
    kept = kept_decode(output)
    # by hand: the H- lines in id order, their score column empty, then the two log lines
    assert kept == ["H-0\t\tfirst", "H-1\t\t", "H-2\t\tthird with\ta tab", output[0], output[-1]]
    path = write_lines(tmp_path / "kept.gen", kept)
    assert read_generate_output(path, expected_ids=3) == hyps  # "D" reads the H- lines where no D- line is kept
    assert read_generate_output(path, expected_ids=3, field="H") == hyps

    # with a --tokenizer, D- lines differ from H- lines: both are kept, each still read as its own field
    detokenized = [line.replace("D-1\t-0.11\t", "D-1\t-0.11\tdetok") for line in generate_output(hyps, [1, 0, 2])]
    kept = kept_decode(detokenized)
    assert [line.split("\t")[0] for line in kept[:6]] == ["H-0", "D-0", "H-1", "D-1", "H-2", "D-2"]
    gzipped = tmp_path / "kept.gen.gz"
    write_kept_decode(write_lines(tmp_path / "full.gen", detokenized), gzipped)
    assert read_generate_output(gzipped, expected_ids=3) == ["first", "detok", "third with\ta tab"]
    assert read_generate_output(gzipped, expected_ids=3, field="H") == hyps
    with gzip.open(gzipped, "rt", encoding="utf-8") as handle:
        assert handle.read().splitlines() == kept


@pytest.mark.parametrize("lines, options, message", [
    (generate_output(HYPOTHESES, [0, 2, 4]), dict(expected_ids=6, expected_from="ref.txt"),
     r"gen.out: no D- line for 3 of the 6 expected ids 0-5 \(as in ref.txt\): 1, 3, 5 "),
    # without a count only gaps below the largest id can be seen
    (generate_output(HYPOTHESES, [0, 2, 4]), {}, r"no D- line for 2 of the 5 expected ids 0-4: 1, 3 "),
    # only a trailing block of missing ids suggests its two causes; a gap in the middle has neither
    (generate_output(HYPOTHESES, [0, 1, 2, 3]), dict(expected_ids=6), "--required-batch-size-multiple 1.*--skipped"),
    (generate_output(HYPOTHESES, [0, 1, 3, 4, 5]), dict(expected_ids=6), r": 2 \(nothing was scored\)$"),
    (generate_output(HYPOTHESES, [0, 1, 2]), dict(expected_ids=2), r"ids 2 beyond the 2 expected ids 0-1"),
    (generate_output(HYPOTHESES, [0, 1, 1]), {}, r"gen.out:15: second D- line for id 1 \(first on line 10\)"),
    (["S-0\tsource", "D-0\tno score column"], {}, r"gen.out:2: a D- line needs an id, a score and a text"),
    (HYPOTHESES, dict(expected_ids=7, expected_from="ref.txt"),
     r"gen.out: 6 lines of plain text, expected 7 \(as in ref.txt\)"),
], ids=["missing", "missing-uncounted", "trailing", "gap", "surplus", "duplicate", "malformed", "plain-text"])
def test_a_decode_without_one_hypothesis_an_id_is_named(tmp_path, lines, options, message):
    with pytest.raises(ScoringInputError, match=message):
        read_generate_output(write_lines(tmp_path / "gen.out", lines), **options)


def test_length_mismatch_names_both_sides():
    with pytest.raises(ScoringInputError, match="hyp.txt has 2 segments but ref.txt has 3"):
        check_same_length(["a", "b"], ["a", "b", "c"], "hyp.txt", "ref.txt")
    with pytest.raises(ScoringInputError, match="has 1 segments but references has 2"):
        corpus_scores(["a"], ["a", "b"])


def test_format_ids_compresses_runs():
    assert format_ids([9, 3, 4, 5, 11, 12]) == "3-5, 9, 11-12"


def test_detokenize_undoes_moses_tokenization():
    tokenized = ["Ein Mann , der ein blau @-@ weißes T @-@ Shirt trägt , lacht ."]
    assert detokenize(tokenized, "de") == ["Ein Mann, der ein blau-weißes T-Shirt trägt, lacht."]


def test_paired_bootstrap_p_values_equal_sacrebleu_command_line(tmp_path):
    # Two systems one sentence apart: a small difference, so an intermediate p-value that must be sacrebleu's.
    refs = [f"sentence number {i} says that the {w} is on the table today" for i, w in
            enumerate(["cat", "dog", "cup", "book", "pen", "key", "hat", "box", "map", "toy"] * 3)]
    bad = [" ".join(ref.split()[:4]) + " something else entirely" for ref in refs]
    system_a, system_b = refs[:20] + bad[20:], refs[:21] + bad[21:]
    ref = write_lines(tmp_path / "ref.txt", refs)
    file_a = write_lines(tmp_path / "a.txt", system_a)
    file_b = write_lines(tmp_path / "b.txt", system_b)
    text = sacrebleu_cli(ref, "-i", file_a, file_b, "-m", "bleu", "chrf", "--paired-bs", "-f", "text")
    cli_p_values = [float(p) for p in re.findall(r"\(p = ([0-9.]+)\)", text)]
    report = paired_bootstrap(system_a, system_b, refs)
    assert [round(report[m]["p_value"], 4) for m in ("BLEU", "chrF")] == cli_p_values
    assert report["BLEU"]["p_value"] > 0.05 and (report["n_samples"], report["seed"]) == (1000, 12345)
    # each system's corpus score beside the test
    assert report["BLEU"]["a"] == pytest.approx(corpus_scores(system_a, refs)["BLEU"])


def test_bleu_by_length_buckets():
    refs = ["one two three", "a b c d e", "w " * 11 + "end", "x " * 24 + "end"]  # lengths 3, 5, 12, 25
    hyps = ["", "a b c d e", "w " * 11 + "end", "y " * 25]
    rows = bleu_by_length(hyps, refs, edges=(4, 10, 11))
    assert [(r["bucket"], r["n_sentences"]) for r in rows] == [("(0,4]", 1), ("(4,10]", 1), ("(10,11]", 0),
                                                               ("(11,inf)", 2)]
    assert rows[0]["BLEU"] == 0.0 and rows[1]["BLEU"] == pytest.approx(100.0) and rows[2]["BLEU"] is None
    assert rows[3]["BLEU"] == pytest.approx(BLEU().corpus_score(hyps[2:], [refs[2:]]).score)
    with pytest.raises(ValueError, match="strictly increasing"):
        bleu_by_length(hyps, refs, edges=(10, 5))


def test_score_command_tokenized_mode_scores_h_against_t_lines(tmp_path):
    generated = write_lines(tmp_path / "gen.out", generate_output(HYPOTHESES, range(6)))
    report = score_cli.main([str(generated), str(generated), "--tok"])
    expected = corpus_scores(HYPOTHESES, REFERENCES, tokenize="none")
    assert report["metrics"]["tokenize"] == "none"
    assert report["metrics"]["BLEU"] == pytest.approx(expected["BLEU"])
    assert report["metrics"]["BLEU"] != pytest.approx(corpus_scores(HYPOTHESES, REFERENCES)["BLEU"])


def argv_file(path: Path, *words: str) -> str:
    """A command's words as fairseq-syntax-score's --train-command and --decode-command take them: a JSON list."""
    path.write_text(json.dumps(list(words)), encoding="utf-8")
    return str(path)


def record_options(tmp_path: Path, record_path: Path, system: str, *train_command: str, walls=(61,)) -> list[str]:
    """fairseq-syntax-score's options of ``system``'s run record: a train log per wall time (4 epochs, 120 updates
    each) and the training command's words."""
    logs = [tmp_path / f"train{index}.log" for index in range(1, len(walls) + 1)]
    for log, wall in zip(logs, walls):
        log.write_text(f"2024-05-01 10:00:03 | INFO | train | epoch 004 | loss 4.4 | num_updates 120 | wall {wall}\n")
    return ["--record", str(record_path), "--dataset", "multi30k", "--system", system, "--arch", "a", "--train-log",
            ",".join(map(str, logs)), "--train-command", argv_file(tmp_path / "train.json", *train_command)]


def test_score_command_prints_the_scores_and_writes_json_and_a_run_record(tmp_path, files, bases, capsys):
    ref, _ = files
    hyp = write_lines(tmp_path / "gen.out", generate_output(HYPOTHESES, [5, 3, 1, 0, 2, 4]))
    baseline, out = bases[0], tmp_path / "scores.json"
    record_path = tmp_path / "runs" / "masks.run.json"
    score_cli.main([str(hyp), str(ref), str(baseline), "--bootstrap", "50", "--json", str(out),
                    *record_options(tmp_path, record_path, "masks", "fairseq-train", "data", "--adam-betas",
                                    "(0.9, 0.98)"),
                    "--decode-command", argv_file(tmp_path / "decode.json", "fairseq-generate", "data"),
                    "--baseline-name", "base", "--by-length", "7,11"])
    report = json.loads(out.read_text())
    assert report["baselines"]["base"]["metrics"]["BLEU"] < report["metrics"]["BLEU"]
    assert 0 < report["significance"]["base"]["BLEU"]["p_value"] <= 1
    # reference lengths 11, 7, 8, 12, 10, 6: (0,7] holds 2, (7,11] holds 3, (11,inf) holds 1
    assert [row["n_sentences"] for row in report["by_length"]["hyp"]] == [2, 3, 1]
    assert re.search(r"\nmasks\s+" + r"\s+".join(f"{report['metrics'][m]:.2f}"  # the row named by --system
                                                  for m in ("BLEU", "BLEU-1", "chrF", "TER", "RIBES")),
                     capsys.readouterr().out)
    record = load_record(record_path)
    # each command as its words (test_run_commands: the display string a shell splits into the same words)
    assert record["command_argv"] == ["fairseq-train", "data", "--adam-betas", "(0.9, 0.98)"]
    assert record["decode_command_argv"] == ["fairseq-generate", "data"]
    assert record["score_command_argv"] == ["fairseq-syntax-score", str(hyp), str(ref), str(baseline), "--by-length",
                                            "7,11", "--bootstrap", "50", "--seed", "12345", "--baseline-name", "base"]
    assert shlex.split(record["score_command"]) == record["score_command_argv"]
    assert (record["system"], record["updates"], record["epochs"], record["wall_time_s"]) == ("masks", 120, 4, 61)
    assert record["by_length"] == bleu_by_length(HYPOTHESES, REFERENCES, (7, 11))
    assert record["metrics"]["BLEU"] == pytest.approx(corpus_scores(HYPOTHESES, REFERENCES)["BLEU"])
    assert list(record["significance"]) == ["base"] and record["significance"]["base"]["n_samples"] == 50
    with pytest.raises(SystemExit):
        score_cli.main([str(hyp), str(ref), "--record", str(record_path), "--system", "masks"])
    # a command that is no list of words: one line naming its file, before anything is scored or written
    before = record_path.read_text()
    (tmp_path / "text.json").write_text('"fairseq-train data"')
    with pytest.raises(RecordError, match=r"text.json: a command is a JSON list of its words"):
        score_cli.main([str(hyp), str(ref), *record_options(tmp_path, record_path, "masks")[:-1],  # its command:
                        str(tmp_path / "text.json")])
    assert record_path.read_text() == before


def test_a_record_takes_the_output_folder_from_its_flag_not_the_environment(tmp_path, files, monkeypatch):
    ref, hyp = files
    monkeypatch.setenv("OUT_DIR", str(tmp_path))  # read by no one
    record_path = tmp_path / "masks.run.json"
    train = ["fairseq-train", f"{tmp_path}/data-bin", "--user-dir", f"{REPO}/fairseq_syntax"]
    options = [str(hyp), str(ref), *record_options(tmp_path, record_path, "masks", *train)]
    score_cli.main(options)
    assert load_record(record_path)["train_log"] == f"{tmp_path}/train1.log"
    score_cli.main([*options, "--out-dir", str(tmp_path)])
    record = load_record(record_path)
    assert record["command_argv"] == ["fairseq-train", "OUT_DIR/data-bin", "--user-dir", "fairseq_syntax"]
    assert record["train_log"] == "OUT_DIR/train1.log"
    assert record["score_command"] == "fairseq-syntax-score OUT_DIR/hyp.txt OUT_DIR/ref.txt"


def test_a_rescore_keeps_the_device_and_parsers_the_training_recorded(tmp_path, files):
    ref, hyp = files
    parsers = tmp_path / "parsers.json"
    parsers.write_text('{"dependency": {"model": "biaffine.pt", "sha256": "0123456789abcdef"}}\n')
    record_path = tmp_path / "ldd.run.json"
    common = [str(hyp), str(ref), "--bootstrap", "10", *record_options(tmp_path, record_path, "ldd", "train")]
    score_cli.main(common + ["--device", "NVIDIA H100", "--parsers", str(parsers)])
    recorded = {"device": "NVIDIA H100", "parsers": {"dependency": {"model": "biaffine.pt",
                                                                    "sha256": "0123456789abcdef"}}}
    assert {key: json.loads(record_path.read_text())[key] for key in recorded} == recorded
    score_cli.main(common)  # RESCORE=1 on another machine, the run's checkpoints gone: nothing given anew
    assert {key: json.loads(record_path.read_text())[key] for key in recorded} == recorded
    score_cli.main(common + ["--device", "cpu"])
    assert json.loads(record_path.read_text())["device"] == "cpu"


def test_score_command_detokenizes_h_lines_with_lang(tmp_path, files):
    tokenized = ["A man in a blue shirt is standing on a ladder ."] + HYPOTHESES[1:]
    generated = write_lines(tmp_path / "gen.out", generate_output(tokenized, range(6)))
    ref, _ = files
    report = score_cli.main([str(generated), str(ref), "--lang", "en"])
    assert report["metrics"]["BLEU"] == pytest.approx(corpus_scores(HYPOTHESES, REFERENCES)["BLEU"])


def test_score_command_tests_against_every_baseline(tmp_path, files, bases):
    ref, hyp, weak = *files, bases[0]
    same = write_lines(tmp_path / "same.txt", HYPOTHESES)
    report = score_cli.main([str(hyp), str(ref), str(weak), str(same), "--bootstrap", "100",
                             "--baseline-name", "sequence", "--baseline-name", "linearized"])
    assert list(report["significance"]) == ["sequence", "linearized"]
    weak_test = report["significance"]["sequence"]  # a much better system: significant in both metrics
    assert weak_test["BLEU"]["p_value"] < 0.05 and weak_test["chrF"]["p_value"] < 0.05
    identical = report["significance"]["linearized"]  # identical outputs: p 1, not sacrebleu's smallest
    assert identical["BLEU"]["p_value"] == identical["chrF"]["p_value"] == 1.0
    with pytest.raises(SystemExit):
        score_cli.main([str(hyp), str(ref), str(weak), "--baseline-name", "a", "--baseline-name", "b"])


def test_skipped_lines_of_preprocessing_are_left_out_of_the_references(tmp_path):
    # fairseq-syntax-preprocess --skip-invalid left out lines 2 and 5 of 6: generate's ids 0-3 are lines 1, 3, 4, 6
    refs = write_lines(tmp_path / "ref.txt", [f"the reference of line {n} is this sentence" for n in range(1, 7)])
    skipped = write_lines(tmp_path / "test.skipped.tsv", ["2\tunreadable line\tx", "5\tover-long source\ty"])
    hyps = [f"the reference of line {n} is this sentence" for n in (1, 3, 4, 6)]
    gen = write_lines(tmp_path / "gen.out", generate_output(hyps, [0, 1, 2, 3]))
    with pytest.raises(ScoringInputError, match=r"no D- line for 2 of the 6 expected ids.*give its "
                                                r"\{split\}.skipped.tsv with --skipped"):
        score_cli.main([str(gen), str(refs)])
    report = score_cli.main([str(gen), str(refs), "--skipped", str(skipped)])
    assert report["metrics"]["n_sentences"] == 4 and report["metrics"]["BLEU"] == pytest.approx(100.0)
    bad = write_lines(tmp_path / "bad.tsv", ["9\tx\ty"])
    with pytest.raises(ScoringInputError, match=r"bad.tsv names lines 9, beyond the 6 references"):
        score_cli.main([str(gen), str(refs), "--skipped", str(bad)])


def test_no_references_is_one_error_not_an_index_error(tmp_path, monkeypatch):
    empty = write_lines(tmp_path / "empty.txt", [])
    monkeypatch.setattr(sys, "argv", ["fairseq-syntax-score", str(empty), str(empty)])
    with pytest.raises(SystemExit) as error:
        score_cli.cli_main()
    assert str(error.value) == f"fairseq-syntax-score: error: {empty}: no references to score (an empty file)"
    refs = write_lines(tmp_path / "ref.txt", ["a b", "c d"])
    skipped = write_lines(tmp_path / "test.skipped.tsv", ["1\tover-long source\tx", "2\tover-long source\ty"])
    with pytest.raises(ScoringInputError, match=r"ref.txt: no references to score: all of them are left out by "
                                                r"--skipped .*test.skipped.tsv"):
        score_cli.main([str(empty), str(refs), "--skipped", str(skipped)])


def test_invalid_utf8_in_a_reference_names_file_and_line(tmp_path):
    path = tmp_path / "ref.txt"
    path.write_bytes(b"fine\nbad \xc3\n")
    with pytest.raises(ScoringInputError, match=r"ref.txt:2: not valid UTF-8 \(byte 0xc3 at byte 5 of the line\)"):
        read_generate_output(str(path), field="T")


# ------------------------------------------------------------------------------------------------ several seeds

SEED_2 = HYPOTHESES[:4] + ["People are walking down a street at night.", "A boy jumps into a lake."]


def test_seed_scores_are_the_mean_and_sample_sd_of_each_seeds_scores():
    one, two = corpus_scores(HYPOTHESES, REFERENCES), corpus_scores(SEED_2, REFERENCES)
    scores = seed_scores([HYPOTHESES, SEED_2], REFERENCES)
    assert scores["per_seed"] == [one, two]
    assert scores["mean"]["BLEU"] == pytest.approx((one["BLEU"] + two["BLEU"]) / 2)
    # the sample sd of two values is |a - b| / sqrt(2)
    assert scores["sd"]["BLEU"] == pytest.approx(abs(one["BLEU"] - two["BLEU"]) / math.sqrt(2))
    assert seed_scores([HYPOTHESES], REFERENCES)["sd"]["chrF"] == 0.0


def test_two_sided_bootstrap_p_is_twice_the_smaller_tail_at_zero():
    # 9 differences: 2 at or below 0, 8 at or above: 2 * (1 + 2) / (9 + 1)
    assert two_sided_bootstrap_p([1, 2, 3, -1, 0, 4, 5, 6, 7]) == pytest.approx(0.6)
    assert two_sided_bootstrap_p([5.0] * 99) == pytest.approx(0.02)  # never at or below 0: 2 * 1 / 100
    assert two_sided_bootstrap_p([-5.0] * 99) == pytest.approx(0.02)  # the same on the other side
    assert two_sided_bootstrap_p([0.0] * 10) == 1.0  # no difference ever: capped at 1


# hypothesis copying j of three 4-word references: BLEU 100 exp(1 - 12 / 4j): 100, 60.65, 13.53, 0
THREE = ["the cat sat down", "a dog ran off", "two owls flew by"]


def bleu_of_copies(j):
    return 100 * math.exp(1 - 3 / j) if j else 0.0


def test_seed_bootstrap_resamples_sentences_and_each_systems_seeds_by_hand():
    system = [THREE, [THREE[0], THREE[1], ""]]  # seed BLEU 100 and 60.65
    baseline = [[THREE[0], "", ""], THREE]  # 13.53 and 100
    # four rounds: (sentence ids, baseline's seeds, system's seeds); a score: m + sqrt(2) (drawn seeds' mean - m)
    draws = SeedDraws(sentences=np.array([[0, 1, 2], [2, 2, 2], [1, 1, 2], [0, 0, 0]]),
                      seeds_a=np.array([[0, 1], [0, 0], [0, 0], [0, 1]]),
                      seeds_b=np.array([[0, 1], [0, 0], [0, 1], [1, 0]]))
    scale = math.sqrt(2)
    deltas = [(100 + bleu_of_copies(2)) / 2 - (bleu_of_copies(1) + 100) / 2,  # the test set itself: 23.56
              # sentence 3 thrice: system 50 + sqrt(2) 50, baseline 50 - sqrt(2) 50
              (50 + scale * 50) - (50 - scale * 50),
              # sentences 2, 2, 3: the system's seeds 100 and 60.65, both drawn; the baseline's 0 and 100, seed 1 twice
              (100 + bleu_of_copies(2)) / 2 - (50 - scale * 50),
              100 - 100]  # sentence 1 thrice: everyone has it
    report = seed_bootstrap(baseline, system, THREE, draws=draws)
    bleu = report["BLEU"]
    assert bleu["a"] == pytest.approx((bleu_of_copies(1) + 100) / 2) and bleu["b"] == pytest.approx(80.3265, abs=1e-4)
    assert bleu["delta"] == pytest.approx(deltas[0])
    # one of four differences <= 0, all >= 0: p = 2 * (1 + 1) / (4 + 1), MC error 2 sqrt(q (1 - q) / 4), q = 0.4
    assert bleu["p_value"] == pytest.approx(0.8) and bleu["p_mc_se"] == pytest.approx(2 * math.sqrt(0.4 * 0.6 / 4))
    assert bleu["delta_ci"] == pytest.approx(list(np.percentile(deltas, [2.5, 97.5])))
    # Welch's test (its formula by hand: test_welch_test_by_hand) over each system's seed scores, B's against A's
    assert bleu["welch"] == pytest.approx(welch_test([bleu_of_copies(1), 100], [100, bleu_of_copies(2)]))
    assert (report["n_samples"], report["seeds_a"], report["seeds_b"]) == (4, 2, 2)
    assert set(report) >= {"BLEU", "chrF", "test"} and report["test"] == "seed-aware paired bootstrap"


def test_the_scaled_seed_resampling_gives_the_unbiased_variance_of_a_mean_of_seeds():
    # seeds scoring 1, 2, 6 (variance 7): resampled mean variance (2 / 3) 7 / 3, scaled by sqrt(3 / 2): 7 / 3
    assert seed_scale(3) == pytest.approx(math.sqrt(1.5)) and seed_scale(1) == 1.0
    draws = np.array(list(itertools.product(range(3), repeat=3)))
    scores = np.tile([1.0, 2.0, 6.0], (27, 1))
    plain = np.take_along_axis(scores, draws, axis=1).mean(axis=1)
    assert plain.var() == pytest.approx(14 / 9)
    scaled = resampled_seed_means(scores, draws)
    assert scaled.mean() == pytest.approx(3.0) and scaled.var() == pytest.approx(7 / 3)


def test_welch_test_by_hand():
    # a = 0, 2 and b = 3, 5: t = 3 / sqrt(2 / 2 + 2 / 2) = 2.1213, df 2, P(|T| > t) = 1 - t / sqrt(t^2 + 2)
    test = welch_test([0, 2], [3, 5])
    t = 3 / math.sqrt(2)
    assert test["t"] == pytest.approx(t) and test["df"] == pytest.approx(2.0)
    assert test["p_value"] == pytest.approx(1 - t / math.sqrt(t * t + 2))  # 0.1679
    # b without spread: df = 1 (Cauchy), t = (2 - 1) / 1: P(|T| > 1) = 1 - 2 atan(1) / pi = 0.5
    cauchy = welch_test([0, 2], [2, 2])
    assert (cauchy["t"], cauchy["df"], cauchy["p_value"]) == pytest.approx((1.0, 1.0, 0.5))
    assert welch_test([0, 2], [5, 3])["t"] == pytest.approx(t)  # the order of the seeds does not matter
    assert welch_test([1], [2, 3]) is None and welch_test([1, 1], [2, 2]) is None  # one seed; no spread at all


def test_the_monte_carlo_error_of_a_two_sided_p():
    # p = 0.05 is twice a tail share of 0.025: 2 sqrt(0.025 x 0.975 / 10,000) = 0.0031225
    assert mc_standard_error(0.05, 10_000) == pytest.approx(0.0031225, abs=1e-7)
    assert mc_standard_error(1.0, 100) == pytest.approx(2 * 0.5 / 10)  # q = 0.5: the largest error


def test_vectorised_bleu_and_chrf_equal_sacrebleus_on_any_sums_of_sentence_statistics():
    rng = np.random.default_rng(3)
    hyps = HYPOTHESES + ["", "a", SEED_2[4]]
    refs = REFERENCES + ["A dog.", "a", "People are walking."]
    for name, metric in (("BLEU", BLEU()), ("chrF", CHRF())):
        stats = sentence_statistics(name, hyps, refs)
        # random resamples, single sentences (zero matches of some order, an empty hypothesis) and all zeros
        counts = np.vstack([rng.integers(0, 3, (40, len(hyps))), np.eye(len(hyps)), np.zeros((1, len(hyps)))])
        rows = counts @ stats
        expected = [metric._compute_score_from_stats(list(row)).score for row in rows]
        assert scores_from_statistics(metric, rows) == pytest.approx(expected, abs=1e-9)
        whole = scores_from_statistics(metric, stats.sum(axis=0, keepdims=True))[0]
        assert whole == pytest.approx(metric.corpus_score(hyps, [refs]).score)


def as_seed_bootstrap_computes_it(versus: dict, system: list[list[str]]) -> None:
    """``versus``, a record's test of ``system`` against BASE_SEEDS (50 rounds), field by field as seed_bootstrap
    computes it (pytest.approx takes no dict that holds a list, delta_ci, since pytest 9.2)."""
    bootstrap = seed_bootstrap(BASE_SEEDS, system, REFERENCES, n_samples=50)
    assert (versus["seeds_a"], versus["seeds_b"]) == (3, len(system))
    assert sorted(versus["BLEU"]) == sorted(bootstrap["BLEU"])
    for field, value in bootstrap["BLEU"].items():
        assert versus["BLEU"][field] == (pytest.approx(value) if value is not None else None), field


def test_seed_bootstrap_over_random_draws():
    empty = [[""] * 3, [""] * 3, [""] * 3]
    # every round: 100 against 0, so no round is at or below 0: p = 2 / (n + 1), whatever the draws
    report = seed_bootstrap(empty, [THREE, THREE], THREE, n_samples=99, seed=7)
    assert report["BLEU"]["p_value"] == pytest.approx(0.02) and report["BLEU"]["delta"] == pytest.approx(100)
    assert (report["seeds_a"], report["seeds_b"]) == (3, 2)  # another number of seeds: nothing is paired by seed
    # a system against itself, one seed: every round's difference is 0
    same = seed_bootstrap([HYPOTHESES], [HYPOTHESES], REFERENCES, n_samples=50)
    assert same["BLEU"]["p_value"] == 1.0 and same["chrF"]["p_value"] == 1.0
    # the same seed draws from the same seed
    again = seed_bootstrap([HYPOTHESES, SEED_2], [SEED_2], REFERENCES, n_samples=50, seed=3)
    assert again == seed_bootstrap([HYPOTHESES, SEED_2], [SEED_2], REFERENCES, n_samples=50, seed=3)


def test_score_command_over_seeds_records_mean_sd_and_seed_aware_p_values(tmp_path, files, bases):
    ref, hyp = files
    hyp_2 = write_lines(tmp_path / "hyp2.txt", SEED_2)
    base_1, base_2, base_3 = bases
    record_path = tmp_path / "mask.seeds.run.json"
    score_cli.main([f"{hyp},{hyp_2}", str(ref), f"{base_1},{base_2},{base_3}", "--bootstrap", "50",
                    *record_options(tmp_path, record_path, "mask", "fairseq-train", "data", "--seed", "1",
                                    walls=(60, 80)),
                    "--baseline-name", "sequence", "--device", "cpu", "--run-seeds", "1,2"])
    record = load_record(record_path)
    expected = seed_scores([HYPOTHESES, SEED_2], REFERENCES)
    assert record["seeds"] == 2 and record["seed_list"] == [1, 2]
    assert record["device"] == "cpu" and record["wall_time_s"] == 70
    assert record["metrics"]["BLEU"] == pytest.approx(expected["mean"]["BLEU"])
    assert record["metrics_sd"]["BLEU"] == pytest.approx(expected["sd"]["BLEU"])
    assert record["per_seed_metrics"]["BLEU"] == [seed["BLEU"] for seed in expected["per_seed"]]
    as_seed_bootstrap_computes_it(record["significance"]["sequence"], [HYPOTHESES, SEED_2])  # 3 seeds against 2
    assert record["score_command"] == (f"fairseq-syntax-score {hyp},{hyp_2} {ref} {base_1},{base_2},{base_3} "
                                       "--bootstrap 50 --seed 12345 --baseline-name sequence")
    table = render_markdown([record])
    assert (f"| mask | parse | 2: 1, 2 | {expected['mean']['BLEU']:.2f} ± {expected['sd']['BLEU']:.2f} | "
            f"{expected['mean']['chrF']:.2f} ± {expected['sd']['chrF']:.2f} | – | 4.0 |") in table
    with pytest.raises(SystemExit):  # a seed for each output
        score_cli.main([f"{hyp},{hyp_2}", str(ref), "--run-seeds", "1"])
    # without --bootstrap: 10,000 rounds over seeds (scoring.SEED_BOOTSTRAP_ROUNDS), sacrebleu's 1,000 for one run
    over = score_cli.main([f"{hyp},{hyp_2}", str(ref), str(base_1)])
    one = score_cli.main([str(hyp), str(ref), str(base_1)])
    assert (over["significance"][str(base_1)]["n_samples"], one["significance"][str(base_1)]["n_samples"]) == (
        10_000, 1000)
    # a control's one seed against its method's three: the baseline's decodes read one by one, the seed-aware test
    score_cli.main([str(hyp), str(ref), f"{base_1},{base_2},{base_3}", "--bootstrap", "50",
                    *record_options(tmp_path, record_path, "mask_random", "fairseq-train", "data"),
                    "--baseline-name", "mask", "--run-seeds", "1"])
    record = load_record(record_path)
    assert record["seeds"] == 1 and record["seed_list"] == [1]
    as_seed_bootstrap_computes_it(record["significance"]["mask"], [HYPOTHESES])
    assert record["significance"]["mask"]["BLEU"]["welch"] is None  # one seed on a side: no spread to test
    # without --train-command: no command or device of its own (a rescore keeps none): its first seed's record's
    score_cli.main([str(hyp), str(ref), *record_options(tmp_path, record_path, "mask")[:-2], "--run-seeds", "2"])
    assert not {"command_argv", "device"} & set(json.loads(record_path.read_text()))
    seed_2 = json.loads(record_path.read_text()) | {"seed": 2, "command_argv": ["fairseq-train", "two"], "device": "x"}
    (tmp_path / "mask.seed2.run.json").write_text(json.dumps(seed_2))
    assert (load_record(record_path)["command"], load_record(record_path)["device"]) == ("fairseq-train two", "x")


def test_a_record_over_seeds_keeps_only_what_its_seeds_records_do_not_give_it(tmp_path, files, bases):
    ref, hyp = files
    hyp_2 = write_lines(tmp_path / "hyp2.txt", SEED_2)
    runs, logs = tmp_path / "runs", []
    for seed, (output, wall) in enumerate(((hyp, 60), (hyp_2, 80)), start=1):  # each seed's run and its record
        (tmp_path / f"seed{seed}").mkdir()
        options = record_options(tmp_path / f"seed{seed}", runs / f"mask.seed{seed}.run.json", "mask", "fairseq-train",
                                 walls=(wall,))
        score_cli.main([str(output), str(ref), *options, "--run-seed", str(seed)])
        logs.append(options[options.index("--train-log") + 1])
    over = runs / "mask.seeds.run.json"
    command = [f"{hyp},{hyp_2}", str(ref), str(bases[0]), "--bootstrap", "50", "--baseline-name", "sequence",
               "--record", str(over), "--dataset", "multi30k", "--system", "mask", "--arch", "a", "--train-log",
               ",".join(logs), "--run-seeds", "1,2"]
    score_cli.main(command)
    # what its seeds' records give it, bit for bit, is theirs: its mean, sds, per-seed scores, logs and run facts
    assert list(json.loads(over.read_text())) == ["system", "significance", "score_command_argv", "seed_list"]
    record, expected = load_record(over), seed_scores([HYPOTHESES, SEED_2], REFERENCES)
    assert (record["metrics"], record["metrics_sd"]) == (expected["mean"], expected["sd"])
    assert record["per_seed_metrics"]["BLEU"] == [seed["BLEU"] for seed in expected["per_seed"]]
    assert (record["dataset"], record["arch"], record["seeds"], record["wall_time_s"], record["train_log"]) == (
        "multi30k", "a", 2, 70.0, ",".join(logs))
    # a seed's record scored otherwise (here: its BLEU changed by hand): the scores over seeds are the record's own
    seed_2 = json.loads((runs / "mask.seed2.run.json").read_text())
    seed_2["metrics"]["BLEU"] += 1
    (runs / "mask.seed2.run.json").write_text(json.dumps(seed_2))
    score_cli.main(command)
    assert list(json.loads(over.read_text())) == ["system", "metrics", "significance", "score_command_argv",
                                                  "seed_list", "metrics_sd", "per_seed_metrics"]
    assert load_record(over)["metrics"]["BLEU"] == expected["mean"]["BLEU"]
