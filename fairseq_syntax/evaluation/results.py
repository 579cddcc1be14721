"""Run records and the results tables generated from them (never typed by hand).

A run record is one JSON file per trained-and-scored system, written by the recipes (``record_run``) and named
``*.run.json``:

    {"dataset": "multi30k", "system": "syntax masks", "arch": "transformer_syntax_mask",
     "command": "fairseq-train ...", "updates": 4540, "epochs": 20, "wall_time_s": 4812.0,
     "train_log": "work/masks/train.log",
     "metrics": {"BLEU": 38.1, "chrF": 62.3, ..., "tokenize": "13a", "signatures": {...}},
     "significance": {"transformer": {"BLEU": {"p_value": 0.004, ...}, "chrF": {...}, "n_samples": 1000, ...}}}

``metrics`` is what ``scoring.corpus_scores`` returns (or any dict of numbers, e.g. an accuracy); ``significance``
maps a baseline's system name to ``scoring.paired_bootstrap``'s report of this system against it. Optional fields:
``seed``, ``device`` (what it was trained on), ``parsers`` (the ``parsers.json`` of its training data,
``fairseq_syntax.parsing.provenance``), and for a system over seeds ``seeds`` and ``metrics_sd``. ``updates``,
``epochs`` and ``wall_time_s`` are read from the fairseq-train log, so the table shows the budget each number
cost.

This module is also the one place that writes a recipe's ``RESULTS.md`` and ``RESULTS.json`` (``write_results``):
the run records' table here, and the recipes whose results are read from logs (``examples/sst/results.py``,
``examples/ptb_induction/make_results.py``) render their tables with ``markdown_table`` / ``table_json`` (or a
``Table`` of ``Cell``s, which gives both from the same rows). Logs and decodes are kept gzipped beside their
records: every reader here (``open_text``, ``read_text``, ``parse_train_log``, and ``scoring.read_lines``) takes
``name`` or ``name.gz``, whichever exists.
"""
import gzip
import io
import json
import os
import re
import shutil
import statistics
from pathlib import Path
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

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


def existing_path(path) -> Path:
    """``path`` if it exists; else its gzipped (``path.gz``) or, for a ``.gz`` name, its uncompressed twin if that
    exists; else ``path`` itself (so that opening it names the file that was asked for)."""
    path = Path(path)
    if path.exists():
        return path
    twin = path.with_name(path.name[:-len(".gz")] if path.name.endswith(".gz") else path.name + ".gz")
    return twin if twin.exists() else path


def open_text(path, mode: str = "r", encoding: str = "utf-8", **kwargs):
    """Open a text file, through gzip when its name ends in ``.gz``; ``mode`` is "r", "w" or "a".

    Reading takes ``path`` or ``path.gz``, whichever exists (``existing_path``). A gzip file written here has no
    name or time stamp in its header, so the same text always gives the same bytes.
    """
    mode = mode.replace("t", "")
    if mode not in ("r", "w", "a"):
        raise ValueError(f"mode must be 'r', 'w' or 'a', not {mode!r}")
    path = existing_path(path) if mode == "r" else Path(path)
    if not path.name.endswith(".gz"):
        return open(path, mode, encoding=encoding, **kwargs)
    if mode == "r":
        return gzip.open(path, "rt", encoding=encoding, **kwargs)
    raw = open(path, mode + "b")
    compressed = gzip.GzipFile(filename="", mode=mode + "b", fileobj=raw, mtime=0)
    compressed.myfileobj = raw  # closed with the gzip stream
    return io.TextIOWrapper(compressed, encoding=encoding, **kwargs)


def read_text(path) -> str:
    """The whole text of ``path`` or ``path.gz`` (see ``open_text``)."""
    with open_text(path) as handle:
        return handle.read()


