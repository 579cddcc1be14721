#!/usr/bin/env python3
r"""Parse sentences (one per line) with a SuPar biaffine dependency parser into labeled arc distributions:
``fairseq-syntax-parse dependency --backend biaffine`` (``fairseq_syntax/cli/parse.py`` has the options and docs).

  python3 preprocess/parse_dependency.py --model MODELS/biaffine-dep-ud-ewt.pt \
      --input train.tok.en --arcs train.arcs.jsonl --conllu train.conllu

``--arcs`` is ``--output`` there, ``--tokenize LANG`` is ``--raw --lang LANG``."""
from fairseq_syntax.cli import parse


def main(argv=None):
    return parse.script_main(["dependency", "--backend", "biaffine"], argv, {"--arcs": "--output"})


if __name__ == "__main__":
    main()
