#!/usr/bin/env python3
r"""Parse sentences (one per line) into PTB-bracketed constituency trees (one per line):
``fairseq-syntax-parse constituency`` (``fairseq_syntax/cli/parse.py`` has the options and docs).

  python3 preprocess/parse_constituency.py --backend benepar --model MODELS/benepar-ptb.pt \
      --input train.tok.en --output train.tree

Same options; ``--tokenize LANG`` is ``--raw --lang LANG`` there."""
import sys

from fairseq_syntax.cli import parse


def command_line(argv: list[str]) -> list[str]:
    """This script's options as ``fairseq-syntax-parse constituency``'s."""
    translated, words = ["constituency"], iter(argv)
    for word in words:
        if word == "--tokenize":
            translated += ["--raw", "--lang", next(words, "")]
        elif word.startswith("--tokenize="):
            translated += ["--raw", "--lang", word.split("=", 1)[1]]
        else:
            translated.append(word)
    return translated


def main(argv=None):
    return parse.main(command_line(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
