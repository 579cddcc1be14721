#!/usr/bin/env python3
"""The data path at scale: a synthetic corpus of 50k, 100k and 200k lines through parsing (tiny models), BPE and
binarization, each step's wall and CPU time and peak memory per line, and the side data's bytes per word.

    python3 preprocess/measure_scaling.py --sizes 50000 100000 200000 --workers 1 --work ../scaling-work
    python3 preprocess/make_results.py        # the tables into preprocess/RESULTS.md

Per size N: N synthetic pairs (``bench/synthetic.py``, one seed for every size), then the :func:`steps` (crf-con
and biaffine parsing, BPE learning and applying, the preorder and sequence forms, the LDD side data),
each its own process measured with ``os.wait4`` (wall time, CPU time with its workers, the largest resident set).

The parsers are tiny (``train_tiny_parsers``, or ``--crf-con`` / ``--biaffine``): fast and wrong, enough to
measure everything around a parser (a real parser's rate: ``measure_throughput.py``). The LDD step reads
bench/synthetic.py's distributions (``SYNTHETIC_ARCS``: 3 heads a word, 2 labels a head), so the side data has a
real parser's size. Writes ``--out`` (JSON) for ``make_results.py``: per step the CPU time per line at each size
against the smallest (over 15% slower is named as growing faster than linearly) and the memory each further line
adds (extrapolated to WMT'14's 4.5M lines). ``WORK/nN`` is made afresh per size and kept."""
import argparse
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
from collections import deque

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "bench"))
import synthetic  # bench/synthetic.py: made-up words, random trees and arcs

from fairseq_syntax.parsing.text import open_output, read_json

DEFAULT_OUT = os.path.join(HERE, "measurements", "scaling.json")
SYNTHETIC_ARCS = "synthetic.arcs.jsonl.gz"  # the LDD step's input (module docstring)
SUBWORD_NMT = "import sys; from subword_nmt.subword_nmt import main; sys.argv[0] = 'subword-nmt'; main()"
SRC, TGT = "en", "de"
TRAINING_TREES = 200
STAR_EPOCHS = 6  # the tiny biaffine parser's (train_tiny_parsers)
TINY = {"n_embed": 16, "n_char_embed": 8, "n_char_hidden": 16, "n_feat_embed": 16, "n_lstm_hidden": 16,
        "n_lstm_layers": 1, "n_mlp": 16, "n_label_mlp": 8}  # SuparSize of the tiny parsers


def pairs(count: int, seed: int, min_words: int, max_words: int):
    """``count`` (source words, target words) of bench/synthetic.py, and the tree and 1-best arcs of the source."""
    rng, vocabulary = random.Random(seed), synthetic.vocabulary()
    for _ in range(count):
        drawn = synthetic.sentence(rng, rng.randint(min_words, max_words), vocabulary)
        yield drawn, " ".join(drawn.target).replace("@@ ", "").split()


def write_corpus(prefix: str, count: int, seed: int, min_words: int, max_words: int) -> int:
    """``prefix.{en,de}`` and ``prefix.SYNTHETIC_ARCS`` (bench/synthetic.py's arc distributions); returns the number
    of source words."""
    words = 0
    with open_output(f"{prefix}.{SRC}") as source, open_output(f"{prefix}.{TGT}") as target, \
            open_output(f"{prefix}.{SYNTHETIC_ARCS}") as arcs:
        for drawn, target_words in pairs(count, seed, min_words, max_words):
            source.write(" ".join(drawn.arcs["words"]) + "\n")
            target.write(" ".join(target_words) + "\n")
            arcs.write(json.dumps(drawn.arcs) + "\n")
            words += len(drawn.arcs["words"])
    return words


def train_tiny_parsers(folder: str, seed: int) -> dict:
    """Tiny crf-con and biaffine models (kept when there): crf-con 2 epochs on synthetic trees; biaffine
    ``STAR_EPOCHS`` epochs on trees with every word on the first (label ``dep``), so its distributions are peaked
    as a trained parser's are (on random trees it spreads its mass over every head and label)."""
    from fairseq_syntax.core.trees import Tree, to_bracketed
    from fairseq_syntax.parsing import training

    paths = {"crf-con": os.path.join(folder, "crf-con-tiny.pt"), "biaffine": os.path.join(folder, "biaffine-tiny.pt")}
    if all(os.path.exists(path) for path in paths.values()):
        return paths
    os.makedirs(folder, exist_ok=True)
    trees, conllu = os.path.join(folder, "train.pid"), os.path.join(folder, "train.conllu")
    with open(trees, "w", encoding="utf-8") as tree_out, open(conllu, "w", encoding="utf-8") as conllu_out:
        for drawn, _ in pairs(TRAINING_TREES, seed + 1, 3, 20):
            tree_out.write(to_bracketed(Tree("TOP", [drawn.tree])) + "\n")
            heads = [(0, "root")] + [(1, "dep")] * (len(drawn.arcs["words"]) - 1)
            conllu_out.write("".join(f"{i}\t{word}\t_\t_\t_\t_\t{head}\t{label}\t_\t_\n"
                                     for i, (word, (head, label)) in enumerate(zip(drawn.arcs["words"], heads), 1))
                             + "\n")
    size = training.SuparSize(**TINY)
    training.train_supar_constituency(trees, trees, paths["crf-con"], epochs=2, size=size, batch_tokens=500,
                                      learning_rate=1e-2, verbose=False)
    training.train_supar_dependency(conllu, conllu, paths["biaffine"], epochs=STAR_EPOCHS, size=size,
                                    batch_tokens=200, learning_rate=1e-2, verbose=False)
    return paths


