"""The repository stays lean: its tracked files are code, run records, generated tables and figures, at most 3 MB
(the project's goal; the test holds them at 3.45 MB until the cut below lands), plus data artifacts that save hours,
at most 20 MB (issue 60: room for the German parses).

A data artifact is a file named in a ``SHA256SUMS`` beside it (compressed and checksummed): the Multi30k parses
(``examples/multi30k/parses``, hours of parsing), the packed logs and decodes of trained runs
(``examples/*/packed.tar.xz``, ``examples/*/runs/`` and ``logs/``: the Multi30k study's alone are about 70 CPU
thread-hours) with the test set they were scored on, and the packed logs and raw measurements of the benchmarks
(``bench/**/packed.tar.xz``). Each is checked against its digest here. Everything else (the package, tests, bench, recipes, docs, the records over seeds, RESULTS tables
and figures) counts against the 3 MB. Sizes are those of the files git tracks, as a clone has them.
"""
import hashlib
import subprocess
from pathlib import Path

import pytest

from conftest import REPO as REPO_PATH

# The goal is 3 MB. The study command and the parser work of issues 59 and 60 (study/, parsing/, their tests and docs:
# about 330 KB) took the tree from 2.99 to 3.30 MB (2026-12-02), and the study records to 3.39; the retired shell of
# the Multi30k recipe (run.sh, replicate_gpu.sh, common.sh's score_seeds, seed_records.py: study/ does their work)
# took it back to 3.36 (2026-12-03). The shell recipes' data path (prepare_translation.sh, common.sh, the
# prepare.sh of iwslt15 and Multi30k) retired with the study's adoption of its folders (issue 68, item 1). The test
# holds the tree at 3.45 MB, so that it fails on growth beyond the study records still to come. Not the goal: the
# closing notes say so.
CODE_RECORDS_TABLES_BYTES = int(3.45 * 1024 * 1024)
DATA_ARTIFACT_BYTES = 20 * 1024 * 1024
REPO = Path(REPO_PATH)


def tracked_files(root: Path) -> list:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are git's to list")
    return [root / name for name in listed.decode("utf-8").split("\0") if name]


def data_artifacts(files: list) -> set:
    """The files named in a tracked ``SHA256SUMS`` (``sha256sum`` lines: digest, two spaces, name) in their folder."""
    named = set()
    for sums in (f for f in files if f.name == "SHA256SUMS"):
        for line in sums.read_text(encoding="utf-8").splitlines():
            if line.strip():
                named.add(sums.parent / line.split(maxsplit=1)[1].lstrip("*"))
    return named


def test_data_artifacts_are_read_from_each_folders_sha256sums(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "SHA256SUMS").write_text("ab" * 32 + "  packed.tar.xz\n" + "cd" * 32 + " *b.xz\n\n")
    files = [tmp_path / "runs" / "SHA256SUMS", tmp_path / "runs" / "packed.tar.xz", tmp_path / "README.md"]
    assert data_artifacts(files) == {tmp_path / "runs" / "packed.tar.xz", tmp_path / "runs" / "b.xz"}


def test_every_data_artifact_has_the_digest_its_sha256sums_lists():
    files = [f for f in tracked_files(REPO) if f.is_file()]
    for sums in (f for f in files if f.name == "SHA256SUMS"):
        for line in filter(str.strip, sums.read_text(encoding="utf-8").splitlines()):
            digest, name = line.split(maxsplit=1)
            artifact = sums.parent / name.lstrip("*")
            assert hashlib.sha256(artifact.read_bytes()).hexdigest() == digest, f"{artifact}: not the digest {sums} lists"


def test_code_records_and_tables_stay_under_3_mb_and_data_artifacts_under_12_mb():
    files = [f for f in tracked_files(REPO) if f.is_file()]  # a file deleted but not yet committed is no size
    artifacts = data_artifacts(files)
    assert {f.relative_to(REPO).as_posix() for f in artifacts} >= {
        "examples/multi30k/parses/train.tree.xz", "examples/multi30k/runs/packed.tar.xz"}
    artifact_bytes = sum(f.stat().st_size for f in files if f in artifacts)
    other = sorted(((f.stat().st_size, f.relative_to(REPO).as_posix()) for f in files if f not in artifacts),
                   reverse=True)
    other_bytes = sum(size for size, _ in other)
    largest = ", ".join(f"{name} {size // 1024} KB" for size, name in other[:5])
    assert other_bytes <= CODE_RECORDS_TABLES_BYTES, \
        f"code, records and tables take {other_bytes / 2**20:.2f} MB (at most 3.45; the goal is 3): the largest are {largest}"
    assert artifact_bytes <= DATA_ARTIFACT_BYTES, f"data artifacts take {artifact_bytes / 2**20:.2f} MB (at most 20)"
