"""Where a study's runs keep what they made, and how it is read back: the work and runs folders, a run's kept
files (gzipped there, or packed in the runs' archive: :mod:`fairseq_syntax.evaluation.packed_runs`), its record
(``RUNS/RUN.run.json``, each command with its argv), and the one-line error every study command stops with."""
from __future__ import annotations

from pathlib import Path

from fairseq_syntax.evaluation import packed_runs
from fairseq_syntax.study.config import StudyConfig


class StudyError(RuntimeError):
    """A problem that stops a run or a command, in one line."""


def work_dir(config: StudyConfig) -> Path:
    return config.folder("work").resolve()


def runs_dir(config: StudyConfig) -> Path:
    return config.folder("runs").resolve()


def kept(path: Path) -> Path | None:
    """The kept form of a run's file: ``FILE.gz`` (there or packed in the runs' archive), else None. Not ``FILE``:
    a run writes its decode and logs plain while it runs and gzips them once whole, so a plain file is one in progress
    (or left by a run killed partway), never a finished run's."""
    candidate = Path(f"{path}.gz")
    # find_member, not packed_runs.has: has() also answers for the plain twin of a .gz name
    return candidate if candidate.is_file() or packed_runs.find_member(candidate) is not None else None


def read_record(path: Path) -> dict | None:
    """The run record ``path`` (there, or packed; :func:`fairseq_syntax.evaluation.records.load_record`: each command
    with its argv, a record that cannot be read one line naming it); None where there is none."""
    from fairseq_syntax.evaluation.records import load_record

    return load_record(path) if path.is_file() or packed_runs.has(path) else None
