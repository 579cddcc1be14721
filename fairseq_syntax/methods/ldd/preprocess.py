"""``fairseq-syntax-preprocess-dependencies``: add the labeled dependency distributions (Pu & Sima'an 2022, section
3.1) of each source sentence to an existing data directory of the ``sequence`` form.

Inputs per split prefix ``P``: ``P.SRC`` (the BPE'd source the directory was made from) and ``P.ARCS_SUFFIX`` (the
parser's side data, ``fairseq_syntax.parsing.dependency``), both without the lines ``{split}.skipped.tsv`` names
(left unread). Each record's words must equal the source tokens with BPE merged, and the BPE token count the
binarized sentence's. Labels are summed into the 16 groups of Appendix A; pairs ``(dependent, head, group)`` below
``--floor`` are dropped; the 1-best tree (``best``) is stored where the file has it. Output:
``{split}.SRC-TGT.SRC.ldd.{bin,idx}`` (:mod:`.side_input`) and per split a report of the probability mass (in the
file, outside the groups by label, retained after floor and quantisation), the parser's fallbacks (kept; the paper
drops them) and records without a 1-best tree. ``--labels`` and ``--floor`` are recorded in ``syntax.json``
(``"ldd"``) for ``fairseq-interactive``; a later run must use the same."""
import argparse
import logging
import math
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np
import torch

from fairseq_syntax.core.bpe import group_bpe_words, merge_pieces
from fairseq_syntax.core.data_dir import (
    META_FILE,
    SIDE_DATA_KEY,
    add_split_arguments,
    read_meta,
    read_skipped_lines,
    skipped_listing,
    source_prefix,
    split_prefixes,
    with_side_data,
    write_meta,
)
from fairseq_syntax.core.side_data import side_data_builder
from fairseq_syntax.core.stopping import stopping_cleanly
from fairseq_syntax.core.text_lines import TextLineError, iter_lines_or_errors, read_lines_or_errors
from fairseq_syntax.methods.ldd import distributions as dependency
from fairseq_syntax.methods.ldd.side_input import (
    LDD_META_KEY,
    QUANTISATION,
    STORAGE_DTYPE,
    decode_sentence,
    record_item,
)
from fairseq_syntax.parsing.dependency import read_arc_distributions

logger = logging.getLogger("fairseq_syntax.preprocess_dependencies")

SUFFIX = "ldd"
DEFAULT_FLOOR = 1e-3
#: a word whose head probabilities sum to less than this (a parser file keeps ~0.99) is named in the log
LOW_MASS = 0.5
LOW_MASS_LINES_LOGGED = 10


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fairseq-syntax-preprocess-dependencies", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--destdir", required=True,
                        help="data directory made by fairseq-syntax-preprocess --form sequence")
    add_split_arguments(parser)
    parser.add_argument("--arcs-suffix", default="arcs.jsonl", help="the parser's side data is PREFIX.ARCS_SUFFIX")
    parser.add_argument("--labels", choices=sorted(dependency.LABEL_TABLES), required=True,
                        help="label-group table: stanford (the paper's Appendix A) or universal (UD v2)")
    parser.add_argument("--floor", type=float, default=DEFAULT_FLOOR,
                        help="drop labeled pairs (dependent, head, group) with a smaller probability")
    return parser


