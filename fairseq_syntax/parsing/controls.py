"""Control structures: the parses' words and labels under a structure that is not the parse.

Pham, Macháček & Bojar (2019, "Promoting the Knowledge of Source Syntax in Transformer NMT Is Not Needed"): trivial
trees give a Transformer the gains of real parses. A control replaces every parse's structure and keeps the rest
(docs/methods.md); names and data directories: :mod:`fairseq_syntax.core.control_kinds`.

* constituency (``.tree``): the *units* (POS nodes with their words, and words attached directly to a phrase, left
  to right) stay; everything above them is replaced.

  - ``random``, ``left``, ``right``: a binary tree over the units, inner nodes labelled ``X``
    (:data:`~fairseq_syntax.core.control_kinds.CONTROL_LABEL`), the root keeping the parse's root label.
    ``random``: drawn top-down, a span of k > 1 units splits after a point drawn uniformly from its k - 1 gaps
    (balanced trees are likelier), left span before right. ``right``: ``(S p1 (X p2 (X p3 p4)))``; ``left``:
    ``(S (X (X p1 p2) p3) p4)``. A root with one unit keeps it.
  - ``struct``: the parse's phrases with their child counts and labels; only the units each spans change. Uniform
    over ordered trees with the n units as leaves and the parse's multiset of k child counts (unary included): a
    tree is its preorder child-count sequence (Łukasiewicz word: n zeros and the k counts, summing to n + k - 1),
    and by the cycle lemma (Dvoretzky & Motzkin 1947; Stanley, *Enumerative Combinatorics* 2, Lemma 5.3.7) exactly
    one of the n + k rotations of any arrangement is such a word (starting right after the first minimum of the
    partial sums of count - 1); a shuffled arrangement so rotated is a uniform draw. The root keeps the parse's root
    label, the other inner nodes take the other phrase labels shuffled. A one-word or flat parse is its own control.
  - A root that is itself a POS node stays as it is.
* dependency (``.arcs.jsonl.gz``, :mod:`fairseq_syntax.parsing.dependency`): a record whose 1-best tree (``best``)
  is the control tree and whose ``arcs`` are one-hot on it. ``random``: a random projective tree drawn top-down: a
  span takes a head uniformly from its words, the words left and right of it form two spans whose heads depend on
  it (left first); the sentence's head is the root. ``left``: each word's head is its left neighbour, the first
  word the root; ``right``: the right neighbour, the last word the root. Each word keeps its 1-best label, except
  that the control's root and the parse's root trade labels (the root carries ``root``). ``struct`` makes no
  dependency data (:data:`~fairseq_syntax.core.control_kinds.CONTROL_INPUTS`). A fallback record keeps its
  ``fallback`` key. The CoNLL-U file is written from the control records.

Randomness: line ``k`` (1-based) draws from ``random.Random(f"{seed}:{k}")``, only where there is a choice, so a
line's control depends on its seed, number and parse only.

``fairseq-syntax-control``: ``make``, ``stats`` and ``dictionary`` (the real one with ``(X`` in place of fairseq's
first padding filler ``madeupwordNNNN``: same size, every other index kept)."""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
from collections.abc import Iterator

from tqdm import tqdm

from fairseq_syntax.core import trees
from fairseq_syntax.core.control_kinds import (
    CONTROL_INPUTS,
    CONTROL_KEY,
    CONTROL_LABEL,
    CONTROLS,
    check_control,
    describe,
)
from fairseq_syntax.core.data_dir import META_FILE
from fairseq_syntax.parsing.text import open_output, read_json, write_json

PARSERS_FILE = "parsers.json"
#: fairseq pads a dictionary to a multiple of 8 with fillers named madeupword0000, madeupword0001, ...
PADDING_FILLER = "madeupword"


def line_rng(seed: int, line: int) -> random.Random:
    """The random draws of line ``line`` (1-based) under ``seed``."""
    return random.Random(f"{seed}:{line}")


# --- constituency


def units_and_phrases(tree: trees.Tree) -> tuple[list[trees.Tree], list[trees.Tree]]:
    """The units of ``tree`` left to right (its POS nodes and words attached directly to a phrase) and its inner
    nodes above them in preorder, the root first."""
    units, phrases, stack = [], [], [tree]
    while stack:
        node = stack.pop()
        if node.is_leaf or node.is_preterminal:
            units.append(node)
        else:
            phrases.append(node)
            stack.extend(reversed(node.children))
    return units, phrases


