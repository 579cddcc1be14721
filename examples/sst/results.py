"""RESULTS.md and RESULTS.json for the SST recipe, from the fairseq-train logs of ``run.sh``.

``python3 examples/sst/results.py examples/sst/logs --out examples/sst/RESULTS.md`` (RESULTS.json beside it;
without --out, Markdown to stdout). Each ``DATASET.RUN.log.gz`` (or plain ``.log``, or packed, ``packed_runs``)
gives its settings, size, training time, why it stopped and the dev accuracy per epoch; a log without "done
training" is reported unfinished."""
import argparse
import os
import re
import statistics
import sys
from dataclasses import dataclass, field

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # this checkout's package
from fairseq_syntax.evaluation import packed_runs  # noqa: E402
from fairseq_syntax.evaluation.kept_files import read_text  # noqa: E402
from fairseq_syntax.evaluation.tables import Cell, Table, write_results  # noqa: E402

LOG_SUFFIXES = (".log.gz", ".log")

# the paper's test accuracies (Nguyen et al. 2020, Tables 2 and 3), for orientation only: different split (test vs
# our dev), 15k updates vs ours, and their tree model trained on every node label
PAPER = {"sst5": {"Transformer": 37.6, "Tree Transformer (ours in the paper)": 47.4, "-HierEmb": 46.1,
                  "-SubMask": 45.7},
         "sst2": {"Transformer": 74.8, "Tree Transformer (ours in the paper)": 84.3}}


@dataclass
class Run:
    name: str
    dataset: str
    settings: dict
    params: int | None = None
    train_trees: int | None = None
    valid_trees: int | None = None
    valid: list[tuple[int, int, float, float | None]] = field(default_factory=list)  # epoch, updates, acc, node
    stopped_by: str = "unfinished"
    seconds: float | None = None


def setting(config: str, name: str) -> str | None:
    """A value from fairseq's logged configuration, written ``'name': value`` (dicts) or ``name=value`` (Namespace)."""
    match = re.search(rf"['\"]?\b{name}['\"]?(?:: |=)('[^']*'|[\w.\-]+)", config)
    return match.group(1).strip("'") if match else None


def read_run(path: str) -> Run:
    name = os.path.basename(path)
    name = next(name[: -len(suffix)] for suffix in LOG_SUFFIXES if name.endswith(suffix))
    text = read_text(path)
    config = next((line for line in text.splitlines() if "fairseq_cli.train | {" in line), "")
    keys = ("arch", "input_form", "preterminals", "classifier_pooling", "node_labels", "no_hier_embed",
            "no_subtree_mask", "max_update", "warmup_updates")
    run = Run(name, name.split(".")[0], {key: setting(config, key) for key in keys})
    for attribute, pattern in (("params", r"num\. shared model params: ([\d,]+)"),
                               ("train_trees", r"train: (\d+) trees"), ("valid_trees", r"valid: (\d+) trees")):
        if match := re.search(pattern, text):
            setattr(run, attribute, int(match.group(1).replace(",", "")))
    for line in text.splitlines():
        if "valid on 'valid' subset" in line:
            epoch, updates, accuracy, node = (re.search(rf"\b{name} ([\d.]+)", line)
                                              for name in ("epoch", "num_updates", "accuracy", "node_accuracy"))
            run.valid.append((int(epoch[1]), int(updates[1]), float(accuracy[1]), node and float(node[1])))
    if match := re.search(r"Stopping training due to (\w+)", text):
        run.stopped_by = {"num_updates": "max updates", "cumulative_training_time": "time limit"}.get(
            match.group(1), match.group(1))
    if match := re.search(r"done training in ([\d.]+) seconds", text):
        run.seconds = float(match.group(1))
        if run.stopped_by == "unfinished":
            run.stopped_by = "max epochs"
    return run


def describe(run: Run) -> tuple[str, str]:
    s = run.settings
    if s["arch"] and "hier_accum" in s["arch"]:
        model = "hierarchical accumulation"
        ablations = [label for key, label in (("no_hier_embed", "-HierEmb"), ("no_subtree_mask", "-SubMask"))
                     if s[key] == "True"]
        model += " " + " ".join(ablations) if ablations else ""
    else:
        model = "Transformer"
    labels = "root + every node/word" if s["node_labels"] == "True" else "root"
    return model, labels


