"""Stanford Sentiment Treebank -> two ``tree_classification`` data directories, ``sst5`` and ``sst2``.

``python3 examples/sst/prepare.py --sst SST_DIR --out DIR`` reads ``{train,dev}.txt(.gz)`` (one binarized tree per
line, a class 0-4 on every node) and writes per task ``DIR/TASK/{train,valid}.tree``, ``labels.txt`` and
``dict.txt`` (the training trees' words, ``(X`` and ``)``).

* SST-5: the trees as they are; classes 0 (very negative) ... 4 (very positive).
* SST-2 (Socher et al. 2013; Tai et al. 2015): neutral-rooted sentences dropped; 0, 1 -> negative, 3, 4 ->
  positive on every node; inner neutral nodes keep ``neutral``, no class, so no training signal.

``valid`` is SST's dev set (test is held out). Words keep their case and PTB escapes."""
import argparse
import os
from typing import Dict, List, Optional

from fairseq_syntax.core import trees
from fairseq_syntax.core.classification_task import (
    DICT_FILE,
    LABELS_FILE,
    build_dictionary,
)

FINE = ["0", "1", "2", "3", "4"]
BINARY = {"0": "negative", "1": "negative", "2": "neutral", "3": "positive", "4": "positive"}
BINARY_CLASSES = ["negative", "positive"]
SPLITS = {"train": "train", "valid": "dev"}


def relabel(tree: trees.Tree, mapping: Dict[str, str]) -> trees.Tree:
    if tree.is_leaf:
        return trees.Tree(tree.label)
    return trees.Tree(mapping[tree.label], [relabel(child, mapping) for child in tree.children])


def read_sst(directory: str, name: str) -> List[trees.Tree]:
    for path in (os.path.join(directory, f"{name}.txt.gz"), os.path.join(directory, f"{name}.txt")):
        if os.path.exists(path):
            return list(trees.read_trees(path))
    raise FileNotFoundError(f"{directory}: no {name}.txt.gz or {name}.txt")


def write_task(out: str, classes: List[str], splits: Dict[str, List[trees.Tree]]) -> None:
    os.makedirs(out, exist_ok=True)
    for split, tree_list in splits.items():
        with open(os.path.join(out, f"{split}.tree"), "w", encoding="utf-8") as f:
            f.writelines(trees.to_bracketed(tree) + "\n" for tree in tree_list)
    with open(os.path.join(out, LABELS_FILE), "w", encoding="utf-8") as f:
        f.writelines(label + "\n" for label in classes)
    build_dictionary(splits["train"]).save(os.path.join(out, DICT_FILE))
    counts = {split: len(tree_list) for split, tree_list in splits.items()}
    print(f"{out}: {counts} trees, classes {classes}")


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sst", required=True, help="folder with SST's train.txt(.gz) and dev.txt(.gz)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    fine = {split: read_sst(args.sst, name) for split, name in SPLITS.items()}
    for split, tree_list in fine.items():
        unknown = {tree.label for tree in tree_list} - set(FINE)
        if unknown:
            raise ValueError(f"{args.sst} {SPLITS[split]}: root labels {sorted(unknown)} are not SST classes 0-4")
    write_task(os.path.join(args.out, "sst5"), FINE, fine)
    binary = {
        split: [relabel(tree, BINARY) for tree in tree_list if BINARY[tree.label] != "neutral"]
        for split, tree_list in fine.items()
    }
    write_task(os.path.join(args.out, "sst2"), BINARY_CLASSES, binary)


if __name__ == "__main__":
    main()
