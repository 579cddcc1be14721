#!/usr/bin/env python3
"""Write preprocess/RESULTS.md and RESULTS.json: the parsers and tagger trained here, from their run records, and the
parsing throughput and data-path scaling measured here.

    python3 preprocess/make_results.py

Reads ``preprocess/runs/*.json`` (``train_parser.py``'s record of one model: a row per metric),
``measurements/throughput.json`` (``measure_throughput.py``) and ``measurements/scaling.json``
(``measure_scaling.py``); RESULTS.md says what each table holds. A missing measurement's section says how to make
it."""
import argparse
import os
import textwrap

from fairseq_syntax.evaluation.tables import Cell, Table, number_cell, write_results
from fairseq_syntax.parsing.provenance import read_parser_records
from fairseq_syntax.parsing.text import read_json

HERE = os.path.dirname(os.path.abspath(__file__))
MEASUREMENTS = os.path.join(HERE, "measurements")
PARSERS = ("tagger", "crf-con", "biaffine", "benepar")  # measure_throughput.py's, in its order
LINEAR_TOLERANCE = 0.15  # a step more than 15% slower per line than at the smallest size is not linear
HOLDING_BYTES = 512  # a step whose peak grows by more than this a line holds the corpus in memory
WIDTH = 116  # Markdown paragraphs are wrapped at this width
WMT14_LINES = 4_500_000  # WMT'14 En-De's training pairs, for the memory extrapolation
#: the goal set for each model before it was trained, on its evaluation data
#: (a model trained later, e.g. the German parser, had none)
GOALS = {("tagger-ptb-sample.pt", "POS accuracy"): 96.0, ("crf-con-ptb-sample.pt", "F1"): 88.0,
         ("biaffine-dep-ud-ewt.pt", "UAS"): 88.0, ("biaffine-dep-ud-ewt.pt", "LAS"): 85.0}


def results_table(records: list) -> Table:
    table = Table(["parser", "model", "data", "split", "metric", "value", "goal", "epochs", "best epoch", "minutes",
                   "device", "sentences/s"], "lllllrrrrrlr")
    for record in records:
        # the evaluation split, then a test split neither trained on nor selected by (train_parser.py --test)
        for split in (record, *([record["test"]] if record.get("test") else [])):
            for metric, value in split["scores"].items():
                goal = GOALS.get((record["model"], metric)) if split is record else None
                table.add(record["parser"], record["model"], record["data"], split["split"], metric,
                          number_cell(value, ".2f"), number_cell(goal, "g"), record["epochs"], record["best_epoch"],
                          number_cell(record["minutes"], ".0f"), record["device"],
                          number_cell(split["sentences_per_second"], ".0f"))
    return table


def record_notes(records: list) -> list[str]:
    """A line under the parsers table for each record with a ``note`` (``train_parser.py --note``)."""
    return [f"- `{record['model']}`: {record['note']}" for record in records if record.get("note")]


def load_measurement(name: str, folder: str = MEASUREMENTS) -> dict | None:
    """``folder/NAME.json`` (a measure_*.py record), or None when it is not there."""
    path = os.path.join(folder, f"{name}.json")
    return read_json(path) if os.path.exists(path) else None


def throughput_table(record: dict) -> Table:
    """One row per parser, device and worker count; the speed-up is over the same parser on one CPU worker. A parser
    of ``PARSERS`` without rows gets one saying it was not measured, and why."""
    table = Table(["parser", "model", "device", "workers", "sentences", "sentences/s", "speed-up over 1 CPU worker",
                   "sentences/s, whole command", "load average before"], "llllrrrrr")
    rows = record["rows"]
    single = {row["parser"]: row["sentences_per_second"] for row in rows
              if row["device"] == "cpu" and row["workers"] == 1}
    for parser in [*PARSERS, *sorted({row["parser"] for row in rows} - set(PARSERS))]:
        measured = [row for row in rows if row["parser"] == parser]
        if not measured:
            reason = record.get("not_measured", {}).get(parser, "no model given")
            table.add(parser, Cell(None, f"not measured: {reason}"), "–", *[number_cell(None, "")] * 6)
        for row in sorted(measured, key=lambda row: (row["device"] != "cpu", row["workers"])):
            speedup = row["sentences_per_second"] / single[parser] if single.get(parser) else None
            table.add(parser, row["model"], row["device"], row["workers"], row["sentences"],
                      number_cell(row["sentences_per_second"], ".1f"),
                      Cell(speedup, "–" if speedup is None else f"{speedup:.2f}x"),
                      number_cell(row["wall_sentences_per_second"], ".1f"), number_cell(row["load_average"], ".1f"))
    return table


