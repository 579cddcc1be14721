"""Run outputs (logs, decodes, scores) packed into one xz archive per folder, beside the run records.

A run of a recipe keeps its outputs gzipped (the Multi30k study: ``NAME.seedK.{train.log,gen,gen.log}.gz`` beside its
record, ``examples/common.sh``; the SST and PTB recipes: ``logs*/NAME.log.gz``). Packed, they move into one archive,
``packed.tar.xz``: runs that translate the same test set, or log the same model's training, are much alike, and one
xz stream over all of them keeps what gzip keeps one file at a time in a third to a half (Multi30k study, 15 runs:
687 KB gzipped, 265 KB packed; SST: 167 KB, 80 KB; PTB induction, six run folders: 303 KB, 124 KB). Its SHA-256 goes
into ``SHA256SUMS`` beside it (``sha256sum -c`` reads it). A run's record goes in with its outputs (as JSON, the bytes
it had: the Multi30k study's first 21 records took 104 KB as files and take 5 KB packed); a record that no kept
outputs belong to (a system's record over its seeds, ``NAME.seeds.run.json``, the table's row) stays a file. Nothing
in the files changes (the archive holds each file's text as gzip held it).

An archive in folder ``A`` holds a file of ``A`` or of a folder below it, under its path relative to ``A`` without
``.gz``: ``runs/packed.tar.xz`` holds ``runs/mask.seed1.gen.gz`` as ``mask.seed1.gen``,
``ptb_induction/packed.tar.xz`` holds ``ptb_induction/logs/induce_min1.log.gz`` as ``logs/induce_min1.log``. Every
reader of logs and decodes (``results.open_text``, ``results.read_text``, ``results.parse_train_log``,
``scoring.read_lines``, and of records, ``results.load_record`` and ``results.find_record_files``) reads a file that
is neither there nor gzipped from the archive of its folder or of a folder above it, after the archive's SHA-256 is
checked against ``SHA256SUMS``; ``glob`` and ``rglob`` list packed files with those on disk. The recipes' shell
steps ask ``has``, ``cat`` and ``ls``, running this file as a script: it imports nothing but Python's library, so it
answers in a fraction of the seconds that importing the package (torch, fairseq) takes.

    python3 fairseq_syntax/evaluation/packed_runs.py pack RUNS_DIR [NAME]   # finished runs' *.{...}.gz and records
    python3 fairseq_syntax/evaluation/packed_runs.py unpack RUNS_DIR NAME   # and back (to run a seed again)
    python3 fairseq_syntax/evaluation/packed_runs.py pack-folder FOLDER [--into ANCESTOR]    # FOLDER's *.gz files
    python3 fairseq_syntax/evaluation/packed_runs.py unpack-folder FOLDER [--into ANCESTOR]  # and back
    python3 fairseq_syntax/evaluation/packed_runs.py has [--packed] FILE    # exit 0: FILE is there, gzipped or packed
    python3 fairseq_syntax/evaluation/packed_runs.py cat FILE               # FILE's text, wherever it is kept
    python3 fairseq_syntax/evaluation/packed_runs.py ls [--packed] 'PATTERN'  # matching files (--packed: packed only)

``pack`` takes only finished runs (named, a kept file whose run has no record stops it, naming the file; without a
name, every finished run's files are packed and the others left where they are); ``unpack`` gives the files back as
they were kept (gzipped; records as JSON), to run a seed again or to rescore it; both packing
commands add to an archive already there, and a file it holds already stops them: nothing is replaced unseen. The
archive is the same bytes for the same files: members sorted, no time stamps, owners or modes of this machine.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import fnmatch
import functools
import glob as disk_glob
import gzip
import hashlib
import io
import json
import lzma
import os
import sys
import tarfile
import zlib
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple

ARCHIVE_NAME = "packed.tar.xz"
CHECKSUMS = "SHA256SUMS"
RECORD_SUFFIX = ".run.json"
# what run_system keeps of a run, gzipped, beside its record
KEPT_SUFFIXES = (".train.log.gz", ".gen.gz", ".gen.log.gz")
XZ_PRESET = 9 | lzma.PRESET_EXTREME


class PackedRunsError(ValueError):
    """An archive or run directory that cannot be used as it is; the message names the file."""


class Member(NamedTuple):
    label: str  # "DIR/packed.tar.xz:MEMBER", for messages (FILE:LINE)
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


def write_atomically(path, data: bytes | str) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` through a temporary file beside it that then replaces it: a reader
    in another process (the other lane) sees the old file or the new one, never a part of it."""
    path = Path(path)
    temporary = path.with_name(f"{path.name}.partial.{os.getpid()}")
    temporary.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    os.replace(temporary, path)