def _split_point(start: int, end: int, control: str, rng: random.Random) -> int:
    """Where the span ``[start, end)`` of more than one POS node splits into its two children."""
    if end - start == 2:
        return start + 1
    if control == "random":
        return rng.randrange(start + 1, end)
    return start + 1 if control == "right" else end - 1


def _check_changes(control: str, kind: str) -> None:
    check_control(control)
    if kind not in CONTROL_INPUTS[control]:
        raise ValueError(f"the {control} control changes the {' and '.join(CONTROL_INPUTS[control])} only, not the "
                         f"{kind} (fairseq_syntax.core.control_kinds.CONTROL_INPUTS)")


def control_tree(tree: trees.Tree, control: str, rng: random.Random) -> trees.Tree:
    """``tree``'s POS nodes under a ``control`` tree (module docstring); ``tree`` is not changed."""
    _check_changes(control, "trees")
    nodes = units_and_phrases(tree)[0]
    if len(nodes) == 1 and nodes[0] is tree:  # the root is itself a POS node
        return trees.Tree(tree.label, list(tree.children))
    if control == "struct":
        return structure_only_tree(tree, rng)
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


def lukasiewicz_rotation(counts: list[int]) -> list[int]:
    """The rotation of ``counts`` (child counts, zeros for leaves, summing to ``len(counts) - 1``) that is a tree's
    preorder sequence: it starts right after the first minimum of the partial sums of ``count - 1``."""
    if sum(counts) != len(counts) - 1:
        raise ValueError(f"child counts {counts} sum to {sum(counts)}, a tree of {len(counts)} nodes needs "
                         f"{len(counts) - 1}")
    total, lowest, start = 0, 0, 0
    for position, count in enumerate(counts, 1):
        total += count - 1
        if total < lowest:
            lowest, start = total, position
    return counts[start:] + counts[:start]


def tree_of_counts(counts: list[int], labels: list[str], units: list[trees.Tree]) -> trees.Tree:
    """The tree of a preorder child-count sequence (:func:`lukasiewicz_rotation`): its inner nodes labelled
    ``labels`` in preorder, its leaves ``units`` left to right."""
    labels, units = iter(labels), iter(units)
    root = None
    open_nodes: list[list] = []  # [node, children still to attach], innermost last
    for count in counts:
        node = trees.Tree(next(labels)) if count else next(units)
        if open_nodes:
            parent = open_nodes[-1]
            parent[0].children.append(node)
            parent[1] -= 1
            if not parent[1]:
                open_nodes.pop()
        else:
            root = node
        if count:
            open_nodes.append([node, count])
    return root


def structure_only_tree(tree: trees.Tree, rng: random.Random) -> trees.Tree:
    """The ``struct`` control of ``tree``. Draws: ``rng.shuffle`` of the counts, then of the labels."""
    units, phrases = units_and_phrases(tree)
    counts = [len(node.children) for node in phrases] + [0] * len(units)
    rng.shuffle(counts)
    labels = [node.label for node in phrases[1:]]
    rng.shuffle(labels)
    return tree_of_counts(lukasiewicz_rotation(counts), [tree.label, *labels], units)


# --- dependency


def control_heads(n: int, control: str, rng: random.Random) -> list[int]:
    """Heads (1-based, 0 = root) of the words 1..n of a ``control`` tree (module docstring)."""
    _check_changes(control, "arcs")
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
    """The control version of one side-data record: the ``control`` tree as ``best``, one-hot ``arcs``."""
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


# --- files


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


def _update_json(path: str, control: dict, required: bool) -> None:
    if os.path.exists(path):
        content = read_json(path)
    elif required:
        raise ValueError(f"{path}: no such file (make the data directory with fairseq-syntax-preprocess first)")
    else:
        content = {}
    recorded = content.get(CONTROL_KEY)
    if recorded is not None and recorded != control:
        raise ValueError(f"{path}: records the control {recorded}, not {control}: this directory was made from "
                         "other control parses; make it again")
    write_json(path, {**content, CONTROL_KEY: control})


def record_control(data_dir: str, control: str, seed: int) -> None:
    """Adds ``"control": {"structure": control, "seed": seed}`` to ``data_dir``'s syntax.json and parsers.json."""
    check_control(control)
    entry = {"structure": control, "seed": seed}
    _update_json(os.path.join(data_dir, META_FILE), entry, required=True)
    _update_json(os.path.join(data_dir, PARSERS_FILE), entry, required=False)


# --- measures


