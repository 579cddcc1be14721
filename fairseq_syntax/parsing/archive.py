"""Parses kept with a corpus: the source side's constituency trees and dependency side data, compressed and
checksummed, so a new machine makes every data directory in minutes instead of hours of parsing
(``examples/multi30k/parses/``; docs/parsers.md shows ``pack``).

``pack`` reads, per split of ``TOK_DIR`` (a study's ``WORK/tok``), ``SPLIT.SRC``, ``SPLIT.tree``,
``SPLIT.arcs.jsonl.gz``, ``SPLIT.conllu`` and the fallback listings ``*.skipped``, and writes:

- ``SPLIT.tree.xz``, ``SPLIT.arcs.jsonl.xz``: the files' bytes, xz-compressed;
- no CoNLL-U: ``pack`` checks it is exactly what
  :func:`~fairseq_syntax.parsing.dependency.conllu_of_record` makes of the records, and ``unpack`` rebuilds it;
- ``SPLIT.lines.xz``: the digest of each parsed line (:mod:`fairseq_syntax.parsing.coverage`), which
  ``fairseq-syntax-study plan`` checks a study's lines against;
- ``MANIFEST.json``: per split the line count, SHA-256 of the tokens and of each file's uncompressed bytes, the
  fallback lines, and the parsers (:mod:`provenance`); ``SHA256SUMS`` of every compressed file.

``unpack`` checks ``SHA256SUMS``, then writes ``TOK_DIR/SPLIT.{tree,arcs.jsonl.gz,conllu}`` (and fallback
listings) for the tokens in ``TOK_DIR/SPLIT.SRC``: a line's parse is found by its tokens, so a subset or a
length-filtered split gets its own lines' parses in its order. A line with no parse in the archive stops the run
naming it. A line occurring twice takes the parse at its own line number where the file is the whole split, else
the first one's. ``TOK_DIR/parses.json`` records the archive and its parsers; :func:`write_provenance` writes a
data directory's ``parsers.json`` from it."""
from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import sys
from dataclasses import dataclass

from fairseq_syntax.core.files import write_atomically
from fairseq_syntax.parsing.coverage import (
    MANIFEST,
    XZ_PRESET,
    ArchiveError,
    lines_file,
    lines_name,
    read_bytes,
    read_manifest,
)
from fairseq_syntax.parsing.provenance import describe_parsers, read_parser_records, role_models
from fairseq_syntax.parsing.text import open_output, write_json

CHECKSUMS = "SHA256SUMS"
PROVENANCE = "parses.json"  # written into TOK_DIR by unpack
FORMAT = 1
# what a study names each parse file in TOK_DIR, and the file that holds it in the archive
TREES, ARCS, CONLLU = "tree", "arcs.jsonl.gz", "conllu"
STORED = {TREES: "tree.xz", ARCS: "arcs.jsonl.xz"}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def lines_of(data: bytes, path: str) -> list[bytes]:
    """The lines of a file's bytes, each without its newline; a file must end in one (as every parse file does)."""
    if data and not data.endswith(b"\n"):
        raise ArchiveError(f"{path}: the last line has no newline (a file cut short?)")
    return data.split(b"\n")[:-1] if data else []


def read_fallbacks(path: str) -> list[list]:
    """A parser's fallback listing (``LINE<TAB>reason`` a line; none when the file is absent)."""
    if not os.path.exists(path):
        return []
    fallbacks = []
    for number, line in enumerate(read_bytes(path).decode("utf-8").splitlines(), 1):
        line_number, _, reason = line.partition("\t")
        if not line_number.isdigit():
            raise ArchiveError(f"{path}:{number}: not 'LINE<TAB>reason'")
        fallbacks.append([int(line_number), reason])
    return fallbacks


def conllu_bytes(arcs_lines: list[bytes], numbers: list[int], path: str) -> bytes:
    """The CoNLL-U file of the records, record k numbered ``numbers[k]``."""
    from fairseq_syntax.parsing.dependency import conllu_of_record  # torch: not for a study's plan

    blocks = []
    for number, line in zip(numbers, arcs_lines):
        try:
            blocks.append(conllu_of_record(json.loads(line), number))
        except (ValueError, KeyError, TypeError) as error:
            raise ArchiveError(f"{path}:{number}: not a side-data record with its 1-best tree ({error})") from None
    return "".join(blocks).encode("utf-8")


# --- pack


