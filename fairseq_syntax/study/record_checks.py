"""Every record of a study's runs folder checked against its study file, by ``plan``, ``run`` and ``report`` before
anything else (:func:`refuse_foreign_records`) and by a run before it counts as finished (:func:`finished`): a record
of another study, a system the file lacks or another setting is refused in one line naming each difference.

Settings are compared key by key where the record names them; a record of the old form (a settings digest, or none)
matches on an equal digest, else its training command is compared word by word with the file's
(:func:`~fairseq_syntax.study.grid.train_pieces` names what gives each word). A first-studies control run that read
the seed-1 structures (``DATA.CONTROL``) for every seed is no difference. A record over seeds that holds no training
command (:func:`~fairseq_syntax.evaluation.records.takes_seed_facts`) has its seeds' records checked instead: each
must be there (or packed). A record holding an absolute path the study file does not write is refused too (paths are
relative to :func:`~fairseq_syntax.study.records.project_root`)."""
from __future__ import annotations

import dataclasses
import json
import os
import re
from difflib import SequenceMatcher
from pathlib import Path

from fairseq_syntax.evaluation import packed_runs
from fairseq_syntax.evaluation.records import absolute_paths, map_strings, seed_record_path, takes_seed_facts
from fairseq_syntax.evaluation.run_commands import as_old_form, record_argv
from fairseq_syntax.study.config import StudyConfig
from fairseq_syntax.study.grid import (
    Run,
    planned_seeds,
    registry_systems,
    settings_digest,
    study_settings,
    train_pieces,
)
from fairseq_syntax.study.records import StudyError, kept, project_root, read_record, runs_dir

#: a record's file name: a run's (``SYSTEM.seedK``) or a system's over its seeds (``SYSTEM.seeds``)
RECORD_NAME = re.compile(r"^(?P<system>.+)\.(?:seed(?P<seed>\d+)|seeds)\.run\.json$")
#: how a record writes the study's work folder (:func:`fairseq_syntax.evaluation.records.portable_paths`)
OUT_DIR = "OUT_DIR"
_ABSENT = object()


def _shown(value) -> str:
    return "absent" if value is _ABSENT else json.dumps(value, ensure_ascii=False)


def settings_differences(recorded: dict, config: StudyConfig) -> list[str]:
    """Each key whose value in ``recorded`` (a record's settings by key) is not the file's: ``KEY: RECORDED (file:
    VALUE)``, in the file's order."""
    mine = study_settings(config)
    keys = [*mine, *(key for key in recorded if key not in mine)]
    return [f"{key}: {_shown(recorded.get(key, _ABSENT))} (file: {_shown(mine.get(key, _ABSENT))})"
            for key in keys if recorded.get(key, _ABSENT) != mine.get(key, _ABSENT)]


