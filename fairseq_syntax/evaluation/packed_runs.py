"""A finished system's run outputs packed into one xz archive beside its run records.

Each run of a recipe keeps its training log, its decode and the decode's log gzipped beside its run record
(``NAME.seedK.{train.log,gen,gen.log}.gz``, ``examples/common.sh``). Once every seed of a system is in, ``pack``
moves them into ``NAME.tar.xz``: the seeds of one system translate the same test set into much the same sentences,
and xz over all of them keeps about half of what gzip keeps one file at a time (Multi30k study: 127-135 KB gzipped,
72-74 KB packed, for a system of three seeds). Its SHA-256 goes into ``SHA256SUMS`` beside it (``sha256sum -c``
reads it). The run records stay plain JSON; nothing in the files changes (the archive holds each file's text as
gzip held it).

Every reader of logs and decodes (``results.open_text``, ``results.read_text``, ``results.parse_train_log``,
``scoring.read_lines``) reads a file that is neither there nor gzipped from ``DIR/PREFIX.tar.xz``, where ``PREFIX`` is
its name up to one of its dots: ``runs/mask.seed1.gen.gz`` from ``runs/mask.tar.xz`` (member ``mask.seed1.gen``),
after the archive's SHA-256 is checked against ``SHA256SUMS``. The recipes' shell steps ask ``has``, running this
file as a script: it imports nothing but Python's library, so it answers in a fraction of the seconds that importing
the package (torch, fairseq) takes.

    python3 -m fairseq_syntax.evaluation.packed_runs pack RUNS_DIR NAME     # NAME.seed*.{...}.gz -> NAME.tar.xz
    python3 -m fairseq_syntax.evaluation.packed_runs unpack RUNS_DIR NAME   # and back (to run a seed again)
    python3 -m fairseq_syntax.evaluation.packed_runs has [--packed] FILE    # exit 0: FILE is there, gzipped or packed

``pack`` takes only finished runs (a kept file whose run has no record stops it, naming the file) and adds to an
archive already there (a file it holds already stops it: nothing is replaced unseen). The archive is the same bytes
for the same files: members sorted, no time stamps, owners or modes of this machine.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import gzip
import hashlib
import io
import lzma
import os
import sys
import tarfile
import zlib
from pathlib import Path
from typing import NamedTuple

ARCHIVE_SUFFIX = ".tar.xz"
CHECKSUMS = "SHA256SUMS"
RECORD_SUFFIX = ".run.json"
# what run_system keeps of a run, gzipped, beside its record
KEPT_SUFFIXES = (".train.log.gz", ".gen.gz", ".gen.log.gz")
XZ_PRESET = 9 | lzma.PRESET_EXTREME


class PackedRunsError(ValueError):
    """An archive or run directory that cannot be used as it is; the message names the file."""


class Member(NamedTuple):
    label: str  # "DIR/NAME.tar.xz:MEMBER", for messages (FILE:LINE)
    data: bytes


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_checksums(folder: Path) -> dict[str, str]:
    """``SHA256SUMS`` of ``folder``: file name -> hex digest (empty when there is none)."""
    path = folder / CHECKSUMS
    if not path.exists():
        return {}
    sums = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        digest, separator, name = line.partition("  ")
        if not separator or len(digest) != 64:
            raise PackedRunsError(f"{path}:{number}: not a sha256sum line (DIGEST, two spaces, FILE name)")
        sums[name] = digest
    return sums


def write_checksums(folder: Path, sums: dict[str, str]) -> None:
    path = folder / CHECKSUMS
    if not sums:
        path.unlink(missing_ok=True)
        return
    temporary = path.with_name(path.name + ".partial")
    temporary.write_text("".join(f"{sums[name]}  {name}\n" for name in sorted(sums)), encoding="utf-8")
    os.replace(temporary, path)


@functools.lru_cache(maxsize=32)
def _members(archive: str, _stamp: tuple[int, int]) -> dict[str, bytes]:
    """Every member of ``archive`` (checked against its folder's ``SHA256SUMS``); ``_stamp`` (time, size) makes a
    rewritten archive read again."""
    path = Path(archive)
    listed = read_checksums(path.parent).get(path.name)
    if listed is None:
        raise PackedRunsError(f"{path}: not listed in {path.parent / CHECKSUMS}; an archive of run outputs is read "
                              "only with its checksum")
    if _sha256(path) != listed:
        raise PackedRunsError(f"{path}: its SHA-256 is not the one {path.parent / CHECKSUMS} lists (damaged, or "
                              "changed by hand)")
    try:
        with tarfile.open(path, "r:xz") as tar:
            return {info.name: tar.extractfile(info).read() for info in tar.getmembers() if info.isfile()}
    except (tarfile.TarError, lzma.LZMAError, EOFError) as error:
        raise PackedRunsError(f"{path}: not a whole .tar.xz archive ({error})") from None


def archive_members(archive: Path) -> dict[str, bytes]:
    """Member name -> bytes of ``archive``, checked (see ``_members``)."""
    stat = archive.stat()
    return _members(str(archive), (stat.st_mtime_ns, stat.st_size))


def member_name(path) -> str:
    """The name a kept file has in an archive: its file name without ``.gz``."""
    name = Path(path).name
    return name[:-len(".gz")] if name.endswith(".gz") else name


def find_member(path) -> Member | None:
    """The packed copy of ``path`` (named with or without ``.gz``): the member ``member_name(path)`` of
    ``DIR/PREFIX.tar.xz`` for the shortest ``PREFIX`` of the name up to a dot whose archive holds it; None when no
    archive holds it."""
    path = Path(path)
    name = member_name(path)
    for end in (index for index, character in enumerate(name) if character == "."):
        archive = path.parent / (name[:end] + ARCHIVE_SUFFIX)
        if archive.is_file():
            data = archive_members(archive).get(name)
            if data is not None:
                return Member(f"{archive}:{name}", data)
    return None


def has(path) -> bool:
    """True when ``path`` can be read: it is there, or gzipped (``path.gz``, or without its ``.gz``), or packed."""
    path = Path(path)
    twin = path.with_name(member_name(path)) if path.name.endswith(".gz") else path.with_name(path.name + ".gz")
    return path.exists() or twin.exists() or find_member(path) is not None


def _run_of(file_name: str) -> str | None:
    """``mask.seed1`` of ``mask.seed1.train.log.gz``; None for a file that is not a kept run output."""
    for suffix in KEPT_SUFFIXES:
        if file_name.endswith(suffix):
            return file_name[:-len(suffix)]
    return None


def _tar_bytes(members: dict[str, bytes]) -> bytes:
    """A .tar.xz of ``members`` that depends on nothing else: sorted, no time, owner or mode of this machine."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", preset=XZ_PRESET, format=tarfile.GNU_FORMAT) as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(members[name]), 0, 0o644
            tar.addfile(info, io.BytesIO(members[name]))
    return buffer.getvalue()