def by_size(record: dict) -> list[dict]:
    return sorted(record["sizes"], key=lambda size: size["lines"])


def scaling_rows(record: dict) -> list[dict]:
    """Per step and size: wall and CPU seconds and peak memory per line, and the time per line against the smallest
    size's (CPU time, user + system with workers)."""
    sizes = by_size(record)
    rows = []
    for step in sizes[0]["steps"]:
        first = sizes[0]["steps"][step]
        first_cost, first_wall = first["cpu_seconds"] / sizes[0]["lines"], first["seconds"] / sizes[0]["lines"]
        for size in sizes:
            measured = size["steps"][step]
            per_line, wall_per_line = measured["cpu_seconds"] / size["lines"], measured["seconds"] / size["lines"]
            ratio = per_line / first_cost if first_cost > 0 else None
            rows.append({"step": step, "lines": size["lines"], "seconds": measured["seconds"],
                         "cpu_seconds": measured["cpu_seconds"], "cpu_ms_per_line": 1000 * per_line,
                         "per_line_vs_smallest": ratio,
                         "wall_per_line_vs_smallest": wall_per_line / first_wall if first_wall > 0 else None,
                         "peak_mb": measured["peak_mb"], "peak_kb_per_line": measured["peak_mb"] * 1024 / size["lines"],
                         "load_average": measured.get("load_average"),
                         "grows_faster_than_linearly": ratio is not None and ratio > 1 + LINEAR_TOLERANCE})
    return rows


def memory_rows(record: dict) -> list[dict]:
    """Per step: the memory each further line adds between the smallest and the largest size, and the peak
    extrapolated to WMT'14's lines (a straight line, never falling)."""
    sizes = by_size(record)
    first, last = sizes[0], sizes[-1]
    rows = []
    for step in first["steps"]:
        low, high = first["steps"][step]["peak_mb"], last["steps"][step]["peak_mb"]
        added = (high - low) * 2**20 / (last["lines"] - first["lines"]) if last["lines"] > first["lines"] else None
        # a peak lower at the larger size is noise around a flat line: no growth is extrapolated from it
        at_wmt = None if added is None else (low * 2**20 + max(added, 0) * (WMT14_LINES - first["lines"])) / 2**30
        rows.append({"step": step, "peak_mb_smallest": low, "peak_mb_largest": high, "bytes_per_further_line": added,
                     "peak_gb_at_wmt14": at_wmt})
    return rows


def scaling_tables(record: dict) -> tuple[Table, Table, Table]:
    """(time and memory per step and size, memory growth per step, side data bytes per word per size)."""
    steps = Table(["step", "lines", "wall s", "CPU s", "CPU ms per line", "CPU per line vs smallest",
                   "wall per line vs smallest", "load average before", "peak MB", "peak kB per line", "linear"],
                  "lrrrrrrrrrl")
    for row in scaling_rows(record):
        ratio = row["per_line_vs_smallest"]
        verdict = (f"not linear: {100 * (ratio - 1):+.0f}% per line" if row["grows_faster_than_linearly"]
                   else "yes" if ratio is not None else "–")
        steps.add(row["step"], row["lines"], *(number_cell(row[key], spec) for key, spec in (
            ("seconds", ".1f"), ("cpu_seconds", ".1f"), ("cpu_ms_per_line", ".3f"), ("per_line_vs_smallest", ".2f"),
            ("wall_per_line_vs_smallest", ".2f"), ("load_average", ".1f"), ("peak_mb", ".0f"),
            ("peak_kb_per_line", ".2f"))), Cell(not row["grows_faster_than_linearly"], verdict))
    memory = Table(["step", "peak MB, smallest", "peak MB, largest", "bytes each further line adds",
                    f"peak GB at {WMT14_LINES / 1e6:g}M lines (extrapolated)"], "lrrrr")
    for row in memory_rows(record):
        memory.add(row["step"], *(number_cell(row[key], spec) for key, spec in (
            ("peak_mb_smallest", ".0f"), ("peak_mb_largest", ".0f"), ("bytes_per_further_line", ".0f"),
            ("peak_gb_at_wmt14", ".1f"))))
    side = Table(["lines", "source words", "LDD side data, bytes per word", "preorder parents, bytes per word",
                  "arcs read by the LDD step (.jsonl.gz), bytes per word",
                  "tiny parser's arcs (.jsonl.gz), bytes per word"],
                 "rrrrrr")
    for size in by_size(record):
        arcs = size.get("arcs_file_bytes_per_word", {})
        side.add(size["lines"], size["words"], number_cell(size["ldd_bytes_per_word"], ".1f"),
                 number_cell(size["parents_bytes_per_word"], ".2f"), *(number_cell(arcs.get(key), ".1f")
                                                                  for key in ("ldd_input", "parser")))
    return steps, memory, side


