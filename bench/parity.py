"""``python3 bench/parity.py``: does CPU bf16 training reach the BLEU of fp32? Trains one architecture on the demo
corpus (``examples/demo``) once in fp32 and once per bf16 variant of :mod:`precision`, at the benchmark's model
size with the demo's dropout and optimizer, same seed and batches, then decodes the test set and scores each
variant against fp32 with ``fairseq-syntax-score`` (paired bootstrap). Writes ``PARITY.md`` and ``PARITY.json`` to
``--out`` (default: this folder), with each run's CPU and wall time and peak RSS.

The runs train at once, one torch thread each, so their CPU times compare.
``python3 bench/parity.py --train PRECISION DATA SAVE_DIR`` is one training run (the main command starts those)."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import precision as precisions  # noqa: E402
from recipe import MODEL_SIZE  # noqa: E402
from report import apply_bpe, run_command  # noqa: E402

from fairseq_syntax.evaluation import tables  # noqa: E402
from fairseq_syntax.evaluation.train_logs import parse_valid_curve  # noqa: E402

BPE_MERGES = 1500
# the benchmark's model size (the Multi30k recipe) with the demo study's dropout and optimizer (its study.toml)
PARITY_RECIPE = MODEL_SIZE + [
    "--task", "syntax_translation", "--dropout", "0.1", "--criterion", "label_smoothed_cross_entropy",
    "--label-smoothing", "0.1", "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "2e-3",
    "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "300", "--clip-norm", "1.0", "--max-tokens", "4096",
    "--cpu", "--seed", "1", "--no-epoch-checkpoints", "--no-last-checkpoints", "--log-format", "simple",
    "--log-interval", "50", "--num-workers", "0", "--user-dir", os.path.join(REPO, "fairseq_syntax"),
]


def prepare_demo_data(work: str) -> str:
    """The demo study's data steps (examples/demo/study.toml): corpus, joint BPE, preorder data directory."""
    raw, bpe, data = (os.path.join(work, name) for name in ("raw", "bpe", "data-preorder"))
    run_command([sys.executable, os.path.join(REPO, "examples", "demo", "make_data.py"), "--out", raw,
                 "--train", "8000", "--valid", "500", "--test", "500", "--seed", "1"])
    run_command(["subword-nmt", "learn-joint-bpe-and-vocab", "--input", f"{raw}/train.en", f"{raw}/train.de",
                 "-s", str(BPE_MERGES), "-o", f"{raw}/codes", "--write-vocabulary", f"{raw}/vocab.en",
                 f"{raw}/vocab.de"])
    os.makedirs(bpe, exist_ok=True)
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            apply_bpe(f"{raw}/codes", f"{raw}/vocab.{lang}", f"{raw}/{split}.{lang}", f"{bpe}/{split}.{lang}")
        shutil.copy(f"{raw}/{split}.tree", f"{bpe}/{split}.tree")
    shutil.rmtree(data, ignore_errors=True)
    run_command([sys.executable, "-m", "fairseq_syntax.cli.preprocess", "-s", "en", "-t", "de",
                 "--trainpref", f"{bpe}/train", "--validpref", f"{bpe}/valid", "--testpref", f"{bpe}/test",
                 "--form", "preorder", "--destdir", data, "--joined-dictionary", "--workers", "1"])
    return data


def train_one(precision: str, train_args: List[str]) -> None:
    """fairseq-train with ``precision`` applied (this process only)."""
    import torch
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq_cli import train

    if precision == "bf16_autocast_layers":
        raise SystemExit("bf16_autocast_layers needs the model; the parity check takes the other variants")
    torch.set_num_threads(1)
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), train_args))
    precisions.configure(cfg, precision)
    train.main(cfg)


def best_valid_loss(log_path: str) -> float:
    curve = parse_valid_curve(log_path)
    if not curve:
        raise SystemExit(f"error: {log_path} has no validation line")
    return min(loss for _, loss in curve)