@contextlib.contextmanager
def _folder_lock(folder: Path):
    """Holds an exclusive lock on ``folder`` (flock on the folder itself: no lock file joins the runs): two lanes
    that pack at the same time must not each rewrite ``SHA256SUMS`` from what it held before the other wrote it."""
    if not folder.is_dir():
        raise PackedRunsError(f"{folder}: no such folder")
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def pack(runs_dir, name: str) -> list[Path]:
    """Move the kept outputs of every finished run ``NAME.*`` of ``runs_dir`` into ``NAME.tar.xz`` (added to the
    archive if there is one) and list it in ``SHA256SUMS``; returns the files it removed."""
    with _folder_lock(Path(runs_dir)):
        return _pack(Path(runs_dir), name)


def _pack(folder: Path, name: str) -> list[Path]:
    archive = folder / f"{name}{ARCHIVE_SUFFIX}"
    members = dict(archive_members(archive)) if archive.exists() else {}
    sources = []
    for path in sorted(folder.glob(f"{name}.*")):
        if path.name.endswith((RECORD_SUFFIX, ARCHIVE_SUFFIX)):
            continue
        run = _run_of(path.name)
        if run is None:
            raise PackedRunsError(f"{path}: not a kept output of a finished run (NAME.seedK"
                                  f"{{{','.join(KEPT_SUFFIXES)}}}); a run still training leaves its log uncompressed")
        if not (folder / f"{run}{RECORD_SUFFIX}").exists():
            raise PackedRunsError(f"{path}: its run has no record {run}{RECORD_SUFFIX}: pack a system once every "
                                  "run of it is scored")
        if member_name(path) in members:
            raise PackedRunsError(f"{path}: {archive} holds {member_name(path)} already (unpack it first)")
        try:
            members[member_name(path)] = gzip.decompress(path.read_bytes())
        except (OSError, EOFError, zlib.error) as error:
            raise PackedRunsError(f"{path}: not a whole gzip file ({error})") from None
        sources.append(path)
    if not sources:
        raise PackedRunsError(f"{folder}: no kept run outputs {name}.*{{{','.join(KEPT_SUFFIXES)}}} to pack")
    temporary = archive.with_name(archive.name + ".partial")
    temporary.write_bytes(_tar_bytes(members))
    with tarfile.open(temporary, "r:xz") as tar:  # read back before anything is removed
        if {info.name: tar.extractfile(info).read() for info in tar.getmembers()} != members:
            raise PackedRunsError(f"{temporary}: does not read back as written")
    sums = read_checksums(folder)
    sums[archive.name] = _sha256(temporary)
    os.replace(temporary, archive)
    write_checksums(folder, sums)
    for path in sources:
        path.unlink()
    return sources