#: Runs ``argv[2:]`` and writes its wall seconds, exit code and ``os.wait4`` usage to ``argv[1]`` as JSON; a small
#: process starts the step, since Linux counts the forking process's memory into a child's peak RSS
LAUNCHER = """
import json, os, subprocess, sys, time
start = time.perf_counter()
process = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(process.pid, 0)
with open(sys.argv[1], "w") as out:
    json.dump({"seconds": time.perf_counter() - start, "exit": os.waitstatus_to_exitcode(status),
               "cpu_seconds": usage.ru_utime + usage.ru_stime, "maxrss_kib": usage.ru_maxrss}, out)
"""


def timed(command: list[str], log: str) -> tuple[float, float, float]:
    """Runs ``command`` from the repository root, output into ``log``: (wall seconds, CPU seconds of it and its
    workers, peak resident MB of the largest)."""
    usage_path = log + ".usage.json"
    with open(log, "w", encoding="utf-8") as out:
        subprocess.run([sys.executable, "-S", "-c", LAUNCHER, usage_path, *command], stdout=out,
                       stderr=subprocess.STDOUT, cwd=REPO, check=True)
    usage = read_json(usage_path)
    if usage["exit"] != 0:
        with open(log, encoding="utf-8", errors="replace") as handle:
            tail = "".join(deque(handle, 20))
        raise SystemExit(f"error: {' '.join(command)} exited {usage['exit']}; the end of {log}:\n{tail}")
    return usage["seconds"], usage["cpu_seconds"], usage["maxrss_kib"] / 1024  # Linux: ru_maxrss in KiB


def steps(work: str, models: dict, workers: int, merges: int) -> dict:
    """The commands of each step (module docstring), on ``work/tok/train``, ``work/bpe/train``, ``work/bin``."""
    python, tok, bpe = sys.executable, os.path.join(work, "tok", "train"), os.path.join(work, "bpe", "train")
    codes, vocabulary = os.path.join(work, "bpe", "codes"), os.path.join(work, "bpe", "vocab")
    parallel = ["--workers", str(workers), "--device", "cpu"]
    preprocess = [python, "-m", "fairseq_syntax.cli.preprocess", "-s", SRC, "-t", TGT, "--trainpref", bpe,
                  "--joined-dictionary", "--workers", str(workers)]
    return {
        "parse-trees": [[python, "preprocess/parse_constituency.py", "--backend", "crf-con", "--model",
                         models["crf-con"], "--input", f"{tok}.{SRC}", "--output", f"{tok}.tree", *parallel]],
        "parse-arcs": [[python, "preprocess/parse_dependency.py", "--model", models["biaffine"], "--input",
                        f"{tok}.{SRC}", "--arcs", f"{tok}.arcs.jsonl.gz", "--conllu", f"{tok}.conllu.gz",
                        *parallel]],
        "bpe-learn": [[python, "-c", SUBWORD_NMT, "learn-joint-bpe-and-vocab", "--input",
                       f"{tok}.{SRC}", f"{tok}.{TGT}", "-s", str(merges), "-o", codes, "--write-vocabulary",
                       f"{vocabulary}.{SRC}", f"{vocabulary}.{TGT}"]],
        "bpe-apply": [[python, "-c", SUBWORD_NMT, "apply-bpe", "-c", codes, "--vocabulary",
                       f"{vocabulary}.{lang}", "--vocabulary-threshold", "1", "--input", f"{tok}.{lang}",
                       "--output", f"{bpe}.{lang}"] for lang in (SRC, TGT)],
        "preorder": [[*preprocess, "--form", "preorder", "--destdir", os.path.join(work, "bin", "preorder")]],
        "sequence": [[*preprocess, "--form", "sequence", "--destdir", os.path.join(work, "bin", "sequence")]],
        "ldd": [[python, "-m", "fairseq_syntax.methods.ldd.preprocess", "-s", SRC, "-t", TGT, "--trainpref", bpe,
                 "--arcs-suffix", "arcs.jsonl.gz", "--labels", "universal", "--destdir",
                 os.path.join(work, "bin", "sequence")]],
    }


