#!/usr/bin/env python3
r"""Parsing throughput: sentences per second of the POS tagger, crf-con, the biaffine parser and benepar at 1 and 2
workers on this machine's cores, through the parse commands' own ``--workers``, and on a GPU when one is here.

    python3 preprocess/measure_throughput.py --input ../shared/data/multi30k/train.en.gz --tokenize en \
        --lines 2000 --tagger examples/multi30k/work/models/tagger-ptb-sample.pt \
        --crf-con examples/multi30k/work/models/crf-con-ptb-sample.pt \
        --biaffine examples/multi30k/work/models/biaffine-dep-ud-ewt.pt
    python3 preprocess/make_results.py        # the table into preprocess/RESULTS.md

(``--benepar MODEL`` adds benepar.) The first ``--lines`` lines are tokenized once, untimed; each parser parses
them with ``--workers W --num-shards W`` for each W (one thread a worker, ``--device cpu``), ``--repeats`` times;
with CUDA once more on the GPU (``GPU_BATCH``). Per run: the slowest worker's parsing seconds, the command's wall
seconds, and the load average before it (``--note`` marks shared cores). Writes ``--out`` (JSON) for
``preprocess/make_results.py``.

``tag`` (``measure_throughput.py tag --tagger MODEL --input IN --output OUT``): the tagger alone as a parse
command, one line of tags per input line.

Temporary files go to ``TMPDIR``, removed at the end or when stopped (:mod:`fairseq_syntax.core.stopping`)."""
import argparse
import os
import platform
import runpy
import shlex
import statistics
import sys
import time
from itertools import islice

import torch

from fairseq_syntax.core.stopping import stopping_cleanly, temporary_directory
from fairseq_syntax.parsing import shards
from fairseq_syntax.parsing.batching import DEFAULT_BATCH_TOKENS
from fairseq_syntax.parsing.constituency import DEFAULT_BATCH_SIZE
from fairseq_syntax.parsing.shards import LINES, Outcome, ParseJob, model_identity
from fairseq_syntax.parsing.text import open_output
from fairseq_syntax.parsing.training_report import cpu_name, write_record

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "measurements", "throughput.json")
PARSERS = ("tagger", "crf-con", "biaffine", "benepar")
GPU_BATCH = ["--batch-size", "5000", "--batch-tokens", "50000"]  # a GPU wants large batches


# --- the tagger alone


def tag_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="measure_throughput.py tag", description="POS tags, one line per input line")
    parser.add_argument("--tagger", required=True, help="tagger model (preprocess/train_parser.py tagger)")
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--tokenize", metavar="LANG")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="sentences tagged together")
    parser.add_argument("--batch-tokens", type=int, default=DEFAULT_BATCH_TOKENS, help="padded words per batch")
    parser.add_argument("--threads", type=int, default=1)
    shards.add_arguments(parser)
    return parser


def tag_main(argv: list[str]) -> shards.ParseRun:
    parser = tag_parser()
    args = parser.parse_args(argv)
    shards.check_arguments(parser, args)
    torch.set_num_threads(args.threads)

    def load(device: str) -> shards.ParseFunction:
        from fairseq_syntax.parsing.tagger import load_tagger

        tagger = load_tagger(args.tagger, device, args.batch_tokens)

        def tag(lines, outputs, progress) -> Outcome:
            fallbacks, lines = [], iter(lines)
            while chunk := list(islice(lines, args.batch_size)):
                for line, tags in zip(chunk, tagger.tag([line.tokens for line in chunk])):
                    outputs[0].write(" ".join(tags) + "\n")
                    if line.problem:
                        fallbacks.append((line.number, line.problem))
                progress(len(chunk))
            return Outcome(fallbacks)

        return tag

    settings = {"tagger": model_identity(args.tagger), "tokenize": args.tokenize, "batch_tokens": args.batch_tokens}
    job = ParseJob(args.input, args.tokenize, [(args.output, LINES)], args.batch_size, settings, load)
    result = shards.run(job, args, [sys.executable, os.path.abspath(__file__), "tag", *argv])
    shards.report_run(result, args, args.output, args.output + ".skipped")
    return result


# --- measurements


def command(parser: str, models: dict, out: str) -> tuple[str, list[str]]:
    """(the command's script, its options) for one parser."""
    if parser == "tagger":
        return "tag", ["--tagger", models["tagger"], "--output", out]
    if parser == "biaffine":
        return "parse_dependency.py", ["--model", models["biaffine"], "--arcs", out, "--conllu", out + ".conllu"]
    return "parse_constituency.py", ["--backend", parser, "--model", models[parser], "--output", out]


def run_once(parser: str, models: dict, sample: str, workers: int, device: str, work: str) -> dict:
    script, options = command(parser, models, os.path.join(work, f"{parser}.out"))
    argv = [*options, "--input", sample, "--threads", "1", "--workers", str(workers), "--num-shards", str(workers),
            "--device", device, *(GPU_BATCH if device == "cuda" else [])]
    main = tag_main if script == "tag" else runpy.run_path(os.path.join(HERE, script))["main"]
    load = os.getloadavg()[0]
    start = time.perf_counter()
    result = main(argv)
    wall = time.perf_counter() - start
    return {"parse_seconds": max(result.shard_seconds), "wall_seconds": wall, "load_average": load,
            "sentences": result.report.sentences, "fallbacks": len(result.report.fallbacks),
            "command": describe(script, argv, models, sample, work)}


