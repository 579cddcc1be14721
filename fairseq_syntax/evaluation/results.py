"""Run records and the results tables generated from them (never typed by hand).

A run record is one JSON file per trained-and-scored system, written by the recipes (``record_run``) and named
``*.run.json``:

    {"dataset": "news-de", "system": "syntax masks", "arch": "transformer_syntax_mask",
     "command": "fairseq-train DATA ...", "command_argv": ["fairseq-train", "DATA", ...],
     "updates": 4540, "epochs": 20, "wall_time_s": 4812.0,
     "train_log": "work/masks/train.log",
     "metrics": {"BLEU": 38.1, "chrF": 62.3, ..., "tokenize": "13a", "signatures": {...}},
     "significance": {"transformer": {"BLEU": {"p_value": 0.004, ...}, "chrF": {...}, "n_samples": 1000, ...}}}

Each command is held as its argv list beside a display string (``command`` and ``command_argv``, likewise
``decode_command`` and ``score_command``: :mod:`fairseq_syntax.evaluation.run_commands`, which also reads the records
of the old form, whose commands are text only). ``metrics`` is what ``scoring.corpus_scores`` returns (or any dict of numbers, e.g. an accuracy); ``significance``
maps a baseline's system name to ``scoring.paired_bootstrap``'s report of this system against it. Optional fields:
``seed``, ``device`` (what it was trained on), ``valid`` (one run's validation curve: the statistic its best
checkpoint is chosen by and ``[epoch, value]`` per epoch, ``parse_valid_curve``), ``parsers`` (the ``parsers.json`` of its training data,
``fairseq_syntax.parsing.provenance``), and for a system over seeds ``seeds`` and ``metrics_sd``. ``updates``,
``epochs`` and ``wall_time_s`` are read from the fairseq-train log, so the table shows the budget each number
cost.

The run records' table is rendered here (``render_markdown``, ``render_json``; written by
:func:`fairseq_syntax.evaluation.tables.write_results`, which every generated results table goes through). A dataset
of several seeds gets one row per system (:mod:`fairseq_syntax.evaluation.seed_systems`), its answer
(:mod:`fairseq_syntax.evaluation.study_answer`) and each run's convergence
(:mod:`fairseq_syntax.evaluation.convergence`); what it compares (the baseline, each control's method and kind,
the seeds planned) is a :class:`~fairseq_syntax.evaluation.comparisons.Comparisons`, given or, when none is, the
method registry's (:func:`~fairseq_syntax.evaluation.comparisons.registry_comparisons`), and recorded in
RESULTS.json. :func:`results_of_runs` is the whole of ``fairseq-syntax-results`` for a caller in Python (the
study's report). Logs and decodes are kept gzipped beside their
records, and finished runs' are packed into their folder's archive (:mod:`packed_runs`): every reader here
(``open_text``, ``read_text``, ``parse_train_log``, and ``scoring.read_lines``) takes ``name`` or ``name.gz``, whichever
exists, else the packed copy.
"""
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
from typing import Any

from fairseq_syntax.core.control_kinds import CONTROL_KEY
from fairseq_syntax.evaluation import packed_runs
from fairseq_syntax.evaluation.comparisons import Comparisons, registry_comparisons
from fairseq_syntax.evaluation.convergence import replay
from fairseq_syntax.evaluation.packed_runs import RECORD_SUFFIX, existing_path, find_member
from fairseq_syntax.evaluation.run_commands import (
    command_fields,
    command_text,
    option_value,
    record_argv,
    with_argv,
    with_seed_variable,
)
from fairseq_syntax.evaluation.seed_systems import (
    P_VALUE_READING,
    SeedSystem,
    is_seeds_dataset,
    probability_text,
    seed_systems,
    structure_read,
)
from fairseq_syntax.evaluation.study_answer import study_answer
from fairseq_syntax.evaluation.tables import Cell, Table, markdown_table, table_json

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


def best_checkpoint_metric(argv: list[str]) -> str:
    """The validation statistic that fairseq-train ``argv`` chooses its best checkpoint by (fairseq's default:
    loss)."""
    return option_value(argv, "--best-checkpoint-metric") or "loss"


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