def tree_shape(tree: trees.Tree) -> tuple[int, int]:
    """(phrases, depth): inner nodes above the units and the most of them on one root-to-unit path (0 for a POS
    root)."""
    phrases, depth, stack = 0, 0, [(tree, 0)]
    while stack:
        node, above = stack.pop()
        if node.is_leaf or node.is_preterminal:
            depth = max(depth, above)
            continue
        phrases += 1
        stack.extend((child, above + 1) for child in node.children)
    return phrases, depth


def dependency_shape(heads: list[int]) -> tuple[int, int, list[int]]:
    """(heads, depth, arc lengths) of ``heads`` (``heads[k]`` the 1-based head of word k + 1, 0 = root): words with a
    dependent, most words on a root-to-leaf path (root word alone: 1), ``|dependent - head|`` of each non-root
    arc."""
    depths = [0] * len(heads)
    for word in range(1, len(heads) + 1):
        path, node = [], word
        while node and not depths[node - 1]:
            path.append(node)
            node = heads[node - 1]
            if len(path) > len(heads):
                raise ValueError(f"heads {heads} have a cycle")
        above = depths[node - 1] if node else 0
        for step, on_path in enumerate(reversed(path), 1):
            depths[on_path - 1] = above + step
    lengths = [abs(word - head) for word, head in enumerate(heads, 1) if head]
    return len({head for head in heads if head}), max(depths, default=0), lengths


STATS_COLUMNS = ("Structure", "Control seed", "Kind", "Sentences", "Inner nodes per sentence", "Depth (mean)",
                 "Mean arc length")
KINDS = {"trees": "constituency: phrases above the POS nodes", "arcs": "dependency: words with a dependent"}


def _stats_row(structure: str, seed: int | None, kind: str, shapes: list[tuple]) -> dict:
    lengths = [length for shape in shapes if len(shape) == 3 for length in shape[2]]
    return {"structure": structure, "seed": seed, "kind": kind, "sentences": len(shapes),
            "inner_nodes": statistics.fmean(shape[0] for shape in shapes) if shapes else None,
            "depth": statistics.fmean(shape[1] for shape in shapes) if shapes else None,
            "arc_length": statistics.fmean(lengths) if lengths else None}


def _inputs(in_prefix: str, trees_suffix: str, arcs_suffix: str) -> dict[str, str]:
    inputs = {"trees": f"{in_prefix}.{trees_suffix}", "arcs": f"{in_prefix}.{arcs_suffix}"}
    if not any(os.path.exists(path) for path in inputs.values()):
        raise ValueError(f"{in_prefix}: neither {inputs['trees']} nor {inputs['arcs']} exists")
    return inputs


def structure_stats(in_prefix: str, controls: list[str], seeds: list[int], trees_suffix: str = "tree",
                    arcs_suffix: str = "arcs.jsonl.gz") -> list[dict]:
    """For ``IN_PREFIX.tree`` and ``IN_PREFIX.arcs.jsonl.gz`` (whichever exist), one row for the parse and one per
    changing control and seed (a control that draws nothing: once, seed None): means over sentences of
    :func:`tree_shape` / :func:`dependency_shape`, and for dependency trees the mean arc length pooled over
    sentences. Controls are drawn as ``make`` draws them."""
    from fairseq_syntax.core.control_kinds import SEEDED_CONTROLS
    from fairseq_syntax.parsing.dependency import read_arc_distributions

    for control in controls:
        check_control(control)
    rows = []
    for kind, path in _inputs(in_prefix, trees_suffix, arcs_suffix).items():
        if not os.path.exists(path):
            continue
        if kind == "trees":
            parses = list(trees.read_trees(path))
            shape = tree_shape
            draw = control_tree
        else:
            parses = list(read_arc_distributions(path))
            shape = lambda record: dependency_shape([head for head, _ in record["best"]])  # noqa: E731
            draw = lambda record, control, rng: control_record(record, control, rng, path)  # noqa: E731
        rows.append(_stats_row("parse", None, kind, [shape(parse) for parse in parses]))
        for control in controls:
            if kind not in CONTROL_INPUTS[control]:
                continue
            for seed in seeds if control in SEEDED_CONTROLS else [None]:
                made = [draw(parse, control, line_rng(seed or 1, line)) for line, parse in
                        enumerate(_progress(parses, f"{path} {control} {seed or ''}"), 1)]
                rows.append(_stats_row(control, seed, kind, [shape(item) for item in made]))
    return rows


