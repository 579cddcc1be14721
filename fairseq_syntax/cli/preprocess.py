"""``fairseq-syntax-preprocess``: a parallel corpus plus source trees -> a fairseq data directory with side data.

Inputs per split prefix ``P``: ``P.SRC`` and ``P.TGT`` (tokenized, BPE applied: subword-nmt's ``@@`` joiner),
``P.TREES_SUFFIX`` (one bracketed constituency tree per line over the *words* of ``P.SRC``). The BPE segmentation
of each source line is carried onto its tree's leaves, so tree and tokens always agree. Output: what
``fairseq-preprocess`` writes for the chosen input form (``sequence``, ``linearized``, ``preorder``), the side data
``{split}.SRC-TGT.SRC.parents.{bin,idx}`` for ``preorder``, and ``syntax.json`` recording the form.

Every problem stops with ``FILE:LINE: problem`` (malformed tree, tree leaves that differ from the source words,
line-count mismatch, over-long sentence), unless ``--skip-invalid`` is given: then the pair is left out of both
sides and each skipped line is counted, by reason, and listed.
"""
import argparse
import json
import logging
import os
import sys
import tempfile
from collections import Counter
from typing import List, Optional, Tuple

import numpy as np
import torch
from tqdm import tqdm

from fairseq_syntax.core import trees
from fairseq_syntax.core.bpe import group_bpe_words, merge_pieces
from fairseq_syntax.core.data_dir import META_FILE
from fairseq_syntax.core.input_forms import FORMS, PRETERMINALS, source_form
from fairseq_syntax.core.text_lines import TextLineError, read_lines_or_errors
from fairseq_syntax.parsing.text import ptb_escape_token

logger = logging.getLogger("fairseq_syntax.preprocess")


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fairseq-syntax-preprocess",
        description=__doc__.split("\n\n")[0],
        epilog="Any other option is passed to fairseq-preprocess (e.g. --joined-dictionary, --srcdict, --workers).",
    )
    parser.add_argument("-s", "--source-lang", required=True)
    parser.add_argument("-t", "--target-lang", required=True)
    parser.add_argument("--trainpref")
    parser.add_argument("--validpref", help="comma-separated prefixes for several validation sets")
    parser.add_argument("--testpref", help="comma-separated prefixes for several test sets")
    parser.add_argument("--destdir", required=True)
    parser.add_argument("--trees-suffix", default="tree", help="source trees are PREFIX.TREES_SUFFIX")
    parser.add_argument("--form", choices=FORMS, required=True)
    parser.add_argument("--preterminals", choices=PRETERMINALS, default="auto",
                        help="which POS nodes are tree nodes (see fairseq_syntax.core.trees.preorder): auto (keep "
                        "real POS tags, else a POS node only over a BPE-split word), keep, split, drop")
    parser.add_argument("--max-source-positions", type=int, default=1024,
                        help="longest source allowed, in tokens of the chosen form, fairseq's EOS included")
    parser.add_argument("--skip-invalid", action="store_true",
                        help="leave out (and count) invalid pairs instead of stopping at the first")
    return parser