def command_differences(recorded: list[str], config: StudyConfig, run: Run) -> list[str]:
    """How a record's training command of the old form differs from the file's for ``run``: per differing stretch of
    words, what gives them and both words, ``KEY: RECORDED (file: WORDS)``."""
    expected, sources = ["fairseq-train"], ["the program"]
    empty_at: dict[int, list[str]] = {}  # where a piece that gives no words would have given them
    for source, words in train_pieces(config, run, OUT_DIR):
        words = as_old_form(words)
        if not words:
            empty_at.setdefault(len(expected), []).append(source)
        expected += words
        sources += [source] * len(words)
    recorded = list(recorded)
    seed_one = f"{OUT_DIR}/data-bin/{registry_systems()[run.system.name].data}"
    if len(recorded) > 1 and recorded[1] == seed_one:  # read the seed-1 structures, as the first control runs did
        recorded[1] = expected[1]
    found = []
    for tag, mine, mine_end, theirs, theirs_end in SequenceMatcher(a=recorded, b=expected,
                                                                   autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        what = list(dict.fromkeys(sources[theirs:theirs_end])) or empty_at.get(theirs, [])
        found.append(f"{', '.join(what) or 'words the file does not give'}: "
                     f"{' '.join(recorded[mine:mine_end]) or 'absent'} "
                     f"(file: {' '.join(expected[theirs:theirs_end]) or 'absent'})")
    return found


def given_paths(config: StudyConfig) -> list[str]:
    """The absolute paths the study file writes itself, in any key (``~`` expanded): a record may hold those."""
    return absolute_paths(map_strings(os.path.expanduser, [dataclasses.asdict(section)
                                                           for section in config.sections.values()]))


def record_problems(config: StudyConfig, path: Path, record: dict) -> list[str]:
    """Why the record ``path`` is not one of this study's; empty: it is."""
    named = RECORD_NAME.match(path.name)
    if named is None:
        return ["not a study's record name (SYSTEM.seedK.run.json or SYSTEM.seeds.run.json)"]
    system, identity = named["system"], record.get("study") or {}
    given = given_paths(config)
    problems = [f"it holds the absolute path {found} (a study's record names its files relative to its project, "
                f"{project_root(config)}, and its work folder as {OUT_DIR})" for found in absolute_paths(record)
                if not any(found == path or found.startswith(path.rstrip("/") + "/") for path in given)]
    if identity and identity.get("name") != config.name:
        problems.append(f"study {identity.get('name')!r}, not {config.name!r}")
    if record.get("dataset") not in (config.name, identity.get("name")):
        problems.append(f"dataset {record.get('dataset')!r}, not {config.name!r}")
    if record.get("system") != system:
        problems.append(f"system {record.get('system')!r}, not its file name's {system!r}")
    if named["seed"] is not None and record.get("seed", int(named["seed"])) != int(named["seed"]):
        problems.append(f"seed {record.get('seed')!r}, not its file name's {named['seed']}")
    if system not in planned_seeds(config):
        return [*problems, f"system {system!r} is not one of the study's"]
    if named["seed"] is None and takes_seed_facts(record):
        seeds = {seed: seed_record_path(path, record, seed) for seed in record["seed_list"]}
        return problems + [f"the record of its seed {seed}, {found.name}, is missing (not there or packed)"
                           for seed, found in seeds.items() if not packed_runs.has(found)]
    settings = identity.get("settings")
    if isinstance(settings, dict):
        return problems + settings_differences(settings, config)
    if settings is not None and settings == settings_digest(config):
        return problems
    # a record of the old form: its training command, word by word
    seed = int(named["seed"]) if named["seed"] is not None else (record.get("seed_list") or [1])[0]
    words = record_argv(record)
    if not words:
        return [*problems, "no settings and no training command to compare with the file's"]
    found = command_differences(words, config, Run(registry_systems()[system].for_training_seed(seed), seed))
    if not found and settings is not None:
        found = ["its settings' digest is not the file's: a setting of [corpus], [parses], [bpe] or [decoding] "
                 "changed (a record of the old form keeps their digest only)"]
    return problems + found


def refusal(config: StudyConfig, path, problems: list[str]) -> str:
    """The one line that refuses the record ``path``."""
    return f"{path}: not a record of this study ({config.path}): {'; '.join(problems)}"


def finished(config: StudyConfig, run: Run) -> bool:
    """Whether ``run`` has a kept decode and a record of this study; StudyError for a record of another study or
    setting."""
    runs = runs_dir(config)
    record_path = runs / f"{run.name}.run.json"
    record = read_record(record_path)
    if record is None or kept(runs / f"{run.name}.gen") is None:
        return False
    problems = record_problems(config, record_path, record)
    if problems:
        raise StudyError(refusal(config, record_path, problems))
    return True


def refuse_foreign_records(config: StudyConfig) -> None:
    """StudyError naming every record of the runs folder (there or packed) that is not this study's, a line each."""
    lines = []
    for path in packed_runs.glob(str(runs_dir(config) / f"*{packed_runs.RECORD_SUFFIX}")):
        problems = record_problems(config, Path(path), read_record(Path(path), seed_facts=False) or {})
        if problems:
            lines.append(refusal(config, path, problems))
    if lines:
        raise StudyError("\n".join(lines))
