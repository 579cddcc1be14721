"""The run record: one JSON file per trained-and-scored system, written by ``record_run`` (by the recipes and
``fairseq-syntax-score --record``) and named ``*.run.json``:

    {"dataset": "news-de", "system": "syntax masks", "arch": "transformer_syntax_mask",
     "command": "fairseq-train DATA ...", "command_argv": ["fairseq-train", "DATA", ...],
     "updates": 4540, "epochs": 20, "wall_time_s": 4812.0,
     "train_log": "work/masks/train.log",
     "metrics": {"BLEU": 38.1, "chrF": 62.3, ..., "tokenize": "13a", "signatures": {...}},
     "significance": {"transformer": {"BLEU": {"p_value": 0.004, ...}, "chrF": {...}, "n_samples": 1000, ...}}}

Commands are held as argv lists beside a display string (``command``/``command_argv``, likewise ``decode_command`` and
``score_command``: :mod:`fairseq_syntax.evaluation.run_commands`, which also reads records with text commands only).
``metrics``: ``scoring.corpus_scores`` (or any dict of numbers); ``significance``: baseline name ->
``scoring.paired_bootstrap``'s report against it (over seeds: ``seed_bootstrap``'s). Optional: ``seed``, ``device``,
``valid`` (the statistic the best checkpoint is chosen by and ``[epoch, value]`` per epoch), ``parsers`` (the training
data's ``parsers.json``), and over seeds ``seeds``, ``seed_list``, ``metrics_sd`` and ``per_seed_metrics``.
``updates``, ``epochs`` and ``wall_time_s`` come from the fairseq-train log (over seeds: their means).

A record over seeds (``SYSTEM.seeds.run.json``) without a training command holds what is over its seeds only: its
seeds' facts (``SEED_FACTS``) come from its first seed's record beside it, the rest (``OVER_SEEDS_FIELDS``: means,
sds, per-seed values, logs) from all its seeds' records (``seeds_give``, read by ``load_record``). Its seed-aware
tests hold, as a rule, ``test``, ``n_samples``, ``seed`` and each metric's ``p_value`` and ``delta_ci`` to ``DIGITS``
significant digits (``stored_test``); ``load_record`` adds the rest (``seed_test_gives``).
A record names no folder of its machine (``portable_paths``); ``load_record`` and ``find_record_files`` read packed
records too."""
import itertools
import json
import os
import re
import statistics
import sys
from collections.abc import Iterable
from pathlib import Path

from fairseq_syntax.core.files import atomic_path, write_atomically
from fairseq_syntax.evaluation import packed_runs
from fairseq_syntax.evaluation.kept_files import RecordError, open_text
from fairseq_syntax.evaluation.packed_runs import RECORD_SUFFIX
from fairseq_syntax.evaluation.run_commands import command_fields, stored_form, with_argv
from fairseq_syntax.evaluation.seed_systems import (
    SEED_BOOTSTRAP_TEST,
    mc_standard_error,
    mean_and_sd,
    seed_means,
    welch_test,
)
from fairseq_syntax.evaluation.tables import _significant, json_text
from fairseq_syntax.evaluation.train_logs import best_checkpoint_metric, parse_train_log, parse_valid_curve

REQUIRED_FIELDS = ("dataset", "system", "arch", "command", "updates", "epochs", "wall_time_s", "train_log",
                   "metrics", "significance")
#: what a record over seeds without a training command takes from its first seed's record
SEED_FACTS = ("dataset", "arch", "command", "command_argv", "decode_command", "decode_command_argv", "device",
              "parsers")
#: what such a record takes from all its seeds' records (``seeds_give``)
OVER_SEEDS_FIELDS = ("seeds", "updates", "epochs", "wall_time_s", "train_log", "metrics", "metrics_sd",
                     "per_seed_metrics")
