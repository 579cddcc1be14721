"""Control structures: the parses' words and labels under a structure that is not the parse.

"Does the syntax help, and is it the parse that helps?" Pham, Macháček & Bojar (2019, "Promoting the Knowledge of
Source Syntax in Transformer NMT Is Not Needed") found that trivial trees give a Transformer the same gains as real
parses. A control replaces the structure of every parse and keeps everything else, so each method reads it
unchanged, from the same kind of files, and a table row on a control differs from its real-parse row in the
structure only:

* constituency (a ``.tree`` file): the POS nodes stay (the preterminal over each word, with its tag, its words as
  they are; a word attached directly to a phrase stays a bare word), and everything above them is replaced by a
  binary tree over them whose inner nodes are labelled :data:`CONTROL_LABEL` (``X``, the PTB's label for an
  unknown constituent), except the root, which keeps the parse's root label. ``random``: a random binary
  bracketing, drawn top-down: a span of k > 1 POS nodes splits after a point drawn uniformly from its k - 1 gaps
  (so the bracketings are not uniform over binary trees: balanced ones are likelier), left span before right.
  ``right``: right-branching, ``(S p1 (X p2 (X p3 p4)))``; ``left``: left-branching, ``(S (X (X p1 p2) p3) p4)``.
  A tree whose root has one POS node (a one-word sentence) keeps it under the root; a root that is itself a POS
  node stays as it is.
* dependency (an ``.arcs.jsonl.gz`` file, :mod:`fairseq_syntax.parsing.dependency`): a record of the same format
  whose 1-best tree (``best``) is the control tree and whose distribution (``arcs``) is one-hot on it, so LDD and
  UDP/LDP read the same tree. ``random``: a random projective tree, drawn top-down: a span of words takes a head
  drawn uniformly from its words; the words left of it and right of it form two spans whose heads depend on it,
  left span before right; the whole sentence's head is the root. ``left``: each word's head is its left
  neighbour, the first word is the root; ``right``: each word's head is its right neighbour, the last word is the
  root. Labels: each word keeps the label the parser gave it in its 1-best tree, except that the control's root
  and the parse's root (the first word on the root) trade labels, so the root still carries ``root`` and the
  sentence keeps its labels; only the structure changes. A record the parser fell back on keeps its ``fallback``
  key (its labels are the fallback's, ``dep``). The CoNLL-U file is written from the control records.

Randomness: line ``k`` (1-based) of a file draws from ``random.Random(f"{seed}:{k}")`` and only where there is a
choice (a span of one word or two POS nodes draws nothing), so a line's control depends on its seed, its number
and its own parse: not on other lines, nor on how the parsing was sharded.

``fairseq-syntax-control`` makes the files and records them:

* ``make --control random --seed 1 IN_PREFIX OUT_PREFIX``: ``IN_PREFIX.tree`` -> ``OUT_PREFIX.tree`` and
  ``IN_PREFIX.arcs.jsonl.gz`` -> ``OUT_PREFIX.arcs.jsonl.gz`` + ``OUT_PREFIX.conllu`` (whichever inputs exist;
  each output appears whole or not at all);
* ``dictionary REAL_DICT OUT_DICT``: a tree form's dictionary for the control (the real form's, plus
  ``(X``/:data:`CONTROL_LABEL`, written where fairseq's first padding filler ``madeupwordNNNN`` was, so the
  dictionary keeps its size and every other token its index);
* ``record --control random --seed 1 DATA_DIR...``: adds ``"control": {"structure": "random", "seed": 1}`` to each
  data directory's ``syntax.json`` and ``parsers.json``; run records copy ``parsers.json``
  (:mod:`fairseq_syntax.parsing.provenance`), so each table row says which structure it read.

``examples/prepare_translation.sh`` with ``CONTROLS="random"`` (``CONTROL_SEED``, default 1) makes
``data-bin/FORM.random`` for every form with these commands.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections.abc import Iterator

from tqdm import tqdm

from fairseq_syntax.core import trees
from fairseq_syntax.core.data_dir import META_FILE
from fairseq_syntax.parsing.text import open_output

CONTROLS = ("random", "left", "right")
CONTROL_LABEL = "X"
CONTROL_KEY = "control"  # the entry of syntax.json and parsers.json
PARSERS_FILE = "parsers.json"
#: fairseq pads a dictionary to a multiple of 8 with fillers named madeupword0000, madeupword0001, ...
PADDING_FILLER = "madeupword"


def line_rng(seed: int, line: int) -> random.Random:
    """The random draws of line ``line`` (1-based) under ``seed``."""
    return random.Random(f"{seed}:{line}")


def _check_control(control: str) -> None:
    if control not in CONTROLS:
        raise ValueError(f"control must be one of {CONTROLS}, got {control!r}")


# ---------------------------------------------------------------------------------------------------- constituency


def pos_nodes(tree: trees.Tree) -> list[trees.Tree]:
    """What a control tree keeps of ``tree``, left to right: its POS nodes (preterminals, with their words) and any
    word attached directly to a phrase."""
    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        if node.is_leaf or node.is_preterminal:
            found.append(node)
        else:
            stack.extend(reversed(node.children))
    return found


def _split_point(start: int, end: int, control: str, rng: random.Random) -> int:
    """Where the span ``[start, end)`` of more than one POS node splits into its two children."""
    if end - start == 2:
        return start + 1
    if control == "random":
        return rng.randrange(start + 1, end)
    return start + 1 if control == "right" else end - 1


def control_tree(tree: trees.Tree, control: str, rng: random.Random) -> trees.Tree:
    """``tree``'s POS nodes under a ``control`` binary tree (module docstring); ``tree`` is not changed."""
    _check_control(control)
    nodes = pos_nodes(tree)
    if len(nodes) == 1 and nodes[0] is tree:  # the root is itself a POS node
        return trees.Tree(tree.label, list(tree.children))
    top: list[trees.Tree] = []
    stack = [(top, 0, len(nodes))]  # (children list to fill, span start, span end): preorder, left span first
    while stack:
        children, start, end = stack.pop()
        if end - start == 1:
            children.append(nodes[start])
            continue
        split = _split_point(start, end, control, rng)
        node = trees.Tree(CONTROL_LABEL)
        children.append(node)
        stack += [(node.children, split, end), (node.children, start, split)]
    root = top[0]
    if root is nodes[0]:  # a single POS node: under the root
        return trees.Tree(tree.label, [root])
    return trees.Tree(tree.label, root.children)


