#!/usr/bin/env python3
"""fairseq-interactive's throughput with and without the parser: what parsing raw text at decoding time costs.

    python3 bench/interactive.py --work ../interactive-bench        # writes bench/interactive/RESULTS.{md,json}

Everything at the recipes' sizes (``examples/train_parsers.py``): the parsers with SuPar's published encoder
(``--n-lstm-hidden 400 --n-lstm-layers 3 --n-mlp 500``) and the POS tagger's default size, the translation models
at the Multi30k recipe's (``bench/recipe.py``). Speed is the networks' size, not their training: the parsers are
trained one epoch (batches of 100 tokens; the weights kept where the dev score stays 0) on the first
``--parser-sentences`` trees of the local PTB sample (sentences of UD EWT for the biaffine parser), the
translation models 2 updates on the first ``--pairs`` Multi30k pairs, parsed and BPE'd as the recipes do. An
untrained model writes no end of sentence, so every hypothesis is held at ``--max-len-a 1.3 --max-len-b 5`` tokens
(about a translation's length) on every row alike.

Rows (the first ``--lines`` Multi30k test sentences, Moses-tokenized and PTB-escaped as the recipes do; ``--buffer-size
64 --batch-size 64``, beam 5, one torch thread, ``--cpu``):

* ``mask``, ``--source-format tree``: trees parsed beforehand (the decoding alone);
* ``mask``, ``--source-parser`` crf-con with ``--source-tagger``: raw text, parsed as it is read;
* ``sequence`` (fairseq's transformer): raw text, no parser;
* ``ldd``, ``--source-dependency-parser``: raw text through the biaffine parser (the sequence form's tokens).

Each row is the CPU time (user + system, ``os.wait4``) of a ``fairseq-interactive`` process over the lines, less that
of the same command on one line (process start, imports, loading models and parsers), per sentence; CPU time
because the cores may be shared. ``sentences/s`` is its inverse; ``parser share`` the part of a text row's time its
parser adds over the row without it (mask: over the trees given; ldd: over the sequence model, which decodes the same
tokens with a model of the same size), and ``time ratio`` that row's CPU time per sentence over the other's.
"""
import argparse
import os
import subprocess
import sys
import time
from functools import partial

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import report  # noqa: E402
from recipe import MODEL_SIZE, TRAINING  # noqa: E402

DATA = os.path.join(REPO, "..", "shared", "data")
SUPAR_SIZE = dict(n_lstm_hidden=400, n_lstm_layers=3, n_mlp=500)  # examples/train_parsers.py's SUPAR_SIZE
GENERATION = ["--beam", "5", "--max-len-a", "1.3", "--max-len-b", "5", "--buffer-size", "64", "--batch-size", "64",
              "--cpu", "-s", "en", "-t", "de"]
ONE_THREAD = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
run = partial(report.run_command, env=ONE_THREAD)  # every command on one thread


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def sentences(path: str, lang: str, count: int) -> list[str]:
    """The first ``count`` lines, tokenized and (the source) PTB-escaped as a study's data preparation does."""
    from itertools import islice

    from fairseq_syntax.core.trees import ptb_escape_token
    from fairseq_syntax.parsing.text import open_text, tokenizer

    split = tokenizer(lang)
    with open_text(path) as lines:
        return [" ".join(ptb_escape_token(t) if lang == "en" else t for t in split(line))
                for line in islice(lines, count)]


def write(path: str, lines: list[str]) -> str:
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(line + "\n" for line in lines)
    return path


def train_parsers(work: str, count: int) -> dict:
    from fairseq_syntax.core.trees import clean_ptb, read_ptb, to_bracketed
    from fairseq_syntax.parsing import training
    from fairseq_syntax.parsing.tagger import sentences_from_conllu, sentences_from_trees, train_tagger
    from fairseq_syntax.parsing.text import open_text

    models = {name: os.path.join(work, f"{name}.pt") for name in ("crf-con", "tagger", "biaffine")}
    if all(os.path.exists(path) for path in models.values()):
        return models
    trees = [clean_ptb(tree) for _, tree in zip(range(count), read_ptb(os.path.join(DATA, "ptb-sample",
                                                                                  "wsj_0001-0159.mrg.gz")))]
    pid = write(os.path.join(work, "ptb.pid"), [f"(TOP {to_bracketed(tree)})" for tree in trees])
    size = training.SuparSize(**SUPAR_SIZE)
    log("training crf-con (1 epoch, recipe size)")
    supar_model(training.train_supar_constituency, pid, models["crf-con"], size)
    log("training the POS tagger (1 epoch, default size)")
    tagged = sentences_from_trees(trees)
    train_tagger(tagged, tagged, models["tagger"], epochs=1, log=lambda line: None)
    log("training the biaffine parser (1 epoch, recipe size)")
    with open_text(os.path.join(DATA, "ud-ewt", "en_ewt-ud-dev.conllu.gz")) as conllu:
        blocks = conllu.read().split("\n\n")[:count]
    ud = write(os.path.join(work, "ud.conllu"), ["\n\n".join(block.strip("\n") for block in blocks) + "\n"])
    assert sentences_from_conllu(ud)
    supar_model(training.train_supar_dependency, ud, models["biaffine"], size)
    return models