TRAIN_FIELDS = ("updates", "epochs", "wall_time_s")  # parse_train_log's
#: a seed-aware test's fields in ``scoring.seed_bootstrap``'s order (its metrics after them), then each metric's
TEST_ORDER = ("test", "n_samples", "seed", "seeds_a", "seeds_b",
              "p_value", "p_mc_se", "a", "b", "delta", "delta_ci", "welch")
DIGITS = 8  # significant digits of a seed-aware test's floats in a record over seeds

OUT_DIR = "OUT_DIR"  # how a record writes the recipe's output folder (data, checkpoints: outside the repository)
# a path starts a token (after a space, '=', ',', a quote or a bracket); its prefix ends where a '/' or the token does
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
    """The (pattern, replacement) pairs of ``portable_paths`` in order; with ``python``, site-packages ->
    ``SITE_PACKAGES`` and the prefix -> ``PYTHON_PREFIX`` too."""
    def rules_of(path: str, *ends: tuple[str, str]) -> list:  # (what follows the path, its replacement)
        return [(re.compile(_PATH_START + re.escape(form) + end), new)
                for form in _path_forms(path) for end, new in ends]

    rules = rules_of(out_dir, (_PATH_END, OUT_DIR)) if out_dir else []
    rules += rules_of(root, ("/", ""), (_PATH_END, os.curdir)) if root else []
    if python:
        import sysconfig

        for name, key in PYTHON_PATHS:
            rules += rules_of(sysconfig.get_paths()[key] if key else sys.prefix, (_PATH_END, name))
    return rules


def portable_paths(value, out_dir: str | None = None, root: str | None = None, python: bool = False):
    """``value`` (a string, or dicts and lists of them) with every path under ``out_dir`` written from ``OUT_DIR``
    (``/x/work/ckpt`` -> ``OUT_DIR/ckpt``), then every path under ``root`` relative to it (``/x/repo/examples/runs``
    -> ``examples/runs``; ``root`` itself -> ``.``); with ``python``, Python's folders too. Other text is kept."""
    rules = _path_rules(out_dir, root, python)

    def convert(item: str) -> str:
        for pattern, replacement in rules:
            item = pattern.sub(replacement, item)
        return item

    return map_strings(convert, value)


def map_strings(function, value):
    """``value`` (a string, or dicts, lists and tuples of them) with ``function`` of each string (tuples as lists)."""
    if isinstance(value, str):
        return function(value)
    if isinstance(value, dict):
        return {key: map_strings(function, inner) for key, inner in value.items()}
    return [map_strings(function, inner) for inner in value] if isinstance(value, (list, tuple)) else value


#: an absolute path in a record's text: a '/' that starts a token (as ``_PATH_START`` says), then a name
_ABSOLUTE = re.compile(_PATH_START + r"/[\w.+@-]+(?:/[\w.+@-]*)*")


def absolute_paths(value) -> list[str]:
    """The absolute paths in ``value``'s strings, each once, in order: what :func:`portable_paths` leaves of a
    machine's folders."""
    found: dict[str, None] = {}
    map_strings(lambda text: found.update(dict.fromkeys(_ABSOLUTE.findall(text))), value)
    return list(found)


def make_log_portable(path, out_dir: str | None = None, root: str | None = None) -> int:
    """Rewrite the log ``path`` (plain or gzipped) in place with ``portable_paths``, Python's folders included. Line
    ends and undecodable bytes are kept. Returns the number of lines changed."""
    path = Path(path)
    with open_text(path, errors="surrogateescape", newline="") as handle:
        lines = handle.read().split("\n")
    portable = portable_paths(lines, out_dir, root, python=True)
    changed = sum(old != new for old, new in zip(lines, portable))
    if changed:
        # the same ending: gzipped where the log is
        with atomic_path(path, ".partial" + path.suffix) as temporary, \
                open_text(temporary, "w", errors="surrogateescape", newline="") as out:
            out.write("\n".join(portable))
    return changed


