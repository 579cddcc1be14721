"""A parallel corpus as the parsers and ``fairseq-syntax-preprocess`` read it: one sentence per line, tokens
separated by one space, the source side's brackets PTB-escaped
(:func:`fairseq_syntax.core.trees.ptb_escape_token`), written to ``OUTPUT.SRC`` and ``OUTPUT.TGT`` (docs/parsers.md
shows the command).

``--text``: ``raw``, tokenized here with sacremoses (``-l LANG -a``, no XML escaping), or
``tokenized``, Moses-tokenized text with XML escapes (``&apos; &quot; &amp; &#91;`` ...), unescaped token by token.

Both sides must have the same number of lines; an empty line is an error naming file and line, except with
``--max-words N``: pairs with more than N words, or none, on either side are left out, counted and listed in
``--removed``. Inputs may be gzipped. The tokens step of :mod:`fairseq_syntax.study.prepare`."""
from __future__ import annotations

import argparse
import html
import os
import re
from itertools import zip_longest
from typing import Iterator

from fairseq_syntax.core.text_lines import TextLineError, iter_lines_or_errors
from fairseq_syntax.parsing.text import open_output, ptb_escape_token, tokenizer

#: only complete entities (with the ';'): html.unescape alone would also turn a bare "&copy" into a sign
ENTITY = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")
TEXT_KINDS = ("raw", "tokenized")


def tokens_of(path: str, lang: str, text: str) -> Iterator[tuple[int, list[str]]]:
    """(1-based line, tokens) of each line of ``path``, tokenized (``raw``) or unescaped (``tokenized``); a line
    that is not text (not UTF-8, a control character, a gzip file cut short) stops with ``FILE:LINE: problem``."""
    split = tokenizer(lang if text == "raw" else None)
    try:
        for number, line in enumerate(iter_lines_or_errors(path), 1):
            if isinstance(line, TextLineError):
                raise SystemExit(str(line))
            tokens = split(line)
            if text == "tokenized":
                plain = [ENTITY.sub(lambda m: html.unescape(m.group(0)), token) for token in tokens]
                for token, unescaped in zip(tokens, plain):
                    if unescaped.split() != [unescaped]:
                        raise SystemExit(f"{path}:{number}: token {token!r} unescapes to whitespace")
                tokens = plain
            yield number, tokens
    except FileNotFoundError:
        raise SystemExit(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SystemExit(f"{path}: a directory, not a text file") from None
    except TextLineError as error:  # the whole file unreadable: a gzip file cut short
        raise SystemExit(str(error)) from None


def normalize(text: str, src: str, tgt: str, src_file: str, tgt_file: str, out_prefix: str, max_words: int = 0,
              listing_path: str | None = None) -> None:
    """Writes ``out_prefix.{src,tgt}`` (module docstring)."""
    removed, number = [], 0
    os.makedirs(os.path.dirname(out_prefix) or ".", exist_ok=True)
    with open_output(f"{out_prefix}.{src}") as out_src, open_output(f"{out_prefix}.{tgt}") as out_tgt:
        pairs = zip_longest(tokens_of(src_file, src, text), tokens_of(tgt_file, tgt, text))
        for number, (source, target) in enumerate(pairs, 1):
            if source is None or target is None:
                raise SystemExit(f"{src_file} and {tgt_file} differ in length: line {number} exists only in "
                                 f"{src_file if target is None else tgt_file}")
            source, target = source[1], target[1]
            if max_words > 0 and (not source or not target or max(len(source), len(target)) > max_words):
                reason = "empty side" if not source or not target else f"over {max_words} words"
                removed.append(f"{number}\t{reason}\t{len(source)}\t{len(target)}")
                continue
            for path, tokens in ((src_file, source), (tgt_file, target)):
                if not tokens:
                    raise SystemExit(f"{path}:{number}: empty line (a pair needs both sides; only a training split "
                                     "filtered by --max-words, a study's corpus.max_train_words, leaves such pairs "
                                     "out)")
            out_src.write(" ".join(ptb_escape_token(t) for t in source) + "\n")
            out_tgt.write(" ".join(target) + "\n")
    if max_words > 0 and listing_path is not None:
        with open(listing_path, "w", encoding="utf-8") as listing:
            listing.write("line\treason\tsource_words\ttarget_words\n" + "".join(r + "\n" for r in removed))
        print(f"{src_file}: left out {len(removed)} of {number} training pairs (empty, or over {max_words} words on a "
              f"side); listed in {listing_path}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python3 -m fairseq_syntax.parsing.normalize",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--text", choices=TEXT_KINDS, required=True, help="raw or Moses-tokenized input")
    parser.add_argument("-s", "--source-lang", required=True)
    parser.add_argument("-t", "--target-lang", required=True)
    parser.add_argument("--source", required=True, help="the source side's file (plain or .gz)")
    parser.add_argument("--target", required=True, help="the target side's file (plain or .gz)")
    parser.add_argument("--output", required=True, help="writes OUTPUT.SRC and OUTPUT.TGT")
    parser.add_argument("--max-words", type=int, default=0,
                        help="leave out (and list) the pairs with more than N words, or none, on a side; 0: keep all")
    parser.add_argument("--removed", help="the listing of the pairs --max-words left out")
    args = parser.parse_args(argv)
    if args.max_words > 0 and args.removed is None:
        parser.error("--max-words lists the pairs it leaves out: give --removed")
    normalize(args.text, args.source_lang, args.target_lang, args.source, args.target, args.output, args.max_words,
              args.removed)


if __name__ == "__main__":
    main()