def write_checksums(folder: Path, sums: dict[str, str]) -> None:
    path = folder / CHECKSUMS
    if not sums:
        path.unlink(missing_ok=True)
        return
    write_atomically(path, "".join(f"{sums[name]}  {name}\n" for name in sorted(sums)))


_HELD: set[str] = set()  # the folders whose exclusive lock this process holds (_folder_lock)


@contextlib.contextmanager
def _reading(folders: Iterable[Path]):
    """Shared locks on ``folders`` (those that exist and whose exclusive lock this process does not hold already)
    while a reader looks at their archives and files: a packer in another process holds a folder's lock exclusively
    from before it replaces the archive until it has written SHA256SUMS and removed the files it packed, so a reader
    never sees an archive before its checksum, nor a packed file still on disk beside it."""
    descriptors = []
    try:
        for folder in folders:
            if os.path.realpath(folder) in _HELD or not os.path.isdir(folder):
                continue
            try:
                descriptors.append(os.open(folder, os.O_RDONLY))
            except OSError:  # a folder this user may not open: no packer of this user's writes in it either
                continue
            fcntl.flock(descriptors[-1], fcntl.LOCK_SH)
        yield
    finally:
        for descriptor in descriptors:
            os.close(descriptor)  # releases its lock


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


def _archive_places(path) -> Iterator[tuple[Path, str]]:
    """(archive, member) where a packed copy of ``path`` would be: its folder's archive, then each folder's above it,
    the member its path below that folder."""
    path = Path(os.path.normpath(path))
    member = member_name(path)
    for folder in _folders_up(path.parent):
        yield folder / ARCHIVE_NAME, member
        member = f"{folder.name}/{member}"


def find_member(path) -> Member | None:
    """The packed copy of ``path`` (named with or without ``.gz``) in the nearest archive that holds it; None when
    none does."""
    for archive, member in _archive_places(path):
        if archive.is_file():
            data = archive_members(archive).get(member)
            if data is not None:
                return Member(f"{archive}:{member}", data)
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
    """The paths ``glob.glob(pattern)`` finds on disk, and the packed files (named without ``.gz``) and the folders
    they lie in that match ``pattern``, from the archives of the pattern's last fixed folder and of the folders above
    it; sorted. A file both packed and on disk (itself or gzipped) is an error naming both: one of them is stale."""
    pattern = os.path.normpath(pattern)
    parts = Path(pattern).parts
    fixed = next((index for index, part in enumerate(parts) if any(mark in part for mark in "*?[")), len(parts) - 1)
    folder = Path(*parts[:fixed]) if fixed else Path(".")
    with _reading(_folders_up(folder)):  # the files on disk and the archives as one packer left them
        return _glob(pattern, parts, folder)


def _glob(pattern: str, parts: tuple[str, ...], folder: Path) -> list[str]:
    found = {os.path.normpath(path) for path in disk_glob.glob(pattern)}
    for archive in (above / ARCHIVE_NAME for above in _folders_up(folder)):
        if not archive.is_file():
            continue
        for member in archive_members(archive):
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
    """The files named ``*suffix`` in ``folder`` or below it, on disk and packed (in the archives of ``folder``, of
    the folders below it and of those above it), sorted; a file both packed and on disk is an error naming both."""
    folder = Path(os.path.normpath(folder))
    archives = {*folder.rglob(ARCHIVE_NAME), *(above / ARCHIVE_NAME for above in _folders_up(folder))}
    # the files on disk and the archives as one packer left them
    with _reading(sorted({folder, *(archive.parent for archive in archives)})):
        return _rglob(folder, suffix, archives)


def _rglob(folder: Path, suffix: str, archives: set[Path]) -> list[Path]:
    found = {Path(os.path.normpath(path)) for path in folder.rglob(f"*{suffix}") if path.is_file()}
    for archive in sorted(archive for archive in archives if archive.is_file()):
        for member in archive_members(archive):
            path = Path(os.path.normpath(archive.parent / member))
            if not member.endswith(suffix) or os.path.relpath(path, folder).startswith(".."):
                continue
            _refuse_stale(path, archive, member)
            found.add(path)
    return sorted(found)


def _run_of(file_name: str) -> str | None:
    """``mask.seed1`` of ``mask.seed1.train.log.gz``; None for a file that is not a kept run output."""
    for suffix in KEPT_SUFFIXES:
        if file_name.endswith(suffix):
            return file_name[:-len(suffix)]
    return None


def _is_record(name: str) -> bool:
    return name.endswith(RECORD_SUFFIX)


