"""Run records and the results tables generated from them (never typed by hand).

A run record is one JSON file per trained-and-scored system, written by the recipes (``record_run``) and named
``*.run.json``:

    {"dataset": "multi30k", "system": "syntax masks", "arch": "transformer_syntax_mask",
     "command": "fairseq-train ...", "updates": 4540, "epochs": 20, "wall_time_s": 4812.0,
     "train_log": "work/masks/train.log",
     "metrics": {"BLEU": 38.1, "chrF": 62.3, ..., "tokenize": "13a", "signatures": {...}},
     "significance": {"transformer": {"BLEU": {"p_value": 0.004, ...}, "chrF": {...}, "n_samples": 1000, ...}}}

``metrics`` is what ``scoring.corpus_scores`` returns (or any dict of numbers, e.g. an accuracy); ``significance``
maps a baseline's system name to ``scoring.paired_bootstrap``'s report of this system against it. ``updates``,
``epochs`` and ``wall_time_s`` are read from the fairseq-train log, so the table shows the budget each number
cost.
"""
import json
import re
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

RECORD_SUFFIX = ".run.json"
REQUIRED_FIELDS = ("dataset", "system", "arch", "command", "updates", "epochs", "wall_time_s", "train_log",
                   "metrics", "significance")
# Columns in this order when present; any other numeric metric follows alphabetically.
PREFERRED_METRICS = ("BLEU", "BLEU-1", "chrF", "TER", "RIBES")
SIGNIFICANCE_METRICS = ("BLEU", "chrF")
COLUMN_NAMES = {"n_sentences": "Sentences"}

# fairseq's logging prefix on stdout, "2024-01-01 12:00:00 | INFO | train | <message>"; a --log-file has the
# bare message.
LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| [A-Z]+ \| (?P<logger>[^|]+?) \| (?P<message>.*)$")
# End-of-epoch statistics printed by the simple/tqdm progress bars: "epoch 003 | loss 4.2 | ... | wall 95".
# Mid-epoch "train_inner" lines read "epoch 003:   200 / 454 loss=..." and do not match.
EPOCH_STATS = re.compile(r"^epoch (?P<epoch>\d+) \| (?P<fields>.*)$")


class RecordError(ValueError):
    """A train log or run record that cannot be used (no statistics, missing fields, unreadable JSON)."""


def _train_stats_from_message(message: str) -> Optional[Tuple[int, int, float]]:
    """(epoch, num_updates, wall seconds) from one end-of-epoch "train" log message, else None."""
    if message.startswith("{"):
        # --log-format json: the "train" tag prefixes every key; "train_wall" is the wall-clock meter.
        try:
            stats = json.loads(message)
        except json.JSONDecodeError:
            return None
        if "train_num_updates" not in stats:
            return None
        return int(stats["epoch"]), int(float(stats["train_num_updates"])), float(stats["train_wall"])
    match = EPOCH_STATS.match(message)
    if not match:
        return None
    fields = dict(field.split(" ", 1) for field in match.group("fields").split(" | ") if " " in field)
    if "valid" in fields or "num_updates" not in fields or "wall" not in fields:
        # "epoch 003 | valid on 'valid' subset | ..." is the validation line of the same epoch.
        return None
    return int(match.group("epoch")), int(float(fields["num_updates"])), float(fields["wall"])


def parse_train_log(path) -> Dict[str, float]:
    """Updates, epochs and wall-clock seconds of a fairseq-train run, from its last end-of-epoch statistics line.

    Reads fairseq-train's stdout (any --log-format of simple, tqdm, json) or its --log-file. The "wall" meter is
    saved in checkpoints, so after a resume the last line still gives the whole run's time. Returns
    {"updates": int, "epochs": int, "wall_time_s": float}.
    """
    last = None
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.rstrip("\r\n")
            prefixed = LOG_PREFIX.match(line)
            if prefixed:
                if prefixed.group("logger") != "train":
                    continue
                line = prefixed.group("message")
            stats = _train_stats_from_message(line)
            if stats is not None:
                last = stats
    if last is None:
        raise RecordError(
            f"{path}: no end-of-epoch 'train' statistics line (fairseq prints one per finished epoch, "
            f"e.g. 'epoch 001 | loss ... | num_updates 38 | ... | wall 12'); is this a fairseq-train log?"
        )
    epochs, updates, wall = last
    return {"updates": updates, "epochs": epochs, "wall_time_s": wall}


def record_run(path, *, dataset: str, system: str, arch: str, command: str, train_log, metrics: dict,
               significance: Optional[dict] = None, by_length: Optional[List[dict]] = None) -> dict:
    """Write the run record of one system to `path` (by convention `<name>.run.json`) and return it.

    updates, epochs and wall_time_s come from `train_log` (see parse_train_log); `by_length` is the system's
    `scoring.bleu_by_length` rows, if scored.
    """
    record = {"dataset": dataset, "system": system, "arch": arch, "command": command,
              **parse_train_log(train_log), "train_log": str(train_log), "metrics": metrics,
              "significance": significance or {}}
    if by_length:
        record["by_length"] = by_length
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
    return record


def load_record(path) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except json.JSONDecodeError as error:
        raise RecordError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from error
    if not isinstance(record, dict):
        raise RecordError(f"{path}: a run record is a JSON object, got {type(record).__name__}")
    missing = [field for field in REQUIRED_FIELDS if field not in record]
    if missing:
        raise RecordError(f"{path}: run record lacks {', '.join(missing)}")
    return record


