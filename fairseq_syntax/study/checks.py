"""Every check ``fairseq-syntax-study run`` makes before it trains (:func:`study_problems`), a line a problem naming
the file and the key; ``plan`` makes them too, so that ``plan`` answering 0 means ``run`` starts training."""
from __future__ import annotations

import functools
from collections.abc import Collection
from pathlib import Path

from fairseq_syntax.parsing.coverage import ArchiveError, covered, line_digest
from fairseq_syntax.parsing.text import MOSES_LANGUAGES
from fairseq_syntax.study.config import StudyConfig
from fairseq_syntax.study import prepare
from fairseq_syntax.study.prepare.corpus import draw_order, raw_lines, subset_lines
from fairseq_syntax.study.prepare.engine import PrepareError
from fairseq_syntax.study.prepare.preparation import Preparation
from fairseq_syntax.study.records import StudyError, project_root, runs_dir
from fairseq_syntax.study.slurm import slurm_missing

#: the seeds whose draws a refusal tries besides the study's own, for a draw of lines the archive holds
DRAW_SEEDS = range(10)


class RawSide:
    """One raw file's lines and, as asked, each line's digest (:func:`~fairseq_syntax.parsing.coverage.line_digest`;
    ``entities``: of Moses-tokenized text)."""

    def __init__(self, path: Path):
        self.lines = raw_lines(path)
        self.digests: dict[tuple[int, bool], str] = {}

    def digest(self, number: int, entities: bool) -> str:
        """The digest of 1-based line ``number``."""
        if (number, entities) not in self.digests:
            self.digests[number, entities] = line_digest(self.lines[number - 1], entities)
        return self.digests[number, entities]


@functools.lru_cache(maxsize=8)
def _raw_side(path: str, stamp: tuple) -> RawSide:
    return RawSide(Path(path))


def raw_side(path: Path) -> RawSide:
    """A raw file's lines, read once a process while it stays as it is (each size of a study reads them)."""
    status = path.stat()
    return _raw_side(str(path.resolve()), (status.st_mtime_ns, status.st_size))


def study_problems(config: StudyConfig, executor: str, runs: Collection[str], work: bool = True) -> list[str]:
    """What stops ``run`` before it trains ``runs`` (the names of the runs left to do), one line each: the corpus's
    files and parsers or archive (:func:`~fairseq_syntax.study.prepare.problems`), :func:`corpus_problems`,
    :func:`coverage_problems`, the work folder (``work``: :func:`~fairseq_syntax.study.prepare.dry_run`) and the
    executor's needs."""
    if not runs:
        return []
    preparation = Preparation(config, lambda line: None, only=runs)
    problems = prepare.problems(preparation)
    if not problems:
        problems = corpus_problems(preparation) or coverage_problems(preparation)
    if not problems and work:
        try:
            prepare.dry_run(preparation)
        except PrepareError as error:
            problems.append(str(error))
    return runs_folder_problems(config) + problems + executor_problems(config, executor)


def runs_folder_problems(config: StudyConfig) -> list[str]:
    """A runs folder outside the study's project: its records would name their files by this machine's paths."""
    runs, root = runs_dir(config), project_root(config)
    if runs == root or root in runs.parents:
        return []
    return [f"{config.key_file('study', 'runs')}: study.runs: {runs} lies outside the study's project {root} (the "
            "git checkout that holds the study file, else its folder), and its records name their files relative to "
            "it: keep the runs folder inside (the work folder may lie anywhere)"]


def check_study(config: StudyConfig, executor: str, runs: Collection[str]) -> None:
    """:func:`study_problems` as one :class:`StudyError` (a line each)."""
    problems = study_problems(config, executor, runs)
    if problems:
        raise StudyError("\n".join(problems))


def executor_problems(config: StudyConfig, executor: str) -> list[str]:
    """What the executor needs that is not here: submitit and Slurm's commands for ``slurm``."""
    missing = slurm_missing() if executor == "slurm" else None
    return [f"{config.path}: executor slurm (executor.kind, or run's --executor) needs {missing}"] if missing else []


def corpus_problems(preparation: Preparation) -> list[str]:
    """A split whose two sides differ in length; a ``corpus.subset`` above the training pairs."""
    config, corpus = preparation.config, preparation.config.corpus
    problems = []
    for split, stem in preparation.stems.items():
        paths = [preparation.raw_file(stem, lang) for lang in (preparation.src, preparation.tgt)]
        counts = [len(raw_side(path).lines) for path in paths]
        if counts[0] != counts[1]:
            problems.append(f"{config.path}: corpus.{split}: {paths[0]} has {counts[0]} lines, {paths[1]} "
                            f"{counts[1]}")
        elif split == "train" and corpus.subset > counts[0]:
            problems.append(f"{config.path}: corpus.subset: {corpus.subset} pairs, but the training split has "
                            f"{counts[0]}")
    return problems


