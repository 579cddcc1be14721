"""preprocess/'s measurement scripts and make_results.py's tables against hand-written records."""
import json
import runpy
import sys
from pathlib import Path

import pytest

from fairseq_syntax.evaluation.tables import table_rows

REPO = Path(__file__).resolve().parents[2]
PREPROCESS = REPO / "preprocess"


@pytest.fixture(scope="module")
def make_results():
    return runpy.run_path(str(PREPROCESS / "make_results.py"))


def throughput_row(parser, device, workers, sentences, parse_seconds, wall_seconds, load=0.5):
    return {"parser": parser, "model": f"{parser}.pt", "device": device, "workers": workers, "sentences": sentences,
            "words": 10 * sentences, "repeats": 1, "parse_seconds": parse_seconds, "wall_seconds": wall_seconds,
            "sentences_per_second": sentences / parse_seconds, "wall_sentences_per_second": sentences / wall_seconds,
            "load_average": load, "fallbacks": 0, "command": f"python3 parse {parser} --workers {workers}"}


THROUGHPUT = {
    "generated_by": "preprocess/measure_throughput.py", "command": "python3 preprocess/measure_throughput.py ...",
    "input": "train.en.gz", "lines": 100, "tokenize": "en", "note": "both cores were shared with two trainings",
    "not_measured": {"benepar": "no model given"},
    "machine": {"cpu": "Some CPU", "cores": 2, "torch": "2.x", "python": "3.11", "gpu": "Some GPU"},
    "rows": [
        throughput_row("tagger", "cpu", 1, 100, 10.0, 12.0),  # 10 sentences/s
        throughput_row("tagger", "cpu", 2, 100, 4.0, 8.0),  # 25 sentences/s: 2.5 times one worker's
        throughput_row("crf-con", "cuda", 1, 100, 2.0, 5.0),  # 50 sentences/s: 10 times one CPU worker's
        throughput_row("crf-con", "cpu", 1, 100, 20.0, 25.0),  # 5 sentences/s
    ],
}


def test_throughput_table_gives_the_speed_up_over_one_cpu_worker(make_results):
    rows = make_results["throughput_table"](THROUGHPUT).json()["rows"]
    table = {(row["parser"], row["device"], row["workers"]): row for row in rows}
    assert table["tagger", "cpu", 1]["sentences/s"] == 10.0
    assert table["tagger", "cpu", 2]["speed-up over 1 CPU worker"] == pytest.approx(2.5)
    assert table["crf-con", "cuda", 1]["speed-up over 1 CPU worker"] == pytest.approx(10.0)
    assert table["tagger", "cpu", 2]["sentences/s, whole command"] == pytest.approx(12.5)
    # every parser of the four has a row, in their order; the ones without a model say so
    assert [row["parser"] for row in rows] == ["tagger", "tagger", "crf-con", "crf-con", "biaffine", "benepar"]
    assert [row["device"] for row in rows[:4]] == ["cpu", "cpu", "cpu", "cuda"]
    markdown, data = make_results["render"]([], THROUGHPUT, None)
    assert "| benepar | not measured: no model given |" in markdown
    assert "| tagger | tagger.pt | cpu | 2 | 100 | 25.0 | 2.50x | 12.5 | 0.5 |" in markdown
    assert "Note: both cores were shared with two trainings" in markdown
    assert "No GPU was here" not in markdown  # there is a cuda row
    assert table_rows(data["throughput"]["table"]) == rows


def scaling_step(seconds, cpu_seconds, peak_mb):
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, "peak_mb": peak_mb, "load_average": 2.0}


SCALING = {
    "generated_by": "preprocess/measure_scaling.py", "command": "python3 preprocess/measure_scaling.py --sizes ...",
    "note": None, "workers": 1, "merges": 100, "words_per_sentence": [5, 45], "cpu": "Some CPU", "cores": 2,
    "models": {"crf-con": "crf-con-tiny.pt", "biaffine": "biaffine-tiny.pt"},
    "sizes": [  # given largest first: the tables sort them
        {"lines": 2000, "words": 50000, "ldd_bytes_per_word": 31.0, "parents_bytes_per_word": 2.5,
         "steps": {"linear": scaling_step(30.0, 20.0, 110.0),  # 10 ms a line at both sizes
                   "slower": scaling_step(30.0, 24.0, 50.0),  # 12 ms a line: 20% more than at 1000 lines
                   "within": scaling_step(30.0, 22.8, 48.0)}},  # 11.4 ms a line: 14% more, not flagged
        {"lines": 1000, "words": 25000, "ldd_bytes_per_word": 32.0, "parents_bytes_per_word": 2.5,
         "steps": {"linear": scaling_step(15.0, 10.0, 100.0), "slower": scaling_step(15.0, 10.0, 50.0),
                   "within": scaling_step(15.0, 10.0, 50.0)}},
    ],
}


