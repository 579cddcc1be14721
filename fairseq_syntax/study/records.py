"""Where a study's runs keep what they made, and how it is read back: work and runs folders, checkpoints
(``WORK/ckpt/ckpt-RUN``), kept files (gzipped, or packed: :mod:`fairseq_syntax.evaluation.packed_runs`), records
(``RUNS/RUN.run.json``), the test set the runs are scored on, and the one-line error every study command stops with."""
from __future__ import annotations

import gzip
from pathlib import Path

from fairseq_syntax.core.files import write_atomically
from fairseq_syntax.evaluation import packed_runs
from fairseq_syntax.study.config import StudyConfig


class StudyError(RuntimeError):
    """A problem that stops a run or a command, in one line."""


def work_dir(config: StudyConfig) -> Path:
    return config.folder("work").resolve()


def runs_dir(config: StudyConfig) -> Path:
    return config.folder("runs").resolve()


def project_root(config: StudyConfig) -> Path:
    """The study's project, which its records name their files relative to: the git checkout that holds the study
    file (its nearest folder with ``.git``), else the study file's folder."""
    folder = config.path.resolve().parent
    return next((above for above in (folder, *folder.parents) if (above / ".git").exists()), folder)


def checkpoints_dir(config: StudyConfig, name: str) -> Path:
    """The checkpoints of the run ``name`` and the commands that made them."""
    return work_dir(config) / "ckpt" / f"ckpt-{name}"


def kept(path: Path) -> Path | None:
    """The kept form of a run's file: ``FILE.gz`` (there or packed), else None. Never plain ``FILE``: that is one in
    progress or left by a killed run."""
    candidate = Path(f"{path}.gz")
    # find_member, not packed_runs.has: has() also answers for the plain twin of a .gz name
    return candidate if candidate.is_file() or packed_runs.find_member(candidate) is not None else None


def read_record(path: Path, seed_facts: bool = True) -> dict | None:
    """The run record ``path`` (there or packed, each command with its argv, over seeds with what its seeds' records
    give it unless not ``seed_facts``; unreadable: one line naming it); None where there is none."""
    from fairseq_syntax.evaluation.records import load_record

    return load_record(path, seed_facts) if path.is_file() or packed_runs.has(path) else None


def raw_reference(config: StudyConfig) -> Path:
    """The raw test reference: corpus.reference, else RAW/TEST.TARGET(.gz)."""
    corpus = config.corpus
    if corpus.reference:
        return config.resolve(corpus.reference)
    plain = config.resolve(corpus.raw) / f"{corpus.test}.{corpus.target}"
    return plain if plain.is_file() else Path(f"{plain}.gz")


def reference_path(config: StudyConfig) -> Path:
    """The test reference the runs are scored against: the data preparation's copy in WORK (records name it
    OUT_DIR/test.TARGET.ref), else the corpus's own."""
    copy = work_dir(config) / f"test.{config.corpus.target}.ref"
    return copy if copy.is_file() else raw_reference(config)


def test_set(config: StudyConfig) -> tuple[Path, Path | None]:
    """The test set the runs are scored on, in the data: the reference as scored (a ``tokenized`` corpus's kept
    tokens, else the raw reference) and the test source (None where the corpus names its own reference)."""
    corpus = config.corpus
    reference = raw_reference(config)
    scored = reference_path(config) if corpus.text == "tokenized" else reference
    source = reference.with_name(reference.name.replace(f".{corpus.target}", f".{corpus.source}"))
    return scored, source if corpus.reference == "" else None


def kept_test_set(config: StudyConfig) -> tuple[Path, Path]:
    """Where the runs folder keeps its test set (gzipped, or packed): ``RUNS/test.TARGET.ref`` and
    ``RUNS/test.SOURCE.src``."""
    corpus, runs = config.corpus, runs_dir(config)
    return runs / f"test.{corpus.target}.ref", runs / f"test.{corpus.source}.src"


def kept_test_lines(kept_name: Path, data_file: Path | None) -> list[str] | None:
    """The lines of a test file: the runs folder's kept copy of it, else the data's file (None: neither is there).
    Both there, they must be the same lines (else StudyError naming both)."""
    from fairseq_syntax.evaluation.scoring import read_lines

    data = read_lines(data_file) if data_file is not None and data_file.is_file() else None
    copy = kept(kept_name)
    if copy is None:
        return data
    lines = read_lines(copy)
    if data is not None and lines != data:
        number = next((n for n, (a, b) in enumerate(zip(lines, data), 1) if a != b), min(len(lines), len(data)) + 1)
        raise StudyError(f"{copy}: line {number} differs from {data_file}: the runs were scored on another test set "
                         "than the study's data has")
    return lines


def keep_test_set(config: StudyConfig) -> None:
    """Keep the data's test set in the runs folder (:func:`kept_test_set`, gzipped) where not kept yet; StudyError
    where another one is kept."""
    for kept_name, data_file in zip(kept_test_set(config), test_set(config)):
        lines = kept_test_lines(kept_name, data_file)
        if lines is not None and kept(kept_name) is None:
            write_atomically(f"{kept_name}.gz", gzip.compress("".join(f"{line}\n" for line in lines).encode(), mtime=0))