def _kept_file(member: str) -> str:
    """The file name a member is kept under outside the archive: a run record as it is (plain JSON), every other
    file gzipped."""
    return member if _is_record(member) else f"{member}.gz"


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
    that pack at the same time must not each rewrite the archive and ``SHA256SUMS`` from what they held before the
    other wrote them."""
    if not folder.is_dir():
        raise PackedRunsError(f"{folder}: no such folder")
    descriptor = os.open(folder, os.O_RDONLY)
    held = os.path.realpath(folder)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        _HELD.add(held)  # this process's own reads of the folder need no shared lock (they would wait on this one)
        yield
    finally:
        _HELD.discard(held)
        os.close(descriptor)  # releases the lock


def _write_archive(folder: Path, members: dict[str, bytes]) -> None:
    """``folder``'s archive holds ``members`` (none: no archive), read back before it replaces the one there, and
    ``SHA256SUMS`` lists it."""
    archive = folder / ARCHIVE_NAME
    sums = read_checksums(folder)
    if not members:
        archive.unlink(missing_ok=True)
        sums.pop(archive.name, None)
        write_checksums(folder, sums)
        return
    temporary = archive.with_name(archive.name + ".partial")
    temporary.write_bytes(_tar_bytes(members))
    with tarfile.open(temporary, "r:xz") as tar:  # read back before anything is removed
        if {info.name: tar.extractfile(info).read() for info in tar.getmembers()} != members:
            raise PackedRunsError(f"{temporary}: does not read back as written")
    sums[archive.name] = _sha256(temporary)
    os.replace(temporary, archive)
    write_checksums(folder, sums)


def _add(folder: Path, sources: list[Path]) -> list[Path]:
    """Move the gzipped files ``sources`` (in ``folder`` or below it) into ``folder``'s archive."""
    archive = folder / ARCHIVE_NAME
    members = dict(archive_members(archive)) if archive.exists() else {}
    for path in sources:
        below = os.path.relpath(path.parent, folder)
        if below.startswith(".."):
            raise PackedRunsError(f"{path}: not in {folder} or a folder below it")
        member = member_name(path) if below == "." else f"{Path(below).as_posix()}/{member_name(path)}"
        if member in members:
            raise PackedRunsError(f"{path}: {archive} holds {member} already (unpack it first)")
        if _is_record(path.name):
            members[member] = path.read_bytes()
            try:  # a record is written whole (write_atomically): one that does not parse is not packed
                json.loads(members[member])
            except ValueError as error:
                raise PackedRunsError(f"{path}: not a whole run record ({error})") from None
            continue
        try:
            members[member] = gzip.decompress(path.read_bytes())
        except (OSError, EOFError, zlib.error) as error:
            raise PackedRunsError(f"{path}: not a whole gzip file ({error})") from None
    _write_archive(folder, members)
    for path in sources:
        path.unlink()
    return sources


