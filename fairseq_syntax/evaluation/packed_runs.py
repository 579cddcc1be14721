"""Reading run outputs (logs, decodes, records) that are packed into one xz archive per folder, beside the records.

A run keeps its outputs gzipped (a study over seeds: ``NAME.seedK.{train.log,gen,gen.log}.gz`` beside its record; SST
and PTB: ``logs*/NAME.log.gz``). ``examples/pack_runs.py`` packs them into ``packed.tar.xz``: one xz stream over runs
that are much alike keeps them in a third to a half of gzip's bytes. Its SHA-256 is listed in ``SHA256SUMS`` beside
it. A run's record goes in with its outputs (its JSON bytes); a record without kept outputs (``NAME.seeds.run.json``)
stays a file. Members hold each file's text as gzip held it.

An archive in folder ``A`` holds a file of ``A`` or below under its path relative to ``A`` without ``.gz``
(``runs/packed.tar.xz`` holds ``runs/mask.seed1.gen.gz`` as ``mask.seed1.gen``). Every reader of logs, decodes and
records reads a file that is neither there nor gzipped from the archive of its folder or one above, after checking
the archive's SHA-256; ``glob`` and ``rglob`` list packed files with those on disk. Readers hold a shared ``flock``
on the folders whose archives they read, against the packer's exclusive one (``EXCLUSIVELY_HELD``: the folders this
process's packer holds).

Run as a script (``has``, ``cat``, ``ls``: the recipes' shell steps) it imports only Python's library."""
from __future__ import annotations

import argparse
import contextlib
import fnmatch
import functools
import glob as disk_glob
import gzip
import hashlib
import importlib.util
import lzma
import os
import sys
import tarfile
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

if __package__:
    from fairseq_syntax.core import files
else:  # run as a script, or loaded by its file (examples/pack_runs.py): core/files.py by its file too
    _spec = importlib.util.spec_from_file_location("files", Path(__file__).resolve().parents[1] / "core" / "files.py")
    files = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(files)

ARCHIVE_NAME = "packed.tar.xz"
CHECKSUMS = "SHA256SUMS"
RECORD_SUFFIX = ".run.json"


class PackedRunsError(ValueError):
    """An archive or run directory that cannot be used as it is; the message names the file."""


class Member(NamedTuple):
    label: str  # "DIR/packed.tar.xz:MEMBER", for messages (FILE:LINE)
    data: bytes


def sha256_of(path: Path) -> str:
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


#: real paths of the folders whose exclusive lock a packer in this process holds (its reads take no shared lock)
EXCLUSIVELY_HELD: set[str] = set()


@contextlib.contextmanager
def _reading(folders: Iterable[Path]):
    """Shared locks on ``folders`` (those that exist and whose exclusive lock this process does not hold) while a
    reader looks at their archives: a reader never sees an archive before its checksum, nor a packed file still on
    disk beside it."""
    with contextlib.ExitStack() as held:
        for folder in folders:
            if os.path.realpath(folder) in EXCLUSIVELY_HELD or not os.path.isdir(folder):
                continue
            # a folder this user may not open: no packer of this user's writes in it either
            with contextlib.suppress(PermissionError):
                held.enter_context(files.held_lock(folder, shared=True))
        yield


@functools.lru_cache(maxsize=32)
def _members(archive: str, _stamp: tuple[int, int]) -> dict[str, bytes]:
    """Every member of ``archive`` (checked against its folder's ``SHA256SUMS``); ``_stamp`` (time, size) makes a
    rewritten archive read again."""
    path = Path(archive)
    listed = read_checksums(path.parent).get(path.name)
    if listed is None:
        raise PackedRunsError(f"{path}: not listed in {path.parent / CHECKSUMS}; an archive of run outputs is read "
                              "only with its checksum")
    if sha256_of(path) != listed:
        raise PackedRunsError(f"{path}: its SHA-256 is not the one {path.parent / CHECKSUMS} lists (damaged, or "
                              "changed by hand)")
    try:
        with tarfile.open(path, "r:xz") as tar:
            return {info.name: tar.extractfile(info).read() for info in tar.getmembers() if info.isfile()}
    except (tarfile.TarError, lzma.LZMAError, EOFError) as error:
        raise PackedRunsError(f"{path}: not a whole .tar.xz archive ({error})") from None


def archive_members(archive: Path) -> dict[str, bytes]:
    """Member name -> bytes of ``archive``, checked (see ``_members``); read while no packer rewrites it."""
    with _reading([archive.parent]):
        stat = archive.stat()
        return _members(str(archive), (stat.st_mtime_ns, stat.st_size))


def member_name(path) -> str:
    """The name a kept file has in an archive: its file name without ``.gz``."""
    name = Path(path).name
    return name[:-len(".gz")] if name.endswith(".gz") else name


def existing_path(path) -> Path:
    """``path`` if it exists; else its gzipped (``path.gz``) or, for a ``.gz`` name, its uncompressed twin if that
    exists; else ``path`` itself (so that opening it names the file that was asked for)."""
    path = Path(path)
    if path.exists():
        return path
    twin = path.with_name(member_name(path) if path.name.endswith(".gz") else path.name + ".gz")
    return twin if twin.exists() else path


def _folders_up(folder: Path) -> Iterator[Path]:
    """``folder``, then each folder above it, as far as the path names them."""
    while True:
        yield folder
        if folder.name in ("", "..") or folder == folder.parent:
            return
        folder = folder.parent