def supar_model(train, data: str, path: str, size) -> None:
    """One epoch of a SuPar parser (batches of 100 tokens) on ``data``; where its dev score stays 0 (a few sentences,
    one epoch), the epoch's weights are saved from SuPar's checkpoint all the same: its size is what is timed. (Such
    a checkpoint holds SuPar's base ``Metric``, which ``supar_safe_globals`` does not list: allowed here.)"""
    import torch
    from supar import Parser
    from supar.utils.metric import Metric

    from fairseq_syntax.parsing.resumable import checkpoint_path
    from fairseq_syntax.parsing.torch_load import supar_safe_globals

    with torch.serialization.safe_globals([Metric]):
        try:
            train(data, data, path, epochs=1, size=size, batch_tokens=100, verbose=False)
        except RuntimeError as error:
            if not os.path.exists(checkpoint_path(path)):
                raise
            log(f"{error}: saving the epoch's weights")
            with supar_safe_globals():
                Parser.load(checkpoint_path(path), checkpoint=True).save(path)


def prepare(work: str, models: dict, pairs: int) -> None:
    """Multi30k's first ``pairs`` pairs parsed, BPE'd and preprocessed as the recipes do: data-{preorder,sequence}."""
    if os.path.exists(os.path.join(work, "data-sequence", "syntax.json")):
        return
    source, target = (write(os.path.join(work, f"train.words.{lang}"),
                            sentences(os.path.join(DATA, "multi30k", f"train.{lang}.gz"), lang, pairs))
                      for lang in ("en", "de"))
    log(f"parsing {pairs} training sentences")
    parse(work, "train", models)
    run(["subword-nmt", "learn-joint-bpe-and-vocab", "--input", source, target, "-s", "2000", "-o",
         os.path.join(work, "codes"), "--write-vocabulary", os.path.join(work, "vocab.en"),
         os.path.join(work, "vocab.de")])
    for lang in ("en", "de"):
        report.apply_bpe(os.path.join(work, "codes"), os.path.join(work, f"vocab.{lang}"),
                         os.path.join(work, f"train.words.{lang}"), os.path.join(work, f"train.{lang}"))
    for form in ("preorder", "sequence"):
        log(f"fairseq-syntax-preprocess --form {form}")
        dest = os.path.join(work, f"data-{form}")
        run([sys.executable, "-m", "fairseq_syntax.cli.preprocess", "-s", "en", "-t", "de", "--trainpref",
             os.path.join(work, "train"), "--form", form, "--destdir", dest, "--joined-dictionary", "--workers", "1",
             "--bpe-codes", os.path.join(work, "codes"), "--bpe-vocabulary", os.path.join(work, "vocab.en"),
             "--bpe-vocabulary-threshold", "1", "--parser-backend", "crf-con", "--parser-model", models["crf-con"],
             "--parser-tagger", models["tagger"], "--overwrite"])
    run([sys.executable, "-m", "fairseq_syntax.methods.ldd.preprocess", "-s", "en", "-t", "de", "--trainpref",
         os.path.join(work, "train"), "--labels", "universal", "--destdir", os.path.join(work, "data-sequence")])


def parse(work: str, name: str, models: dict) -> None:
    words = os.path.join(work, f"{name}.words.en")
    run([sys.executable, "preprocess/parse_constituency.py", "--backend", "crf-con", "--model", models["crf-con"],
         "--tagger", models["tagger"], "--input", words, "--output", os.path.join(work, f"{name}.tree")])
    run([sys.executable, "preprocess/parse_dependency.py", "--model", models["biaffine"], "--input", words, "--arcs",
         os.path.join(work, f"{name}.arcs.jsonl"), "--conllu", os.path.join(work, f"{name}.conllu")])


SYSTEMS = {"mask": ("transformer_syntax_mask", "preorder"), "sequence": ("transformer", "sequence"),
           "ldd": ("transformer_ldd", "sequence")}