def _take(folder: Path, wanted: Callable[[str], bool]) -> list[Path]:
    """The inverse of ``_add``: the members of ``folder``'s archive that ``wanted`` picks, back as gzipped files (run
    records as plain JSON; a file there already stops it); the archive keeps the others (none left: it goes, with
    its checksum line)."""
    archive = folder / ARCHIVE_NAME
    if not archive.exists():
        raise PackedRunsError(f"{archive}: no such archive")
    members = dict(archive_members(archive))
    targets = {folder / _kept_file(member): member for member in members if wanted(member)}
    if not targets:
        raise PackedRunsError(f"{archive}: holds none of the files asked for")
    present = [str(existing_path(target)) for target in targets if existing_path(target).exists()]
    if present:
        raise PackedRunsError(f"{present[0]}: there already; {archive} holds it too (remove one of them)")
    for target, member in targets.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        if _is_record(member):
            target.write_bytes(members.pop(member))
            continue
        with open(target, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
            out.write(members.pop(member))
    _write_archive(folder, members)
    return sorted(targets)


def pack(runs_dir, name: str | None = None) -> list[Path]:
    """Move the kept outputs and the record of every finished run ``NAME.*`` of ``runs_dir`` (every finished run,
    without ``name``) into its archive (added to the archive if there is one) and list it in ``SHA256SUMS``; returns
    the files it removed. A run is finished when it has a record; a record whose run kept no outputs (a system's
    record over its seeds, ``NAME.seeds.run.json``) stays where it is. Named, a run not finished is an error; without
    a name, its files stay where they are (the study's lanes pack after each run while the other lane's run goes
    on)."""
    folder = Path(runs_dir)
    with _folder_lock(folder):
        archive = folder / ARCHIVE_NAME
        packed = archive_members(archive) if archive.exists() else {}
        candidates = [path for path in sorted(folder.glob("*" if name is None else f"{name}.*"))
                      if path.is_file() and path.name not in (ARCHIVE_NAME, CHECKSUMS)]
        # the runs that kept outputs, on disk or packed: their records go with them
        with_outputs = {_run_of(path.name) for path in candidates} | {_run_of(f"{member}.gz") for member in packed}
        sources = []
        for path in candidates:
            if _is_record(path.name):
                if path.name[:-len(RECORD_SUFFIX)] in with_outputs:
                    sources.append(path)
                continue
            run = _run_of(path.name)
            record = f"{run}{RECORD_SUFFIX}"
            finished = run is not None and ((folder / record).exists() or record in packed)
            if name is None and not finished:
                continue
            if run is None:
                raise PackedRunsError(f"{path}: not a kept output of a finished run (NAME.seedK"
                                      f"{{{','.join(KEPT_SUFFIXES)}}}); a run still training leaves its log "
                                      "uncompressed")
            if not finished:
                raise PackedRunsError(f"{path}: its run has no record {record}: pack a run once it is scored")
            sources.append(path)
        if not sources:
            if name is None:
                return []
            raise PackedRunsError(f"{folder}: no kept run outputs {name}.*{{{','.join(KEPT_SUFFIXES)}}} to pack")
        return _add(folder, sources)


def unpack(runs_dir, name: str) -> list[Path]:
    """The inverse of ``pack``: the archive's ``NAME.*`` members back as gzipped files. Returns the files written."""
    folder = Path(runs_dir)
    with _folder_lock(folder):
        return _take(folder, lambda member: "/" not in member and member.startswith(f"{name}."))


def _below(folder, into) -> tuple[Path, Path, str]:
    """(folder, archive folder, folder's path below it: "" when the same) of pack_folder / unpack_folder."""
    folder = Path(folder)
    into = folder if into is None else Path(into)
    below = os.path.relpath(folder, into)
    if below.startswith(".."):
        raise PackedRunsError(f"{into}: not {folder} nor a folder above it")
    return folder, into, "" if below == "." else Path(below).as_posix() + "/"


def pack_folder(folder, into=None) -> list[Path]:
    """Move the gzipped files of ``folder`` (not of the folders in it) into the archive of ``into`` (``folder`` or a
    folder above it; default ``folder``); other files (a README) stay. Returns the files it removed."""
    folder, into, _ = _below(folder, into)
    with _folder_lock(into):
        sources = sorted(path for path in folder.glob("*.gz") if path.is_file())
        if not sources:
            raise PackedRunsError(f"{folder}: no gzipped files to pack")
        return _add(into, sources)


def unpack_folder(folder, into=None) -> list[Path]:
    """The inverse of ``pack_folder``: the packed files of ``folder`` back as gzipped files."""
    folder, into, below = _below(folder, into)
    with _folder_lock(into):
        return _take(into, lambda member: member.startswith(below) and "/" not in member[len(below):])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 fairseq_syntax/evaluation/packed_runs.py",
                                     description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for command, help_text in (("pack", "move the gzipped logs and decodes and the records of NAME's finished runs (of "
                                        "every finished run, without NAME) into RUNS_DIR's archive"),
                               ("unpack", "NAME.seed*'s packed files back as they were kept")):
        sub = commands.add_parser(command, help=help_text)
        sub.add_argument("runs_dir")
        sub.add_argument("name", nargs="?" if command == "pack" else None)
    for command, help_text in (("pack-folder", "move FOLDER's gzipped files into the archive of FOLDER (or --into)"),
                               ("unpack-folder", "FOLDER's packed files back as gzipped files")):
        sub = commands.add_parser(command, help=help_text)
        sub.add_argument("folder")
        sub.add_argument("--into", help="the folder of the archive: FOLDER (default) or a folder above it")
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
        if args.command == "cat":
            sys.stdout.buffer.write(read_bytes(args.file))
            return 0
        actions = {"pack": lambda: pack(args.runs_dir, args.name), "unpack": lambda: unpack(args.runs_dir, args.name),
                   "pack-folder": lambda: pack_folder(args.folder, args.into),
                   "unpack-folder": lambda: unpack_folder(args.folder, args.into)}
        done = actions[args.command]()
    except (PackedRunsError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    archive = Path(getattr(args, "runs_dir", None) or args.into or args.folder) / ARCHIVE_NAME
    verb = "packed into" if args.command.startswith("pack") else "unpacked from"
    left = ""
    if args.command == "pack" and args.name is None:  # what a run still going has written so far
        others = [path for path in Path(args.runs_dir).iterdir()
                  if path.is_file() and (_run_of(path.name) or _run_of(path.name + ".gz"))]
        left = f"; {len(others)} files of runs not finished left as they are"
    print(f"{len(done)} files {verb} {archive}{left}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
