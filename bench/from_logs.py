"""``python3 bench/from_logs.py LOG [LOG ...] --out FILE [--json FILE] [--device NAME] [--command CMD]``: the ratio
table of ``bench/run.py`` rebuilt from the progress lines of runs a time limit stopped before they wrote
RESULTS.md.

Each progress line (:data:`report.PROGRESS_LINE`) is one measurement; a (log, round) with both a system and its
baseline at a length gives one ratio, and the table reports their median and count. Pairs as ``run.result_rows``;
device, model size and command as the logs say them (:data:`FACT_LINES`), else as the options give them."""
import argparse
import re
import statistics
import sys
from collections.abc import Sequence

import report
from fairseq_syntax.evaluation.kept_files import open_text
from report import BASELINE, PROGRESS_LINE, REFERENCE_FORM

#: what run.py logs besides its progress lines: the device of its first measurement, its model size; window.sh
#: writes the command as a log's first line
FACT_LINES = {"device": re.compile(r"\] device: (?P<value>.+)$"),
              "model": re.compile(r"\] model size: (?P<value>\S+)$"),
              "command": re.compile(r"^# command: (?P<value>.+)$")}


def read_logs(paths: Sequence[str]) -> tuple[dict[str, str], dict[tuple[str, int], dict[tuple[str, int], dict]]]:
    """{"device", "model", "command"}: what the logs say (values of several logs joined by "; "), and
    {(system label, words): {(log, round): measurement}} of the fp32 lines of every log."""
    found: dict[str, list[str]] = {}
    measurements: dict[tuple[str, int], dict[tuple[str, int], dict]] = {}
    for path in paths:
        with open_text(path) as log:  # NAME.log or the kept NAME.log.gz
            for line in map(str.rstrip, log):
                for fact, pattern in FACT_LINES.items():
                    match = pattern.search(line)
                    if match and match["value"] not in found.get(fact, []):
                        found.setdefault(fact, []).append(match["value"])
                match = PROGRESS_LINE.search(line)
                if match and match["option"] == "fp32":
                    measured = {"tokens_per_s": float(match["tokens"]), "wall_tokens_per_s": float(match["wall"]),
                                "peak_mem_mb": float(match["mem"])}
                    if match["gen"] is not None:
                        measured[report.GENERATE_RATIO[1]] = float(match["gen"])
                    measurements.setdefault((match["system"], int(match["words"])), {})[
                        (path, int(match["round"]))] = measured
    if not measurements:
        raise SystemExit(f"error: no fp32 measurement lines of bench/run.py in {', '.join(paths)}")
    return {fact: "; ".join(values) for fact, values in found.items()}, measurements


def split_label(label: str) -> tuple[str, str]:
    """``transformer_hier_accum (dense, naive) (preorder-split)`` -> (``transformer_hier_accum (dense, naive)``,
    ``preorder-split``)."""
    name, _, form = label.rpartition(" (")
    return name, form[:-1]


def rows(measurements: dict, model: str = "recipe", device: str | None = None) -> list[dict]:
    result = []
    systems = sorted({label for label, _ in measurements}, key=lambda label: (label.startswith(BASELINE + " "), label))
    for label in systems:
        name, form = split_label(label)
        if name == BASELINE:
            if form == REFERENCE_FORM:
                continue
            baseline = f"{BASELINE} ({REFERENCE_FORM})"
        else:
            baseline = f"{BASELINE} ({form})"
        for words in sorted(w for l, w in measurements if l == label):
            mine, theirs = measurements[(label, words)], measurements.get((baseline, words), {})
            rounds = sorted(set(mine) & set(theirs))
            if not rounds:
                continue
            row = {"arch": name, "form": form, "src_words": words, "model": model, "baseline": baseline,
                   "rounds": len(rounds)}
            fields = [(f, m) for f, m in report.RATIO_FIELDS.items() if f != "wall_tokens_per_s_ratio"]  # a GPU's
            if all(report.GENERATE_RATIO[1] in side[r] for side in (mine, theirs) for r in rounds):
                fields.append(report.GENERATE_RATIO)
            for field, measured in fields:
                row[field] = round(report.median_ratio([mine[r] for r in rounds], [theirs[r] for r in rounds],
                                                       measured), 2)
            row["tokens_per_s"] = round(statistics.median(mine[r]["tokens_per_s"] for r in rounds))
            row["baseline_tokens_per_s"] = round(statistics.median(theirs[r]["tokens_per_s"] for r in rounds))
            row["peak_mem_mb"] = round(statistics.median(mine[r]["peak_mem_mb"] for r in rounds))
            if device is not None:
                row["device"] = device
            result.append(row)
    return result


def markdown(table: list[dict], paths: Sequence[str], device: str, command: str, model: str) -> list[str]:
    logs = ", ".join(f"`{path}`" for path in paths)
    cuda = device != "cpu"
    clock = ("wall-clock second of GPU training (each step synchronized)" if cuda else
             "CPU second of the training process")
    memory = ("peak CUDA memory allocated by training beyond the model's weights" if cuda else
              "peak RSS added by training")
    return [
        f"# Training cost against fairseq's transformer (generated by `python3 bench/from_logs.py` from {logs})",
        "",
        (f"Device: {device}. Model size: {model} (`bench/recipe.py`). Each log is one run of `{command}`, stopped "
         "before it wrote its own tables (its last round may be incomplete); everything else as in "
         "`bench/RESULTS.md`: the same --max-tokens batches for every system, fp32."),
        (f"tok/s = target tokens per {clock}; peak mem = {memory}; generate = beam search (beam 5) as "
         "fairseq-generate runs it, where the logs have it. ratio = system / baseline within one round of one run, "
         "median over the rounds in which both were measured (`rounds`)."),
        "",
        *report.markdown_table(table, ("arch", "form", "src_words", "baseline", "tokens_per_s_ratio",
                                       "peak_mem_ratio", "generate_ratio", "rounds", "tokens_per_s",
                                       "baseline_tokens_per_s", "peak_mem_mb")),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--device", help="what the runs trained on (default: what the logs say)")
    parser.add_argument("--command", help="the bench/run.py command that wrote the logs (default: what they say)")
    parser.add_argument("--model", help="the model size (default: what the logs say, else recipe)")
    parser.add_argument("--out", required=True, help="the table (Markdown)")
    parser.add_argument("--json", help="the rows, as RESULTS.json has them")
    args = parser.parse_args(argv)
    facts, measurements = read_logs(args.logs)
    device = args.device or facts.get("device")
    if device is None:
        raise SystemExit("error: the logs do not say their device: give --device")
    model = args.model or facts.get("model", "recipe")
    command = args.command or facts.get("command", "python3 bench/run.py")
    table = rows(measurements, model, device)
    with open(args.out, "w") as out:
        out.write("\n".join(markdown(table, args.logs, device, command, model)) + "\n")
    if args.json:
        report.write_rows(args.json, table)


if __name__ == "__main__":
    main(sys.argv[1:])
