"""A study over training-set sizes (``corpus.subset`` lists them): one ordinary study a size, a *point*.

Size N takes the first N lines of one random order of the training lines (nested subsets, ``corpus.subset_seed``);
it is ``NAME.nN`` in ``WORK/nN``, ``RUNS/nN`` and ``REPORT/nN``, or the runs of ``[sizes.N] study_file``. Its sweep's
candidates (the product of the ``sweep.SECTION.KEY`` lists, in file order) are studies of the baseline alone, seed 1,
in ``nN/sweep/LABEL``; the size's protocol is the candidate of lowest validation negative log-likelihood per sentence
at its best epoch (``nll_loss`` bits/token x ln 2 x ``wpb / bsz``: per-token losses of two BPE vocabularies are not
comparable), and its grid waits until every candidate has run; the chosen candidate's run is the grid's baseline seed 1
where it is the same run (:func:`sweep_twin`)."""
from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairseq_syntax.study.config import ConfigError, Study, StudyConfig, SystemEntry, load_study


@dataclass(frozen=True)
class Candidate:
    """One combination of a size's sweep: its label and values (section -> key -> value)."""
    label: str
    values: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class SweepResult:
    """A finished sweep run: validation negative log-likelihood per sentence (nats) at its best epoch, that epoch,
    the per-token nll (bits) and the epochs trained; its test BLEU (shown, never used to choose)."""
    candidate: Candidate
    nll_per_sentence: float
    nll_per_token_bits: float
    best_epoch: int
    epochs: int
    bleu: float | None


@dataclass(frozen=True)
class Point:
    """One size of a study over sizes: its sweep's studies, what they found, and its own study (None while its
    sweep is not finished: ``waiting`` says why)."""
    pairs: int
    label: str
    sweep: tuple[tuple[Candidate, StudyConfig], ...]
    results: tuple[SweepResult, ...]
    config: StudyConfig | None
    waiting: str = ""
    given: bool = False  # its runs are another study file's (sizes.N.study_file)

    @property
    def chosen(self) -> SweepResult | None:
        return min(self.results, key=lambda found: found.nll_per_sentence) if self.sweep and \
            len(self.results) == len(self.sweep) else None