def paragraph(text: str) -> list[str]:
    """``text`` as Markdown lines of at most ``WIDTH`` characters, and a blank line after."""
    return [*textwrap.wrap(text, WIDTH, break_long_words=False, break_on_hyphens=False), ""]


def note_and_command(record: dict) -> list[str]:
    note = paragraph(f"Note: {record['note']}") if record.get("note") else []
    return note + ["```", record.get("command", "python3 " + record["generated_by"]), "```", ""]


def throughput_section(record: dict | None) -> tuple[list[str], dict | None]:
    lines = ["## Parsing throughput", ""]
    if record is None:
        return lines + paragraph(
            "Not measured yet: `preprocess/measure_throughput.py` (the command in its docstring) with the parsers of "
            "the table above writes `preprocess/measurements/throughput.json`; then run "
            "`python3 preprocess/make_results.py`."), None
    table = throughput_table(record)
    machine = record["machine"]
    repeats = record["rows"][0]["repeats"] if record["rows"] else "–"
    lines += paragraph(
        f"From `preprocess/measurements/throughput.json` (`{record['generated_by']}`): the first {record['lines']} "
        f"lines of `{record['input']}`, tokenized once beforehand, parsed by each parse command with `--workers W "
        f"--num-shards W` (one torch thread a worker) on {machine['cpu']} ({machine['cores']} cores), torch "
        f"{machine['torch']}; the median of {repeats} runs. *sentences/s*: the sentences over the parsing seconds of "
        "the slowest worker (models loaded: the rate a long corpus gets); *whole command*: over the wall time of the "
        "command, process starts, model loading and the merge included. *load average before*: the machine's "
        "1-minute load average when the run began; above 0, other work shared the cores and the rates are below the "
        "machine's own. The tagger is timed alone (`measure_throughput.py tag`), as `parse_constituency.py --tagger` "
        "runs it after crf-con.")
    lines += [*table.lines(), ""]
    if not any(row["device"] == "cuda" for row in record["rows"]):
        lines += paragraph("No GPU was here: no GPU row (the same command on a machine with CUDA adds one).")
    lines += note_and_command(record)
    lines += paragraph("Each measured run's command is its row's `command` in the record (`MODELS/`: the models given, "
                       "`SAMPLE`: the tokenized sample, `WORK`: a temporary folder).")
    return lines, {"table": table.json(lists=True), "record": "preprocess/measurements/throughput.json"}


