"""Where a study's runs keep what they made, and how it is read back: the work and runs folders, a run's kept
files (gzipped there, or packed in the runs' archive: :mod:`fairseq_syntax.evaluation.packed_runs`), its record
(``RUNS/RUN.run.json``), and the one-line error every study command stops with."""
from __future__ import annotations

import json
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
    if path.is_file() or packed_runs.has(path):
        return json.loads(packed_runs.read_bytes(path).decode("utf-8"))
    return None