def _value_text(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def candidates(sweep: dict[str, dict[str, list]]) -> list[Candidate]:
    """Every combination of a sweep's candidate values, in the file's order (the last key varying fastest)."""
    keys = [(section, key) for section, values in sweep.items() for key in values]
    found = []
    for combination in itertools.product(*(sweep[section][key] for section, key in keys)):
        values: dict[str, dict[str, Any]] = {}
        for (section, key), value in zip(keys, combination):
            values.setdefault(section, {})[key] = value
        label = "-".join(f"{key}{_value_text(value)}" for (_, key), value in zip(keys, combination))
        found.append(Candidate(label, values))
    return found


def _derived(config: StudyConfig, label: str, name: str, folders: dict[str, str], pairs: int,
             settings: list[dict[str, dict[str, Any]]], systems: tuple[SystemEntry, ...]) -> StudyConfig:
    config = config.with_changes("corpus", subset=pairs).with_changes("study", name=name, **folders)
    for layer in settings:
        for section, values in layer.items():
            config = config.with_changes(section, **values)
    return dataclasses.replace(config, systems=systems, sizes={}, point=label)


def _folders(study: Study, suffix: str) -> dict[str, str]:
    return {key: f"{study[key]}/{suffix}" for key in ("work", "runs", "report")}


def sweep_studies(config: StudyConfig, pairs: int) -> list[tuple[Candidate, StudyConfig]]:
    """Size ``pairs``'s sweep: each candidate's study (the baseline alone, seed 1)."""
    entry = config.sizes.get(pairs)
    if entry is None or not entry.sweep:
        return []
    study = config.study
    found = []
    for candidate in candidates(entry.sweep):
        suffix = f"n{pairs}/sweep/{candidate.label}"
        folders = _folders(study, suffix)
        folders["report"] = folders["runs"]
        found.append((candidate, _derived(config, suffix, f"{study.name}.n{pairs}.sweep.{candidate.label}",
                                          folders, pairs, [entry.settings, candidate.values],
                                          (SystemEntry(name=config.baseline, seeds=1),))))
    return found


def sweep_result(candidate: Candidate, study: StudyConfig) -> SweepResult | None:
    """What a finished sweep run found (its kept training log and record), None before its record is written."""
    from fairseq_syntax.study.records import kept, read_record, runs_dir

    runs = runs_dir(study)
    name = f"{study.baseline}.seed1"
    log, record = kept(runs / f"{name}.train.log"), read_record(runs / f"{name}.run.json")
    if log is None or kept(runs / f"{name}.gen") is None or record is None:
        return None
    return validation_result(candidate, log, record.get("metrics", {}).get("BLEU"))


def validation_result(candidate: Candidate, log: Path, bleu: float | None = None) -> SweepResult:
    """The best epoch of a training log by validation ``nll_loss`` and its negative log-likelihood per sentence."""
    from fairseq_syntax.evaluation.train_logs import parse_valid_curve

    nll = dict(parse_valid_curve(log, "nll_loss"))
    tokens, sentences = dict(parse_valid_curve(log, "wpb")), dict(parse_valid_curve(log, "bsz"))
    if not nll:
        raise ValueError(f"{log}: no validation line with nll_loss")
    best = min(nll, key=lambda epoch: (nll[epoch], epoch))
    per_sentence = nll[best] * math.log(2) * tokens[best] / sentences[best]
    return SweepResult(candidate, per_sentence, nll[best], best, max(nll), bleu)


def point_of(config: StudyConfig, pairs: int) -> Point:
    """Size ``pairs`` of a study over sizes (module docstring)."""
    entry = config.sizes.get(pairs)
    study = config.study
    label = f"n{pairs}"
    if entry is not None and entry.study_file:
        path = config.path.parent / entry.study_file
        given = load_study(path)
        problems = given_problems(config, given, pairs)
        if problems:
            raise ConfigError(problems)
        return Point(pairs, label, (), (), dataclasses.replace(given, point=label), given=True)
    sweep = tuple(sweep_studies(config, pairs))
    results = tuple(found for found in (sweep_result(candidate, sub) for candidate, sub in sweep) if found)
    settings = [entry.settings] if entry else []
    chosen = Point(pairs, label, sweep, results, None).chosen
    if sweep and chosen is None:
        return Point(pairs, label, sweep, results, None,
                     waiting=f"waits for its sweep ({len(results)} of {len(sweep)} candidates run)")
    if chosen is not None:
        settings.append(chosen.candidate.values)
    own = _derived(config, label, f"{study.name}.{label}", _folders(study, label), pairs, settings,
                   size_systems(config, pairs))
    return Point(pairs, label, sweep, results, own)


def size_systems(config: StudyConfig, pairs: int) -> tuple[SystemEntry, ...]:
    """The systems of size ``pairs``'s grid, with the seeds its ``[sizes.N]`` gives them."""
    raised = config.sizes[pairs].systems if pairs in config.sizes else {}
    return tuple(raised.get(entry.name, entry) for entry in config.systems)


def sweep_twin(point: Point) -> tuple[StudyConfig | None, str]:
    """The chosen candidate's study where its run is the grid's baseline seed 1: its record's training and decoding
    commands are the grid's word for word, the work folder as OUT_DIR; else None and why not ("" with none chosen)."""
    from fairseq_syntax.evaluation.run_commands import as_old_form, record_argv
    from fairseq_syntax.study.grid import decode_arguments, study_runs, train_arguments
    from fairseq_syntax.study.record_checks import OUT_DIR
    from fairseq_syntax.study.records import read_record, runs_dir

    chosen = point.chosen
    if chosen is None or point.config is None:
        return None, ""
    sweep = next(study for candidate, study in point.sweep if candidate == chosen.candidate)
    run = study_runs(sweep)[0]  # the baseline's seed 1, its one run
    record = read_record(runs_dir(sweep) / f"{run.name}.run.json") or {}
    for field, program, arguments in (("command", "fairseq-train", train_arguments),
                                      ("decode_command", "fairseq-generate", decode_arguments)):
        mine, theirs = [program, *arguments(point.config, run, OUT_DIR)], record_argv(record, field) or []
        if theirs not in (mine, as_old_form(mine)):  # a record of the old form: its words split once
            at = next((n for n, (a, b) in enumerate(zip(theirs, mine)) if a != b), min(len(theirs), len(mine)))
            return None, (f"{sweep.point}'s {program} command differs from the grid's at word {at}: "
                          f"{' '.join(theirs[at:at + 2]) or 'end'} (grid: {' '.join(mine[at:at + 2]) or 'end'})")
    return sweep, ""


def given_problems(config: StudyConfig, given: StudyConfig, pairs: int) -> list[str]:
    """Why a ``study_file`` cannot be size ``pairs`` of ``config``: another corpus or draw, another size, or systems
    of the curve it lacks."""
    where = f"{config.path}: sizes.{pairs}.study_file: {given.path}"
    problems = []
    mine, theirs = config.corpus, given.corpus
    if theirs.subset != pairs:
        problems.append(f"{where}: its corpus.subset is {theirs.subset!r}, not {pairs}")
    for key in ("source", "target", "text", "train", "valid", "test", "subset_seed", "max_train_words"):
        if mine[key] != theirs[key]:
            problems.append(f"{where}: its corpus.{key} is {theirs[key]!r}, this file's {mine[key]!r}")
    if config.resolve(mine.raw).resolve() != given.resolve(theirs.raw).resolve():
        problems.append(f"{where}: its corpus.raw is another folder ({theirs.raw})")
    names = {entry.name for entry in given.systems}
    missing = [entry.name for entry in config.systems if entry.name not in names]
    if missing:
        problems.append(f"{where}: it has no {', '.join(missing)}")
    return problems


def points(config: StudyConfig) -> list[Point]:
    """Every size of a study over sizes, ascending."""
    return [point_of(config, pairs) for pairs in config.size_list]


def point_config(config: StudyConfig, label: str) -> StudyConfig:
    """The study of one point (``n1000``) or sweep candidate (``n1000/sweep/LABEL``), as a run's process finds it
    from the file; StudyError while a size's protocol is not chosen."""
    from fairseq_syntax.study.records import StudyError

    size, _, rest = label.partition("/")
    if not size.startswith("n") or not size[1:].isdigit() or int(size[1:]) not in config.size_list:
        raise StudyError(f"{config.path}: no size {label!r} in the study (corpus.subset: {config.size_list})")
    pairs = int(size[1:])
    if rest:
        for candidate, study in sweep_studies(config, pairs):
            if f"{size}/sweep/{candidate.label}" == label:
                return study
        raise StudyError(f"{config.path}: no sweep candidate {label!r} (fairseq-syntax-study plan lists them)")
    point = point_of(config, pairs)
    if point.config is None:
        raise StudyError(f"{config.path}: size {pairs}: {point.waiting}")
    return point.config


def size_problems(config: StudyConfig) -> list[str]:
    """Sizes above the corpus's training pairs (its source training file's lines), in one line; none where that file
    is missing."""
    from fairseq_syntax.study.prepare.engine import line_count

    corpus = config.corpus
    plain = config.resolve(corpus.raw) / f"{corpus.train}.{corpus.source}"
    found = [path for path in (plain, Path(f"{plain}.gz")) if path.is_file()]
    total = line_count(found[0]) if found else math.inf
    above = [pairs for pairs in config.size_list if pairs > total]
    return [f"{config.path}: corpus.subset: {', '.join(map(str, above))} above the corpus's {total} training pairs"] \
        if above else []
