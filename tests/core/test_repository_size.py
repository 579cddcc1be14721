"""Tracked code, records and tables stay under the hold (goal 3 MB); artifacts in SHA256SUMS under 20 MB."""
import hashlib
import subprocess
from pathlib import Path

import pytest

from conftest import REPO as REPO_PATH

# The goal: code, records and tables under 3 MB (2.98 MB on 2026-12-07, cut from 4.07). Results still to come (the
# sizes study) land with cuts of their size.
HOLD_MB = 3.0
CODE_RECORDS_TABLES_BYTES = int(HOLD_MB * 1024 * 1024)
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
            digest_now = hashlib.sha256(artifact.read_bytes()).hexdigest()
            assert digest_now == digest, f"{artifact}: not the digest {sums} lists"


def test_code_records_and_tables_stay_under_the_hold_and_data_artifacts_under_20_mb():
    files = [f for f in tracked_files(REPO) if f.is_file()]  # a file deleted but not yet committed is no size
    artifacts = data_artifacts(files)
    assert {f.relative_to(REPO).as_posix() for f in artifacts} >= {
        "examples/multi30k/parses/train.tree.xz", "examples/multi30k/runs/packed.tar.xz"}
    artifact_bytes = sum(f.stat().st_size for f in files if f in artifacts)
    other = sorted(((f.stat().st_size, f.relative_to(REPO).as_posix()) for f in files if f not in artifacts),
                   reverse=True)
    other_bytes = sum(size for size, _ in other)
    largest = ", ".join(f"{name} {size // 1024} KB" for size, name in other[:5])
    assert other_bytes <= CODE_RECORDS_TABLES_BYTES, (f"code, records and tables take {other_bytes / 2**20:.2f} MB "
                                                      f"(at most {HOLD_MB}; the goal is 3): the largest are {largest}")
    assert artifact_bytes <= DATA_ARTIFACT_BYTES, f"data artifacts take {artifact_bytes / 2**20:.2f} MB (at most 20)"
