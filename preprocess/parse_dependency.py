#!/usr/bin/env python3
r"""Parse sentences (one per line) with a SuPar biaffine dependency parser into labeled arc distributions:
``fairseq-syntax-parse dependency --backend biaffine`` (``fairseq_syntax/cli/parse.py`` has the options and docs).

  python3 preprocess/parse_dependency.py --model MODELS/biaffine-dep-ud-ewt.pt \
      --input train.tok.en --arcs train.arcs.jsonl --conllu train.conllu

``--arcs`` is ``--output`` there, ``--tokenize LANG`` is ``--raw --lang LANG``."""
import sys

from fairseq_syntax.cli import parse


def command_line(argv: list[str]) -> list[str]:
    """This script's options as ``fairseq-syntax-parse dependency``'s."""
    translated, words = ["dependency", "--backend", "biaffine"], iter(argv)
    for word in words:
        if word == "--tokenize":
            translated += ["--raw", "--lang", next(words, "")]
        elif word.startswith("--tokenize="):
            translated += ["--raw", "--lang", word.split("=", 1)[1]]
        elif word == "--arcs":
            translated.append("--output")
        elif word.startswith("--arcs="):
            translated.append("--output=" + word.split("=", 1)[1])
        else:
            translated.append(word)
    return translated


def main(argv=None):
    return parse.main(command_line(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
