"""Packing a recipe's finished runs into their folder's archive, and back, under a lock while other runs of the grid
go on. Reading what is packed and the archive's layout (``packed.tar.xz``, listed in ``SHA256SUMS``):
``fairseq_syntax/evaluation/packed_runs.py``.

    python3 examples/pack_runs.py pack RUNS_DIR [NAME]   # finished runs' *.{train.log,gen,gen.log}.gz and records
    python3 examples/pack_runs.py unpack RUNS_DIR NAME   # and back (to run a seed again)
    python3 examples/pack_runs.py pack-folder FOLDER [--into ANCESTOR]    # FOLDER's *.gz files
    python3 examples/pack_runs.py unpack-folder FOLDER [--into ANCESTOR]  # and back

``pack`` takes only finished runs (named: a kept file without a record stops it; unnamed: unfinished runs' files
stay); neither replaces a file: one already where it would go stops them. A packer holds the folder's exclusive
``flock`` until ``SHA256SUMS`` is written and the packed files removed; readers take the shared lock. As a script
it imports only Python's library."""
from __future__ import annotations

import argparse
import contextlib
import gzip
import importlib.util
import io
import json
import lzma
import os
import sys
import tarfile
import zlib
from pathlib import Path
from typing import Callable

if __name__ == "__main__":
    _READER = Path(__file__).resolve().parents[1] / "fairseq_syntax" / "evaluation" / "packed_runs.py"
    _spec = importlib.util.spec_from_file_location("packed_runs", _READER)
    packed_runs = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(packed_runs)
else:
    from fairseq_syntax.evaluation import packed_runs

PackedRunsError = packed_runs.PackedRunsError
ARCHIVE_NAME, CHECKSUMS, RECORD_SUFFIX = packed_runs.ARCHIVE_NAME, packed_runs.CHECKSUMS, packed_runs.RECORD_SUFFIX
archive_members, existing_path = packed_runs.archive_members, packed_runs.existing_path
member_name = packed_runs.member_name
files = packed_runs.files  # core/files.py: atomic writes and locks

# what a study run (fairseq_syntax/study/runner.py) keeps of a run, gzipped, beside its record
KEPT_SUFFIXES = (".train.log.gz", ".gen.gz", ".gen.log.gz")
XZ_PRESET = 9 | lzma.PRESET_EXTREME


def write_checksums(folder: Path, sums: dict[str, str]) -> None:
    path = folder / CHECKSUMS
    if not sums:
        path.unlink(missing_ok=True)
        return
    files.write_atomically(path, "".join(f"{sums[name]}  {name}\n" for name in sorted(sums)))


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
    """Holds an exclusive ``flock`` on ``folder`` itself, so two packers take turns."""
    if not folder.is_dir():
        raise PackedRunsError(f"{folder}: no such folder")
    held = os.path.realpath(folder)
    with files.held_lock(folder):
        # this process's own reads of the folder need no shared lock (they would wait on this one)
        packed_runs.EXCLUSIVELY_HELD.add(held)
        try:
            yield
        finally:
            packed_runs.EXCLUSIVELY_HELD.discard(held)


def _write_archive(folder: Path, members: dict[str, bytes]) -> None:
    """``folder``'s archive holds ``members`` (none: no archive), read back before it replaces the one there, and
    ``SHA256SUMS`` lists it."""
    archive = folder / ARCHIVE_NAME
    sums = packed_runs.read_checksums(folder)
    if not members:
        archive.unlink(missing_ok=True)
        sums.pop(archive.name, None)
        write_checksums(folder, sums)
        return
    with files.atomic_path(archive) as temporary:
        Path(temporary).write_bytes(_tar_bytes(members))
        with tarfile.open(temporary, "r:xz") as tar:  # read back before anything is removed
            if {info.name: tar.extractfile(info).read() for info in tar.getmembers()} != members:
                raise PackedRunsError(f"{temporary}: does not read back as written")
        sums[archive.name] = packed_runs.sha256_of(Path(temporary))
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
    """The inverse of ``_add``: the archive members ``wanted`` picks, back as gzipped files (records as JSON; a file
    there already stops it); an archive left empty goes, with its checksum line."""
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
    """Move the kept outputs and record of every finished run ``NAME.*`` of ``runs_dir`` (every finished run, without
    ``name``) into its archive and list it in ``SHA256SUMS``; returns the files removed. A record without kept
    outputs (``NAME.seeds.run.json``) stays."""
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
    """Move the gzipped files of ``folder`` (not its subfolders) into the archive of ``into`` (``folder`` or an
    ancestor; default ``folder``); returns the files removed."""
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
    parser = argparse.ArgumentParser(prog="python3 examples/pack_runs.py", description=__doc__.split("\n\n")[0])
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
    args = parser.parse_args(argv)
    actions = {"pack": lambda: pack(args.runs_dir, args.name), "unpack": lambda: unpack(args.runs_dir, args.name),
               "pack-folder": lambda: pack_folder(args.folder, args.into),
               "unpack-folder": lambda: unpack_folder(args.folder, args.into)}
    try:
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