# ---------------------------------------------------------------------------------------------------- dependency


def control_heads(n: int, control: str, rng: random.Random) -> list[int]:
    """Heads (1-based, 0 = root) of the words 1..n of a ``control`` tree (module docstring)."""
    _check_control(control)
    if control == "left":
        return list(range(n))
    if control == "right":
        return [word + 1 for word in range(1, n)] + [0] if n else []
    heads = [0] * n
    stack = [(1, n, 0)] if n else []  # (first word, last word, head of the span's head): preorder, left span first
    while stack:
        first, last, parent = stack.pop()
        head = first if first == last else rng.randint(first, last)
        heads[head - 1] = parent
        stack += [span for span in ((head + 1, last, head), (first, head - 1, head)) if span[0] <= span[1]]
    return heads


def control_record(record: dict, control: str, rng: random.Random, source: str = "<record>",
                   line: int | None = None) -> dict:
    """The control version of one side-data record (format in :mod:`fairseq_syntax.parsing.dependency`): the
    ``control`` tree as its 1-best tree and its one-hot distribution, labels as the module docstring says."""
    best = record.get("best")
    if best is None:
        where = source if line is None else f"{source}:{line}"
        raise ValueError(f"{where}: the record has no 1-best tree (\"best\"), whose labels a control keeps: "
                         "re-parse with preprocess/parse_dependency.py")
    heads = control_heads(len(record["words"]), control, rng)
    labels = [label for _, label in best]
    if heads:
        parse_root = next((word for word, (head, _) in enumerate(best) if head == 0), 0)
        control_root = heads.index(0)
        labels[parse_root], labels[control_root] = labels[control_root], labels[parse_root]
    out = {"words": record["words"],
           "arcs": [[word, head, 1.0, {label: 1.0}] for word, (head, label) in enumerate(zip(heads, labels), 1)],
           "best": [[head, label] for head, label in zip(heads, labels)]}
    if "fallback" in record:
        out["fallback"] = record["fallback"]
    return out


# ---------------------------------------------------------------------------------------------------- files


def _progress(items, path: str):
    return tqdm(items, desc=os.path.basename(path), unit="sent")


def control_tree_file(in_path: str, out_path: str, control: str, seed: int) -> int:
    """One control tree per parse of ``in_path`` (one bracketed tree per line); returns the number of lines."""
    parses = list(trees.read_trees(in_path))  # a malformed line stops here, FILE:LINE
    with open_output(out_path) as out:
        for line, tree in enumerate(_progress(parses, in_path), 1):
            out.write(trees.to_bracketed(control_tree(tree, control, line_rng(seed, line))) + "\n")
    return len(parses)


def control_arcs_file(in_path: str, out_arcs: str, out_conllu: str, control: str, seed: int) -> int:
    """The control records of the side-data file ``in_path`` and their CoNLL-U; returns the number of lines."""
    from fairseq_syntax.parsing.dependency import conllu_of_record, read_arc_distributions

    records = list(read_arc_distributions(in_path))  # a malformed line stops here, FILE:LINE
    with open_output(out_arcs) as arcs, open_output(out_conllu) as conllu:
        for line, record in enumerate(_progress(records, in_path), 1):
            controlled = control_record(record, control, line_rng(seed, line), in_path, line)
            arcs.write(json.dumps(controlled, ensure_ascii=False) + "\n")
            conllu.write(conllu_of_record(controlled, line))
    return len(records)


