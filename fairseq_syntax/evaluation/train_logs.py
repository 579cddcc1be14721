"""What a fairseq-train log says of its run: updates, epochs and wall seconds (``parse_train_log``) and the
validation curve (``parse_valid_curve``), from stdout (--log-format simple, tqdm or json) or --log-file, plain,
gzipped or packed."""
import json
import re
from collections.abc import Iterator

from fairseq_syntax.evaluation.kept_files import RecordError, open_text
from fairseq_syntax.evaluation.run_commands import option_value

# stdout's prefix "2024-01-01 12:00:00 | INFO | train | <message>"; a --log-file has the bare message.
LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| [A-Z]+ \| (?P<logger>[^|]+?) \| (?P<message>.*)$")
# End-of-epoch statistics printed by the simple/tqdm progress bars: "epoch 003 | loss 4.2 | ... | wall 95".
# Mid-epoch "train_inner" lines read "epoch 003:   200 / 454 loss=..." and do not match.
EPOCH_STATS = re.compile(r"^epoch (?P<epoch>\d+) \| (?P<fields>.*)$")


def _epoch_stats(message: str, tag: str) -> dict | None:
    """The end-of-epoch statistics of ``tag`` ("train" or "valid") in one log message by name, "epoch" among them;
    else None (json: the tag prefixes every key, "train_wall")."""
    if message.startswith("{"):
        try:
            stats = json.loads(message)
        except json.JSONDecodeError:
            return None
        fields = {key[len(tag) + 1:]: value for key, value in stats.items() if key.startswith(f"{tag}_")}
        return {**fields, "epoch": stats["epoch"]} if fields and "epoch" in stats else None
    match = EPOCH_STATS.match(message)
    if not match or match.group("fields").startswith("valid on ") != (tag == "valid"):
        return None
    fields = dict(field.split(" ", 1) for field in match.group("fields").split(" | ") if " " in field)
    return {**fields, "epoch": match.group("epoch")}


def _log_messages(path, loggers) -> Iterator[str]:
    """The messages of fairseq-train's ``loggers`` (a name or tuple of names) in a log (``path`` or ``path.gz``):
    stdout lines less the timestamp prefix; every line of a --log-file."""
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
    """Updates, epochs and wall-clock seconds of a fairseq-train run, from its end-of-epoch statistics.

    A resumed run appends another fairseq-train's output whose "wall" meter restarts from 0, so the wall time is the
    sum of each run's last "wall" (a run starts at its configuration line, or where "wall" falls). An epoch cut short
    by a stop is not counted. Returns {"updates": int, "epochs": int, "wall_time_s": float}."""
    last = None
    earlier_runs_wall = run_wall = 0.0
    for message in _log_messages(path, ("train", "fairseq_cli.train")):
        if message.startswith(TRAIN_START):
            earlier_runs_wall, run_wall = earlier_runs_wall + run_wall, 0.0
            continue
        stats = _epoch_stats(message, "train")
        if stats is None or "num_updates" not in stats or "wall" not in stats:
            continue
        stats = int(stats["epoch"]), int(float(stats["num_updates"])), float(stats["wall"])
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
    """[(epoch, value)] of validation statistic ``metric`` at the end of each epoch, in epoch order; an epoch
    validated twice (a resumed run) keeps its last value. Empty when no validation line has ``metric``."""
    curve: dict[int, float] = {}
    for message in _log_messages(path, "valid"):
        stats = _epoch_stats(message, "valid")
        if stats is not None and metric in stats:
            curve[int(stats["epoch"])] = float(stats[metric])
    return sorted(curve.items())
