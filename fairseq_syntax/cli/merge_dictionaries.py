"""One fairseq dictionary from several: a large corpus's parts' (docs/parsers.md, "A large corpus"), their counts
summed in fairseq's order (by count, then symbol; padded to a multiple of 8), as ``fairseq-preprocess
--joined-dictionary`` makes it of the whole split. A line that is not ``SYMBOL COUNT`` stops with
``FILE:LINE: problem``."""
from __future__ import annotations

import argparse
import os
import re

from fairseq.data import Dictionary

from fairseq_syntax.core.text_lines import TextLineError, read_lines

PADDING_FACTOR = 8  # fairseq-preprocess's --padding-factor default
OVERWRITE = "#fairseq:overwrite"  # fairseq's flag on a line that repeats a symbol


def dictionary_entries(path: str) -> list[tuple[str, int]]:
    """(symbol, count) of each line ``SYMBOL COUNT [#fairseq:overwrite]`` of a fairseq dictionary; a line of another
    form, or a symbol given twice without the flag, stops with ``PATH:LINE: problem``."""
    try:
        lines = read_lines(path)
    except FileNotFoundError:
        raise SystemExit(f"error: {path}: no such file") from None
    except IsADirectoryError:
        raise SystemExit(f"error: {path}: a directory, not a dictionary file") from None
    except TextLineError as error:
        raise SystemExit(f"error: {error}") from None
    entries, seen = [], set()
    for number, line in enumerate(lines, 1):
        fields = line.rstrip().rsplit(" ", 2 if line.rstrip().endswith(" " + OVERWRITE) else 1)
        overwrite = fields[-1] == OVERWRITE
        if overwrite:
            fields.pop()
        if len(fields) != 2 or not fields[0] or not re.fullmatch(r"[0-9]+", fields[1]):
            raise SystemExit(f"error: {path}:{number}: {line!r} is not a dictionary line 'SYMBOL COUNT' (a fairseq "
                             "dict.LANG.txt, as fairseq-syntax-preprocess --dict-only writes it)")
        if fields[0] in seen and not overwrite:
            raise SystemExit(f"error: {path}:{number}: the symbol {fields[0]!r} again (a dictionary holds each once)")
        seen.add(fields[0])
        entries.append((fields[0], int(fields[1])))
    return entries


def merged_dictionary(paths: list[str]) -> Dictionary:
    """The symbols of the dictionaries at ``paths`` with their counts summed; fairseq's padding symbols
    (``madeupwordNNNN``, count 0) are left out and made again for the merged size."""
    merged = Dictionary()
    for path in paths:
        for symbol, count in dictionary_entries(path):
            if count > 0:
                merged.add_symbol(symbol, count)
    merged.finalize(padding_factor=PADDING_FACTOR)
    return merged


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python3 -m fairseq_syntax.cli.merge_dictionaries",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", required=True, help="the merged dictionary")
    parser.add_argument("dictionaries", nargs="+", help="the parts' dictionaries (dict.LANG.txt)")
    args = parser.parse_args(argv)
    merged = merged_dictionary(args.dictionaries)
    folder = os.path.dirname(args.output) or "."
    if not os.path.isdir(folder):
        raise SystemExit(f"error: --output {args.output}: no folder {folder} to write it in")
    merged.save(args.output)
    symbols = sum(1 for count in merged.count[merged.nspecial:] if count > 0)
    print(f"{args.output}: {symbols} symbols from {len(args.dictionaries)} dictionaries")


if __name__ == "__main__":
    main()
