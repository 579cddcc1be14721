"""A study's data, made once: everything under ``WORK`` that the grid's runs read (:mod:`.needs`; with ``only``,
the runs named), each step recorded and skipped once made (:mod:`.engine`): the training ``subset`` and ``tokens``
(:mod:`.corpus`), the parses (:mod:`.parses`), ``bpe``, the ``controls``' structures, every ``data-bin/NAME`` a run
reads (:mod:`.data`) and the test ``reference``. An output there without a record stops it in one line naming it:
nothing is overwritten."""
from __future__ import annotations

import shutil
from collections.abc import Callable, Collection

from fairseq_syntax.study.config import StudyConfig
from fairseq_syntax.study.grid import data_directories
from fairseq_syntax.study.prepare import corpus, parses
from fairseq_syntax.study.prepare.bpe import bpe_step
from fairseq_syntax.study.prepare.controls import controls_step
from fairseq_syntax.study.prepare.data import data_step
from fairseq_syntax.study.prepare.engine import STAGING, PrepareError, Unmade
from fairseq_syntax.study.prepare.preparation import Preparation


def problems(prep: Preparation) -> list[str]:
    """Every missing file and parser, one line each (:mod:`fairseq_syntax.study.checks` adds what else ``run``
    checks before it trains)."""
    return corpus.file_problems(prep) + parses.parser_problems(prep)


def steps(prep: Preparation) -> None:
    sources = corpus.subset_step(prep)
    corpus.tokens_step(prep, sources)
    if prep.needs.trees or prep.needs.arcs:
        prep.parses_key = parses.parses_step(prep)
    bpe_step(prep)
    for control, seed in prep.needs.controls:
        controls_step(prep, control, seed)
    for directory in prep.needs.directories:
        data_step(prep, directory)
    corpus.reference_step(prep)
    if not prep.dry:
        shutil.rmtree(prep.work / STAGING, ignore_errors=True)


def dry_run(prep: Preparation) -> None:
    """What :func:`prepare` would refuse in ``WORK`` as it is, making nothing: each step's recipe against its record
    up to the first step it would make; one line of :class:`~.engine.PrepareError`."""
    if not prep.work.is_dir():
        return
    prep.read_manifest()
    prep.dry, prep.progress = True, lambda line: None
    try:
        steps(prep)
    except Unmade:
        pass


def prepare(config: StudyConfig, progress: Callable[[str], None] = print,
            only: Collection[str] | None = None) -> list[str]:
    """Make (or find made) under ``study.work`` everything the study's runs read (with ``only``, what those runs
    read); return the data directories' names under ``WORK/data-bin`` in the grid's first-use order (real-parse
    directories before control directories). A problem stops it with :class:`PrepareError`, one line each."""
    prep = Preparation(config, progress, only)
    # every missing file and parser named at once; then named parsers downloaded, before anything is made
    found = problems(prep) or parses.fetch_problems(prep)
    if found:
        raise PrepareError("\n".join(found))
    with prep.locked():
        prep.read_manifest()
        steps(prep)
    every = data_directories(config)
    made = {d.name for d in prep.needs.directories}
    names = every if only is None else [name for name in every if name in made]
    later = len(every) - len(names)
    progress(f"prepared: {len(names)} data directories in {prep.work / 'data-bin'}: {', '.join(names)}"
             + (f" ({later} more when their runs are run)" if later else ""))
    return names
