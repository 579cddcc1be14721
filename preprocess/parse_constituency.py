#!/usr/bin/env python3
r"""Parse sentences (one per line) into PTB-bracketed constituency trees (one per line):
``fairseq-syntax-parse constituency`` (``fairseq_syntax/cli/parse.py`` has the options and docs).

  python3 preprocess/parse_constituency.py --backend benepar --model MODELS/benepar-ptb.pt \
      --input train.tok.en --output train.tree

Same options; ``--tokenize LANG`` is ``--raw --lang LANG`` there."""
from fairseq_syntax.cli import parse


def main(argv=None):
    return parse.script_main(["constituency"], argv)


if __name__ == "__main__":
    main()