def record_run(path, *, dataset: str, system: str, arch: str, command: list[str] | None, train_log, metrics: dict,
               significance: dict | None = None, by_length: list[dict] | None = None,
               out_dir: str | None = None, root: str | None = None, **extra) -> dict:
    """Write the run record of one system to `path` (`<name>.run.json`) and return it.

    updates, epochs and wall_time_s come from `train_log` (comma-separated logs, one per seed: the means);
    `by_length`: `scoring.bleu_by_length` rows. `extra` goes in as it is: `seed`, `device`, `decode_command`,
    `score_command`, and over seeds `seeds`, `seed_list`, `metrics_sd` and `per_seed_metrics` (per seed, in
    `seed_list`'s order). `out_dir` / `root`: paths written by `portable_paths`. `command`: the training argv (the
    file holds argv only; None over seeds: the first seed's). A record of one run also holds its validation curve
    (`valid`)."""
    logs = [parse_train_log(log) for log in str(train_log).split(",")]
    train = train_means(logs)
    trained = command_fields("command", command) if command else {}
    record = {"dataset": dataset, "system": system, "arch": arch, **trained,
              **train, "train_log": str(train_log), "metrics": metrics, "significance": significance or {}, **extra}
    if len(logs) == 1 and command:  # one run: its validation curve (over seeds: in its runs' records)
        metric = best_checkpoint_metric(command)
        curve = parse_valid_curve(train_log, metric)
        if curve:
            record["valid"] = {"metric": metric, "curve": [list(point) for point in curve]}
    if by_length:
        record["by_length"] = by_length
    if out_dir or root:
        record = portable_paths(record, out_dir, root)
    if takes_seed_facts(record) and all(packed_runs.has(seed_record_path(path, record, seed))
                                        for seed in record["seed_list"]):
        record["significance"] = {partner: stored_test(path, record, partner, report)
                                  for partner, report in record["significance"].items()}
        given = seeds_give(path, record)  # over seeds: what its seeds' records give it, equal, is not kept twice
        record = {key: value for key, value in record.items() if key not in given or not same(value, given[key])}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    # whole or not at all: the other lane may pack this folder's finished runs meanwhile
    write_atomically(path, json_text(stored_form(record)))
    return record


def seed_record_path(path, record: dict, seed: int) -> Path:
    """The record of ``seed``'s run beside the record over seeds ``path``."""
    return Path(path).with_name(f"{record['system']}.seed{seed}{RECORD_SUFFIX}")


def _seed_record(path, system: str, seed: int, whose: str = "its") -> Path:
    """The record of ``system``'s ``seed`` beside ``path``; RecordError where it is neither there nor packed."""
    found = seed_record_path(path, {"system": system}, seed)
    if not packed_runs.has(found):
        raise RecordError(f"{path}: the record of {whose} seed {seed}, {found.name}, is missing (not there or packed)")
    return found


def scored_files(record: dict) -> tuple[list[str], dict[str, list[str]]]:
    """The files ``record``'s score command scored, one a seed: HYP's, and each BASELINE's by its name
    (``--baseline-name``, else its path); the words before its first option, as ``score_command`` writes them."""
    words = record.get("score_command_argv") or [""]
    inputs = [paths.split(",") for paths in itertools.takewhile(lambda word: not word.startswith("-"), words[1:])]
    names = [value for option, value in zip(words, words[1:]) if option == "--baseline-name"]
    partners = inputs[2:]
    return (inputs or [[]])[0], dict(zip(names + [",".join(files) for files in partners[len(names):]], partners))


def exact_p(p_value: float, n_samples: int) -> float:
    """The p of ``scoring.two_sided_bootstrap_p``, ``2 k / (R + 1)`` of ``n_samples`` = R rounds, whose ``DIGITS``
    significant digits ``p_value`` is (``p_value`` itself where none is)."""
    share = round(p_value * (n_samples + 1) / 2)
    exact = min(1.0, 2 * share / (n_samples + 1))
    return exact if _significant(exact, DIGITS) == _significant(p_value, DIGITS) else p_value