def unpack(runs_dir, name: str) -> list[Path]:
    """The inverse of ``pack``: ``NAME.tar.xz``'s members back as gzipped files (a file there already stops it);
    the archive and its checksum line are removed. Returns the files written."""
    with _folder_lock(Path(runs_dir)):
        return _unpack(Path(runs_dir), name)


def _unpack(folder: Path, name: str) -> list[Path]:
    archive = folder / f"{name}{ARCHIVE_SUFFIX}"
    if not archive.exists():
        raise PackedRunsError(f"{archive}: no such archive")
    members = archive_members(archive)
    targets = {folder / f"{member}.gz": data for member, data in members.items()}
    present = [str(target) for target in targets if target.exists() or target.with_name(member_name(target)).exists()]
    if present:
        raise PackedRunsError(f"{present[0]}: there already; {archive} holds it too (remove one of them)")
    for target, data in targets.items():
        with open(target, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
            out.write(data)
    sums = read_checksums(folder)
    sums.pop(archive.name, None)
    write_checksums(folder, sums)
    archive.unlink()
    return sorted(targets)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m fairseq_syntax.evaluation.packed_runs",
                                     description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for command, help_text in (("pack", "move NAME.seed*'s gzipped logs and decodes into RUNS_DIR/NAME.tar.xz"),
                               ("unpack", "NAME.tar.xz's files back as gzipped files")):
        sub = commands.add_parser(command, help=help_text)
        sub.add_argument("runs_dir")
        sub.add_argument("name")
    sub = commands.add_parser("has", help="exit 0 when FILE is there, gzipped or packed; 1 otherwise")
    sub.add_argument("file")
    sub.add_argument("--packed", action="store_true", help="only a packed copy counts")
    args = parser.parse_args(argv)
    try:
        if args.command == "has":
            return 0 if (find_member(args.file) is not None if args.packed else has(args.file)) else 1
        done = pack(args.runs_dir, args.name) if args.command == "pack" else unpack(args.runs_dir, args.name)
    except PackedRunsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    verb = "packed into" if args.command == "pack" else "unpacked from"
    print(f"{len(done)} files {verb} {Path(args.runs_dir) / (args.name + ARCHIVE_SUFFIX)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
