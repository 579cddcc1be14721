"""``fairseq-syntax-preprocess``: a parallel corpus plus source trees -> a fairseq data directory with side data.

Per split prefix ``P``: ``P.SRC``, ``P.TGT`` (BPE'd with ``@@``) and ``P.TREES_SUFFIX`` (a tree a line over the words
of ``P.SRC``). What it checks, skips and refuses: docs/data.md."""
import argparse
import logging
import os
import shutil
import sys
from collections import Counter
from typing import List, Optional, Tuple

import numpy as np
import torch
from tqdm import tqdm

from fairseq_syntax.core import trees
from fairseq_syntax.core.bpe import BPE_META_KEY, SubwordNmtBpe, group_bpe_words, merge_pieces, record_bpe
from fairseq_syntax.core.data_dir import (
    META_FILE,
    SIDE_DATA_KEY,
    SKIPPED_SUFFIX,
    add_split_arguments,
    data_files,
    skipped_listing,
    source_prefix,
    split_prefixes,
    with_side_data,
    write_meta,
)
from fairseq_syntax.core.input_forms import FORMS, PRETERMINALS, source_form
from fairseq_syntax.core.interactive_source import (
    MIXED,
    PARSER_META_KEY,
    POS_TAGS_META_KEY,
    TAGGED,
    UNTAGGED,
)
from fairseq_syntax.core.source_parsers import BACKENDS
from fairseq_syntax.core.stopping import stopping_cleanly, temporary_directory
from fairseq_syntax.core.text_lines import TextLineError, read_lines_or_errors
from fairseq_syntax.parsing.provenance import model_digest
from fairseq_syntax.parsing.text import ptb_escape_token

logger = logging.getLogger("fairseq_syntax.preprocess")


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fairseq-syntax-preprocess",
        description=__doc__.split("\n\n")[0],
        epilog="Any other option is passed to fairseq-preprocess (e.g. --joined-dictionary, --srcdict, --workers).",
    )
    add_split_arguments(parser)
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
    parser.add_argument("--bpe-codes", metavar="CODES",
                        help="the subword-nmt BPE codes the source was segmented with (apply-bpe -c CODES): copied "
                        "into --destdir and recorded for fairseq-interactive, which segments its input alike")
    parser.add_argument("--bpe-vocabulary", metavar="VOCAB", help="with --bpe-codes: apply-bpe's --vocabulary")
    parser.add_argument("--bpe-vocabulary-threshold", type=int, metavar="N",
                        help="with --bpe-vocabulary: apply-bpe's --vocabulary-threshold")
    parser.add_argument("--parser-backend", choices=BACKENDS,
                        help="the constituency parser that made the trees (preprocess/parse_constituency.py "
                        "--backend), recorded for fairseq-interactive --source-parser")
    parser.add_argument("--parser-model", metavar="MODEL", help="with --parser-backend: its --model")
    parser.add_argument("--parser-tagger", metavar="MODEL",
                        help="with --parser-backend: its --tagger, if the trees were tagged by one")
    parser.add_argument("--overwrite", action="store_true",
                        help="--destdir holds an earlier data directory: remove its files (dictionaries, binarized "
                        "splits, side data, syntax.json, listings; no other file) once every split is converted")
    return parser


