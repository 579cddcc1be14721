#!/usr/bin/env python3
"""The German dependency parser's training data: UD German GSD dev + GSD test + LIT (3,696 sentences; GSD's train
split is not obtainable here), every 20th held out for model selection (184), the rest trained on (3,512). UD
German PUD (1,000) is the parser's test.

    python3 examples/multi30k_de_en/make_parser_data.py ../shared/data OUT_DIR

writes OUT_DIR/de-train.conllu.gz and OUT_DIR/de-heldout.conllu.gz (blocks as in the treebanks), then prints the
counts."""
import argparse
import gzip
import os

TREEBANKS = ("ud-de-gsd/de_gsd-ud-dev.conllu.gz", "ud-de-gsd/de_gsd-ud-test.conllu.gz",
             "ud-de-lit/de_lit-ud-test.conllu.gz")
HELD_OUT_EVERY = 20


def sentences(path: str) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [block for block in handle.read().strip("\n").split("\n\n") if block.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="the shared data folder (holds ud-de-gsd/ and ud-de-lit/)")
    parser.add_argument("out", help="folder to write the two files to")
    args = parser.parse_args()
    pool = [block for name in TREEBANKS for block in sentences(os.path.join(args.data, name))]
    parts = {"train": [b for i, b in enumerate(pool) if i % HELD_OUT_EVERY != HELD_OUT_EVERY - 1],
             "heldout": [b for i, b in enumerate(pool) if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1]}
    os.makedirs(args.out, exist_ok=True)
    for name, part in parts.items():
        with gzip.open(os.path.join(args.out, f"de-{name}.conllu.gz"), "wt", encoding="utf-8") as out:
            out.write("\n\n".join(part) + "\n\n")
    print(f"{len(pool)} sentences: {len(parts['train'])} to train on, {len(parts['heldout'])} held out")


if __name__ == "__main__":
    main()