def scaling_section(record: dict | None) -> tuple[list[str], dict | None]:
    lines = ["## The data path at scale", ""]
    if record is None:
        return lines + paragraph(
            "Not measured yet: `python3 preprocess/measure_scaling.py --work WORK` writes "
            "`preprocess/measurements/scaling.json`; then run `python3 preprocess/make_results.py`."), None
    steps, memory, side = scaling_tables(record)
    sizes = ", ".join(str(size["lines"]) for size in by_size(record))
    flagged = sorted({row["step"] for row in scaling_rows(record) if row["grows_faster_than_linearly"]})
    low, high = record["words_per_sentence"]
    lines += paragraph(
        f"From `preprocess/measurements/scaling.json` (`{record['generated_by']}`): synthetic corpora of {sizes} "
        f"lines ({low}-{high} made-up words a sentence, `bench/synthetic.py`) through every step of the data path, "
        f"each step a process of its own, with `--workers {record['workers']}` where it has one, on {record['cpu']} "
        f"({record['cores']} cores), with tiny parsers ({', '.join(record['models'].values())}: fast and wrong, so "
        "that the steps around the parser are measured; a real parser's rate is the table above). *peak MB*: the "
        "largest resident set of the step's process and of its workers. The cost is the CPU time (user + system, "
        "workers included): where other work shares the cores (*load average before*: the 1-minute load when the "
        "step began), the wall time measures the share the step got as much as the step. A step whose CPU time per "
        f"line exceeds the smallest size's by more than {100 * LINEAR_TOLERANCE:.0f}% is named *not linear*; fixed "
        "costs (process start, model loading) make the time per line fall with size where the step itself is "
        "linear.")
    lines += [*steps.lines(), ""]
    lines += paragraph("CPU time per line grows faster than linearly in: "
                       + (", ".join(flagged) if flagged else "no step") + ".")
    lines += paragraph(
        "Memory: the peak's growth from the smallest to the largest size, per further line, and the peak that gives "
        f"at WMT'14's {WMT14_LINES / 1e6:g}M lines on a straight line (a step that streams its input adds next to "
        "nothing a line; one that holds the corpus in memory adds what a line costs there).")
    lines += [*memory.lines(), ""]
    holding = [row for row in memory_rows(record)
               if row["bytes_per_further_line"] is not None and row["bytes_per_further_line"] > HOLDING_BYTES]
    lines += paragraph(
        f"Peak memory grows with the corpus by more than {HOLDING_BYTES} bytes a line (the step holds its input in "
        "memory) in: " + (", ".join(f"{row['step']} ({row['bytes_per_further_line'] / 1024:.1f} kB a line: "
                                     f"{row['peak_gb_at_wmt14']:.1f} GB at {WMT14_LINES / 1e6:g}M lines)"
                                     for row in holding) if holding else "no step") + ".")
    lines += paragraph(
        "Side data on disk (`.bin` + `.idx` of the training split), bytes per source word. The LDD step reads "
        "`bench/synthetic.py`'s arc distributions of the same sentences (3 heads a word, 2 labels a head: the "
        "sparsity `bench/RESULTS.md` measures the side data on), not the tiny parser's, whose distributions are "
        "peaked on one head (`measure_scaling.py`'s docstring); both arcs files' sizes are given.")
    lines += [*side.lines(), ""]
    lines += note_and_command(record)
    data = {"steps": steps.json(lists=True), "memory": memory.json(lists=True), "side_data": side.json(lists=True),
            "not_linear": flagged, "holds_the_corpus": [row["step"] for row in holding],
            "record": "preprocess/measurements/scaling.json"}
    return lines, data


def render(records: list, throughput: dict | None = None, scaling: dict | None = None) -> tuple:
    table = results_table(records)
    lines = [
        "# Parsers and tagger trained offline",
        "",
        "Generated by `python3 preprocess/make_results.py` from the run records in `preprocess/runs/` (written by",
        "`preprocess/train_parser.py`) and the measurements in `preprocess/measurements/` (the sections below);",
        "RESULTS.json holds the same tables, numbers unrounded (each measurement's record is the file it names). Do not",
        "edit by hand.",
        "",
        "Scores in %: POS accuracy over every word; labeled bracketing F1 with EVALB's conventions (punctuation",
        "deleted by gold tag, ADVP = PRT); UAS / LAS without punctuation, MST decoding. *minutes*: training and dev",
        "scoring over every sitting; *sentences/s*: labelling the evaluation sentences once, on that device (what to",
        "plan a corpus by). *goal*: the score set as the goal before training.",
        "",
        *table.lines(),
        "",
        *([*record_notes(records), ""] if record_notes(records) else []),
        "## Commands",
        "",
        "Each command resumes from its last finished epoch when run again (`--epochs` is the total), and rewrites its",
        "record; a record written with `--epochs` equal to the epochs already trained just re-evaluates the model. A",
        "model below its goal continues with its command and the recipes' total (`examples/train_parsers.py`: 60",
        "epochs for crf-con and the biaffine parser), on a GPU in minutes.",
        "",
        "```",
        *(record["command"] for record in records),
        "```",
        "",
    ]
    throughput_lines, throughput_data = throughput_section(throughput)
    scaling_lines, scaling_data = scaling_section(scaling)
    lines += throughput_lines + scaling_lines
    data = {"generated_by": "preprocess/make_results.py", "goals": {f"{p} {m}": g for (p, m), g in GOALS.items()},
            "table": table.json(lists=True), "throughput": throughput_data, "scaling": scaling_data}
    return "\n".join(lines).rstrip("\n") + "\n", data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default=os.path.join(HERE, "runs"), help="folder of the run records")
    parser.add_argument("--measurements", default=MEASUREMENTS,
                        help="folder of measure_throughput.py's throughput.json and measure_scaling.py's scaling.json")
    parser.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"), help="RESULTS.md (RESULTS.json beside)")
    args = parser.parse_args()
    records = read_parser_records(args.runs)
    if not records:
        raise SystemExit(f"make_results.py: no run record in {args.runs} (train a parser with train_parser.py)")
    write_results(args.out, *render(records, load_measurement("throughput", args.measurements),
                                    load_measurement("scaling", args.measurements)))


if __name__ == "__main__":
    main()