class InvalidPair(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


class BpeMismatch(Exception):
    """A source word segmented otherwise than ``--bpe-codes`` segments it: the run stops (not a pair to skip)."""


def convert_line(
    tree_line: str, src_line: str, form: str, preterminals: str, tree_file: str, line: int,
    bpe: Optional[SubwordNmtBpe] = None, src_file: str = "",
) -> Tuple[List[str], Optional[np.ndarray], str, bool]:
    """One tree line and its BPE'd source line -> (tokens of the input form, parent array or None, the resolved
    preterminal mode, whether the tree has POS tags). With ``bpe``, each word must segment as ``bpe`` segments it."""
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
    for word, word_pieces in zip(merged, pieces) if bpe is not None else ():
        if bpe.segment(word) != word_pieces:
            given = f"--bpe-codes {bpe.codes}" + (f" --bpe-vocabulary {bpe.vocabulary} --bpe-vocabulary-threshold "
                                                  f"{bpe.threshold}" if bpe.vocabulary else "")
            raise BpeMismatch(f"{src_file}:{line}: the word {word!r} is segmented {' '.join(word_pieces)!r}, but the "
                              f"BPE of {given} makes it {' '.join(bpe.segment(word))!r}: give the BPE files and "
                              "threshold the source was segmented with (subword-nmt apply-bpe's -c, --vocabulary "
                              "and --vocabulary-threshold)")
    segments = iter(pieces)
    tree = trees.apply_bpe(tree, lambda word: next(segments))
    resolved = trees.resolve_preterminals(tree, preterminals)
    form_out = source_form(tree, form, resolved)
    return form_out.tokens, form_out.parents, resolved, trees.has_pos_tags(tree)


def convert_split(prefix: str, args, out_prefix: str,
                  bpe: Optional[SubwordNmtBpe] = None) -> Tuple[List[np.ndarray], Counter, Counter, Counter]:
    """Writes ``out_prefix.{src,tgt}`` (and ``out_prefix.skipped.tsv``); returns parent arrays, skip counts by
    reason, trees per preterminal mode and with / without POS tags. A split without pairs stops the run."""
    src_file, tgt_file = f"{prefix}.{args.source_lang}", f"{prefix}.{args.target_lang}"
    tree_file = f"{prefix}.{args.trees_suffix}"
    src, tgt, tree_lines = (read_lines_or_errors(path) for path in (src_file, tgt_file, tree_file))
    if not len(src) == len(tgt) == len(tree_lines):
        raise SystemExit(
            f"error: line-count mismatch: {src_file} has {len(src)} lines, {tgt_file} {len(tgt)}, "
            f"{tree_file} {len(tree_lines)}"
        )
    parents, skipped, skipped_lines, modes, tagged = [], Counter(), [], Counter(), Counter()
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
                tokens, parent_array, mode, has_tags = convert_line(tr, s, args.form, args.preterminals, tree_file,
                                                                    number, bpe, src_file)
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
            tagged[has_tags] += 1
            out_src.write(" ".join(tokens) + "\n")
            out_tgt.write(t.strip() + "\n")
            if parent_array is not None:
                parents.append(parent_array)
    split = os.path.basename(out_prefix)
    if not src:
        raise SystemExit(f"error: {src_file}: the {split} split is empty; fairseq cannot train or validate on a split "
                         "without pairs: give it pairs, or leave the split out")
    if len(skipped_lines) == len(src):
        first = skipped_lines[0].split("\t", 2)[2]
        raise SystemExit(f"error: {prefix}: --skip-invalid left out all {len(src)} pairs of the {split} split "
                         f"{dict(skipped)}, the first: {first}; fairseq cannot train or validate on a split without "
                         "pairs")
    if skipped_lines:
        with open(out_prefix + SKIPPED_SUFFIX, "w", encoding="utf-8") as f:  # moved to --destdir with the data
            f.write("\n".join(skipped_lines) + "\n")
        logger.warning(f"{prefix}: skipped {sum(skipped.values())} of {len(src)} pairs {dict(skipped)}; see "
                       f"{skipped_listing(args.destdir, split)}")
    if args.form != "sequence" and args.preterminals == "auto":
        logger.info(f"{prefix}: --preterminals auto: {modes['keep']} trees with POS tags keep their POS nodes, "
                    f"{modes['split']} without (placeholder tags {sorted(trees.PLACEHOLDER_TAGS)}) keep a POS node "
                    "only over a BPE-split word")
    return parents, skipped, modes, tagged


def pos_tags(tagged: Counter) -> str:
    """syntax.json's ``pos_tags`` from the number of trees with POS tags (True) and without (False)."""
    return MIXED if tagged[True] and tagged[False] else TAGGED if tagged[True] else UNTAGGED


def parser_record(args, parser) -> Optional[dict]:
    """syntax.json's ``parser`` from --parser-*: a local model file by name and digest, a name as given."""
    if args.parser_backend is None:
        if args.parser_model or args.parser_tagger:
            parser.error("--parser-model and --parser-tagger describe --parser-backend's parser: give it too")
        return None
    if args.parser_model is None:
        parser.error("--parser-backend: give the parser's --parser-model too")

    def identity(model):
        if model is None or not os.path.isfile(model):
            return model
        return {"name": os.path.basename(model), "sha256": model_digest(model)}

    return {"backend": args.parser_backend, "model": identity(args.parser_model),
            "tagger": identity(args.parser_tagger)}


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


def fairseq_arguments(args, fairseq_extra: List[str]) -> List[str]:
    """The arguments of fairseq-preprocess (splits aside), checked before anything is written."""
    from fairseq import options
    from fairseq.data import Dictionary

    fairseq_argv = ["--source-lang", args.source_lang, "--target-lang", args.target_lang, "--destdir", args.destdir,
                    "--dataset-impl", "mmap"] + fairseq_extra
    given = options.get_preprocessing_parser().parse_args(fairseq_argv)  # an unknown option: argparse's one line
    if given.joined_dictionary and given.srcdict and given.tgtdict:
        raise SystemExit("error: --joined-dictionary uses one dictionary for both sides: give it as --srcdict alone "
                         "(or leave --joined-dictionary out to give --srcdict and --tgtdict)")
    for option in ("srcdict", "tgtdict"):
        path = getattr(given, option)
        if path is None:
            continue
        if not os.path.isfile(path):
            raise SystemExit(f"error: --{option} {path}: no such file")
        try:
            Dictionary.load(path)
        except (ValueError, OSError, RuntimeError) as error:
            raise SystemExit(f"error: --{option} {path}: not a fairseq dictionary (lines 'TOKEN COUNT'): "
                             f"{error}") from None
    built = [] if given.srcdict or (given.joined_dictionary and given.tgtdict) else ["source"]
    if not (given.joined_dictionary or given.tgtdict or given.only_source):
        built.append("target")
    if built and not args.trainpref:
        raise SystemExit(f"error: without --trainpref there is no training data to build the {' and '.join(built)} "
                         "dictionary from: give the training data directory's, --srcdict and --tgtdict (or --srcdict "
                         "with --joined-dictionary)")
    return fairseq_argv


def main(argv: Optional[List[str]] = None) -> None:
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", level=logging.INFO)
    args, fairseq_extra = get_parser().parse_known_args(argv)
    if os.path.exists(args.destdir) and not os.path.isdir(args.destdir):
        raise SystemExit(f"error: --destdir {args.destdir} is a file, not a directory")
    earlier = data_files(args.destdir) if os.path.isdir(args.destdir) else []
    if earlier and not args.overwrite:
        stopped = "" if META_FILE in earlier else ", without syntax.json: a run that was stopped"
        raise SystemExit(f"error: {args.destdir} already holds a data directory ({len(earlier)} files: "
                         f"{', '.join(earlier[:4])}{', ...' if len(earlier) > 4 else ''}{stopped}): remove it, "
                         "or pass --overwrite to replace those files")
    splits = split_prefixes(args)
    if args.bpe_codes is None and (args.bpe_vocabulary or args.bpe_vocabulary_threshold is not None):
        get_parser().error("--bpe-vocabulary and --bpe-vocabulary-threshold go with --bpe-codes")
    parser_entry = parser_record(args, get_parser())
    try:
        bpe = SubwordNmtBpe(args.bpe_codes, args.bpe_vocabulary, args.bpe_vocabulary_threshold) if args.bpe_codes \
            else None
    except (OSError, ValueError) as error:
        raise SystemExit(f"error: {error}") from None
    fairseq_argv = fairseq_arguments(args, fairseq_extra)  # checked before anything is written
    os.makedirs(args.destdir, exist_ok=True)

    with temporary_directory("preprocess") as tmp:
        parents, summary, tagged = {}, {}, Counter()
        for split, prefix in splits:
            try:
                parents[split], skipped, modes, split_tagged = convert_split(prefix, args, os.path.join(tmp, split),
                                                                             bpe)
            except (FileNotFoundError, TextLineError, BpeMismatch) as error:  # nothing to skip: stop
                raise SystemExit(f"error: {error}") from None
            summary[split] = {"skipped": dict(skipped), "preterminal_modes": dict(modes)}
            tagged.update(split_tagged)
        if earlier:  # every split converted: only now is the earlier data directory given up
            for name in data_files(args.destdir):
                os.remove(os.path.join(args.destdir, name))
            logger.info(f"--overwrite: removed the {len(earlier)} files of the data directory in {args.destdir}")

        from fairseq import options
        from fairseq_cli import preprocess as fairseq_preprocess

        for kind in ("train", "valid", "test"):
            names = [s for s, _ in splits if s.startswith(kind)]
            if names:
                fairseq_argv += [f"--{kind}pref", ",".join(os.path.join(tmp, s) for s in names)]
        fairseq_preprocess.main(options.get_preprocessing_parser().parse_args(fairseq_argv))
        for split, _ in splits:
            if os.path.exists(os.path.join(tmp, split + SKIPPED_SUFFIX)):
                shutil.move(os.path.join(tmp, split + SKIPPED_SUFFIX), skipped_listing(args.destdir, split))

    # an empty side_data entry still says that this directory records its side data: any other is left over
    meta = {"form": args.form, "preterminals": args.preterminals, "splits": summary, SIDE_DATA_KEY: {},
            POS_TAGS_META_KEY: pos_tags(tagged), PARSER_META_KEY: parser_entry}
    if bpe is not None:
        meta[BPE_META_KEY] = record_bpe(args.destdir, args.source_lang, args.bpe_codes, args.bpe_vocabulary,
                                        args.bpe_vocabulary_threshold)
    for split, _ in splits:
        tokens_prefix = source_prefix(args.destdir, split, args.source_lang, args.target_lang)
        if args.form == "preorder" and "--dict-only" not in fairseq_argv:  # --dict-only: no tokens to tie them to
            write_parents(parents[split], f"{tokens_prefix}.parents")
            check_alignment(tokens_prefix, f"{tokens_prefix}.parents")
            meta = with_side_data(meta, "parents", split, tokens_prefix)
    write_meta(args.destdir, meta)
    total_skipped = sum(sum(v["skipped"].values()) for v in summary.values())
    logger.info(f"wrote {args.destdir} ({args.form}); skipped pairs: {total_skipped} {summary}")


def cli_main() -> None:
    with stopping_cleanly("fairseq-syntax-preprocess"):
        main(sys.argv[1:])


if __name__ == "__main__":
    cli_main()