def coverage_problems(preparation: Preparation) -> list[str]:
    """The lines the study reads that its parse archive has no parse of (by each line's digest), a line a split
    naming the two ways on: parsers, or a draw of lines the archive holds."""
    config, needs = preparation.config, preparation.needs
    if not config.parses.archive or not (needs.trees or needs.arcs):
        return []
    archive = config.resolve(config.parses.archive)
    corpus = config.corpus
    entities = corpus.text == "tokenized"
    kinds = [f"parses.{kind}" for kind, needed in (("constituency", needs.trees), ("dependency", needs.arcs))
             if needed]
    offline = ("python3 examples/train_parsers.py --study FILE trains them without the network" if
               preparation.src == "en" else "docs/parsers.md, 'Local models', trains them without the network")
    parsers = f"give the parsers instead ({' and '.join(kinds)}, by pretrained name or path: {offline})"
    problems = []
    for split, stem in preparation.stems.items():
        path = preparation.raw_file(stem, preparation.src)
        side = raw_side(path)
        try:
            held = covered(str(archive), split)
        except ArchiveError as error:
            problems.append(f"{config.path}: parses.archive: {error}")
            continue
        numbers = subset_lines(len(side.lines), corpus.subset, corpus.subset_seed) \
            if split == "train" and corpus.subset else range(1, len(side.lines) + 1)
        missing = [number for number in numbers if side.digest(number, entities) not in held]
        if split == "train" and missing and corpus.max_train_words:
            missing = kept_lines(preparation, missing)
        if not missing:
            continue
        what = (f"of the {len(numbers)} training lines corpus.subset draws (corpus.subset = {corpus.subset}, "
                f"corpus.subset_seed = {corpus.subset_seed}" if split == "train" and corpus.subset else
                f"of the {len(numbers)} lines of corpus.{split} ({stem!r}")
        head = (f"{config.path}: parses.archive: {archive} has no parse of {len(missing)} {what}; the first: "
                f"{path.name} line {missing[0]})")
        if split == "train":
            problems.append(f"{head}: {parsers}, or {own_draw(side, held, corpus, entities)}")
        else:
            problems.append(f"{head}: parses of another corpus or tokenization; {parsers}")
    return problems


def own_draw(side: RawSide, held: frozenset[str], corpus: dict, entities: bool) -> str:
    """A draw of training lines the archive holds, as the file would ask for it: the study's seed first, then the
    seed of :data:`DRAW_SEEDS` whose draw lies inside the archive the longest."""
    total, wanted = len(side.lines), corpus.subset or len(side.lines)
    best = (0, corpus.subset_seed)
    for seed in dict.fromkeys([corpus.subset_seed, *DRAW_SEEDS]):
        inside = 0
        for number in draw_order(total, seed):
            if side.digest(number, entities) not in held:
                break
            inside += 1
        if inside >= wanted:
            return f"draw lines it holds (corpus.subset_seed = {seed} draws all {wanted} from them)"
        best = max(best, (inside, seed), key=lambda found: found[0])
    if not best[0]:
        return (f"a draw of lines it holds (no corpus.subset_seed of {corpus.subset_seed} or "
                f"{DRAW_SEEDS.start}-{DRAW_SEEDS.stop - 1} draws one of them: an archive of another corpus?)")
    return f"draw lines it holds (corpus.subset = {best[0]} or fewer, with corpus.subset_seed = {best[1]})"


def kept_lines(preparation: Preparation, numbers: list[int]) -> list[int]:
    """Those of the training lines ``numbers`` that ``corpus.max_train_words`` keeps (none empty or over the limit on
    either side), tokenized as the tokens step does; a language sacremoses does not tokenize is counted by its
    spaces."""
    from fairseq_syntax.parsing.text import tokenizer

    corpus = preparation.config.corpus
    limit = corpus.max_train_words
    sides = []
    for lang in (preparation.src, preparation.tgt):
        raw = corpus.text == "raw" and lang in MOSES_LANGUAGES
        split = tokenizer(lang if raw else None)
        lines = raw_side(preparation.raw_file(preparation.stems["train"], lang)).lines
        sides.append((split, lines))
    kept = []
    for number in numbers:
        counts = [len(split(lines[number - 1])) for split, lines in sides]
        if min(counts) > 0 and max(counts) <= limit:
            kept.append(number)
    return kept