def seed_test_gives(path, record: dict, partner: str, report: dict, seeds: bool = True) -> dict:
    """What the seed-aware test ``report`` of ``record`` (over seeds, at ``path``) against ``partner`` has from
    elsewhere: ``seeds_a``, ``seeds_b`` (files its score command scored), per metric ``p_mc_se`` and, with ``seeds``,
    ``a``, ``b`` (means of the partner's seeds' records beside ``path`` and of ``per_seed_metrics``), ``delta`` and
    ``welch``: equal to the test's (numpy) to ``DIGITS`` digits. A partner's seed's record missing: RecordError."""
    own, partners = scored_files(record)
    files = partners.get(partner, [])
    given = {"seeds_a": len(files), "seeds_b": len(own)} if files and own else {}
    found = [re.fullmatch(re.escape(partner) + r"\.seed(\d+)\.gen(\.gz)?", Path(file).name) for file in files]
    theirs = None
    if seeds and files and all(found):
        theirs = [_read_object(_seed_record(path, partner, int(seed[1]), f"{partner}'s"))["metrics"] for seed in found]
    rounds = report.get("n_samples")
    for metric, tested in report.items():
        if not isinstance(tested, dict):
            continue
        given[metric] = {"p_mc_se": mc_standard_error(exact_p(tested["p_value"], rounds), rounds)} if rounds else {}
        mine = record.get("per_seed_metrics", {}).get(metric)
        if theirs is not None and mine:
            scores = [run[metric] for run in theirs]
            a, b = mean_and_sd(scores)[0], mean_and_sd(mine)[0]
            given[metric].update(a=a, b=b, delta=b - a, welch=welch_test(scores, mine))
    return given


def _ordered(stored: dict, given: dict) -> dict:
    """``stored`` with what it lacks of ``given``, keys in ``TEST_ORDER`` (others after, as they come)."""
    order = (*TEST_ORDER, *{**given, **stored})
    return dict(sorted({**given, **stored}.items(), key=lambda item: order.index(item[0])))


def stored_test(path, record: dict, partner: str, report: dict) -> dict:
    """A seed-aware test of a record over seeds as its file holds it: its floats to ``DIGITS`` significant digits,
    without what :func:`seed_test_gives` gives to as many digits (its p_value stays: :func:`exact_p` reads it)."""
    if report.get("test") != SEED_BOOTSTRAP_TEST:
        return report
    report = _significant(report, DIGITS)
    try:
        given = _significant(seed_test_gives(path, record, partner, report), DIGITS)
    except RecordError:  # a partner's seed's record missing: what the record holds alone
        given = _significant(seed_test_gives(path, record, partner, report, seeds=False), DIGITS)

    def kept(stored: dict, given: dict) -> dict:
        return {key: kept(value, given[key]) if isinstance(value, dict) and key in given and key != "welch" else value
                for key, value in stored.items() if not (key in given and same(value, given[key]))}

    return kept(report, given)


def read_test(path, record: dict, partner: str, report: dict, seeds: bool) -> dict:
    """``report`` as :func:`stored_test` wrote it, whole: what it lacks from :func:`seed_test_gives` (``seeds``: those
    from seeds' records too, where it lacks any), each p as the test computed it (:func:`exact_p`)."""
    if report.get("test") != SEED_BOOTSTRAP_TEST:
        return report
    seeds = seeds and any(field not in tested for tested in report.values() if isinstance(tested, dict)
                          for field in ("a", "b", "delta", "welch"))
    given = seed_test_gives(path, record, partner, report, seeds)
    whole = _ordered(report, given)
    for metric, tested in whole.items():
        if isinstance(tested, dict):
            exact = {"p_value": exact_p(tested["p_value"], report["n_samples"])} if "n_samples" in report else {}
            whole[metric] = _ordered({**tested, **exact}, given.get(metric, {}))
    return whole