def describe(script: str, argv: list[str], models: dict, sample: str, work: str) -> str:
    """The command as the record keeps it: MODELS/NAME for a model, SAMPLE and WORK for the temporary files."""
    names = {model: f"MODELS/{os.path.basename(model)}" for model in models.values()}
    words = [names.get(word, word.replace(sample, "SAMPLE").replace(work, "WORK")) for word in argv]
    return " ".join(["python3", "preprocess/measure_throughput.py tag" if script == "tag" else f"preprocess/{script}",
                     *words])


def measure(parser: str, models: dict, sample: str, words: int, workers: int, device: str, repeats: int,
            work: str) -> dict:
    runs = [run_once(parser, models, sample, workers, device, work) for _ in range(repeats)]
    parse = statistics.median(run["parse_seconds"] for run in runs)
    wall = statistics.median(run["wall_seconds"] for run in runs)
    sentences = runs[0]["sentences"]
    return {"parser": parser, "model": os.path.basename(models[parser]), "device": device, "workers": workers,
            "sentences": sentences, "words": words, "repeats": repeats, "parse_seconds": parse, "wall_seconds": wall,
            "sentences_per_second": sentences / parse, "wall_sentences_per_second": sentences / wall,
            "load_average": max(run["load_average"] for run in runs), "fallbacks": runs[0]["fallbacks"],
            "command": runs[0]["command"]}


def write_sample(path: str, lines: int, tokenize: str | None, out: str) -> int:
    """The first ``lines`` lines of ``path``, tokenized, one sentence per line; returns the number of words."""
    words = 0
    with open_output(out) as handle:
        for line in islice(shards.read_input(path, tokenize), lines):
            words += len(line.tokens)
            handle.write(" ".join(line.tokens) + "\n")
    return words


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="sentences, one per line (plain or .gz)")
    parser.add_argument("--tokenize", metavar="LANG", help="the input is raw text: tokenize it (sacremoses) first")
    parser.add_argument("--lines", type=int, default=2000, help="the first N lines are the sample")
    for name in PARSERS:
        parser.add_argument(f"--{name}", metavar="MODEL", help=f"the {name} model (left out: not measured)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts measured on the CPU")
    parser.add_argument("--repeats", type=int, default=2, help="runs per measurement; the median is kept")
    parser.add_argument("--no-gpu", action="store_true", help="no GPU row even where CUDA is available")
    parser.add_argument("--note", help="a sentence for the table (e.g. what else ran on the machine)")
    parser.add_argument("--out", default=DEFAULT_OUT, help="the JSON file of the measurements")
    return parser


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["tag"]:
        tag_main(argv[1:])
        return {}
    args = get_parser().parse_args(argv)
    models = {name: getattr(args, name.replace("-", "_")) for name in PARSERS}
    models = {name: model for name, model in models.items() if model}
    if not models:
        raise SystemExit("error: give at least one of " + ", ".join(f"--{name}" for name in PARSERS))
    missing = [model for model in models.values() if not os.path.exists(model)]
    if missing:
        raise SystemExit(f"error: no such model file: {', '.join(missing)}")
    rows = []
    with temporary_directory("throughput") as work:
        sample = os.path.join(work, "sample.txt")
        words = write_sample(args.input, args.lines, args.tokenize, sample)
        for parser in models:
            for workers in args.workers:
                rows.append(measure(parser, models, sample, words, workers, "cpu", args.repeats, work))
                print(f"{parser}, {workers} worker(s): {rows[-1]['sentences_per_second']:.1f} sentences/s",
                      file=sys.stderr)
            if torch.cuda.is_available() and not args.no_gpu:
                rows.append(measure(parser, models, sample, words, 1, "cuda", args.repeats, work))
    record = {
        "generated_by": "preprocess/measure_throughput.py",
        "command": shlex.join(["python3", "preprocess/measure_throughput.py", *argv]),
        "input": os.path.basename(args.input), "lines": args.lines, "tokenize": args.tokenize, "note": args.note,
        "not_measured": {name: "no model given" for name in PARSERS if name not in models},
        "machine": {"cpu": cpu_name(), "cores": os.cpu_count(), "torch": torch.__version__,
                    "python": platform.python_version(),
                    "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None},
        "rows": rows,
    }
    write_record(args.out, record)
    print(f"wrote {args.out}; python3 preprocess/make_results.py puts it into preprocess/RESULTS.md", file=sys.stderr)
    return record


if __name__ == "__main__":
    if sys.argv[1:2] == ["tag"]:  # a parse command (and its shard workers, which stop on their own signal handler)
        main()
    else:
        with stopping_cleanly("measure_throughput.py"):
            main()