def pack(tok_dir: str, archive: str, source: str, splits: list[str], models: dict[str, str],
         records_dir: str, kinds: tuple[str, ...] = (TREES, ARCS)) -> dict:
    """Writes ARCHIVE from TOK_DIR's parses; returns the manifest. ``kinds``: the parses it holds (``(ARCS,)`` for a
    language without a constituency parser)."""
    if ARCS not in kinds or not set(kinds) <= {TREES, ARCS}:
        raise ArchiveError(f"an archive holds the arcs and optionally the trees, not {list(kinds)}")
    manifest = {"format": FORMAT, "source": source, "splits": {},
                "parsers": describe_parsers(models, read_parser_records(records_dir))}
    compressed = {}
    for split in splits:
        token_path = os.path.join(tok_dir, f"{split}.{source}")
        tokens = read_bytes(token_path)
        count = len(lines_of(tokens, token_path))
        entry = {"lines": count, "tokens_sha256": sha256(tokens), "files": {}, "fallbacks": {}}
        compressed[lines_name(split)] = lines_file(line.decode("utf-8") for line in lines_of(tokens, token_path))
        for kind in kinds:
            path = os.path.join(tok_dir, f"{split}.{kind}")
            data = read_bytes(path)
            if len(lines_of(data, path)) != count:
                raise ArchiveError(f"{path}: {len(lines_of(data, path))} lines, but {token_path} has {count}")
            name = f"{split}.{STORED[kind]}"
            print(f"compressing {path} ({len(data) / 1e6:.1f} MB) into {name}", file=sys.stderr)
            compressed[name] = lzma.compress(data, preset=XZ_PRESET)
            entry["files"][kind] = {"stored": name, "sha256": sha256(data), "bytes": len(data)}
            entry["fallbacks"][kind] = read_fallbacks(path + ".skipped")
        arcs_path = os.path.join(tok_dir, f"{split}.{ARCS}")
        conllu_path = os.path.join(tok_dir, f"{split}.{CONLLU}")
        conllu = read_bytes(conllu_path)
        if conllu != conllu_bytes(lines_of(read_bytes(arcs_path), arcs_path), list(range(1, count + 1)), arcs_path):
            raise ArchiveError(f"{conllu_path} is not the 1-best trees of {arcs_path}: parse both again together "
                               "(preprocess/parse_dependency.py writes them in one run)")
        entry["files"][CONLLU] = {"rebuilt_from": ARCS, "sha256": sha256(conllu), "bytes": len(conllu)}
        manifest["splits"][split] = entry
    os.makedirs(archive, exist_ok=True)
    for name, data in compressed.items():
        write_atomically(os.path.join(archive, name), data)
    write_json(os.path.join(archive, MANIFEST), manifest, ensure_ascii=False)
    names = sorted(compressed) + [MANIFEST]
    with open_output(os.path.join(archive, CHECKSUMS)) as out:
        for name in names:
            out.write(f"{sha256(read_bytes(os.path.join(archive, name)))}  {name}\n")
    return manifest


# --- verify


def verify(archive: str) -> dict:
    """Checks every file of ``SHA256SUMS`` and that the manifest is listed there; returns the manifest."""
    checksums_path = os.path.join(archive, CHECKSUMS)
    listed = {}
    for number, line in enumerate(read_bytes(checksums_path).decode("utf-8").splitlines(), 1):
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name:
            raise ArchiveError(f"{checksums_path}:{number}: not 'SHA256  NAME'")
        listed[name] = digest
    if MANIFEST not in listed:
        raise ArchiveError(f"{checksums_path} does not list {MANIFEST}")
    for name, digest in listed.items():
        path = os.path.join(archive, name)
        if sha256(read_bytes(path)) != digest:
            raise ArchiveError(f"{path}: its SHA-256 is not the one {checksums_path} lists (a damaged or changed "
                               "file: take it from the repository again)")
    manifest = read_manifest(archive)
    if manifest.get("format") != FORMAT:
        raise ArchiveError(f"{archive}/{MANIFEST}: format {manifest.get('format')!r}, this code reads {FORMAT}")
    return manifest


def stored_lines(archive: str, entry: dict, kind: str) -> list[bytes]:
    """The uncompressed lines of one stored file, checked against the manifest's digest of the original."""
    path = os.path.join(archive, entry["files"][kind]["stored"])
    data = lzma.decompress(read_bytes(path))
    if sha256(data) != entry["files"][kind]["sha256"]:
        raise ArchiveError(f"{path}: its content is not the file the manifest describes")
    lines = lines_of(data, path)
    if len(lines) != entry["lines"]:
        raise ArchiveError(f"{path}: {len(lines)} lines, but the manifest says {entry['lines']}")
    return lines


# --- unpack


@dataclass
class Unpacked:
    split: str
    lines: int
    whole: bool  # the tokens are the whole split the archive was made from
    fallbacks: int


def matching_lines(tokens: list[bytes], archived_words: list[tuple], token_path: str, archive: str,
                   split: str) -> list[int]:
    """The 1-based archive line of each token line (module docstring: by its tokens, its own line first)."""
    first = {}
    for number, words in enumerate(archived_words, 1):
        first.setdefault(words, number)
    chosen = []
    for number, line in enumerate(tokens, 1):
        words = tuple(line.decode("utf-8").split())
        if number <= len(archived_words) and archived_words[number - 1] == words:
            chosen.append(number)
        elif words in first:
            chosen.append(first[words])
        else:
            raise ArchiveError(
                f"{token_path}:{number}: no parse of this line in {archive} ({split} split, {len(archived_words)} "
                "lines): an archive holds the parses of the lines it was made from only; a line of another draw or "
                "corpus needs a parser (parses.constituency and parses.dependency, by name or path, in place of "
                "parses.archive), and tokens made otherwise (another sacremoses version) the archive packed again "
                "from them")
    return chosen