HEADER = ["run", "model", "input (pooling)", "trained on", "params", "updates (warm-up)", "epochs", "minutes",
          "stopped by", "dev acc. best (epoch)", "dev acc. last", "dev token-label acc. last"]


def cell(value, spec: str = ".2f") -> Cell:
    return Cell(value, "-" if value is None else format(value, spec))


def table(runs: list[Run]) -> Table:
    """One dataset's table (RESULTS.json: numbers unrounded, "a (b)" as [a, b], None for "-")."""
    table = Table(HEADER, "llllrrrrlrrr")
    for run in runs:
        s = run.settings
        source = s["input_form"] + (f", {s['preterminals']} POS" if s["input_form"] == "preorder" else "")
        epoch, updates, accuracy, node = run.valid[-1] if run.valid else (None,) * 4
        best = max(run.valid, key=lambda v: v[2]) if run.valid else None
        model, labels = describe(run)
        table.add(run.name, model, f"{source} ({s['classifier_pooling']})", labels,
                  cell(run.params, ","), Cell([updates, s["warmup_updates"] and int(s["warmup_updates"])],
                                              f"{cell(updates, 'd').text} ({s['warmup_updates']})"),
                  cell(epoch, "d"), cell(None if run.seconds is None else run.seconds / 60, ".1f"), run.stopped_by,
                  Cell(best and [best[2], best[0]], f"{best[2]:.2f} ({best[0]})" if best else "-"), cell(accuracy),
                  cell(node))
    return table


SEED_SUFFIX = re.compile(r"\.seed(\d+)$")