def find_member(path) -> Member | None:
    """The packed copy of ``path`` (named with or without ``.gz``) in the nearest archive that holds it (its folder's,
    then each folder's above it, as its path below that folder); None when none does."""
    path = Path(os.path.normpath(path))
    member = member_name(path)
    for folder in _folders_up(path.parent):
        archive = folder / ARCHIVE_NAME
        data = archive_members(archive).get(member) if archive.is_file() else None
        if data is not None:
            return Member(f"{archive}:{member}", data)
        member = f"{folder.name}/{member}"
    return None


def _packing_folders(path) -> list[Path]:
    """The folders a packer of ``path`` may hold: its own, and those above it that have an archive."""
    folder = Path(os.path.normpath(path)).parent
    return [folder] + [above for above in _folders_up(folder) if above != folder and (above / ARCHIVE_NAME).is_file()]


def has(path) -> bool:
    """True when ``path`` can be read: it is there, or gzipped (``path.gz``, or without its ``.gz``), or packed."""
    with _reading(_packing_folders(path)):  # not between a packer's archive and its unlink
        return existing_path(path).exists() or find_member(path) is not None


def read_bytes(path) -> bytes:
    """The (uncompressed) content of ``path``: the file, its gzipped twin, or its packed copy."""
    with _reading(_packing_folders(path)):  # not between a packer's archive and its unlink
        found = existing_path(path)
        if found.exists():
            data = found.read_bytes()
            return gzip.decompress(data) if found.name.endswith(".gz") else data
        packed = find_member(path)
    if packed is None:
        raise FileNotFoundError(f"{path}: not there, gzipped or packed")
    return packed.data


def _matches(path: Path, pattern_parts: tuple[str, ...]) -> bool:
    return len(path.parts) == len(pattern_parts) and all(
        fnmatch.fnmatchcase(part, wanted) for part, wanted in zip(path.parts, pattern_parts))


def _refuse_stale(path: Path, archive: Path, member: str) -> None:
    """A packed file that is on disk too (itself or gzipped) is an error naming both: one of them is stale."""
    if existing_path(path).exists():
        raise PackedRunsError(f"{existing_path(path)}: on disk and in {archive} as {member}: remove the stale one")


def glob(pattern) -> list[str]:
    """The paths ``glob.glob(pattern)`` finds on disk, and the packed files (named without ``.gz``) and folders
    matching ``pattern`` in the archives of the pattern's last fixed folder and above; sorted. A file both packed and
    on disk is an error naming both."""
    pattern = os.path.normpath(pattern)
    parts = Path(pattern).parts
    fixed = next((index for index, part in enumerate(parts) if any(mark in part for mark in "*?[")), len(parts) - 1)
    folder = Path(*parts[:fixed]) if fixed else Path(".")
    with _reading(_folders_up(folder)):  # the files on disk and the archives as one packer left them
        found = {os.path.normpath(path) for path in disk_glob.glob(pattern)}
        for archive in (above / ARCHIVE_NAME for above in _folders_up(folder)):
            for member in archive_members(archive) if archive.is_file() else ():
                path = archive.parent / member
                for candidate in (path, *path.parents):
                    if candidate == archive.parent:
                        break
                    if _matches(candidate, parts):
                        if candidate == path:
                            _refuse_stale(path, archive, member)
                        found.add(str(candidate))
    return sorted(found)


def rglob(folder, suffix: str) -> list[Path]:
    """The files named ``*suffix`` in ``folder`` or below, on disk and packed (archives of ``folder``, below and
    above it), sorted; a file both packed and on disk is an error naming both."""
    folder = Path(os.path.normpath(folder))
    archives = {*folder.rglob(ARCHIVE_NAME), *(above / ARCHIVE_NAME for above in _folders_up(folder))}
    # the files on disk and the archives as one packer left them
    with _reading(sorted({folder, *(archive.parent for archive in archives)})):
        found = {Path(os.path.normpath(path)) for path in folder.rglob(f"*{suffix}") if path.is_file()}
        for archive in sorted(archive for archive in archives if archive.is_file()):
            for member in archive_members(archive):
                path = Path(os.path.normpath(archive.parent / member))
                if member.endswith(suffix) and not os.path.relpath(path, folder).startswith(".."):
                    _refuse_stale(path, archive, member)
                    found.add(path)
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 fairseq_syntax/evaluation/packed_runs.py",
                                     description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("ls", help="the files (on disk and packed) that PATTERN matches, one a line")
    listing.add_argument("pattern")
    listing.add_argument("--packed", action="store_true", help="only the packed ones")
    for command, help_text in (("has", "exit 0 when FILE is there, gzipped or packed; 1 otherwise"),
                               ("cat", "write FILE's text, wherever it is kept")):
        sub = commands.add_parser(command, help=help_text)
        sub.add_argument("file")
    commands.choices["has"].add_argument("--packed", action="store_true", help="only a packed copy counts")
    args = parser.parse_args(argv)
    try:
        if args.command == "has":
            return 0 if (find_member(args.file) is not None if args.packed else has(args.file)) else 1
        if args.command == "ls":
            on_disk = {os.path.normpath(path) for path in disk_glob.glob(args.pattern)} if args.packed else set()
            sys.stdout.writelines(f"{path}\n" for path in glob(args.pattern) if path not in on_disk)
            return 0
        sys.stdout.buffer.write(read_bytes(args.file))
        return 0
    except (PackedRunsError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
