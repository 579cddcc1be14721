"""What the steps of one preparation share: the build over ``WORK`` (:mod:`.engine`), the study file's corpus and
parsers, and what the grid reads (:mod:`.needs`)."""
from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

from fairseq_syntax.study.config import StudyConfig
from fairseq_syntax.study.prepare.engine import Build
from fairseq_syntax.study.prepare.needs import grid_needs


class Preparation(Build):
    """One preparation of ``study.work``; with ``only`` (run names), of what those runs read."""

    def __init__(self, config: StudyConfig, progress: Callable[[str], None], only: Collection[str] | None = None):
        super().__init__(config.folder("work").resolve(), config.path, progress)
        self.config, self.only = config, only
        corpus = config.corpus
        self.src, self.tgt = corpus.source, corpus.target
        self.stems = {"train": corpus.train, "valid": corpus.valid, "test": corpus.test}
        self.raw = config.resolve(corpus.raw)
        self.needs = grid_needs(config, only)
        self.parses_key = ""  # the record of the parses: parses:archive, or "" (one per parser kind)
        self.settings_made: dict[str, dict] = {}  # each side data's settings (data.side_data_settings), once asked

    def raw_file(self, stem: str, lang: str) -> Path | None:
        """The corpus's raw file ``STEM.LANG``, gzipped or not, or None."""
        for name in (f"{stem}.{lang}", f"{stem}.{lang}.gz"):
            if (self.raw / name).is_file():
                return self.raw / name
        return None

    def model_path(self, value: str) -> Path | None:
        path = self.config.resolve(value)
        return path if path.is_file() or path.is_dir() else None

    def parses_record(self, kind: str) -> str:
        """The record that holds the parses of ``kind`` (``trees`` or ``arcs``)."""
        return self.parses_key or ("parses:constituency" if kind == "trees" else "parses:dependency")