def find_record_files(paths: Iterable) -> List[Path]:
    """Each file as given; each directory contributes its `*.run.json` files (recursively, sorted)."""
    found = []
    for path in map(Path, paths):
        if path.is_dir():
            in_dir = sorted(path.rglob(f"*{RECORD_SUFFIX}"))
            if not in_dir:
                raise RecordError(f"{path}: no *{RECORD_SUFFIX} run records in this directory")
            found.extend(in_dir)
        elif path.is_file():
            found.append(path)
        else:
            raise RecordError(f"{path}: no such file or directory")
    return found


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _metric_columns(records: Sequence[dict]) -> List[str]:
    present = {key for record in records for key, value in record["metrics"].items() if _is_number(value)}
    preferred = [name for name in PREFERRED_METRICS if name in present]
    return preferred + sorted(present - set(preferred))


def _baseline_names(records: Sequence[dict]) -> List[str]:
    names = []
    for record in records:
        for name in record["significance"]:
            if name not in names:
                names.append(name)
    return names


def format_wall_time(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _cell(text) -> str:
    """Markdown table cells cannot hold a raw '|' or a line break."""
    return str(text).replace("\n", " ").replace("|", "\\|")


def _format_metric(value) -> str:
    if not _is_number(value):
        return "–"
    return str(value) if isinstance(value, int) else f"{value:.2f}"


def _format_p_values(report: Optional[dict]) -> str:
    if not report:
        return "–"
    return " / ".join(f"{report[m]['p_value']:.3f}" if m in report else "–" for m in SIGNIFICANCE_METRICS)


def _table(records: Sequence[dict]) -> List[str]:
    metrics = _metric_columns(records)
    baselines = _baseline_names(records)
    show_tokenize = any("tokenize" in record["metrics"] for record in records)
    header = (["System", "Arch"] + (["BLEU tok."] if show_tokenize else [])
              + [COLUMN_NAMES.get(name, name) for name in metrics]
              + [f"p vs {name} (BLEU / chrF)" for name in baselines]
              + ["Updates", "Epochs", "Wall time", "Command"])
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    for record in records:
        row = [record["system"], record["arch"]]
        if show_tokenize:
            row.append(record["metrics"].get("tokenize", "–"))
        row += [_format_metric(record["metrics"].get(name)) for name in metrics]
        row += [_format_p_values(record["significance"].get(name)) for name in baselines]
        row += [record["updates"], record["epochs"], format_wall_time(record["wall_time_s"]),
                f"`{record['command']}`"]
        lines.append("| " + " | ".join(_cell(value) for value in row) + " |")
    return lines


def _by_length_table(records: Sequence[dict]) -> List[str]:
    """Systems x reference-length intervals, for the records scored with the same intervals as the first one."""
    scored = [record for record in records if record.get("by_length")]
    if not scored:
        return []
    buckets = [(row["bucket"], row["n_sentences"]) for row in scored[0]["by_length"]]
    same = [r for r in scored if [(row["bucket"], row["n_sentences"]) for row in r["by_length"]] == buckets]
    header = ["System"] + [f"{bucket} (n={count})" for bucket, count in buckets]
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    for record in same:
        lines.append("| " + " | ".join([_cell(record["system"])]
                                       + [_format_metric(row["BLEU"]) for row in record["by_length"]]) + " |")
    return lines


def _notes(records: Sequence[dict]) -> List[str]:
    """Test settings and sacrebleu signatures: what a reader needs to reproduce or compare the numbers."""
    notes = []
    tests = []
    for record in records:
        for report in record["significance"].values():
            setting = f"{report.get('test', 'paired test')}, {report.get('n_samples', '?')} samples, " \
                      f"seed {report.get('seed', '?')}"
            if setting not in tests:
                tests.append(setting)
    for setting in tests:
        notes.append(f"- p: two-sided p-value of the row's system against the named baseline ({setting}).")
    signatures = []
    for record in records:
        for metric, signature in record["metrics"].get("signatures", {}).items():
            if (metric, signature) not in signatures:
                signatures.append((metric, signature))
    for metric, signature in signatures:
        notes.append(f"- {metric} signature: `{signature}`")
    return notes


def render_markdown(records: Sequence[dict], sources: Sequence = ()) -> str:
    """One table per dataset (datasets in order of first appearance, rows in the given order), each followed by
    the significance-test settings and sacrebleu signatures; `sources` (record paths) are listed at the end."""
    datasets: Dict[str, List[dict]] = {}
    for record in records:
        datasets.setdefault(record["dataset"], []).append(record)
    lines = ["<!-- Generated by fairseq-syntax-results from run records; edit the records, not this file. -->",
             ""]
    for dataset, rows in datasets.items():
        lines += [f"## {dataset}", ""] + _table(rows) + [""]
        notes = _notes(rows)
        if notes:
            lines += notes + [""]
        by_length = _by_length_table(rows)
        if by_length:
            lines += ["BLEU by reference length (tokens of the reference, sentences per interval in the header):",
                      ""] + by_length + [""]
    if sources:
        lines += ["Run records: " + ", ".join(f"`{source}`" for source in sources), ""]
    return "\n".join(lines)