def record_run(path, *, dataset: str, system: str, arch: str, command: list[str], train_log, metrics: dict,
               significance: dict | None = None, by_length: list[dict] | None = None,
               out_dir: str | None = None, root: str | None = None, **extra) -> dict:
    """Write the run record of one system to `path` (by convention `<name>.run.json`) and return it.

    updates, epochs and wall_time_s come from `train_log` (see parse_train_log; comma-separated logs, one per seed,
    give the means); `by_length` is the system's `scoring.bleu_by_length` rows, if scored. `extra` fields go into
    the record as they are: `seed` (of one run), `device`, `decode_command` and `score_command` (each with its
    argv, `run_commands.command_fields`), and for a system over
    seeds `seeds` (how many), `seed_list` (which), `metrics_sd` (standard deviation over seeds of each metric in
    `metrics`, their means) and `per_seed_metrics` (each numeric metric's value per seed, in `seed_list`'s order).
    With `out_dir` (the recipe's output folder) or `root` (the repository), the record's paths are written by
    `portable_paths`. `command` is the training command's argv (program first), kept with its display string. A
    record of one run also holds its validation curve (`valid`) of the statistic `command` chooses the best
    checkpoint by, so a table can show that training converged.
    """
    logs = [parse_train_log(log) for log in str(train_log).split(",")]
    train = {key: type(logs[0][key])(statistics.fmean(log[key] for log in logs)) for key in logs[0]}
    record = {"dataset": dataset, "system": system, "arch": arch, **command_fields("command", command),
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
    packed_runs.write_atomically(path, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return record


def load_record(path) -> dict:
    """The run record ``path``: the file, or its packed copy (a finished run's record is packed with its outputs),
    each command with its argv (:func:`~fairseq_syntax.evaluation.run_commands.with_argv`)."""
    try:
        record = json.loads(packed_runs.read_bytes(path).decode("utf-8"))
    except json.JSONDecodeError as error:
        raise RecordError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from error
    if not isinstance(record, dict):
        raise RecordError(f"{path}: a run record is a JSON object, got {type(record).__name__}")
    missing = [field for field in REQUIRED_FIELDS if field not in record]
    if missing:
        raise RecordError(f"{path}: run record lacks {', '.join(missing)}")
    return with_argv(record)


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


def _format_metric(value) -> str:
    if not _is_number(value):
        return "–"
    return str(value) if isinstance(value, int) else f"{value:.2f}"


def format_p(found: dict) -> str:
    """One metric's p of a test report: ``0.041`` (a test of one run), ``0.041±0.002 (t 0.059)`` (the seed-aware
    bootstrap: its Monte-Carlo standard error, and Welch's t-test p over the seeds' scores where it is defined)."""
    text = probability_text(found["p_value"])
    if found.get("p_mc_se") is not None:
        text += f"±{probability_text(found['p_mc_se'])}"
    if (found.get("welch") or {}).get("p_value") is not None:
        text += f" (t {probability_text(found['welch']['p_value'])})"
    return text


def _format_p_values(report: dict | None, metrics: Sequence[str] = SIGNIFICANCE_METRICS) -> str:
    if not report:
        return "–"
    return " / ".join(format_p(report[m]) if m in report else "–" for m in metrics)


def _p_values(report: dict | None, metrics: Sequence[str] = SIGNIFICANCE_METRICS) -> dict[str, Any] | None:
    """Per metric the p-value, or for a seed-aware test ``{"p_value", "p_mc_se", "welch_p_value"}``."""
    if not report:
        return None
    values = {}
    for metric in metrics:
        if metric not in report:
            continue
        found = report[metric]
        if "p_mc_se" in found:
            values[metric] = {"p_value": found["p_value"], "p_mc_se": found["p_mc_se"],
                              "welch_p_value": (found.get("welch") or {}).get("p_value")}
        else:
            values[metric] = found["p_value"]
    return values


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
    """The systems table of RESULTS.md: the columns of :func:`_table_data` but the command, which
    :func:`_run_commands_section` lists below the table (a command is too long for a column people read)."""
    header, _, cells = _table_data(records)
    return markdown_table(header[:-1], [cell[:-1] for cell in cells])


def _run_commands_section(records: Sequence[dict]) -> list[str]:
    """Each row's training command, in the table's order, a line each (a row of a run of one seed of several is
    named with its seed)."""
    lines = ["### Commands", "", "The training command of each row (paths as the record holds them):", ""]
    for record in records:
        name = record["system"] + (f" (seed {record['seed']})" if record.get("seed") is not None else "")
        lines.append(f"- **{name}**: `{record['command']}`")
    return lines + [""]


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

#: the seeds table's column of the epochs each row's runs trained
EPOCHS = "Epochs (mean)"


def p_vs_baseline_column(comparisons: Comparisons) -> str:
    """The seeds table's column of each row's p-values against the baseline (``p vs sequence (BLEU / chrF)``)."""
    return f"p vs {comparisons.baseline} ({' / '.join(comparisons.metrics)})"


def p_vs_method_column(comparisons: Comparisons) -> str:
    """The seeds table's column of a control row's p-values against its method."""
    return f"p vs its method ({' / '.join(comparisons.metrics)})"


def _control_text(control: dict) -> str:
    return f"{control.get('structure', '?')} structures (seed {control.get('seed', '?')})"


def _metric_cell(system: SeedSystem, metric: str) -> Cell:
    found = system.mean_sd(metric)
    if found is None:
        return Cell(None, "–")
    mean, sd = found
    per_seed = system.per_seed(metric)
    # one seed has no spread to show: "± 0.00" would read as runs that agree exactly
    shown = f"{mean:.2f} ± {sd:.2f}" if len(per_seed) != 1 else f"{mean:.2f} (one seed)"
    return Cell({"mean": mean, "sd": sd, "per_seed": per_seed}, shown)


def _seeds_cell(system: SeedSystem) -> Cell:
    seeds, later = system.seeds, system.unscored_seeds
    if not seeds:  # a run that recorded no seed: "–"
        return Cell(seeds, str((system.over_seeds or {}).get("seeds", "–")))
    text = f"{len(seeds)}: {', '.join(map(str, seeds))}"
    if later:
        text += f" ({', '.join(map(str, later))} trained since, not yet scored over)"
    return Cell(seeds, text)


def run_convergence(run: dict) -> dict | None:
    """:func:`~fairseq_syntax.evaluation.convergence.replay` of a run record's validation curve under its training
    command's ``--patience`` (and ``--maximize-best-checkpoint-metric``); None without a curve."""
    curve = run.get("valid", {}).get("curve")
    if not curve:
        return None
    argv = record_argv(run) or []
    return replay(curve, int(option_value(argv, "--patience") or 0), "--maximize-best-checkpoint-metric" in argv)


def _epochs_cell(system: SeedSystem) -> Cell:
    """The mean over the row's runs of the epochs trained up to the patience stop (the protocol's), and, beside it,
    the mean of those a resumed run trained past it."""
    runs = system.scored_runs
    if not runs:
        epochs = system.over_seeds["epochs"]
        return Cell({"to_patience_stop": epochs, "past_patience": None}, f"{epochs:.1f}")
    protocol, past = [], []
    for run in runs:
        replayed = run_convergence(run)
        protocol.append(replayed["protocol_epochs"] if replayed else run["epochs"])
        past.append(len(replayed["past_patience"]) if replayed else 0)
    mean, extra = statistics.fmean(protocol), statistics.fmean(past)
    return Cell({"to_patience_stop": mean, "past_patience": extra},
                f"{mean:.1f}" + (f" (+{extra:.1f} past patience)" if extra else ""))


def _p_cell(report: dict | None, metrics: Sequence[str]) -> Cell:
    return Cell(_p_values(report, metrics), _format_p_values(report, metrics))


def _seeds_table(systems: Sequence[SeedSystem], comparisons: Comparisons) -> Table:
    """The seeds table: a row per system, its p against the baseline (no column without one) and, on a control's
    row, its method and its p against it."""
    by_name = {system.name: system for system in systems}
    baseline, metrics = comparisons.baseline, comparisons.metrics
    table = Table(["System", "Structure read", "Seeds"] + [f"{m} (mean ± sd)" for m in metrics]
                  + ([p_vs_baseline_column(comparisons)] if baseline else [])
                  + ["Control of", p_vs_method_column(comparisons), EPOCHS])
    for system in systems:
        method = comparisons.method_of(system.name)
        method = method if method in by_name else None
        # each test as the answer reads it (two-sided): over the seeds both rows stand for, from the method's (or
        # the system's) record, else the other's
        versus_method = by_name[method].test_against(system) if method else None
        versus_baseline = []
        if baseline and baseline not in by_name:  # no row of the baseline's to hold the test's seeds against
            versus_baseline = [_p_cell(system.p_values(baseline), metrics)]
        elif baseline:
            found = system.test_against(by_name[baseline]) if system.name != baseline else None
            versus_baseline = [_p_cell(found[0] if found else None, metrics)]
        table.add(system.name, structure_read(system, comparisons), _seeds_cell(system),
                  *[_metric_cell(system, metric) for metric in metrics], *versus_baseline,
                  Cell(method, method or "–"), _p_cell(versus_method and versus_method[0], metrics),
                  _epochs_cell(system))
    return table


def seed_commands(system: SeedSystem) -> dict[str, Any]:
    """The commands of a row (display strings): its first seed's training and decoding with the seed as ``$SEED``
    (:func:`~fairseq_syntax.evaluation.run_commands.with_seed_variable`), and the scoring over its seeds (each where
    recorded)."""
    first = system.runs[0] if system.runs else system.over_seeds
    seed = first.get("seed", (system.seeds or [None])[0])

    def shown(field: str) -> str:
        return first[field] if seed is None else command_text(with_seed_variable(record_argv(first, field), seed))

    commands = {"system": system.name, "seeds": system.seeds, "train": shown("command")}
    if first.get("decode_command"):
        commands["decode"] = shown("decode_command")
    score = (system.over_seeds or {}).get("score_command")
    if score:
        commands["score"] = score
    elif first.get("score_command"):
        commands["score"] = shown("score_command")
    return commands


def _commands_section(systems: Sequence[SeedSystem]) -> list[str]:
    lines = ["### Commands", "",
             ("Each row's runs: the training and the decoding of each seed (`$SEED`: each of the row's seeds), and "
              "the scoring over its seeds. `OUT_DIR` is the recipe's output folder (its data and checkpoints); "
              "other paths are relative to the repository root. A control run whose structures were drawn with its "
              "training seed reads `DATA.CONTROL` for seed 1 and `DATA.CONTROL-s$SEED` for the others "
              "(`fairseq_syntax.core.control_kinds`); the row's structure says which."), ""]
    for system in systems:
        commands = seed_commands(system)
        seeds = ", ".join(map(str, commands["seeds"])) or "?"
        lines += [f"**{system.name}** (seeds {seeds})", ""]
        lines += [f"- {step}: `{commands[step]}`" for step in ("train", "decode", "score") if step in commands]
        lines.append("")
    return lines


def _seeds_notes(systems: Sequence[SeedSystem], comparisons: Comparisons) -> list[str]:
    over_seeds = [system.over_seeds for system in systems if system.over_seeds]
    by_name = {system.name: system for system in systems}
    facts = [system.facts for system in systems]
    notes = [("- Each row: one training run per seed listed, same data and settings; BLEU and chrF: the mean and "
              "the sample standard deviation (n - 1) of the runs' test scores. A system is scored over every seed "
              "it has a run of; its p-values compare it with each other system over that one's seeds.")]
    on_control = "on a control's row (system X on control structures, X in its Control of column)"
    against = f"{comparisons.baseline} and, {on_control}, against X" if comparisons.baseline else f"X, {on_control}"
    notes += _test_notes(over_seeds, against)
    if any("p_mc_se" in report.get(metric, {}) for record in over_seeds
           for report in record["significance"].values() for metric in comparisons.metrics):
        notes.append(f"- Each p: {P_VALUE_READING}")
    if any(system.over_seeds is None for system in systems):
        notes.append("- p –: not scored over its seeds yet (`fairseq-syntax-score` given one decode per seed "
                     "writes its record over them).")
    if any(system.p_values(name) and system.test_against(by_name[name]) is None
           for system in systems for name in (system.over_seeds or {}).get("significance", {}) if name in by_name):
        notes.append("- A test made before runs that finished since (over fewer seeds than its rows show) is "
                     "shown as –: scored again, it is in (`fairseq-syntax-study report` scores such records again "
                     "before it writes the table).")
    notes.append(f"- {EPOCHS}: the epochs each run trained up to its patience stop (replayed from its validation "
                 "curve, see Convergence), and beside it those that runs resumed before the patience count was kept "
                 "trained past that stop.")
    return notes + _signature_notes(facts) + _parses_notes(facts)


def convergence_table(systems: Sequence[SeedSystem]) -> Table | None:
    """One row per run that recorded its validation curve (:func:`run_convergence`): the epochs it trained, the
    epoch at which ``--patience`` stops it and those it trained past that stop (a resume that counted patience
    afresh), the epoch of the checkpoint fairseq kept and decoded (``checkpoint_best.pt``: on a tie, the last tied
    epoch) and its value, and how far the epochs after it, up to the stop, stayed from it (a curve that has flattened
    stays close). None when no run recorded a curve."""
    runs = [(system.name, run) for system in systems for run in system.runs if run.get("valid", {}).get("curve")]
    if not runs:
        return None
    metrics = list(dict.fromkeys(run["valid"]["metric"] for _, run in runs))
    metric = metrics[0] if len(metrics) == 1 else "metric"
    table = Table(["System", "Seed", "Epochs trained", "Stopped by", "Past patience", "Checkpoint kept (epoch)",
                   f"Valid {metric} kept", f"Valid {metric} after it, to the stop (change, min / max)"])
    for name, run in runs:
        curve = run["valid"]["curve"]
        replayed = run_convergence(run)
        kept_epoch, kept = replayed["kept"]
        cap = int(option_value(record_argv(run) or [], "--max-epoch") or 0)
        last = curve[-1][0]
        stopped = (f"patience, epoch {replayed['stop']}" if replayed["stop"] else
                   "epoch cap" if cap and last >= cap else "–")
        past = replayed["past_patience"]
        past_text = f"{len(past)} (epochs {past[0]}-{past[-1]})" if len(past) > 1 else (
            f"1 (epoch {past[0]})" if past else "–")
        kept_text = str(kept_epoch)
        if replayed["protocol_kept"] and replayed["protocol_kept"][0] != kept_epoch:
            kept_text += f" (past patience; to the stop: {replayed['protocol_kept'][0]})"
        # the epochs after the checkpoint an uninterrupted run keeps (the one kept, unless one past patience tied)
        protocol_epoch, protocol_value = replayed["protocol_kept"]
        after = [value - protocol_value for epoch, value in curve
                 if protocol_epoch < epoch <= replayed["protocol_epochs"]]
        name_cell = name if len(metrics) == 1 else f"{name} ({run['valid']['metric']})"
        table.add(name_cell, run.get("seed", "–"), Cell(last, str(last)), Cell(replayed["stop"], stopped),
                  Cell(past, past_text), Cell(kept_epoch, kept_text), Cell(kept, f"{kept:.3f}"),
                  Cell({"min": min(after), "max": max(after)} if after else None,
                       f"{min(after):+.3f} / {max(after):+.3f} ({len(after)} epochs)" if after else "none"))
    return table


def _convergence_section(systems: Sequence[SeedSystem]) -> list[str]:
    table = convergence_table(systems)
    if table is None:
        return []
    return ["### Convergence", "",
            ("Each run's validation curve (from its training log). *Checkpoint kept*: the epoch of "
             "`checkpoint_best.pt`, the checkpoint decoded: fairseq writes it again when a later epoch ties the best "
             "value (as logged, rounded to 3 decimals) but counts patience only from a strict improvement, so after "
             "a tie it is the last tied epoch. *Stopped by*: the epoch at which `--patience` stops the run, replayed "
             "from the curve; *past patience*: the epochs a run trained after it because a resume counted patience "
             "afresh (since fixed: `fairseq_syntax/core/early_stopping.py`), left out of the table's epoch means. A "
             "run stopped by patience saw no better value in its last epochs: its curve has flattened. "
             "`fairseq_syntax/evaluation/convergence.py` replays both rules."), ""] + table.lines() + [""]




def _by_dataset(records: Sequence[dict]) -> dict[str, list[dict]]:
    """Records by dataset, in order of first appearance, the datasets of several seeds first (the study's)."""
    datasets: dict[str, list[dict]] = {}
    for record in records:
        datasets.setdefault(record["dataset"], []).append(record)
    return dict(sorted(datasets.items(), key=lambda item: not is_seeds_dataset(item[1])))


def render_markdown(records: Sequence[dict], sources: Sequence = (), comparisons: Comparisons | None = None) -> str:
    """One table per dataset (datasets in order of first appearance, those of several seeds first), each followed
    by the significance-test settings and sacrebleu signatures; `sources` (record paths) are listed at the end.
    A dataset of several seeds has one row per system over its seeds, tested as ``comparisons`` say (None: the
    method registry's, :func:`registry_comparisons`), its answer and its commands in a section below; other
    datasets one row per run, rows in the given order, and each row's command in a section below."""
    comparisons = comparisons or registry_comparisons()
    lines = ["<!-- Generated by fairseq-syntax-results from run records; edit the records, not this file. -->",
             ""]
    for dataset, rows in _by_dataset(records).items():
        if is_seeds_dataset(rows):
            systems = seed_systems(rows, comparisons)
            lines += [f"## {dataset}", ""] + _seeds_table(systems, comparisons).lines() + [""]
            lines += _seeds_notes(systems, comparisons) + [""]
            lines += study_answer(systems, comparisons)[0] + _convergence_section(systems)
            lines += _commands_section(systems)
            continue
        lines += [f"## {dataset}", ""] + _table(rows) + [""]
        notes = _notes(rows)
        if notes:
            lines += notes + [""]
        by_length = _by_length_table(rows)
        if by_length:
            lines += ["BLEU by reference length (tokens of the reference, sentences per interval in the header):",
                      ""] + by_length + [""]
        lines += _run_commands_section(rows)
    if sources:
        lines += ["Run records: " + ", ".join(f"`{source}`" for source in sources), ""]
        # no count: the table is written before its newest run is packed, and must read the same after
        if any(find_member(source) is not None for source in sources):
            lines += ["The records of finished runs are packed with their logs and decodes (`packed.tar.xz` beside "
                      "them): `python3 fairseq_syntax/evaluation/packed_runs.py cat RECORD` shows one.", ""]
    return "\n".join(lines)


def render_json(records: Sequence[dict], sources: Sequence = (), comparisons: Comparisons | None = None
                ) -> dict[str, Any]:
    """RESULTS.json of the run records: per dataset, the table of ``render_markdown`` with one row per system and
    the same columns (``table_json``: numbers unrounded, "Wall time" in seconds, each "p vs" cell the p-values
    by metric), the BLEU-by-length table if any, the significance-test settings and sacrebleu signatures. A
    dataset of several seeds has ``"seeds": true``, the ``comparisons`` it was tested by
    (:meth:`Comparisons.to_json`; None: the registry's), each metric cell ``{"mean", "sd", "per_seed"}`` (the
    values in the order of the row's "Seeds"), its ``commands``, one entry per row, its ``answer``
    (``study_answer``: each method against the baseline and against its controls, and the paragraph that states
    it), and ``convergence`` (``convergence_table``) when its runs recorded validation curves."""
    comparisons = comparisons or registry_comparisons()
    datasets = {}
    for dataset, rows in _by_dataset(records).items():
        if is_seeds_dataset(rows):
            systems = seed_systems(rows, comparisons)
            datasets[dataset] = {"seeds": True, "comparisons": comparisons.to_json(),
                                 "table": _seeds_table(systems, comparisons).json(),
                                 "notes": [note[2:] for note in _seeds_notes(systems, comparisons)],
                                 "commands": [seed_commands(system) for system in systems]}
            datasets[dataset]["answer"] = study_answer(systems, comparisons)[1]
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


def displayed_path(path) -> str:
    """``path`` relative to the working directory if it lies under it, else as given: a committed table lists its
    records without one machine's folders."""
    relative = os.path.relpath(os.path.abspath(path))
    return str(path) if relative.startswith(os.pardir) else relative


def results_of_runs(inputs: Iterable, comparisons: Comparisons | None = None) -> tuple[str, dict[str, Any]]:
    """(RESULTS.md's text, RESULTS.json's object) of the run records in ``inputs`` (record files or folders, as
    :func:`find_record_files` takes them), listed by :func:`displayed_path`, the seeds tables tested as
    ``comparisons`` say (None: the method registry's)."""
    paths = find_record_files(inputs)
    records = [load_record(path) for path in paths]
    sources = [displayed_path(path) for path in paths]
    return render_markdown(records, sources, comparisons), render_json(records, sources, comparisons)