class InvalidPair(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


def convert_line(
    tree_line: str, src_line: str, form: str, preterminals: str, tree_file: str, line: int
) -> Tuple[List[str], Optional[np.ndarray], str]:
    """One tree line and its BPE'd source line -> (tokens of the input form, parent array or None, the preterminal
    mode used for this tree: ``auto`` resolved to ``keep`` or ``split``)."""
    try:
        tree = trees.parse_tree(tree_line, source=tree_file, line=line)
    except trees.TreeError as e:
        raise InvalidPair("malformed tree", str(e)) from e
    pieces = group_bpe_words(src_line.split())
    leaves = tree.leaves()
    merged = [merge_pieces(p) for p in pieces]
    if merged != leaves:
        k = next((i for i, (a, b) in enumerate(zip(merged, leaves)) if a != b), min(len(merged), len(leaves)))
        source_word = merged[k] if k < len(merged) else "<end>"
        tree_word = leaves[k] if k < len(leaves) else "<end>"
        escaped = ptb_escape_token(source_word) == tree_word
        raise InvalidPair(
            "leaf/token mismatch",
            f"{tree_file}:{line}: tree leaves differ from the source words at word {k + 1}: "
            f"tree {tree_word!r}, source {source_word!r} ({len(leaves)} leaves, {len(merged)} words)"
            + ("; the tree is PTB-escaped and the source is not: escape brackets in the source the same way "
               "(( -> -LRB-, ) -> -RRB-, [ -> -LSB-, ...; fairseq_syntax.parsing.text.ptb_escape_token) before BPE"
               if escaped else ""),
        )
    segments = iter(pieces)
    tree = trees.apply_bpe(tree, lambda word: next(segments))
    resolved = trees.resolve_preterminals(tree, preterminals)
    form_out = source_form(tree, form, resolved)
    return form_out.tokens, form_out.parents, resolved


def convert_split(prefix: str, args, out_prefix: str) -> Tuple[List[np.ndarray], Counter, Counter]:
    """Writes ``out_prefix.{src,tgt}`` in the chosen form; returns parent arrays, skip counts by reason and the
    number of trees under each preterminal mode."""
    src_file, tgt_file = f"{prefix}.{args.source_lang}", f"{prefix}.{args.target_lang}"
    tree_file = f"{prefix}.{args.trees_suffix}"
    src, tgt, tree_lines = (read_lines_or_errors(path) for path in (src_file, tgt_file, tree_file))
    if not len(src) == len(tgt) == len(tree_lines):
        raise SystemExit(
            f"error: line-count mismatch: {src_file} has {len(src)} lines, {tgt_file} {len(tgt)}, "
            f"{tree_file} {len(tree_lines)}"
        )
    parents, skipped, skipped_lines, modes = [], Counter(), [], Counter()
    with open(f"{out_prefix}.{args.source_lang}", "w", encoding="utf-8") as out_src, open(
        f"{out_prefix}.{args.target_lang}", "w", encoding="utf-8"
    ) as out_tgt:
        for number, (s, t, tr) in enumerate(
            tqdm(zip(src, tgt, tree_lines), total=len(src), desc=os.path.basename(prefix), unit="sent"), start=1
        ):
            try:
                unreadable = next((line for line in (s, t, tr) if isinstance(line, TextLineError)), None)
                if unreadable is not None:
                    raise InvalidPair("unreadable line", str(unreadable))
                if not t.strip():
                    raise InvalidPair("empty target", f"{tgt_file}:{number}: empty target line")
                tokens, parent_array, mode = convert_line(tr, s, args.form, args.preterminals, tree_file, number)
                if len(tokens) + 1 > args.max_source_positions:
                    raise InvalidPair(
                        "over-long source",
                        f"{tree_file}:{number}: {len(tokens)} {args.form} tokens + EOS exceed "
                        f"--max-source-positions {args.max_source_positions}",
                    )
            except InvalidPair as e:
                if not args.skip_invalid:
                    raise SystemExit(f"error: {e}\n(use --skip-invalid to leave such pairs out and count them)")
                skipped[e.reason] += 1
                skipped_lines.append(f"{number}\t{e.reason}\t{e}")
                continue
            modes[mode] += 1
            out_src.write(" ".join(tokens) + "\n")
            out_tgt.write(t.strip() + "\n")
            if parent_array is not None:
                parents.append(parent_array)
    if skipped_lines:
        listing = f"{args.destdir}/{os.path.basename(out_prefix)}.skipped.tsv"
        with open(listing, "w", encoding="utf-8") as f:
            f.write("\n".join(skipped_lines) + "\n")
        logger.warning(f"{prefix}: skipped {sum(skipped.values())} of {len(src)} pairs {dict(skipped)}; see {listing}")
    if args.form != "sequence" and args.preterminals == "auto":
        logger.info(f"{prefix}: --preterminals auto: {modes['keep']} trees with POS tags keep their POS nodes, "
                    f"{modes['split']} without (placeholder tags {sorted(trees.PLACEHOLDER_TAGS)}) keep a POS node "
                    "only over a BPE-split word")
    return parents, skipped, modes


def write_parents(parents: List[np.ndarray], dest_prefix: str) -> None:
    from fairseq.data.indexed_dataset import MMapIndexedDatasetBuilder

    builder = MMapIndexedDatasetBuilder(dest_prefix + ".bin", dtype=np.int16)
    for array in parents:
        builder.add_item(torch.from_numpy(np.asarray(array, dtype=np.int16)))
    builder.finalize(dest_prefix + ".idx")


def check_alignment(dest_prefix_tokens: str, dest_prefix_parents: str) -> None:
    """Each parent array must have exactly one entry per binarized source token (EOS excluded)."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    tokens, parents = MMapIndexedDataset(dest_prefix_tokens), MMapIndexedDataset(dest_prefix_parents)
    if len(tokens) != len(parents) or not np.array_equal(tokens.sizes - 1, parents.sizes):
        raise SystemExit(f"internal error: {dest_prefix_parents} is not aligned with {dest_prefix_tokens}")


def main(argv: Optional[List[str]] = None) -> None:
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", level=logging.INFO)
    args, fairseq_extra = get_parser().parse_known_args(argv)
    os.makedirs(args.destdir, exist_ok=True)
    splits = []
    if args.trainpref:
        splits.append(("train", args.trainpref))
    for kind in ("valid", "test"):
        prefixes = getattr(args, f"{kind}pref")
        for k, prefix in enumerate(prefixes.split(",") if prefixes else []):
            splits.append((kind if k == 0 else f"{kind}{k}", prefix))
    if not splits:
        raise SystemExit("give at least one of --trainpref, --validpref, --testpref")

    with tempfile.TemporaryDirectory(prefix="fairseq-syntax-") as tmp:
        parents, summary = {}, {}
        for split, prefix in splits:
            try:
                parents[split], skipped, modes = convert_split(prefix, args, os.path.join(tmp, split))
            except (FileNotFoundError, TextLineError) as error:  # a missing or cut-short file: nothing to skip
                raise SystemExit(f"error: {error}") from None
            summary[split] = {"skipped": dict(skipped), "preterminal_modes": dict(modes)}

        from fairseq import options
        from fairseq_cli import preprocess as fairseq_preprocess

        fairseq_argv = ["--source-lang", args.source_lang, "--target-lang", args.target_lang,
                        "--destdir", args.destdir, "--dataset-impl", "mmap"] + fairseq_extra
        for kind in ("train", "valid", "test"):
            names = [s for s, _ in splits if s.startswith(kind)]
            if names:
                fairseq_argv += [f"--{kind}pref", ",".join(os.path.join(tmp, s) for s in names)]
        fairseq_preprocess.main(options.get_preprocessing_parser().parse_args(fairseq_argv))

    lang_pair = f"{args.source_lang}-{args.target_lang}"
    for split, _ in splits:
        tokens_prefix = os.path.join(args.destdir, f"{split}.{lang_pair}.{args.source_lang}")
        if args.form == "preorder":
            write_parents(parents[split], f"{tokens_prefix}.parents")
            check_alignment(tokens_prefix, f"{tokens_prefix}.parents")
    with open(os.path.join(args.destdir, META_FILE), "w") as f:
        json.dump({"form": args.form, "preterminals": args.preterminals, "splits": summary}, f, indent=1)
    total_skipped = sum(sum(v["skipped"].values()) for v in summary.values())
    logger.info(f"wrote {args.destdir} ({args.form}); skipped pairs: {total_skipped} {summary}")


def cli_main() -> None:
    main(sys.argv[1:])


if __name__ == "__main__":
    cli_main()