def test_scaling_names_a_step_more_than_15_percent_slower_per_line(make_results):
    rows = {(row["step"], row["lines"]): row for row in make_results["scaling_rows"](SCALING)}
    assert rows["linear", 2000]["cpu_ms_per_line"] == pytest.approx(10.0)
    assert rows["linear", 2000]["per_line_vs_smallest"] == pytest.approx(1.0)
    assert rows["slower", 2000]["per_line_vs_smallest"] == pytest.approx(1.2)
    assert rows["within", 2000]["per_line_vs_smallest"] == pytest.approx(1.14)
    assert [step for (step, lines), row in rows.items() if row["grows_faster_than_linearly"]] == ["slower"]
    assert rows["linear", 1000]["wall_per_line_vs_smallest"] == pytest.approx(1.0)
    assert rows["linear", 1000]["peak_kb_per_line"] == pytest.approx(100 * 1024 / 1000)
    markdown, data = make_results["render"]([], None, SCALING)
    assert "CPU time per line grows faster than linearly in: slower." in markdown
    assert "| slower | 2000 | 30.0 | 24.0 | 12.000 | 1.20 | 1.00 | 2.0 | 50 | 25.60 | not linear: +20% per line |" \
        in markdown
    assert data["scaling"]["not_linear"] == ["slower"]
    assert "## Parsing throughput\n\nNot measured yet" in markdown


def test_scaling_memory_growth_per_line_and_at_wmt14_size(make_results):
    memory = {row["step"]: row for row in make_results["memory_rows"](SCALING)}
    # 100 MiB at 1000 lines, 110 MiB at 2000: 10 MiB for 1000 more lines
    assert memory["linear"]["bytes_per_further_line"] == pytest.approx(10 * 2**20 / 1000)
    # on that line, 4.5M lines hold 100 MiB + 4499 x 10 MiB = 45090 MiB
    assert memory["linear"]["peak_gb_at_wmt14"] == pytest.approx(45090 / 1024)
    assert memory["slower"]["bytes_per_further_line"] == 0 and memory["slower"]["peak_gb_at_wmt14"] == 50 / 1024
    # a peak 2 MiB lower at the larger size: the growth is given as measured, the extrapolation stays flat
    assert memory["within"]["bytes_per_further_line"] == pytest.approx(-2 * 2**20 / 1000)
    assert memory["within"]["peak_gb_at_wmt14"] == 50 / 1024
    markdown, data = make_results["render"]([], None, SCALING)
    assert ("Peak memory grows with the corpus by more than 512 bytes a line (the step holds its input in memory) in: "
            "linear (10.2 kB a line: 44.0 GB at 4.5M lines).") in " ".join(markdown.split())
    assert data["scaling"]["holds_the_corpus"] == ["linear"]
    side = make_results["scaling_tables"](SCALING)[2].json()["rows"]
    assert [(row["lines"], row["LDD side data, bytes per word"]) for row in side] == [(1000, 32.0), (2000, 31.0)]


# --- the scripts
@pytest.fixture(scope="module")
def measure_scaling():
    return runpy.run_path(str(PREPROCESS / "measure_scaling.py"))


def test_scaling_corpus_is_the_same_for_a_seed_and_counts_its_words(measure_scaling, tmp_path):
    words = measure_scaling["write_corpus"](str(tmp_path / "a"), 20, 1, 5, 9)
    measure_scaling["write_corpus"](str(tmp_path / "b"), 20, 1, 5, 9)
    source = (tmp_path / "a.en").read_text().splitlines()
    assert len(source) == 20 and len((tmp_path / "a.de").read_text().splitlines()) == 20
    assert all(5 <= len(line.split()) <= 9 for line in source) and words == sum(len(line.split()) for line in source)
    assert (tmp_path / "a.en").read_bytes() == (tmp_path / "b.en").read_bytes()
    assert "@@" not in (tmp_path / "a.de").read_text()  # words, before BPE
    from fairseq_syntax.parsing.text import open_text

    with open_text(str(tmp_path / "a.synthetic.arcs.jsonl.gz")) as arcs:  # the LDD step's input, of the same words
        assert [" ".join(json.loads(line)["words"]) for line in arcs] == source
    committed = json.loads((PREPROCESS / "measurements" / "scaling.json").read_text())["sizes"][0]["steps"]
    assert list(measure_scaling["steps"](str(tmp_path), {"crf-con": "c.pt", "biaffine": "b.pt"}, 1, 100)) == list(
        committed)  # the steps of the committed record, in its order