def side_data_bytes(prefix: str) -> int:
    return sum(os.path.getsize(f"{prefix}.{ending}") for ending in ("bin", "idx"))


def measure_size(lines: int, args, models: dict) -> dict:
    work = os.path.join(args.work, f"n{lines}")
    if os.path.exists(work):  # an earlier run's: fairseq-syntax-preprocess refuses a data directory already there
        shutil.rmtree(work)
    for folder in ("tok", "bpe", "bin", "logs"):
        os.makedirs(os.path.join(work, folder), exist_ok=True)
    words = write_corpus(os.path.join(work, "tok", "train"), lines, args.seed, args.min_words, args.max_words)
    measured = {}
    for step, commands in steps(work, models, args.workers, args.merges).items():
        if step == "preorder":  # the word-level parses go beside the BPE'd text, as the recipes copy them
            for suffix, made in (("tree", "tree"), ("arcs.jsonl.gz", SYNTHETIC_ARCS)):
                link = os.path.join(work, "bpe", f"train.{suffix}")
                if not os.path.lexists(link):
                    os.symlink(os.path.join("..", "tok", f"train.{made}"), link)  # relative to bpe/
        load = os.getloadavg()[0]
        runs = [timed(command, os.path.join(work, "logs", f"{step}.{k}.log")) for k, command in enumerate(commands)]
        measured[step] = {"seconds": sum(seconds for seconds, _, _ in runs),
                          "cpu_seconds": sum(cpu for _, cpu, _ in runs), "peak_mb": max(peak for _, _, peak in runs),
                          "load_average": load}
        print(f"{lines} lines, {step}: {measured[step]['seconds']:.1f} s, CPU {measured[step]['cpu_seconds']:.1f} s, "
              f"peak {measured[step]['peak_mb']:.0f} MB (load average before: {load:.1f})", file=sys.stderr)
    binary, tok = os.path.join(work, "bin"), os.path.join(work, "tok", "train")
    return {"lines": lines, "words": words, "steps": measured,
            "arcs_file_bytes_per_word": {"parser": os.path.getsize(f"{tok}.arcs.jsonl.gz") / words,
                                         "ldd_input": os.path.getsize(f"{tok}.{SYNTHETIC_ARCS}") / words},
            "ldd_bytes_per_word": side_data_bytes(os.path.join(binary, "sequence", f"train.{SRC}-{TGT}.{SRC}.ldd"))
            / words,
            "parents_bytes_per_word": side_data_bytes(os.path.join(binary, "preorder",
                                                                   f"train.{SRC}-{TGT}.{SRC}.parents")) / words}


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50000, 100000, 200000], help="lines per corpus")
    parser.add_argument("--work", required=True, help="a folder for the corpora, models and logs (gigabytes)")
    parser.add_argument("--workers", type=int, default=1, help="--workers of the parse and binarizing commands")
    parser.add_argument("--merges", type=int, default=8000, help="joint BPE merges")
    parser.add_argument("--min-words", type=int, default=5)
    parser.add_argument("--max-words", type=int, default=45, help="sentence lengths drawn uniformly between these")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--crf-con", help="a crf-con model to use instead of training a tiny one")
    parser.add_argument("--biaffine", help="a biaffine model to use instead of training a tiny one")
    parser.add_argument("--out", default=DEFAULT_OUT, help="the JSON file of the measurements")
    parser.add_argument("--note", help="a sentence for the table (e.g. what else ran on the machine)")
    return parser


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    args = get_parser().parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    given = {"crf-con": args.crf_con, "biaffine": args.biaffine}
    models = given if all(given.values()) else {**train_tiny_parsers(os.path.join(args.work, "models"), args.seed),
                                                **{name: path for name, path in given.items() if path}}
    sizes = [measure_size(lines, args, models) for lines in sorted(args.sizes)]
    from fairseq_syntax.parsing.training_report import cpu_name, write_record

    record = {"generated_by": "preprocess/measure_scaling.py",
              "command": shlex.join(["python3", "preprocess/measure_scaling.py", *argv]), "note": args.note,
              "workers": args.workers, "merges": args.merges,
              "words_per_sentence": [args.min_words, args.max_words], "cpu": cpu_name(), "cores": os.cpu_count(),
              "models": {name: os.path.basename(path) for name, path in models.items()}, "sizes": sizes}
    write_record(args.out, record)
    print(f"wrote {args.out}; python3 preprocess/make_results.py puts it into preprocess/RESULTS.md", file=sys.stderr)
    return record


if __name__ == "__main__":
    main()