def unpack_split(archive: str, manifest: dict, tok_dir: str, source: str, split: str) -> Unpacked:
    entry = manifest["splits"].get(split)
    if entry is None:
        raise ArchiveError(f"{archive}/{MANIFEST} holds no parses of the {split} split (it has: "
                           f"{', '.join(manifest['splits'])})")
    token_path = os.path.join(tok_dir, f"{split}.{source}")
    token_data = read_bytes(token_path)
    tokens = lines_of(token_data, token_path)
    arcs = stored_lines(archive, entry, ARCS)
    archived_words = [tuple(json.loads(line)["words"]) for line in arcs]
    whole = sha256(token_data) == entry["tokens_sha256"]
    chosen = list(range(1, len(tokens) + 1)) if whole else \
        matching_lines(tokens, archived_words, token_path, archive, split)
    picked = {ARCS: [arcs[k - 1] for k in chosen]}
    if TREES in entry["files"]:  # an archive of a language without a constituency parser holds the arcs only
        trees = stored_lines(archive, entry, TREES)
        picked = {TREES: [trees[k - 1] for k in chosen], **picked}
    fallbacks = 0
    for kind, lines in picked.items():
        path = os.path.join(tok_dir, f"{split}.{kind}")
        with open_output(path) as out:
            out.write("".join(line.decode("utf-8") + "\n" for line in lines))
        reasons = dict(entry["fallbacks"][kind])
        listing = [(new, reasons[old]) for new, old in enumerate(chosen, 1) if old in reasons]
        with open_output(path + ".skipped") as out:
            out.write("".join(f"{line}\t{reason}\n" for line, reason in listing))
        fallbacks += len(listing)
    conllu = conllu_bytes(picked[ARCS], list(range(1, len(chosen) + 1)), f"{archive}/{STORED[ARCS]}")
    if whole and sha256(conllu) != entry["files"][CONLLU]["sha256"]:
        raise ArchiveError(f"{archive}: the CoNLL-U rebuilt for {split} is not the one packed")
    write_atomically(os.path.join(tok_dir, f"{split}.{CONLLU}"), conllu)
    return Unpacked(split, len(chosen), whole, fallbacks)


def unpack(archive: str, tok_dir: str, source: str, splits: list[str]) -> list[Unpacked]:
    manifest = verify(archive)
    if manifest["source"] != source:
        raise ArchiveError(f"{archive} holds parses of the {manifest['source']} side, not {source}")
    done = [unpack_split(archive, manifest, tok_dir, source, split) for split in splits]
    write_json(os.path.join(tok_dir, PROVENANCE), {
        "archive": os.path.basename(os.path.normpath(archive)),
        "manifest_sha256": sha256(read_bytes(os.path.join(archive, MANIFEST))), "parsers": manifest["parsers"]},
        ensure_ascii=False)
    return done


def write_provenance(parses_json: str, out_path: str, roles: list[str], without: list[str] = ()) -> dict:
    """A data directory's ``parsers.json`` for ``roles`` (none: every role but ``without``), from unpack's record."""
    parsers = json.loads(read_bytes(parses_json))["parsers"]
    roles = roles or [role for role in parsers if role not in without]
    missing = [role for role in roles if role not in parsers]
    if missing:
        raise ArchiveError(f"{parses_json} names no {', '.join(missing)} parser (it has: {', '.join(parsers)})")
    described = {role: parsers[role] for role in roles}
    write_json(out_path, described)
    return described


# --- command


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m fairseq_syntax.parsing.archive",
                                     description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    pack_command = commands.add_parser("pack", help="compress TOK_DIR's parses into ARCHIVE")
    pack_command.add_argument("tok_dir")
    pack_command.add_argument("archive")
    pack_command.add_argument("--source", required=True, help="the parsed side's language suffix (e.g. en)")
    pack_command.add_argument("--splits", nargs="+", required=True)
    pack_command.add_argument("--models", nargs="*", default=[], metavar="ROLE=MODEL",
                              help="the parsers that made the parses, recorded in the manifest")
    pack_command.add_argument("--records", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                                "preprocess", "runs"),
                              help="folder of the parser run records (default: the repository's preprocess/runs)")
    pack_command.add_argument("--arcs-only", action="store_true",
                              help="the dependency parses only (a source language with no constituency parser)")
    verify_command = commands.add_parser("verify", help="check ARCHIVE's checksums")
    verify_command.add_argument("archive")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = get_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "pack":
            models = role_models(parser, args.models)
            manifest = pack(args.tok_dir, args.archive, args.source, args.splits, models, args.records,
                            (ARCS,) if args.arcs_only else (TREES, ARCS))
            total = sum(os.path.getsize(os.path.join(args.archive, name)) for name in os.listdir(args.archive))
            contents = ", ".join(f"{split} ({entry['lines']} lines)" for split, entry in manifest["splits"].items())
            print(f"{args.archive}: parses of {contents}; {total / 1e6:.2f} MB", file=sys.stderr)
        else:
            manifest = verify(args.archive)
            print(f"{args.archive}: every checksum matches ({', '.join(manifest['splits'])})", file=sys.stderr)
    except ArchiveError as error:
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    main()