def test_timed_measures_a_childs_cpu_time_and_peak_memory(measure_scaling, tmp_path):
    # 200 MiB held, then 0.3 CPU seconds spent (CPU time, so a busy machine does not change it)
    child = ("import time\nheld = bytearray(200 * 2**20)\nheld[::4096] = b'x' * len(held[::4096])\n"
             "start = time.process_time()\nwhile time.process_time() - start < 0.3: pass\n")
    wall, cpu, peak = measure_scaling["timed"]([sys.executable, "-c", child], str(tmp_path / "log"))
    assert 200 <= peak < 300 and cpu >= 0.3 and wall >= cpu - 0.05
    with pytest.raises(SystemExit, match=r"exited 3; the end of .*log:\nboom"):
        measure_scaling["timed"]([sys.executable, "-c", "print('boom'); raise SystemExit(3)"],
                                 str(tmp_path / "log"))


def test_measure_throughput_times_the_tagger_at_one_and_two_workers(tagger_model, tmp_path):
    source = tmp_path / "input.txt"
    source.write_text("The cat sleeps.\nA dog runs.\n\nThe dog sleeps.\nA cat runs.\nThe end.\nNot read.\n")
    out = tmp_path / "throughput.json"
    main = runpy.run_path(str(PREPROCESS / "measure_throughput.py"))["main"]  # its workers: processes of their own
    main(["--input", str(source), "--tokenize", "en", "--lines", "6", "--tagger", tagger_model, "--workers", "1", "2",
          "--repeats", "1", "--no-gpu", "--out", str(out)])
    record = json.loads(out.read_text())
    assert record["not_measured"] == {"crf-con": "no model given", "biaffine": "no model given",
                                      "benepar": "no model given"}
    assert [(row["parser"], row["device"], row["workers"]) for row in record["rows"]] == [
        ("tagger", "cpu", 1), ("tagger", "cpu", 2)]
    for row in record["rows"]:
        assert row["sentences"] == 6 and row["fallbacks"] == 0  # an empty line is tagged empty, no fallback
        assert row["sentences_per_second"] == pytest.approx(6 / row["parse_seconds"])
        assert row["command"].startswith("python3 preprocess/measure_throughput.py tag --tagger MODELS/tagger.pt")
    assert "--workers 2 --num-shards 2" in record["rows"][1]["command"]


def test_the_tag_command_writes_one_line_of_tags_per_line_sharded_or_not(tagger_model, tmp_path):
    tag_main = runpy.run_path(str(PREPROCESS / "measure_throughput.py"))["tag_main"]
    source = tmp_path / "input.txt"
    source.write_text("the cat sleeps .\na dog runs .\n\nthe dog\n")
    common = ["--tagger", tagger_model, "--input", str(source), "--batch-size", "1", "--device", "cpu"]
    tag_main([*common, "--output", str(tmp_path / "single")])
    tag_main([*common, "--output", str(tmp_path / "sharded"), "--num-shards", "3"])  # 3 shards in this process
    tags = (tmp_path / "single").read_text().split("\n")
    assert [len(line.split()) for line in tags] == [4, 4, 0, 2, 0]  # 4 lines and the final newline
    assert (tmp_path / "sharded").read_text() == (tmp_path / "single").read_text()


def test_a_parser_records_note_is_shown_under_the_parsers_table(make_results):
    def record(model, **extra):
        return {"parser": "benepar", "model": model, "data": "ptb.mrg", "split": "held-out last 10%",
                "scores": {"F1": 55.6}, "epochs": 4, "best_epoch": 4, "minutes": 12.3, "device": "CPU",
                "sentences_per_second": 42.0, "command": f"python3 preprocess/train_parser.py benepar {model}",
                **extra}

    text, _ = make_results["render"]([record("a.pt", note="trained only to measure its speed"), record("b.pt")])
    lines = text.splitlines()
    commands = lines.index("## Commands")
    # the table, a blank line, one line per note (b.pt has none), a blank line
    assert lines[commands - 4].startswith("| benepar | b.pt |") and lines[commands - 3] == ""
    assert lines[commands - 2:commands] == ["- `a.pt`: trained only to measure its speed", ""]