def compress(path) -> Path:
    """Gzip ``path`` into ``path.gz`` (no name or time stamp in the header) and remove ``path``; returns the new
    path. The recipes call this (or ``gzip -n``) on their logs and decodes once a run is scored."""
    path = Path(path)
    target = path.with_name(path.name + ".gz")
    with open(path, "rb") as source, open(target, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as compressed:
            shutil.copyfileobj(source, compressed)
    os.remove(path)
    return target


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

    Reads fairseq-train's stdout (any --log-format of simple, tqdm, json) or its --log-file, plain or gzipped
    (``path`` or ``path.gz``). The "wall" meter is saved in checkpoints, so after a resume the last line still
    gives the whole run's time. Returns {"updates": int, "epochs": int, "wall_time_s": float}.
    """
    last = None
    with open_text(path, errors="replace") as handle:
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
               significance: Optional[dict] = None, by_length: Optional[List[dict]] = None, **extra) -> dict:
    """Write the run record of one system to `path` (by convention `<name>.run.json`) and return it.

    updates, epochs and wall_time_s come from `train_log` (see parse_train_log; comma-separated logs, one per seed,
    give the means); `by_length` is the system's `scoring.bleu_by_length` rows, if scored. `extra` fields go into
    the record as they are: `seed` (of one run), `device`, and for a system over seeds `seeds` (how many) and
    `metrics_sd` (standard deviation over seeds of each metric in `metrics`, their means).
    """
    logs = [parse_train_log(log) for log in str(train_log).split(",")]
    train = {key: type(logs[0][key])(statistics.fmean(log[key] for log in logs)) for key in logs[0]}
    record = {"dataset": dataset, "system": system, "arch": arch, "command": command,
              **train, "train_log": str(train_log), "metrics": metrics, "significance": significance or {}, **extra}
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


def markdown_cell(text) -> str:
    """Markdown table cells cannot hold a raw '|' or a line break."""
    return str(text).replace("\n", " ").replace("|", "\\|")


def markdown_table(header: Sequence, rows: Iterable[Sequence], align: Optional[str] = None) -> List[str]:
    """The lines of a Markdown table: ``header``, then one line per row (cells as given, ``str()`` of each, with
    '|' and line breaks escaped). ``align`` has one letter per column: "l" (the default) or "r" (right-aligned,
    for numbers)."""
    align = align or "l" * len(header)
    if len(align) != len(header) or set(align) - {"l", "r"}:
        raise ValueError(f"align needs one of 'l' or 'r' per column ({len(header)}), got {align!r}")
    lines = ["| " + " | ".join(markdown_cell(cell) for cell in header) + " |",
             "|" + "".join("---:|" if letter == "r" else "---|" for letter in align)]
    for row in rows:
        row = list(row)
        if len(row) != len(header):
            raise ValueError(f"a row of {len(row)} cells in a table of {len(header)} columns: {row!r}")
        lines.append("| " + " | ".join(markdown_cell(cell) for cell in row) + " |")
    return lines


def table_json(header: Sequence[str], rows: Iterable[Sequence]) -> Dict[str, Any]:
    """A table for RESULTS.json: ``{"columns": header, "rows": [{column: value}, ...]}``, one object per row of
    the Markdown table, with the values unrounded (numbers as numbers, None for an empty cell)."""
    header = list(header)
    table_rows = []
    for row in rows:
        row = list(row)
        if len(row) != len(header):
            raise ValueError(f"a row of {len(row)} values in a table of {len(header)} columns: {row!r}")
        table_rows.append(dict(zip(header, row)))
    return {"columns": header, "rows": table_rows}


class Cell(NamedTuple):
    """One cell of a ``Table``: its value for RESULTS.json (unrounded; None for none) and its text for RESULTS.md."""
    value: Any
    text: str


class Table:
    """A results table built row by row, rendered to Markdown (``lines``) and to RESULTS.json (``json``) from the
    same rows: a cell is a ``Cell(value, text)``, or a plain value that is its own text."""

    def __init__(self, header: Sequence[str], align: Optional[str] = None):
        self.header, self.align, self.rows = list(header), align, []

    def add(self, *cells) -> None:
        if len(cells) != len(self.header):
            raise ValueError(f"a row of {len(cells)} cells in a table of {len(self.header)} columns: {cells!r}")
        self.rows.append([cell if isinstance(cell, Cell) else Cell(cell, str(cell)) for cell in cells])

    def lines(self) -> List[str]:
        return markdown_table(self.header, ([cell.text for cell in row] for row in self.rows), self.align)

    def json(self) -> Dict[str, Any]:
        return table_json(self.header, ([cell.value for cell in row] for row in self.rows))


def results_json_path(markdown_path) -> Path:
    """RESULTS.json beside RESULTS.md (the Markdown file's name with the suffix .json)."""
    return Path(markdown_path).with_suffix(".json")


def write_results(markdown_path, markdown: str, data: Dict[str, Any]) -> Tuple[Path, Path]:
    """Write a recipe's results: ``markdown`` to ``markdown_path`` (RESULTS.md) and ``data`` to RESULTS.json
    beside it (indented, UTF-8, keys in the given order). Returns both paths."""
    markdown_path = Path(markdown_path)
    json_path = results_json_path(markdown_path)
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    markdown_path.write_text(markdown if markdown.endswith("\n") else markdown + "\n", encoding="utf-8")
    with open(json_path, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
    return markdown_path, json_path


def _format_metric(value) -> str:
    if not _is_number(value):
        return "–"
    return str(value) if isinstance(value, int) else f"{value:.2f}"


def _format_p_values(report: Optional[dict]) -> str:
    if not report:
        return "–"
    return " / ".join(f"{report[m]['p_value']:.3f}" if m in report else "–" for m in SIGNIFICANCE_METRICS)


def _p_values(report: Optional[dict]) -> Optional[Dict[str, float]]:
    if not report:
        return None
    return {m: report[m]["p_value"] for m in SIGNIFICANCE_METRICS if m in report}


def _table_data(records: Sequence[dict]) -> Tuple[List[str], List[list], List[list]]:
    """The systems table: its header, each row's values (for RESULTS.json) and each row's cells (for RESULTS.md)."""
    metrics = _metric_columns(records)
    baselines = _baseline_names(records)
    show_tokenize = any("tokenize" in record["metrics"] for record in records)
    # runs of several seeds: the seed of a run, the number of seeds of a system scored over seeds, the device
    run_fields = [(field, title) for field, title in (("seed", "Seed"), ("seeds", "Seeds"), ("device", "Device"))
                  if any(field in record for record in records)]
    header = (["System", "Arch"] + [title for _, title in run_fields] + (["BLEU tok."] if show_tokenize else [])
              + [COLUMN_NAMES.get(name, name) + (" (mean ± sd)" if any(
                  name in record.get("metrics_sd", {}) for record in records) else "") for name in metrics]
              + [f"p vs {name} (BLEU / chrF)" for name in baselines]
              + ["Updates", "Epochs", "Wall time", "Command"])
    values, cells = [], []
    for record in records:
        value = [record["system"], record["arch"]] + [record.get(field) for field, _ in run_fields]
        cell = [record["system"], record["arch"]] + [record.get(field, "–") for field, _ in run_fields]
        if show_tokenize:
            value.append(record["metrics"].get("tokenize"))
            cell.append(record["metrics"].get("tokenize", "–"))
        sd = record.get("metrics_sd", {})
        means = [record["metrics"].get(name) if _is_number(record["metrics"].get(name)) else None
                 for name in metrics]
        value += [{"mean": mean, "sd": sd[name]} if _is_number(sd.get(name)) else mean
                  for name, mean in zip(metrics, means)]
        cell += [_format_metric(record["metrics"].get(name))
                 + (f" ± {_format_metric(sd[name])}" if _is_number(sd.get(name)) else "") for name in metrics]
        value += [_p_values(record["significance"].get(name)) for name in baselines]
        cell += [_format_p_values(record["significance"].get(name)) for name in baselines]
        value += [record["updates"], record["epochs"], record["wall_time_s"], record["command"]]
        cell += [record["updates"], record["epochs"], format_wall_time(record["wall_time_s"]),
                 f"`{record['command']}`"]
        values.append(value)
        cells.append(cell)
    return header, values, cells


def _table(records: Sequence[dict]) -> List[str]:
    header, _, cells = _table_data(records)
    return markdown_table(header, cells)


def _by_length_data(records: Sequence[dict]) -> Tuple[List[str], List[list], List[list]]:
    """Systems x reference-length intervals, for the records scored with the same intervals as the first one."""
    scored = [record for record in records if record.get("by_length")]
    if not scored:
        return [], [], []
    buckets = [(row["bucket"], row["n_sentences"]) for row in scored[0]["by_length"]]
    same = [r for r in scored if [(row["bucket"], row["n_sentences"]) for row in r["by_length"]] == buckets]
    header = ["System"] + [f"{bucket} (n={count})" for bucket, count in buckets]
    values = [[record["system"]] + [row["BLEU"] for row in record["by_length"]] for record in same]
    cells = [[record["system"]] + [_format_metric(row["BLEU"]) for row in record["by_length"]] for record in same]
    return header, values, cells


def _by_length_table(records: Sequence[dict]) -> List[str]:
    header, _, cells = _by_length_data(records)
    return markdown_table(header, cells) if header else []


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
    notes += _parses_notes(records)
    return notes


def _parses_notes(records: Sequence[dict]) -> List[str]:
    """Which parsers made the syntax each row was trained on (a record's ``parsers``), one line per parser set:
    a table that mixes runs of older and newer parses says which is which. Nothing when no record names any."""
    if not any("parsers" in record for record in records):
        return []
    from fairseq_syntax.parsing.provenance import summary

    systems: Dict[str, List[str]] = {}
    for record in records:
        described = summary(record["parsers"]) if record.get("parsers") else None
        key = f"`{described}`" if described else "not recorded (trained before the data named their parsers)"
        systems.setdefault(key, []).append(record["system"])
    return [f"- parses of the training data (systems that read no syntax ignore them): {key}: {', '.join(names)}"
            for key, names in systems.items()]


def _by_dataset(records: Sequence[dict]) -> Dict[str, List[dict]]:
    datasets: Dict[str, List[dict]] = {}
    for record in records:
        datasets.setdefault(record["dataset"], []).append(record)
    return datasets


def render_markdown(records: Sequence[dict], sources: Sequence = ()) -> str:
    """One table per dataset (datasets in order of first appearance, rows in the given order), each followed by
    the significance-test settings and sacrebleu signatures; `sources` (record paths) are listed at the end."""
    datasets = _by_dataset(records)
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


def render_json(records: Sequence[dict], sources: Sequence = ()) -> Dict[str, Any]:
    """RESULTS.json of the run records: per dataset, the table of ``render_markdown`` with one row per system and
    the same columns (``table_json``: numbers unrounded, "Wall time" in seconds, each "p vs" cell the p-values
    by metric), the BLEU-by-length table if any, the significance-test settings and sacrebleu signatures."""
    datasets = {}
    for dataset, rows in _by_dataset(records).items():
        header, values, _ = _table_data(rows)
        entry = {"table": table_json(header, values)}
        length_header, length_values, _ = _by_length_data(rows)
        if length_header:
            entry["bleu_by_length"] = table_json(length_header, length_values)
        entry["notes"] = [note[2:] for note in _notes(rows)]
        datasets[dataset] = entry
    return {"generated_by": "fairseq-syntax-results (fairseq_syntax.evaluation.results.render_json)",
            "datasets": datasets, "run_records": [str(source) for source in sources]}