@dataclass
class MassReport:
    """Probability mass summed over dependents; each dependent's full distribution has mass 1."""

    sentences: int = 0
    dependents: int = 0
    in_file: float = 0.0
    outside: float = 0.0
    stored: float = 0.0
    stored_in_groups: float = 0.0
    entries: int = 0
    outside_by_label: Counter = field(default_factory=Counter)
    fallbacks: int = 0  # sentences the parser could not parse: every word on the root, label dep (outside)
    without_best: int = 0  # records without the parser's 1-best tree (arcs files written before it was kept)
    low_mass: int = 0  # sentences with a word whose head probabilities sum to less than LOW_MASS
    left_out: int = 0  # source lines fairseq-syntax-preprocess --skip-invalid left out ({split}.skipped.tsv)

    def lines(self, split: str) -> List[str]:
        def share(mass: float) -> float:
            return 100 * mass / max(self.dependents, 1)

        top = ", ".join(f"{label} {share(mass):.2f}%" for label, mass in self.outside_by_label.most_common(8))
        left_out = (f"{split}: {self.left_out} lines that fairseq-syntax-preprocess skipped ({split}.skipped.tsv) are "
                    "left out of the source and the arcs file")
        return ([left_out] if self.left_out else []) + [
            f"{split}: {self.sentences} sentences, {self.dependents} words, {self.entries} entries "
            f"({self.entries / max(self.dependents, 1):.2f} per word)",
            f"{split}: mass in the arcs file {share(self.in_file):.2f}%; outside the 16 groups "
            f"{share(self.outside):.2f}% ({top or 'none'})",
            f"{split}: retained after floor and quantisation {share(self.stored):.2f}% "
            f"(in the 16 groups {share(self.stored_in_groups):.2f}%)",
            f"{split}: {self.fallbacks} sentences fell back to the flat parse (every word on the root with label "
            "dep, outside the groups: the 16 heads see zeros for them; kept, so every pair of the data directory "
            "has its side data)",
        ] + ([f"{split}: {self.low_mass} sentences have a word whose head probabilities sum to less than "
              f"{LOW_MASS} (the first {LOW_MASS_LINES_LOGGED} are named above)"] if self.low_mass else []) + (
            [f"{split}: {self.without_best} records have no 1-best tree (\"best\"): --syntax-variant udp and ldp "
              "cannot read them; re-parse with preprocess/parse_dependency.py"] if self.without_best else [])


def convert_sentence(
    record: dict, source_line: str, index: dict, floor: float, report: MassReport, arcs_file: str, line: int
) -> np.ndarray:
    """One parser record and its BPE'd source line -> the stored array; adds to ``report``."""
    pieces = group_bpe_words(source_line.split())
    merged = [merge_pieces(p) for p in pieces]
    words = record["words"]
    if merged != words:
        k = next((i for i, (a, b) in enumerate(zip(merged, words)) if a != b), min(len(merged), len(words)))
        raise SystemExit(
            f"error: {arcs_file}:{line}: the parsed words differ from the source at word {k + 1}: "
            f"parsed {words[k] if k < len(words) else '<end>'!r}, "
            f"source {merged[k] if k < len(merged) else '<end>'!r} ({len(words)} parsed, {len(merged)} source words)"
        )
    try:
        item = record_item(record, [len(p) for p in pieces], index, floor)
    except ValueError as error:
        raise SystemExit(f"error: {arcs_file}:{line}: {error}") from None

    head_mass = Counter()
    for dependent, _, probability, _ in record["arcs"]:
        head_mass[dependent] += probability
    low = [word for word in range(1, len(words) + 1) if head_mass[word] < LOW_MASS]
    if low:
        report.low_mass += 1
        if report.low_mass <= LOW_MASS_LINES_LOGGED:
            logger.warning(f"{arcs_file}:{line}: words {low} keep head probability "
                           f"{', '.join(f'{head_mass[word]:.2f}' for word in low)} (< {LOW_MASS}): was the file "
                           "cut by a high --arc-floor, or written by another tool?")
    labeled = dependency.labeled_arcs(record)
    stored = decode_sentence(item).entries
    report.sentences += 1
    report.fallbacks += "fallback" in record
    report.without_best += "best" not in record
    report.dependents += len(words)
    report.in_file += sum(arc.probability for arc in labeled)
    for arc in labeled:
        if dependency.label_group(arc.label, index) == dependency.OUTSIDE:
            report.outside += arc.probability
            report.outside_by_label[arc.label] += arc.probability
    distributions = stored[stored[:, 2] < dependency.BEST_OFFSET]
    report.stored += distributions[:, 3].sum() / QUANTISATION
    report.stored_in_groups += distributions[distributions[:, 2] != dependency.OUTSIDE, 3].sum() / QUANTISATION
    report.entries += len(distributions)
    return item