def stats_markdown(rows: list[dict], source: str) -> str:
    """The Markdown table of :func:`structure_stats`'s rows; ``source``: what was measured, for its header."""
    def number(value):
        return "–" if value is None else f"{value:.2f}"

    lines = [f"<!-- Generated by fairseq-syntax-control stats ({source}); run it again, do not edit. -->", "",
             "| " + " | ".join(STATS_COLUMNS) + " |", "|---|---|---|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['structure']} | {row['seed'] or '–'} | {KINDS[row['kind']]} | {row['sentences']} | "
                     f"{number(row['inner_nodes'])} | {number(row['depth'])} | {number(row['arc_length'])} |")
    lines += ["", "Inner nodes: a constituency tree's phrases (its inner nodes above the POS nodes, the root "
              "included); a dependency tree's words that head another. Depth: the most of them on one path from the "
              "root down. Arc length: |dependent - head| in words, over every arc but the root's, pooled over the "
              "sentences (a constituency tree has no arcs: –). Controls: fairseq_syntax/parsing/controls.py."]
    return "\n".join(lines) + "\n"


# --- command


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairseq-syntax-control", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("make", help="control versions of a split's parses")
    make.add_argument("--control", choices=CONTROLS, required=True)
    make.add_argument("--seed", type=int, default=1, help="the random control's seed (default 1)")
    make.add_argument("in_prefix", help="reads IN_PREFIX.TREES_SUFFIX and IN_PREFIX.ARCS_SUFFIX, whichever exist")
    make.add_argument("out_prefix", help="writes OUT_PREFIX.TREES_SUFFIX, .ARCS_SUFFIX and .conllu")
    stats = commands.add_parser("stats", help="inner nodes, depth and arc length of the parse and of its controls")
    stats.add_argument("in_prefix", help="reads IN_PREFIX.TREES_SUFFIX and IN_PREFIX.ARCS_SUFFIX, whichever exist")
    stats.add_argument("--controls", nargs="*", default=["random", "struct"], choices=CONTROLS)
    stats.add_argument("--seeds", nargs="+", type=int, default=[1], help="control seeds (default 1)")
    stats.add_argument("--out", help="write the table here (Markdown) and its rows to OUT.json beside it; default: "
                                     "print the table")
    for command in (make, stats):
        command.add_argument("--trees-suffix", default="tree")
        command.add_argument("--arcs-suffix", default="arcs.jsonl.gz")
    dictionary = commands.add_parser("dictionary", help="a tree form's dictionary for its control data directory")
    dictionary.add_argument("real", help="the real form's dict.SRC.txt")
    dictionary.add_argument("out")
    return parser


def _made(args) -> Iterator[str]:
    inputs = _inputs(args.in_prefix, args.trees_suffix, args.arcs_suffix)
    trees_in, arcs_in = inputs["trees"], inputs["arcs"]
    changes = CONTROL_INPUTS[args.control]
    if os.path.exists(trees_in) and "trees" in changes:
        out = f"{args.out_prefix}.{args.trees_suffix}"
        yield f"{out}: {control_tree_file(trees_in, out, args.control, args.seed)} trees"
    if os.path.exists(arcs_in) and "arcs" in changes:
        out, conllu = f"{args.out_prefix}.{args.arcs_suffix}", f"{args.out_prefix}.conllu"
        yield f"{out}, {conllu}: {control_arcs_file(arcs_in, out, conllu, args.control, args.seed)} sentences"
    for kind, path in inputs.items():
        if os.path.exists(path) and kind not in changes:
            yield f"{path}: left as it is (the {args.control} control changes the {' and '.join(changes)} only)"


def _stats(args) -> None:
    rows = structure_stats(args.in_prefix, args.controls, args.seeds, args.trees_suffix, args.arcs_suffix)
    source = (f"{os.path.basename(args.in_prefix)}, controls {' '.join(args.controls) or 'none'}, seeds "
              f"{' '.join(map(str, args.seeds))}")
    table = stats_markdown(rows, source)
    if not args.out:
        sys.stdout.write(table)
        return
    with open_output(args.out) as out:
        out.write(table)
    json_path = os.path.splitext(args.out)[0] + ".json"
    write_json(json_path, {"generated_by": f"fairseq-syntax-control stats ({source})", "rows": rows})
    print(f"{args.out}, {json_path}: {len(rows)} rows", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    try:
        if args.command == "make":
            for made in _made(args):
                print(f"{made} ({describe({'structure': args.control, 'seed': args.seed})})", file=sys.stderr)
        elif args.command == "stats":
            _stats(args)
        else:
            print(f"{args.out}: {control_dictionary(args.real, args.out)}", file=sys.stderr)
    except (ValueError, OSError) as error:  # TreeError, TextLineError and the side-data reader's are ValueErrors
        sys.exit(f"error: {error}")


def cli_main() -> None:
    main(sys.argv[1:])


if __name__ == "__main__":
    cli_main()