def control_dictionary(real_path: str, out_path: str) -> str:
    """Writes the real dictionary with ``(X`` added (module docstring); returns what was done, for the console."""
    token = "(" + CONTROL_LABEL
    with open(real_path, encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    symbols = [entry.split(" ", 1)[0] for entry in lines]
    if token in symbols:
        done = f"{token} is in {real_path} already"
    else:
        filler = next((k for k, symbol in enumerate(symbols) if symbol.startswith(PADDING_FILLER)), None)
        if filler is None:
            lines.append(f"{token} 0")
            done = f"{token} added at the end"
        else:
            lines[filler] = f"{token} 0"
            done = f"{token} in place of the padding filler {symbols[filler]}"
    with open_output(out_path) as out:
        out.write("".join(entry + "\n" for entry in lines))
    return done


def describe(entry: dict) -> str:
    """A recorded control for a results table: ``control random (seed 1)``, ``control left``."""
    structure = entry.get("structure", "?")
    return f"control {structure}" + (f" (seed {entry.get('seed', '?')})" if structure == "random" else "")


def _update_json(path: str, control: dict, required: bool) -> None:
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            try:
                content = json.load(handle)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None
    elif required:
        raise ValueError(f"{path}: no such file (make the data directory with fairseq-syntax-preprocess first)")
    else:
        content = {}
    recorded = content.get(CONTROL_KEY)
    if recorded is not None and recorded != control:
        raise ValueError(f"{path}: records the control {recorded}, not {control}: this directory was made from "
                         "other control parses; make it again")
    with open_output(path) as out:
        json.dump({**content, CONTROL_KEY: control}, out, indent=1)
        out.write("\n")


def record_control(data_dir: str, control: str, seed: int) -> None:
    """Adds ``"control": {"structure": control, "seed": seed}`` to ``data_dir``'s syntax.json and parsers.json."""
    _check_control(control)
    entry = {"structure": control, "seed": seed}
    _update_json(os.path.join(data_dir, META_FILE), entry, required=True)
    _update_json(os.path.join(data_dir, PARSERS_FILE), entry, required=False)


# ---------------------------------------------------------------------------------------------------- command


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairseq-syntax-control", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("make", help="control versions of a split's parses")
    record = commands.add_parser("record", help="record a control in data directories (syntax.json, parsers.json)")
    for command in (make, record):
        command.add_argument("--control", choices=CONTROLS, required=True)
        command.add_argument("--seed", type=int, default=1, help="the random control's seed (default 1)")
    make.add_argument("in_prefix", help="reads IN_PREFIX.TREES_SUFFIX and IN_PREFIX.ARCS_SUFFIX, whichever exist")
    make.add_argument("out_prefix", help="writes OUT_PREFIX.TREES_SUFFIX, .ARCS_SUFFIX and .conllu")
    make.add_argument("--trees-suffix", default="tree")
    make.add_argument("--arcs-suffix", default="arcs.jsonl.gz")
    record.add_argument("data_dirs", nargs="+", metavar="DATA_DIR")
    dictionary = commands.add_parser("dictionary", help="a tree form's dictionary for its control data directory")
    dictionary.add_argument("real", help="the real form's dict.SRC.txt")
    dictionary.add_argument("out")
    return parser


def _made(args) -> Iterator[str]:
    trees_in = f"{args.in_prefix}.{args.trees_suffix}"
    arcs_in = f"{args.in_prefix}.{args.arcs_suffix}"
    if not os.path.exists(trees_in) and not os.path.exists(arcs_in):
        raise ValueError(f"{args.in_prefix}: neither {trees_in} nor {arcs_in} exists")
    if os.path.exists(trees_in):
        out = f"{args.out_prefix}.{args.trees_suffix}"
        yield f"{out}: {control_tree_file(trees_in, out, args.control, args.seed)} trees"
    if os.path.exists(arcs_in):
        out, conllu = f"{args.out_prefix}.{args.arcs_suffix}", f"{args.out_prefix}.conllu"
        yield f"{out}, {conllu}: {control_arcs_file(arcs_in, out, conllu, args.control, args.seed)} sentences"


def main(argv: list[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    try:
        if args.command == "make":
            for made in _made(args):
                print(f"{made} ({describe({'structure': args.control, 'seed': args.seed})})", file=sys.stderr)
        elif args.command == "record":
            for data_dir in args.data_dirs:
                record_control(data_dir, args.control, args.seed)
        else:
            print(f"{args.out}: {control_dictionary(args.real, args.out)}", file=sys.stderr)
    except (ValueError, OSError) as error:  # TreeError, TextLineError and the side-data reader's are ValueErrors
        sys.exit(f"error: {error}")


def cli_main() -> None:
    main(sys.argv[1:])


if __name__ == "__main__":
    cli_main()