def train_all(data: str, work: str, arch: str, epochs: int, precision_names: Sequence[str]) -> Dict[str, Dict]:
    """Starts one training per precision at once; returns wall and CPU seconds and the best valid loss of each."""
    running = {}
    for name in precision_names:
        save = os.path.join(work, f"ckpt-{name}")
        shutil.rmtree(save, ignore_errors=True)
        log = open(os.path.join(work, f"train-{name}.log"), "w")
        cmd = [sys.executable, os.path.abspath(__file__), "--train", name, data, "--arch", arch,
               "--max-epoch", str(epochs), "--save-dir", save] + PARITY_RECIPE
        running[name] = (subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT), log, time.time())
    results, by_pid = {}, {process.pid: name for name, (process, _, _) in running.items()}
    while by_pid:
        pid, status, usage = os.wait4(-1, 0)  # whichever run ends first, so each wall time is its own
        if pid not in by_pid:
            continue
        name = by_pid.pop(pid)
        process, log, started = running[name]
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        log.close()
        if process.returncode != 0:
            raise SystemExit(f"error: training {name} failed (exit {process.returncode}); see {log.name}")
        results[name] = {"wall_s": round(time.time() - started, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
                         "peak_rss_mb": round(usage.ru_maxrss / 1024), "best_valid_loss": best_valid_loss(log.name)}
    return results


def decode_and_score(data: str, work: str, precision_names: Sequence[str]) -> Dict[str, Dict]:
    reference = os.path.join(work, "raw", "test.de")
    outputs = {}
    for name in precision_names:
        outputs[name] = os.path.join(work, f"{name}.gen")
        with open(outputs[name], "w") as out:
            run_command(["fairseq-generate", data, "--user-dir", os.path.join(REPO, "fairseq_syntax"), "--task",
                         "syntax_translation", "--path", os.path.join(work, f"ckpt-{name}", "checkpoint_best.pt"),
                         "--gen-subset", "test", "--beam", "5", "--remove-bpe", "--cpu", "--batch-size", "128"],
                        stdout=out)
    scores = {}
    for name in precision_names:
        scores_file = os.path.join(work, f"{name}.scores.json")
        baseline = [] if name == "fp32" else [outputs["fp32"]]
        run_command(["fairseq-syntax-score", outputs[name], reference, *baseline, "--bootstrap", "1000",
                     "--json", scores_file])
        with open(scores_file) as f:
            scores[name] = json.load(f)
    return scores


def parity_markdown(arch: str, epochs: int, rows: List[Dict]) -> List[str]:
    lines = [
        "# bf16 against fp32 on CPU: BLEU parity (generated by `python3 bench/parity.py`)",
        "",
        f"{arch} on the demo corpus (examples/demo: 8000 training pairs, preorder input), 3+3 layers, d=256, "
        f"FFN 1024, 4 heads (the benchmark's model), the demo's dropout 0.1 and Adam (lr 2e-3, warm-up 300), "
        f"{epochs} epochs, seed 1, one torch thread per run, all runs at the same time; "
        "test BLEU of checkpoint_best (beam 5), p = paired bootstrap against fp32 (1000 samples).",
        "",
    ]
    return lines + tables.markdown_table(
        ["precision", "BLEU", "chrF", "p vs fp32", "best valid loss", "CPU s", "CPU speed-up", "wall s", "peak RSS MB"],
        ([r["precision"], f"{r['BLEU']:.2f}", f"{r['chrF']:.2f}",
          "" if r["p_vs_fp32"] is None else f"{r['p_vs_fp32']:.3f}", f"{r['best_valid_loss']:.3f}",
          f"{r['cpu_s']:.0f}", f"{r['cpu_speedup']:.2f}", f"{r['wall_s']:.0f}", r["peak_rss_mb"]] for r in rows))


def main(argv: Optional[Sequence[str]] = None) -> List[Dict]:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--train"]:
        train_one(argv[1], argv[2:])
        return []
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", help="keep corpus, checkpoints and logs here (default: a temporary folder)")
    parser.add_argument("--out", default=HERE, help="where PARITY.md and PARITY.json go")
    parser.add_argument("--arch", default="transformer_syntax_mask")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--precisions", default="bf16_autocast",
                        help="bf16 variants to compare with fp32 (see bench/precision.py)")
    args = parser.parse_args(argv)
    names = ["fp32"] + [p for p in args.precisions.split(",") if p != "fp32"]
    unknown = [p for p in names if p not in precisions.PRECISIONS]
    if unknown:
        parser.error(f"unknown precisions {unknown}; choose from {precisions.PRECISIONS}")
    with tempfile.TemporaryDirectory(prefix="parity-") as scratch:
        work = args.work or scratch
        os.makedirs(work, exist_ok=True)
        data = prepare_demo_data(work)
        training = train_all(data, work, args.arch, args.epochs, names)
        scores = decode_and_score(data, work, names)
    rows = []
    for name in names:
        metrics, significance = scores[name]["metrics"], scores[name]["significance"]
        rows.append({"precision": name, "BLEU": metrics["BLEU"], "chrF": metrics["chrF"],
                     "p_vs_fp32": next((s["BLEU"]["p_value"] for s in significance.values()), None),
                     **training[name],
                     "cpu_speedup": round(training["fp32"]["cpu_s"] / training[name]["cpu_s"], 2)})
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "PARITY.json"), "w") as f:
        json.dump({"arch": args.arch, "epochs": args.epochs, "rows": rows}, f, indent=1)
    with open(os.path.join(args.out, "PARITY.md"), "w") as f:
        f.write("\n".join(parity_markdown(args.arch, args.epochs, rows)) + "\n")
    return rows


if __name__ == "__main__":
    main()