def convert_split(prefix: str, tokens_prefix: str, args, index: dict, listing: str) -> MassReport:
    """One split's side data; the lines ``listing`` (``{split}.skipped.tsv``, where it exists) names are left out of
    the source and the arcs file, as fairseq-syntax-preprocess left them out of the binarized source."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    source_file, arcs_file = f"{prefix}.{args.source_lang}", f"{prefix}.{args.arcs_suffix}"
    if not MMapIndexedDataset.exists(tokens_prefix):
        raise SystemExit(f"error: {tokens_prefix}.{{bin,idx}}: no binarized source (run fairseq-syntax-preprocess)")
    binarized = MMapIndexedDataset(tokens_prefix)
    token_sizes = np.array(binarized.sizes)  # a copy: .sizes is a view into the dataset's mmap
    del binarized
    try:
        skipped = set(read_skipped_lines(listing)) if os.path.exists(listing) else set()
        source = read_lines_or_errors(source_file)
    except (FileNotFoundError, ValueError) as error:  # a malformed listing, a gzip file cut short: FILE(:LINE)
        raise SystemExit(f"error: {error}") from None
    unreadable = next((line for number, line in enumerate(source, 1)
                       if isinstance(line, TextLineError) and number not in skipped), None)
    if unreadable is not None:
        raise SystemExit(f"error: {unreadable}")
    if not os.path.exists(arcs_file):
        raise SystemExit(f"error: {arcs_file}: no such file")
    # records are streamed; the lines are counted first, so a file of another length is refused before writing
    try:
        arcs_lines = sum(1 for _ in iter_lines_or_errors(arcs_file))
    except ValueError as error:  # a gzip file cut short
        raise SystemExit(f"error: {error}") from None
    if len(source) != arcs_lines:
        raise SystemExit(f"error: line-count mismatch: {source_file} has {len(source)} lines, {arcs_file} "
                         f"{arcs_lines}")
    records = enumerate(read_arc_distributions(arcs_file, skip=skipped), 1)

    def record_of(number: int) -> dict:
        try:
            for line, record in records:  # lines ascend: the ones between are skipped lines
                if line == number:
                    return record
        except ValueError as error:  # the reader's message names file and line
            raise SystemExit(f"error: {error}") from None
        raise SystemExit(f"error: {arcs_file} ends before line {number}")
    beyond = sorted(number for number in skipped if number > len(source))
    if beyond:
        raise SystemExit(f"error: {listing} names line {beyond[0]}, beyond the {len(source)} lines of {source_file}: "
                         "the data directory was not made from this file")
    kept = [number for number in range(1, len(source) + 1) if number not in skipped]
    if len(kept) != len(token_sizes):
        left_out = (f", {len(skipped)} of them left out by fairseq-syntax-preprocess ({listing}): {len(kept)}"
                    if skipped else f" (no {listing} names lines that fairseq-syntax-preprocess left out)")
        raise SystemExit(f"error: line-count mismatch: {source_file} and {arcs_file} have {len(source)} lines"
                         f"{left_out}, but {tokens_prefix}.bin has {len(token_sizes)} sentences: the data directory "
                         "was not made from these files")
    report = MassReport(left_out=len(skipped))
    with side_data_builder(f"{tokens_prefix}.{SUFFIX}", STORAGE_DTYPE) as builder:  # only a whole split is kept
        for number, size in zip(kept, token_sizes):
            record, line = record_of(number), source[number - 1]
            n_tokens = len(line.split())
            if n_tokens + 1 != size:
                sentence = kept.index(number) + 1
                raise SystemExit(
                    f"error: {source_file}:{number}: {n_tokens} tokens, but sentence {sentence} of "
                    f"{tokens_prefix}.bin has {size - 1} (+ EOS): the data directory was not made from this file"
                )
            item = convert_sentence(record, line, index, args.floor, report, arcs_file, number)
            builder.add_item(torch.from_numpy(item))
        if report.dependents and report.stored <= 0:
            raise SystemExit(f"error: {arcs_file}: no probability of its {report.dependents} words' distributions "
                             f"reaches --floor {args.floor:g}, so the side data would be all zeros and the model "
                             "would learn from no parse: lower --floor, or check the arcs file")
    return report


def check_floor(floor: float) -> None:
    """Stop with one line unless ``floor`` is in [1/QUANTISATION, 1) (NaN passes every comparison; at 1 the side data
    would be all zeros)."""
    if math.isnan(floor):
        raise SystemExit(f"error: --floor {floor:g} is not a number: give a probability in (0, 1) (default "
                         f"{DEFAULT_FLOOR:g})")
    if floor < 1 / QUANTISATION:
        raise SystemExit(f"error: --floor {floor:g} is below one quantisation step (1/{QUANTISATION})")
    if floor >= 1:
        raise SystemExit(f"error: --floor {floor:g} is not below 1: a distribution's probabilities reach it only "
                         f"where one takes all the mass, so nothing of the parser's uncertainty would be kept: give a "
                         f"probability in (0, 1) (default {DEFAULT_FLOOR:g})")


def record_settings(meta: dict, settings: dict, destdir: str) -> None:
    """Adds ``"ldd": settings`` to syntax.json before any split is converted; refuses settings other than those
    recorded."""
    path = os.path.join(destdir, META_FILE)
    recorded = meta.get(LDD_META_KEY)
    made = meta.get(SIDE_DATA_KEY, {}).get(SUFFIX)  # settings bind only side data made with them
    if recorded is not None and recorded != settings and made:
        raise SystemExit(
            f"error: {path}: the side data there was made with --labels {recorded['labels']} --floor "
            f"{recorded['floor']:g}, this run asks for --labels {settings['labels']} --floor {settings['floor']:g}: "
            f"use the same, or to start over remove the {LDD_META_KEY!r} entry and run again for every split"
        )
    write_meta(destdir, {**meta, LDD_META_KEY: settings})


def main(argv: Optional[List[str]] = None) -> Dict[str, MassReport]:
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", level=logging.INFO)
    args = get_parser().parse_args(argv)
    if not os.path.isdir(args.destdir):
        raise SystemExit(f"error: {args.destdir}: no such directory (run fairseq-syntax-preprocess first)")
    check_floor(args.floor)
    meta = read_meta(args.destdir)
    if meta["form"] != "sequence":
        raise SystemExit(
            f"error: {args.destdir} holds the {meta['form']!r} form; dependency side data needs 'sequence'"
        )
    settings = {"labels": args.labels, "floor": args.floor}  # what fairseq-interactive needs to convert alike
    splits = split_prefixes(args)
    record_settings(meta, settings, args.destdir)
    index = dependency.label_index(dependency.LABEL_TABLES[args.labels])
    reports = {}
    for split, prefix in splits:
        tokens_prefix = source_prefix(args.destdir, split, args.source_lang, args.target_lang)
        reports[split] = convert_split(prefix, tokens_prefix, args, index, skipped_listing(args.destdir, split))
        # recorded once the split's side data is in place: loading refuses side data syntax.json does not record
        write_meta(args.destdir, with_side_data(read_meta(args.destdir), SUFFIX, split, tokens_prefix))
        for line in reports[split].lines(split):
            logger.info(line)
    return reports


def cli_main() -> None:
    with stopping_cleanly("fairseq-syntax-preprocess-dependencies"):
        main(sys.argv[1:])


if __name__ == "__main__":
    cli_main()