def train_models(work: str) -> dict:
    checkpoints = {}
    for name, (arch, form) in SYSTEMS.items():
        save = os.path.join(work, f"ckpt-{name}")
        checkpoints[name] = os.path.join(save, "checkpoint_last.pt")
        if not os.path.exists(checkpoints[name]):
            log(f"fairseq-train {name} ({arch}, 2 updates)")
            run(["fairseq-train", os.path.join(work, f"data-{form}"), "--user-dir", "fairseq_syntax", "--arch", arch,
                 *MODEL_SIZE, *TRAINING, "--max-update", "2", "--max-tokens", "4096", "--save-dir", save,
                 "--disable-validation", "--no-epoch-checkpoints", "--num-workers", "0"])
    return checkpoints


def cpu_seconds(command: list[str], lines: str) -> float:
    with open(lines, "rb") as stdin:
        process, _, cpu = report.timed_process(command, cwd=REPO, env=ONE_THREAD, stdin=stdin,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if process.returncode:
        raise SystemExit(f"error: {' '.join(command)} exited {process.returncode}")
    return cpu


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True, help="folder for the models and data (kept; reused when there)")
    parser.add_argument("--lines", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--parser-sentences", type=int, default=200)
    parser.add_argument("--out", default=os.path.join(HERE, "interactive"))
    args = parser.parse_args(argv)
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    models = train_parsers(work, args.parser_sentences)
    prepare(work, models, args.pairs)
    checkpoints = train_models(work)
    test = sentences(os.path.join(DATA, "multi30k", "test_2016_flickr.en.gz"), "en", args.lines)
    write(os.path.join(work, "test.words.en"), test)
    parse(work, "test", models)
    text = os.path.join(work, "test.words.en")
    rows = [("mask", "trees given (--source-format tree)", ["--source-format", "tree"],
             os.path.join(work, "test.tree")),
            ("mask", "text, crf-con + tagger", ["--source-parser", models["crf-con"], "--source-tagger",
                                                models["tagger"]], text),
            ("sequence", "text, no parser", [], text),
            ("ldd", "text, biaffine", ["--source-dependency-parser", models["biaffine"]], text)]
    results = []
    for name, label, options, lines in rows:
        arch, form = SYSTEMS[name]
        command = ["fairseq-interactive", os.path.join(work, f"data-{form}"), "--user-dir", "fairseq_syntax", "--task",
                   "syntax_translation", "--path", checkpoints[name], *GENERATION, *options]
        first = write(os.path.join(work, "one.txt"), open(lines, encoding="utf-8").readline().splitlines())
        log(f"{name}, {label}")
        start, whole = cpu_seconds(command, first), cpu_seconds(command, lines)
        per_sentence = (whole - start) / (args.lines - 1)
        results.append({"system": name, "arch": arch, "input": label, "sentences": args.lines,
                        "cpu_seconds": round(whole, 2), "startup_cpu_seconds": round(start, 2),
                        "cpu_ms_per_sentence": round(1000 * per_sentence, 2),
                        "sentences_per_cpu_second": round(1 / per_sentence, 1)})
    by_input = {(row["system"], row["input"]): row["cpu_ms_per_sentence"] for row in results}
    for row, base in zip(results, [None, ("mask", rows[0][1]), None, ("sequence", rows[2][1])]):
        row["time_ratio"] = None if base is None else round(row["cpu_ms_per_sentence"] / by_input[base], 2)
        row["parser_share"] = None if base is None else round(1 - by_input[base] / row["cpu_ms_per_sentence"], 2)
    from run import reproducing_command  # after the measurements: it sets TQDM_DISABLE in this environment

    facts = {"command": reproducing_command(argv, "bench/interactive.py") + " --work WORK",
             "machine": report.machine(),
             "load_average_after": round(os.getloadavg()[0], 1)}
    cells = [[row["system"], row["input"], row["sentences"], row["cpu_ms_per_sentence"],
              row["sentences_per_cpu_second"], *(("", "") if row["parser_share"] is None else
                                                 (f"{row['time_ratio']:.2f}x", f"{100 * row['parser_share']:.0f}%")),
              row["startup_cpu_seconds"]] for row in results]
    report.write_benchmark(
        args.out, "fairseq-interactive with and without the parser", __doc__.split("\n\n", 2)[2].strip() + "\n\n"
        f"Machine: {facts['machine']}; 1-minute load average at the end {facts['load_average_after']} (CPU times, "
        "not wall times, so other work on the cores changes them little).", facts,
        ["system", "input", "sentences", "CPU ms / sentence", "sentences / CPU s", "time ratio", "parser share",
         "start-up CPU s"], cells, results)


if __name__ == "__main__":
    main()