def train_means(runs: list[dict]) -> dict:
    """``TRAIN_FIELDS`` over ``runs`` (their logs' or records'): the means, each of the first run's type."""
    return {key: type(runs[0][key])(statistics.fmean(run[key] for run in runs)) for key in TRAIN_FIELDS}


def same(a, b) -> bool:
    """Whether ``a`` and ``b`` are the same JSON, bit for bit (1 is not 1.0; keys in the same order)."""
    return json.dumps(a) == json.dumps(b)


def seeds_give(path, record: dict, fields: Iterable[str] = (*SEED_FACTS, *OVER_SEEDS_FIELDS)) -> dict:
    """What the records of its seeds beside the record over seeds ``path`` give it, of ``fields``: their first's
    ``SEED_FACTS``; ``seeds``; the means of ``TRAIN_FIELDS``; ``train_log`` (their logs, comma-joined); ``metrics``,
    ``metrics_sd`` and ``per_seed_metrics`` (:func:`~fairseq_syntax.evaluation.scoring.seed_scores` of their
    metrics). A seed's record missing: RecordError naming it."""
    fields = set(fields)
    seeds = record["seed_list"] if fields & set(OVER_SEEDS_FIELDS) else record["seed_list"][:1]
    runs = []
    for seed in seeds:
        found = _seed_record(path, record["system"], seed)
        # after the first, its numbers and log only: its commands are not read
        runs.append(_lacking(found, _read_object(found), (*TRAIN_FIELDS, "train_log", "metrics")) if runs else
                    load_record(found))
    given = {field: runs[0][field] for field in SEED_FACTS if field in runs[0]}
    if fields & set(OVER_SEEDS_FIELDS):
        mean, sd = seed_means([run["metrics"] for run in runs])
        given.update(seeds=len(runs), **train_means(runs), train_log=",".join(str(run["train_log"]) for run in runs),
                     metrics=mean, metrics_sd=sd, per_seed_metrics={name: [run["metrics"][name] for run in runs]
                                                                    for name in sd})
    return {field: value for field, value in given.items() if field in fields}


def takes_seed_facts(record: dict) -> bool:
    """Whether ``record`` is one over seeds whose seeds' facts are its first seed's (it holds no training command)."""
    return bool(record.get("seed_list")) and "command" not in with_argv(record)


def load_record(path, seed_facts: bool = True) -> dict:
    """The run record ``path`` (the file or its packed copy), each command with its argv
    (:func:`~fairseq_syntax.evaluation.run_commands.with_argv`); over seeds, with what its seeds' records give it
    (:func:`seeds_give`) where it lacks it (``seed_facts=False``: as it is)."""
    record = _read_object(path)
    over_seeds = takes_seed_facts(record)
    given = (*SEED_FACTS, *OVER_SEEDS_FIELDS) if over_seeds else ()
    record = _lacking(path, with_argv(record), [field for field in REQUIRED_FIELDS if field not in given])
    if over_seeds and seed_facts:
        record.update(seeds_give(path, record, [field for field in given if field not in record]))
    record["significance"] = {partner: read_test(path, record, partner, report, seed_facts)
                              for partner, report in record["significance"].items()}
    return record


def _read_object(path) -> dict:
    try:
        record = json.loads(packed_runs.read_bytes(path).decode("utf-8"))
    except json.JSONDecodeError as error:
        raise RecordError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from error
    if not isinstance(record, dict):
        raise RecordError(f"{path}: a run record is a JSON object, got {type(record).__name__}")
    return record


def _lacking(path, record: dict, fields: Iterable[str]) -> dict:
    """``record``; RecordError naming the ``fields`` it lacks."""
    missing = [field for field in fields if field not in record]
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