def seed_table(runs: list[Run]) -> tuple[list[str], dict]:
    """Runs named NAME.seedK with two or more seeds: per NAME the mean and sample sd over seeds of the best-epoch
    and last dev accuracies (the best epoch is chosen on dev, the checkpoint a user would keep)."""
    groups: dict = {}
    for run in runs:
        match = SEED_SUFFIX.search(run.name)
        if match and run.valid:
            groups.setdefault(run.name[: match.start()], []).append(run)
    table = Table(["runs", "seeds", "dev accuracy, best epoch (mean ± sd)", "dev accuracy, last (mean ± sd)"], "lrrr")
    for name, group in sorted(groups.items()):
        if len(group) > 1:
            accuracies = ([max(v[2] for v in run.valid) for run in group], [run.valid[-1][2] for run in group])
            stats = [(statistics.fmean(xs), statistics.stdev(xs)) for xs in accuracies]
            table.add(Cell(name, f"{name}.seed*"), len(group),
                      *(Cell({"mean": mean, "sd": sd}, f"{mean:.2f} ± {sd:.2f}") for mean, sd in stats))
    return (table.lines() if table.rows else []), table.json(lists=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", help="folder of DATASET.RUN.log.gz (or .log) files, or of their packed.tar.xz")
    parser.add_argument("--out", help="write RESULTS.md here and RESULTS.json beside it (default: the Markdown to "
                        "standard output)")
    args = parser.parse_args()
    paths = sorted(path for suffix in LOG_SUFFIXES for path in packed_runs.glob(os.path.join(args.logs, "*" + suffix)))
    runs = [read_run(path) for path in paths]
    if not runs:
        raise SystemExit(f"{args.logs}: no .log.gz or .log files")
    duplicates = sorted({run.name for run in runs if [other.name for other in runs].count(run.name) > 1})
    if duplicates:
        raise SystemExit(f"{args.logs}: both NAME.log and NAME.log.gz for {', '.join(duplicates)}")
    data = {"generated_by": "examples/sst/results.py (tables by fairseq_syntax.evaluation.results)",
            "logs": sorted(os.path.basename(path) for path in paths), "datasets": {}}
    out = [
        "# SST: hierarchical accumulation vs a Transformer of the same size",
        "",
        "Generated by `python3 examples/sst/results.py examples/sst/logs --out examples/sst/RESULTS.md` from the "
        "logs of `examples/sst/run.sh` (gzipped, `logs/NAME.log.gz`, then packed into `logs/packed.tar.xz`: "
        "`python3 fairseq_syntax/evaluation/packed_runs.py cat examples/sst/logs/NAME.log` shows one), with "
        "RESULTS.json beside it (the same tables, numbers unrounded); do not edit by hand.",
        "",
        "All runs: tiny models (2 layers, d = 64, 4 heads, FFN 512), Adam lr 7e-4 with the warm-up shown "
        "(inverse square root), dropout 0.5, 2048-token batches, one seed, CPU, one thread, each run capped at "
        "the updates or the time shown. Accuracy is on SST's dev set (the test set is held out of the shared data). "
        "\"best\" is the best epoch on dev, so it is selected on the data it reports (optimistic); \"last\" is the "
        "last evaluation, which involves no selection. Differences of about one point are within the noise of a "
        "single seed on 1101 (SST-5) or 872 (SST-2) sentences. The last column is the accuracy on the labelled "
        "tokens of the input (nodes other than the root, and words; the Transformer's word sequence has word labels "
        "only), whether or not the run trained on them.",
        "",
    ]
    for dataset in sorted({run.dataset for run in runs}, reverse=True):
        # by training length; the baseline first, then the tree models in run.sh's order (plain, nodes, ablations)
        chosen = sorted((run for run in runs if run.dataset == dataset),
                        key=lambda run: (int(run.settings["max_update"] or 0), describe(run)[0] != "Transformer",
                                         len(run.name), run.name))
        sizes = {(run.train_trees, run.valid_trees) for run in chosen}
        out += [f"## {dataset.upper()}", ""]
        out += [f"Trees: {', '.join(f'{train} train / {valid} dev' for train, valid in sorted(sizes, key=str))}.", ""]
        runs_table, (seed_lines, seeds) = table(chosen), seed_table(chosen)
        out += runs_table.lines() + [""]
        entry = data["datasets"][dataset] = {
            "trees": [{"train": train, "dev": valid} for train, valid in sorted(sizes, key=str)],
            "table": runs_table.json(lists=True), "last_minus_baseline": []}
        if seed_lines:
            out += ["Over seeds (runs NAME.seedK, `run.sh --seeds ...`):", ""] + seed_lines + [""]
            entry["over_seeds"] = seeds
        # each tree model against the Transformer trained for as long
        for budget in sorted({run.settings["max_update"] for run in chosen}, key=lambda value: int(value or 0)):
            same = [run for run in chosen if run.settings["max_update"] == budget and run.valid]
            baseline = next((run for run in same if describe(run)[0] == "Transformer"), None)
            if baseline is None:
                continue
            points = {run.name: run.valid[-1][2] - baseline.valid[-1][2] for run in same if run is not baseline}
            out += [f"- {name} minus {baseline.name}: {value:+.2f} points (last evaluations)"
                    for name, value in points.items()] + [""]
            entry["last_minus_baseline"] += [{"run": name, "baseline": baseline.name, "points": round(value, 2)}
                                             for name, value in points.items()]  # logged to 0.01
        if any("-SubMask" in describe(run)[0] for run in chosen):
            out += ["-SubMask: every SST node is the token `(X` and, as in the paper (footnote 4), only leaves have "
                    "positions, so without subtree masks all node queries of a sentence are equal and so are all "
                    "node states (tests/methods/hier_accum/test_hier_accum.py::"
                    "test_without_subtree_masks_equal_nodes_stay_equal): "
                    "the model cannot tell its nodes apart, and the root is read from a node.", ""]
        paper = ", ".join(f"{name} {value}" for name, value in PAPER.get(dataset, {}).items())
        out += [f"For orientation, the paper's test accuracies (15k updates, tree model trained on every label): "
                f"{paper}.", ""]
        entry["paper_test_accuracy"] = PAPER.get(dataset, {})
    if args.out:
        write_results(args.out, "\n".join(out), data)
    else:
        print("\n".join(out))


if __name__ == "__main__":
    main()
