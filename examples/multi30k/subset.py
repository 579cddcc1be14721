#!/usr/bin/env python3
"""The study's training subset of Multi30k: PAIRS training pairs drawn uniformly at random without replacement
(``random.Random(SEED).sample`` over the line numbers), kept in their original order; valid and test are linked
whole, because every one of their lines is translated and scored.

  python3 examples/multi30k/subset.py RAW_DIR OUT_RAW_DIR --pairs 10000 --seed 1

Writes OUT_RAW_DIR/train.{en,de}.gz, OUT_RAW_DIR/train.lines (the chosen 1-based line numbers of RAW_DIR's train
files, one per line) and links to RAW_DIR's val and test_2016_flickr files. The choice depends on the seed and the
number of lines only, never on the text, so it was fixed before any system was trained on it.
"""
import argparse
import gzip
import os
import random
import sys

SPLITS_KEPT_WHOLE = ("val", "test_2016_flickr")
LANGS = ("en", "de")


def open_raw(raw_dir: str, name: str):
    plain = os.path.join(raw_dir, name)
    if os.path.exists(plain):
        return open(plain, encoding="utf-8", newline="\n")
    if os.path.exists(plain + ".gz"):
        return gzip.open(plain + ".gz", "rt", encoding="utf-8", newline="\n")
    sys.exit(f"{raw_dir}: neither {name} nor {name}.gz exists")


def chosen_lines(total: int, pairs: int, seed: int) -> list:
    """1-based line numbers of the subset, ascending."""
    if not 0 < pairs <= total:
        sys.exit(f"--pairs must be between 1 and the {total} training pairs, not {pairs}")
    return sorted(number + 1 for number in random.Random(seed).sample(range(total), pairs))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("raw_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--pairs", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    args = parser.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    sides = {}
    for lang in LANGS:
        with open_raw(args.raw_dir, f"train.{lang}") as f:
            sides[lang] = f.read().split("\n")
        if sides[lang] and sides[lang][-1] == "":
            sides[lang].pop()
    if len(sides["en"]) != len(sides["de"]):
        sys.exit(f"{args.raw_dir}: train.en has {len(sides['en'])} lines, train.de {len(sides['de'])}")
    lines = chosen_lines(len(sides["en"]), args.pairs, args.seed)
    for lang in LANGS:
        path = os.path.join(args.out_dir, f"train.{lang}.gz")
        with gzip.open(path + ".partial", "wt", encoding="utf-8", newline="\n") as out:
            out.write("".join(sides[lang][number - 1] + "\n" for number in lines))
        os.replace(path + ".partial", path)
    with open(os.path.join(args.out_dir, "train.lines"), "w") as out:
        out.write("".join(f"{number}\n" for number in lines))
    for name in SPLITS_KEPT_WHOLE:
        for lang in LANGS:
            for suffix in ("", ".gz"):
                source = os.path.join(os.path.abspath(args.raw_dir), f"{name}.{lang}{suffix}")
                link = os.path.join(args.out_dir, f"{name}.{lang}{suffix}")
                if os.path.exists(source):
                    if os.path.lexists(link):
                        os.remove(link)
                    os.symlink(source, link)
    print(f"{args.out_dir}: {args.pairs} of {len(sides['en'])} training pairs (seed {args.seed}); "
          f"valid and test whole")


if __name__ == "__main__":
    main()
