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
``seed``, ``device`` (what it was trained on), ``valid`` (one run's validation curve: the statistic its best
checkpoint is chosen by and ``[epoch, value]`` per epoch, ``parse_valid_curve``), ``parsers`` (the ``parsers.json`` of its training data,
``fairseq_syntax.parsing.provenance``), and for a system over seeds ``seeds`` and ``metrics_sd``. ``updates``,
``epochs`` and ``wall_time_s`` are read from the fairseq-train log, so the table shows the budget each number
cost.

This module is also the one place that writes a recipe's ``RESULTS.md`` and ``RESULTS.json`` (``write_results``):
the run records' table here, and the recipes whose results are read from logs (``examples/sst/results.py``,
``examples/ptb_induction/make_results.py``) render their tables with ``markdown_table`` / ``table_json`` (or a
``Table`` of ``Cell``s, which gives both from the same rows). Logs and decodes are kept gzipped beside their
records, and finished runs' are packed into their folder's archive (:mod:`packed_runs`): every reader here
(``open_text``, ``read_text``, ``parse_train_log``, and ``scoring.read_lines``) takes ``name`` or ``name.gz``, whichever
exists, else the packed copy.
"""
import functools
import gzip
import io
import json
import os
import re
import shutil
import statistics
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from fairseq_syntax.evaluation import packed_runs
from fairseq_syntax.evaluation.packed_runs import RECORD_SUFFIX, existing_path, find_member

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


def open_text(path, mode: str = "r", encoding: str = "utf-8", **kwargs):
    """Open a text file, through gzip when its name ends in ``.gz``; ``mode`` is "r", "w" or "a".

    Reading takes ``path`` or ``path.gz``, whichever exists (``existing_path``), else its packed copy
    (``packed_runs.find_member``). A gzip file written here has no name or time stamp in its header, so the
    same text always gives the same bytes.
    """
    mode = mode.replace("t", "")
    if mode not in ("r", "w", "a"):
        raise ValueError(f"mode must be 'r', 'w' or 'a', not {mode!r}")
    if mode == "r":
        found = existing_path(path)
        try:
            if found.name.endswith(".gz"):
                return gzip.open(found, "rt", encoding=encoding, **kwargs)
            return open(found, encoding=encoding, **kwargs)
        except FileNotFoundError:
            # not on disk, or packed since existing_path looked (a lane packs while another reads: the archive is
            # written before the file is removed)
            packed = find_member(path)
            if packed is None:
                raise
            return io.TextIOWrapper(io.BytesIO(packed.data), encoding=encoding, **kwargs)
    path = Path(path)
    if not path.name.endswith(".gz"):
        return open(path, mode, encoding=encoding, **kwargs)
    raw = open(path, mode + "b")  # noqa: SIM115  (the caller's handle closes it, through the gzip stream)
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
    with open(path, "rb") as source, open(target, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as compressed:
        shutil.copyfileobj(source, compressed)
    os.remove(path)
    return target


def _train_stats_from_message(message: str) -> tuple[int, int, float] | None:
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


def _log_messages(path, loggers) -> Iterator[str]:
    """The messages of fairseq-train's ``loggers`` (a name such as "train" or "valid", or a tuple of names) in a log
    (``path`` or ``path.gz``): on stdout the lines they printed, less the timestamp prefix; in a --log-file, which has
    no prefix, every line."""
    loggers = (loggers,) if isinstance(loggers, str) else tuple(loggers)
    with open_text(path, errors="replace") as handle:
        for line in handle:
            line = line.rstrip("\r\n")
            prefixed = LOG_PREFIX.match(line)
            if prefixed:
                if prefixed.group("logger") not in loggers:
                    continue
                line = prefixed.group("message")
            yield line


#: how fairseq-train's log opens (its configuration), printed again by each run that resumes a checkpoint
TRAIN_START = ("{'_name'", "Namespace(")


def parse_train_log(path) -> dict[str, float]:
    """Updates, epochs and wall-clock seconds of a fairseq-train run, from its end-of-epoch statistics lines.

    Reads fairseq-train's stdout (any --log-format of simple, tqdm, json) or its --log-file, plain or gzipped
    (``path`` or ``path.gz``). A run resumed from a checkpoint appends a second fairseq-train's output to the same
    log, and that one's "wall" meter starts again from 0 (fairseq 0.12 restores the meter's sum but not its running
    start), so the wall time is the sum over the log's fairseq-train runs of each one's last "wall": a run starts
    at its configuration line, or where "wall" falls below the value before it. The time of an epoch cut short by a
    stop is not counted (it is trained again). Returns {"updates": int, "epochs": int, "wall_time_s": float}.
    """
    last = None
    earlier_runs_wall = run_wall = 0.0
    for message in _log_messages(path, ("train", "fairseq_cli.train")):
        if message.startswith(TRAIN_START):
            earlier_runs_wall, run_wall = earlier_runs_wall + run_wall, 0.0
            continue
        stats = _train_stats_from_message(message)
        if stats is None:
            continue
        if stats[2] < run_wall:  # a restart the log does not mark (e.g. a --log-file of another format)
            earlier_runs_wall += run_wall
        last, run_wall = stats, stats[2]
    if last is None:
        raise RecordError(
            f"{path}: no end-of-epoch 'train' statistics line (fairseq prints one per finished epoch, "
            f"e.g. 'epoch 001 | loss ... | num_updates 38 | ... | wall 12'); is this a fairseq-train log?"
        )
    epochs, updates, _ = last
    return {"updates": updates, "epochs": epochs, "wall_time_s": earlier_runs_wall + run_wall}


def command_option(command: str, option: str) -> str | None:
    """The value ``command`` gives ``option`` (``--patience 5``, ``--patience=5``, quoted or not), else None."""
    found = re.search(rf"{re.escape(option)}[ =]['\"]?([\w.-]+)", command)
    return found.group(1) if found else None


def best_checkpoint_metric(command: str) -> str:
    """The validation statistic that fairseq-train ``command`` chooses its best checkpoint by (fairseq's default:
    loss)."""
    return command_option(command, "--best-checkpoint-metric") or "loss"


def parse_valid_curve(path, metric: str = "loss") -> list[tuple[int, float]]:
    """[(epoch, value)] of the validation statistic ``metric`` at the end of each epoch of a fairseq-train log
    (the formats ``parse_train_log`` reads), in epoch order. A run that was resumed may validate an epoch twice (in
    the log of the killed process and again after it); the last value of an epoch is the one kept. Empty when the log
    has no validation line with ``metric``."""
    curve: dict[int, float] = {}
    for message in _log_messages(path, "valid"):
        if message.startswith("{"):
            try:
                stats = json.loads(message)
            except json.JSONDecodeError:
                continue
            if f"valid_{metric}" in stats and "epoch" in stats:
                curve[int(stats["epoch"])] = float(stats[f"valid_{metric}"])
            continue
        match = EPOCH_STATS.match(message)
        if not match or not match.group("fields").startswith("valid on "):
            continue
        fields = dict(field.split(" ", 1) for field in match.group("fields").split(" | ") if " " in field)
        if metric in fields:
            curve[int(match.group("epoch"))] = float(fields[metric])
    return sorted(curve.items())


def mean_and_sd(values: Iterable[float]) -> tuple[float, float]:
    """The mean and the sample standard deviation (n - 1) of ``values``; sd 0 for one value."""
    values = list(values)
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


OUT_DIR = "OUT_DIR"  # how a record writes the recipe's output folder (data, checkpoints: outside the repository)
# a path starts a token (after a space, '=', ',', a quote or a bracket) and its prefix ends where a '/' or the token does
_PATH_START = r"(?<![\w.~/-])"
_PATH_END = r"(?=/|$|[\s,;:='\")\]])"


def _path_forms(path: str) -> list[str]:
    """How ``path`` may be written in a command: absolute (as given and with links resolved) and, when given
    relative, as given; longest first."""
    forms = {os.path.abspath(path), os.path.realpath(path)}
    given = os.path.normpath(path)
    if not os.path.isabs(given) and given != os.curdir and not given.startswith(os.pardir):
        forms.add(given)
    return sorted(forms, key=len, reverse=True)


PYTHON_PATHS = (("SITE_PACKAGES", "purelib"), ("SITE_PACKAGES", "platlib"), ("PYTHON_PREFIX", None))


def _path_rules(out_dir: str | None, root: str | None, python: bool = False) -> list:
    """The (pattern, replacement) pairs of ``portable_paths``, in the order they apply; with ``python``, the Python
    installation's folders too (site-packages -> ``SITE_PACKAGES``, the prefix -> ``PYTHON_PREFIX``: where a log's
    warnings name the library file that raised them)."""
    rules = []
    for form in _path_forms(out_dir) if out_dir else ():
        rules.append((re.compile(_PATH_START + re.escape(form) + _PATH_END), OUT_DIR))
    for form in _path_forms(root) if root else ():
        rules += [(re.compile(_PATH_START + re.escape(form) + "/"), ""),
                  (re.compile(_PATH_START + re.escape(form) + _PATH_END), os.curdir)]
    if python:
        import sysconfig

        folders = [(name, sysconfig.get_paths()[key] if key else sys.prefix) for name, key in PYTHON_PATHS]
        for name, folder in folders:
            for form in _path_forms(folder):
                rules.append((re.compile(_PATH_START + re.escape(form) + _PATH_END), name))
    return rules


def portable_paths(value, out_dir: str | None = None, root: str | None = None, python: bool = False):
    """``value`` (a string, or dicts and lists of them, e.g. a whole run record) with every path under ``out_dir``
    written from the literal ``OUT_DIR`` (``/x/work/ckpt`` -> ``OUT_DIR/ckpt``), then every path under ``root`` (the
    repository) relative to it (``/x/repo/examples/runs`` -> ``examples/runs``; ``root`` itself -> ``.``): a record
    then names no folder of the machine it ran on. With ``python``, also the Python installation's folders
    (``_path_rules``). Other text is kept."""
    rules = _path_rules(out_dir, root, python)

    def convert(item):
        if isinstance(item, str):
            for pattern, replacement in rules:
                item = pattern.sub(replacement, item)
            return item
        if isinstance(item, dict):
            return {key: convert(inner) for key, inner in item.items()}
        if isinstance(item, list):
            return [convert(inner) for inner in item]
        return item

    return convert(value)


def make_log_portable(path, out_dir: str | None = None, root: str | None = None) -> int:
    """Rewrite the log ``path`` (plain, or gzipped: ``open_text``) in place with ``portable_paths``, Python's folders
    included, before the recipes keep it beside a run record: a kept log names no folder of the machine it was
    written on. Line ends and undecodable bytes are kept as they are. Returns the number of lines changed."""
    path = Path(path)
    with open_text(path, errors="surrogateescape", newline="") as handle:
        lines = handle.read().split("\n")
    portable = portable_paths(lines, out_dir, root, python=True)
    changed = sum(old != new for old, new in zip(lines, portable))
    if changed:
        temporary = path.with_name(".portable." + path.name)  # the same ending: gzipped where the log is
        with open_text(temporary, "w", errors="surrogateescape", newline="") as out:
            out.write("\n".join(portable))
        os.replace(temporary, path)
    return changed


def record_run(path, *, dataset: str, system: str, arch: str, command: str, train_log, metrics: dict,
               significance: dict | None = None, by_length: list[dict] | None = None,
               out_dir: str | None = None, root: str | None = None, **extra) -> dict:
    """Write the run record of one system to `path` (by convention `<name>.run.json`) and return it.

    updates, epochs and wall_time_s come from `train_log` (see parse_train_log; comma-separated logs, one per seed,
    give the means); `by_length` is the system's `scoring.bleu_by_length` rows, if scored. `extra` fields go into
    the record as they are: `seed` (of one run), `device`, `decode_command`, `score_command`, and for a system over
    seeds `seeds` (how many), `seed_list` (which), `metrics_sd` (standard deviation over seeds of each metric in
    `metrics`, their means) and `per_seed_metrics` (each numeric metric's value per seed, in `seed_list`'s order).
    With `out_dir` (the recipe's output folder) or `root` (the repository), the record's paths are written by
    `portable_paths`. A record of one run also holds its validation curve (`valid`) of the statistic `command`
    chooses the best checkpoint by, so a table can show that training converged.
    """
    logs = [parse_train_log(log) for log in str(train_log).split(",")]
    train = {key: type(logs[0][key])(statistics.fmean(log[key] for log in logs)) for key in logs[0]}
    record = {"dataset": dataset, "system": system, "arch": arch, "command": command,
              **train, "train_log": str(train_log), "metrics": metrics, "significance": significance or {}, **extra}
    if len(logs) == 1:  # one run: its validation curve (a record over seeds has its runs' records for theirs)
        metric = best_checkpoint_metric(command)
        curve = parse_valid_curve(train_log, metric)
        if curve:
            record["valid"] = {"metric": metric, "curve": [list(point) for point in curve]}
    if by_length:
        record["by_length"] = by_length
    if out_dir or root:
        record = portable_paths(record, out_dir, root)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    # whole or not at all: the other lane may pack this folder's finished runs meanwhile
    packed_runs.write_atomically(path, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return record


def load_record(path) -> dict:
    """The run record ``path``: the file, or its packed copy (a finished run's record is packed with its outputs)."""
    try:
        record = json.loads(packed_runs.read_bytes(path).decode("utf-8"))
    except json.JSONDecodeError as error:
        raise RecordError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from error
    if not isinstance(record, dict):
        raise RecordError(f"{path}: a run record is a JSON object, got {type(record).__name__}")
    missing = [field for field in REQUIRED_FIELDS if field not in record]
    if missing:
        raise RecordError(f"{path}: run record lacks {', '.join(missing)}")
    return record


def find_record_files(paths: Iterable) -> list[Path]:
    """Each file as given (there, or packed); each directory contributes its `*.run.json` files, those packed
    included (recursively, sorted)."""
    found = []
    for path in map(Path, paths):
        if path.is_dir():
            in_dir = packed_runs.rglob(path, RECORD_SUFFIX)
            if not in_dir:
                raise RecordError(f"{path}: no *{RECORD_SUFFIX} run records in this directory")
            found.extend(in_dir)
        elif path.is_file() or packed_runs.find_member(path) is not None:
            found.append(path)
        else:
            raise RecordError(f"{path}: no such file or directory")
    return found


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _metric_columns(records: Sequence[dict]) -> list[str]:
    present = {key for record in records for key, value in record["metrics"].items() if _is_number(value)}
    preferred = [name for name in PREFERRED_METRICS if name in present]
    return preferred + sorted(present - set(preferred))


def _baseline_names(records: Sequence[dict]) -> list[str]:
    names = []
    for record in records:
        for name in record["significance"]:
            if name not in names:
                names.append(name)
    return names


def format_wall_time(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def markdown_cell(text) -> str:
    """Markdown table cells cannot hold a raw '|' or a line break."""
    return str(text).replace("\n", " ").replace("|", "\\|")


def markdown_table(header: Sequence, rows: Iterable[Sequence], align: str | None = None) -> list[str]:
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


def table_json(header: Sequence[str], rows: Iterable[Sequence]) -> dict[str, Any]:
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

    def __init__(self, header: Sequence[str], align: str | None = None):
        self.header, self.align, self.rows = list(header), align, []

    def add(self, *cells) -> None:
        if len(cells) != len(self.header):
            raise ValueError(f"a row of {len(cells)} cells in a table of {len(self.header)} columns: {cells!r}")
        self.rows.append([cell if isinstance(cell, Cell) else Cell(cell, str(cell)) for cell in cells])

    def lines(self) -> list[str]:
        return markdown_table(self.header, ([cell.text for cell in row] for row in self.rows), self.align)

    def json(self) -> dict[str, Any]:
        return table_json(self.header, ([cell.value for cell in row] for row in self.rows))


def results_json_path(markdown_path) -> Path:
    """RESULTS.json beside RESULTS.md (the Markdown file's name with the suffix .json)."""
    return Path(markdown_path).with_suffix(".json")


def write_results(markdown_path, markdown: str, data: dict[str, Any]) -> tuple[Path, Path]:
    """Write a recipe's results: ``markdown`` to ``markdown_path`` (RESULTS.md) and ``data`` to RESULTS.json
    beside it (indented, UTF-8, keys in the given order). Returns both paths."""
    markdown_path = Path(markdown_path)
    json_path = results_json_path(markdown_path)
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    # each whole or not at all: the other lane may read them meanwhile (its commit, its figure)
    packed_runs.write_atomically(markdown_path, markdown if markdown.endswith("\n") else markdown + "\n")
    packed_runs.write_atomically(json_path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return markdown_path, json_path


def load_results_json(path) -> dict[str, Any]:
    """RESULTS.json as ``write_results`` wrote it; a file that is not valid JSON, or not such a file, is a
    ValueError naming it (and the line, for JSON that does not parse)."""
    with open(path, encoding="utf-8") as handle:
        try:
            results = json.load(handle)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from error
    if not isinstance(results, dict) or not isinstance(results.get("datasets"), dict):
        raise ValueError(f"{path}: not a RESULTS.json of fairseq-syntax-results (no 'datasets' object)")
    return results


def _format_metric(value) -> str:
    if not _is_number(value):
        return "–"
    return str(value) if isinstance(value, int) else f"{value:.2f}"


def _format_p_values(report: dict | None) -> str:
    if not report:
        return "–"
    return " / ".join(f"{report[m]['p_value']:.3f}" if m in report else "–" for m in SIGNIFICANCE_METRICS)


def _p_values(report: dict | None) -> dict[str, float] | None:
    if not report:
        return None
    return {m: report[m]["p_value"] for m in SIGNIFICANCE_METRICS if m in report}


def _table_data(records: Sequence[dict]) -> tuple[list[str], list[list], list[list]]:
    """The systems table: its header, each row's values (for RESULTS.json) and each row's cells (for RESULTS.md)."""
    metrics = _metric_columns(records)
    baselines = _baseline_names(records)
    show_tokenize = any("tokenize" in record["metrics"] for record in records)
    # the seed of a run and the device (a system over seeds has a table of its own, _seeds_table)
    run_fields = [(field, title) for field, title in (("seed", "Seed"), ("device", "Device"))
                  if any(field in record for record in records)]
    header = (["System", "Arch"] + [title for _, title in run_fields] + (["BLEU tok."] if show_tokenize else [])
              + [COLUMN_NAMES.get(name, name) for name in metrics]
              + [f"p vs {name} (BLEU / chrF)" for name in baselines]
              + ["Updates", "Epochs", "Wall time", "Command"])
    values, cells = [], []
    for record in records:
        value = [record["system"], record["arch"]] + [record.get(field) for field, _ in run_fields]
        cell = [record["system"], record["arch"]] + [record.get(field, "–") for field, _ in run_fields]
        if show_tokenize:
            value.append(record["metrics"].get("tokenize"))
            cell.append(record["metrics"].get("tokenize", "–"))
        value += [record["metrics"].get(name) if _is_number(record["metrics"].get(name)) else None
                  for name in metrics]
        cell += [_format_metric(record["metrics"].get(name)) for name in metrics]
        value += [_p_values(record["significance"].get(name)) for name in baselines]
        cell += [_format_p_values(record["significance"].get(name)) for name in baselines]
        value += [record["updates"], record["epochs"], record["wall_time_s"], record["command"]]
        cell += [record["updates"], record["epochs"], format_wall_time(record["wall_time_s"]),
                 f"`{record['command']}`"]
        values.append(value)
        cells.append(cell)
    return header, values, cells


def _table(records: Sequence[dict]) -> list[str]:
    header, _, cells = _table_data(records)
    return markdown_table(header, cells)


def _by_length_data(records: Sequence[dict]) -> tuple[list[str], list[list], list[list]]:
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


def _by_length_table(records: Sequence[dict]) -> list[str]:
    header, _, cells = _by_length_data(records)
    return markdown_table(header, cells) if header else []


def _test_notes(records: Sequence[dict], against: str = "the named baseline") -> list[str]:
    """One line per significance-test setting of the records' p-values."""
    tests = []
    for record in records:
        for report in record["significance"].values():
            setting = f"{report.get('test', 'paired test')}, {report.get('n_samples', '?')} samples, " \
                      f"seed {report.get('seed', '?')}"
            if setting not in tests:
                tests.append(setting)
    return [f"- p: two-sided p-value of the row's system against {against} ({setting})." for setting in tests]


def _signature_notes(records: Sequence[dict]) -> list[str]:
    signatures = []
    for record in records:
        for metric, signature in record["metrics"].get("signatures", {}).items():
            if (metric, signature) not in signatures:
                signatures.append((metric, signature))
    return [f"- {metric} signature: `{signature}`" for metric, signature in signatures]


def _notes(records: Sequence[dict]) -> list[str]:
    """Test settings and sacrebleu signatures: what a reader needs to reproduce or compare the numbers."""
    return _test_notes(records) + _signature_notes(records) + _parses_notes(records)


def _parses_notes(records: Sequence[dict]) -> list[str]:
    """Which parsers made the syntax each row was trained on (a record's ``parsers``), one line per parser set:
    a table that mixes runs of older and newer parses says which is which; a row trained on control structures
    (the ``control`` entry, :mod:`fairseq_syntax.core.controls`) says so. Nothing when no record names any."""
    if not any("parsers" in record for record in records):
        return []
    from fairseq_syntax.parsing.provenance import summary

    systems: dict[str, list[str]] = {}
    for record in records:
        parsers = dict(record.get("parsers") or {})
        control = parsers.pop(CONTROL_KEY, None)
        described = summary(parsers) if parsers else None
        key = f"`{described}`" if described else "not recorded (trained before the data named their parsers)"
        if control:
            key += f" under control {_control_text(control)}"
        systems.setdefault(key, []).append(record["system"])
    return [f"- parses of the training data (systems that read no syntax ignore them): {key}: {', '.join(names)}"
            for key, names in systems.items()]


# ---- a dataset whose systems were trained with several seeds: one row per system ------------------------------

SEQUENCE = "sequence"  # the baseline every row of a seeds table is tested against
CONTROL_SUFFIX = "_random"  # system X's control is X_random: X on random structures (fairseq_syntax.core.controls)
CONTROL_KEY = "control"  # the entry of parsers.json that names a control structure: {"structure": ..., "seed": ...}
SEEDS_METRICS = ("BLEU", "chrF")
# the seeds table's columns of the p-values against Sequence and against the system's control (RESULTS.json keys)
P_VS_SEQUENCE = f"p vs {SEQUENCE} ({' / '.join(SEEDS_METRICS)})"
P_VS_CONTROL = f"p vs control ({' / '.join(SEEDS_METRICS)})"


def _control_text(control: dict) -> str:
    return f"{control.get('structure', '?')} structures (seed {control.get('seed', '?')})"


def is_seeds_dataset(records: Sequence[dict]) -> bool:
    """Whether a dataset's records are runs of several seeds: one of them is a system scored over its seeds
    (``seeds``), or a system has runs of two seeds or more. Such a dataset gets one row per system
    (``SeedSystem``), not one per run."""
    if any("seeds" in record for record in records):
        return True
    seeds: dict[str, set] = {}
    for record in records:
        if "seed" in record:
            seeds.setdefault(record["system"], set()).add(record["seed"])
    return any(len(found) > 1 for found in seeds.values())


class SeedSystem(NamedTuple):
    """A system of a seeds dataset: its record over the seeds (``fairseq-syntax-score`` with one output per seed,
    ``score_seeds`` of ``examples/common.sh``: the seed-aware p-values), if scored yet, and its runs' records."""
    name: str
    over_seeds: dict | None
    runs: list[dict]  # by seed

    @property
    def seeds(self) -> list[int]:
        if self.over_seeds and "seed_list" in self.over_seeds:
            return list(self.over_seeds["seed_list"])
        return [run["seed"] for run in self.runs if "seed" in run]

    @property
    def facts(self) -> dict:
        """The record whose device, parsers and commands stand for the system (over seeds, else its first run)."""
        return self.over_seeds or self.runs[0]

    def per_seed(self, metric: str) -> list[float]:
        if self.over_seeds and metric in self.over_seeds.get("per_seed_metrics", {}):
            return list(self.over_seeds["per_seed_metrics"][metric])
        return [run["metrics"][metric] for run in self.runs if _is_number(run["metrics"].get(metric))]

    def mean_sd(self, metric: str) -> tuple[float, float] | None:
        if self.over_seeds and _is_number(self.over_seeds["metrics"].get(metric)):
            return self.over_seeds["metrics"][metric], self.over_seeds.get("metrics_sd", {}).get(metric, 0.0)
        values = self.per_seed(metric)
        return mean_and_sd(values) if values else None

    def p_values(self, baseline: str | None) -> dict | None:
        return (self.over_seeds or {}).get("significance", {}).get(baseline) if baseline else None


def seed_systems(records: Sequence[dict]) -> list[SeedSystem]:
    """The systems of a seeds dataset in table order: Sequence first, then in the records' order with each
    system's control (``X_random``) right after it."""
    over_seeds = {record["system"]: record for record in records if "seeds" in record}
    runs: dict[str, list[dict]] = {}
    for record in records:
        if "seeds" not in record:
            runs.setdefault(record["system"], []).append(record)
    names = list(dict.fromkeys(record["system"] for record in records))
    controls = {name[:-len(CONTROL_SUFFIX)]: name for name in names
                if name.endswith(CONTROL_SUFFIX) and name[:-len(CONTROL_SUFFIX)] in names}
    ordered = [SEQUENCE] if SEQUENCE in names else []
    for name in names:
        if name != SEQUENCE and name not in controls.values():
            ordered += [name] + ([controls[name]] if name in controls else [])
    return [SeedSystem(name, over_seeds.get(name), sorted(runs.get(name, []), key=lambda run: run.get("seed", 0)))
            for name in ordered]


@functools.lru_cache(maxsize=1)
def _registry_systems() -> dict[str, Any]:
    from fairseq_syntax.methods import systems

    return {system.name: system for system in systems(task=None)}


def structure_read(system: SeedSystem) -> str:
    """What structure the system's training read: a control (its data's ``parsers.json`` says which), the parse,
    or none (the registry's systems that read the words only)."""
    parsers = system.facts.get("parsers") or {}
    if parsers.get(CONTROL_KEY):
        return f"control: {_control_text(parsers[CONTROL_KEY])}"
    if system.name.endswith(CONTROL_SUFFIX):
        return "control (not recorded)"
    described = _registry_systems().get(system.name)
    if described is None:
        return "parse" if parsers else "–"
    return "parse" if described.form != "sequence" or described.side_inputs else "none (words only)"


def _metric_cell(system: SeedSystem, metric: str) -> Cell:
    found = system.mean_sd(metric)
    if found is None:
        return Cell(None, "–")
    mean, sd = found
    return Cell({"mean": mean, "sd": sd, "per_seed": system.per_seed(metric)}, f"{mean:.2f} ± {sd:.2f}")


def _seeds_table(systems: Sequence[SeedSystem]) -> Table:
    by_name = {system.name: system for system in systems}
    table = Table(["System", "Structure read", "Seeds"] + [f"{m} (mean ± sd)" for m in SEEDS_METRICS]
                  + [P_VS_SEQUENCE, "Control", P_VS_CONTROL, "Epochs (mean)"])
    for system in systems:
        seeds = system.seeds
        control = system.name + CONTROL_SUFFIX if system.name + CONTROL_SUFFIX in by_name else None
        # the pair's test from whichever of the two was scored over its seeds after the other (the p is two-sided)
        versus = [system.p_values(SEQUENCE if system.name != SEQUENCE else None),
                  system.p_values(control) or (by_name[control].p_values(system.name) if control else None)]
        epochs = system.over_seeds["epochs"] if system.over_seeds else statistics.fmean(
            run["epochs"] for run in system.runs)
        table.add(system.name, structure_read(system),
                  Cell(seeds, f"{len(seeds)}: {', '.join(map(str, seeds))}" if seeds else str(
                      (system.over_seeds or {}).get("seeds", "–"))),  # a run that recorded no seed: "–"
                  *[_metric_cell(system, metric) for metric in SEEDS_METRICS],
                  *[Cell(_p_values(report), _format_p_values(report)) for report in versus[:1]],
                  Cell(control, control or "–"),
                  *[Cell(_p_values(report), _format_p_values(report)) for report in versus[1:]],
                  Cell(epochs, f"{epochs:.1f}"))
    return table


def with_seed_variable(command: str, seed: int) -> str:
    """A seed's command with that seed written as ``$SEED`` (``--seed 1``, ``NAME.seed1`` -> ``$SEED``)."""
    command = re.sub(rf"(--seed[ =]){seed}(?!\d)", r"\g<1>$SEED", command)
    return re.sub(rf"\.seed{seed}(?!\d)", ".seed$SEED", command)


def seed_commands(system: SeedSystem) -> dict[str, Any]:
    """The commands of a row: its first seed's training and decoding with the seed as ``$SEED``, and the scoring
    over its seeds (each where recorded)."""
    first = system.runs[0] if system.runs else system.over_seeds
    seed = first.get("seed", (system.seeds or [None])[0])
    train = first["command"] if system.runs else system.over_seeds["command"]
    commands = {"system": system.name, "seeds": system.seeds,
                "train": with_seed_variable(train, seed) if seed is not None else train}
    if first.get("decode_command"):
        commands["decode"] = with_seed_variable(first["decode_command"], seed)
    score = (system.over_seeds or {}).get("score_command")
    if score:
        commands["score"] = score
    elif first.get("score_command"):
        commands["score"] = with_seed_variable(first["score_command"], seed)
    return commands


def _commands_section(systems: Sequence[SeedSystem]) -> list[str]:
    lines = ["### Commands", "",
             ("Each row's runs: the training and the decoding of each seed (`$SEED`: each of the row's seeds), and "
             "the scoring over its seeds. `OUT_DIR` is the recipe's output folder (its data and checkpoints); "
             "other paths are relative to the repository root."), ""]
    for system in systems:
        commands = seed_commands(system)
        seeds = ", ".join(map(str, commands["seeds"])) or "?"
        lines += [f"**{system.name}** (seeds {seeds})", ""]
        lines += [f"- {step}: `{commands[step]}`" for step in ("train", "decode", "score") if step in commands]
        lines.append("")
    return lines


def _seeds_notes(systems: Sequence[SeedSystem]) -> list[str]:
    over_seeds = [system.over_seeds for system in systems if system.over_seeds]
    facts = [system.facts for system in systems]
    notes = [("- Each row: one training run per seed listed, same data and settings; BLEU and chrF: the mean and "
             "the sample standard deviation (n - 1) of the runs' test scores.")]
    notes += _test_notes(over_seeds, f"{SEQUENCE} and against its control, `X{CONTROL_SUFFIX}` for system X, "
                                     "the same system on random structures")
    if any(system.over_seeds is None for system in systems):
        notes.append("- p –: not scored over its seeds yet (`score_seeds` of examples/common.sh, e.g. "
                     "`SEEDS_ONLY=\"1 2 3\" examples/multi30k/run.sh`).")
    return notes + _signature_notes(facts) + _parses_notes(facts)


def convergence_table(systems: Sequence[SeedSystem]) -> Table | None:
    """One row per run that recorded its validation curve: where it stopped, its best epoch and value, and how far
    the epochs after the best stayed from it (a curve that has flattened stays close; one still falling has no
    epochs after its best). *Stopped by*: ``patience`` when the run ended ``--patience`` epochs after its best,
    ``epoch cap`` when it reached ``--max-epoch`` first. None when no run recorded a curve."""
    runs = [(system.name, run) for system in systems for run in system.runs if run.get("valid", {}).get("curve")]
    if not runs:
        return None
    metrics = list(dict.fromkeys(run["valid"]["metric"] for _, run in runs))
    metric = metrics[0] if len(metrics) == 1 else "metric"
    table = Table(["System", "Seed", "Epochs", "Best epoch", f"Best valid {metric}",
                   f"Valid {metric} after the best (change from it, min / max)", "Stopped by"])
    for name, run in runs:
        curve = run["valid"]["curve"]
        best_epoch, best = min(curve, key=lambda point: (point[1], point[0]))
        after = [value - best for epoch, value in curve if epoch > best_epoch]
        patience, cap = (int(command_option(run["command"], option) or 0) for option in ("--patience", "--max-epoch"))
        last = curve[-1][0]
        stopped = ("patience" if patience and last - best_epoch >= patience else
                   "epoch cap" if cap and last >= cap else "–")
        name_cell = name if len(metrics) == 1 else f"{name} ({run['valid']['metric']})"
        table.add(name_cell, run.get("seed", "–"), Cell(last, str(last)), best_epoch, Cell(best, f"{best:.3f}"),
                  Cell({"min": min(after), "max": max(after)} if after else None,
                       f"+{min(after):.3f} / +{max(after):.3f} ({len(after)} epochs)" if after else "none"),
                  stopped)
    return table


def _convergence_section(systems: Sequence[SeedSystem]) -> list[str]:
    table = convergence_table(systems)
    if table is None:
        return []
    return ["### Convergence", "",
            ("Each run's validation curve (from its training log; the checkpoint decoded is the best epoch's). A run "
             "stopped by patience saw no better value in its last epochs: its curve has flattened."), ""] \
        + table.lines() + [""]


def _answer(systems: Sequence[SeedSystem]) -> tuple[list[str], dict[str, Any]]:
    # study_answer builds on this module's SeedSystem, hence imported here
    from fairseq_syntax.evaluation.study_answer import expected_systems, study_answer

    return study_answer(systems, expected_systems([system.name for system in systems]))


def _by_dataset(records: Sequence[dict]) -> dict[str, list[dict]]:
    """Records by dataset, in order of first appearance, the datasets of several seeds first (the study's)."""
    datasets: dict[str, list[dict]] = {}
    for record in records:
        datasets.setdefault(record["dataset"], []).append(record)
    return dict(sorted(datasets.items(), key=lambda item: not is_seeds_dataset(item[1])))


def render_markdown(records: Sequence[dict], sources: Sequence = ()) -> str:
    """One table per dataset (datasets in order of first appearance, those of several seeds first), each followed
    by the significance-test settings and sacrebleu signatures; `sources` (record paths) are listed at the end.
    A dataset of several seeds has one row per system over its seeds and its commands in a section below;
    other datasets one row per run, rows in the given order."""
    lines = ["<!-- Generated by fairseq-syntax-results from run records; edit the records, not this file. -->",
             ""]
    for dataset, rows in _by_dataset(records).items():
        if is_seeds_dataset(rows):
            systems = seed_systems(rows)
            lines += [f"## {dataset}", ""] + _seeds_table(systems).lines() + [""] + _seeds_notes(systems) + [""]
            lines += _answer(systems)[0] + _convergence_section(systems) + _commands_section(systems)
            continue
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
        # no count: the table is written before its newest run is packed, and must read the same after
        if any(find_member(source) is not None for source in sources):
            lines += ["The records of finished runs are packed with their logs and decodes (`packed.tar.xz` beside "
                      "them): `python3 fairseq_syntax/evaluation/packed_runs.py cat RECORD` shows one.", ""]
    return "\n".join(lines)


def render_json(records: Sequence[dict], sources: Sequence = ()) -> dict[str, Any]:
    """RESULTS.json of the run records: per dataset, the table of ``render_markdown`` with one row per system and
    the same columns (``table_json``: numbers unrounded, "Wall time" in seconds, each "p vs" cell the p-values
    by metric), the BLEU-by-length table if any, the significance-test settings and sacrebleu signatures. A
    dataset of several seeds has ``"seeds": true``, each metric cell ``{"mean", "sd", "per_seed"}`` (the values in
    the order of the row's "Seeds"), its ``commands``, one entry per row, its ``answer`` (``study_answer``:
    each method against Sequence and against its control, and the paragraph that states it), and ``convergence`` (``convergence_table``)
    when its runs recorded validation curves."""
    datasets = {}
    for dataset, rows in _by_dataset(records).items():
        if is_seeds_dataset(rows):
            systems = seed_systems(rows)
            datasets[dataset] = {"seeds": True, "table": _seeds_table(systems).json(),
                                 "notes": [note[2:] for note in _seeds_notes(systems)],
                                 "commands": [seed_commands(system) for system in systems]}
            datasets[dataset]["answer"] = _answer(systems)[1]
            convergence = convergence_table(systems)
            if convergence is not None:
                datasets[dataset]["convergence"] = convergence.json()
            continue
        header, values, _ = _table_data(rows)
        entry = {"table": table_json(header, values)}
        length_header, length_values, _ = _by_length_data(rows)
        if length_header:
            entry["bleu_by_length"] = table_json(length_header, length_values)
        entry["notes"] = [note[2:] for note in _notes(rows)]
        datasets[dataset] = entry
    return {"generated_by": "fairseq-syntax-results (fairseq_syntax.evaluation.results.render_json)",
            "datasets": datasets, "run_records": [str(source) for source in sources]}
