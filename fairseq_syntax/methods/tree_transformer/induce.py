"""fairseq-syntax-induce: unsupervised constituency parsing with a Tree Transformer (Wang, Lee & Chen 2019, section
6, Algorithm 1) and its grammar-induction F1 against gold trees, with trivial baselines.

``--input``: one sentence per line, the words the model reads (normalised as in training), optionally subword-nmt BPE
(a word's link to the next is the link after its last piece). Line i must hold the words of gold tree i that count
under :mod:`fairseq_syntax.methods.tree_transformer.parseval`, as many and mostly the same (:func:`word_matches`):
a ``--gold`` with under half the words matching is refused (:func:`check_alignment`, :func:`check_sentences`).

Reports, for all sentences and those of at most ``--short`` words: sentence-level mean F1 (the paper's number) and
corpus-level F1 of the induced trees and of left-branching, right-branching and random trees (:data:`RANDOM_DRAWS`,
as in Kim et al.'s code), and recall per gold label."""
import argparse
import dataclasses
import re
import sys
from itertools import accumulate
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch

from fairseq_syntax.core.bpe import BPE_JOINER, group_bpe_words, merge_pieces
from fairseq_syntax.core.model_inputs import (
    check_fits,
    encode,
    first_word_position,
    load_model,
    padded_batches,
    read_sentences,
    require_files,
)
from fairseq_syntax.core.trees import read_ptb, to_bracketed
from fairseq_syntax.methods.tree_transformer.induction import (
    Node,
    induce_tree,
    left_branching,
    random_shift_reduce_tree,
    random_tree,
    right_branching,
    to_tree,
    tree_spans,
)
from fairseq_syntax.methods.tree_transformer.link_agreement import (
    link_agreement,
    links_by_tag_pair,
)
from fairseq_syntax.methods.tree_transformer.model import tree_encoder
from fairseq_syntax.methods.tree_transformer.parseval import (
    REPORTED_LABELS,
    GoldSentence,
    InductionScores,
    average_scores,
    gold_sentence,
    score_trees,
)
from fairseq_syntax.parsing.text import open_output, write_json

#: the random trees reported, by the name of their draw (published random baselines differ in the draw)
RANDOM_DRAWS = {"uniform split": random_tree, "shift-reduce": random_shift_reduce_tree}


def merge_bpe(tokens: Sequence[str]) -> Tuple[List[str], List[int]]:
    """(words, index of each word's last token) of subword-nmt output (``pie@@ ce`` -> ``piece``)."""
    if tokens and tokens[-1].endswith(BPE_JOINER):
        raise ValueError(f"the last token {tokens[-1]!r} continues a word ('@@') but nothing follows it")
    pieces = group_bpe_words(list(tokens))
    return [merge_pieces(word) for word in pieces], [end - 1 for end in accumulate(map(len, pieces))]


def sentence_links(model, task, token_lines: Sequence[Sequence[str]], batch_size: int,
                   source: str = "<input>", append_eos: bool = True) -> List[np.ndarray]:
    """Word-level link probabilities ``L x (n-1)`` of every sentence (token links at word boundaries); with
    ``append_eos=False`` the sentence ends at its last word, as in the authors' input (no ``</s>``)."""
    encoder = tree_encoder(model)
    offset = first_word_position(task)
    sequences = [encode(task, tokens, append_eos) for tokens in token_lines]
    for line, sequence in enumerate(sequences, 1):
        check_fits(model, sequence, f"{source}:{line}")
    result: List[np.ndarray] = [np.empty(0)] * len(sequences)
    for indices, batch in padded_batches(sequences, task.source_dictionary.pad(), batch_size):
        links = encoder.link_probabilities(batch).float().cpu().numpy()  # L x B x (T-1)
        for row, index in enumerate(indices):
            _, last_pieces = merge_bpe(token_lines[index])
            result[index] = links[:, row, [offset + piece for piece in last_pieces[:-1]]]
    return result


#: the input's stand-in for a word outside the model's vocabulary (the PTB recipe's ptb-lm text): it may be any word
UNKNOWN_WORD = "<unk>"
#: the least share of the gold trees' words that must match the input's (:func:`word_matches`). On the PTB recipe's data
#: the true pairing matches 100%; reversed lines 12.1%, other sentences of the same length 9.9%, lines shifted by one
#: 7.7%, shuffled 7.2%
MIN_MATCHING_WORDS = 0.5
#: the largest share of sentences that may differ from their gold tree before --gold is refused (the PTB recipe's
#: pairing has none)
MAX_DIFFERING_SENTENCES = 0.05


def word_matches(word: str, gold_word: str) -> bool:
    """Whether the input's ``word`` can be ``gold_word`` as the recipes normalise the PTB's words (make_corpus.py):
    the same word ignoring case, a word with a digit written ``N`` (or each run of digits ``N``), or ``<unk>``."""
    gold_word = gold_word.lower()
    return word == UNKNOWN_WORD or word.lower() in (gold_word, re.sub(r"\d+", "n", gold_word)) or (
        word == "N" and any(character.isdigit() for character in gold_word))


def differing_sentences(words: Sequence[Sequence[str]], gold: Sequence[GoldSentence]) -> List[int]:
    """The 1-based lines whose words differ from their gold tree's: under :data:`MIN_MATCHING_WORDS` of them match
    (:func:`word_matches`), word by word; the sentences have the gold trees' word counts (:func:`check_alignment`)."""
    return [line for line, (sentence, reference) in enumerate(zip(words, gold), 1)
            if sum(word_matches(word, gold_word) for word, gold_word in zip(sentence, reference.words))
            < MIN_MATCHING_WORDS * len(reference.words)]


def differing_message(differing: Sequence[int], sentences: int, input_path: str, gold_path: str) -> str:
    """``K of N sentences' words differ from their gold tree's (first: line L)``, naming both files."""
    return (f"{input_path}: {len(differing)} of {sentences} sentences' words differ from their gold tree's in "
            f"{gold_path} (under half of a sentence's words match; first: line {differing[0]})")


def check_sentences(words: Sequence[Sequence[str]], gold: Sequence[GoldSentence], input_path: str, gold_path: str,
                    max_differing: float = MAX_DIFFERING_SENTENCES) -> List[int]:
    """The lines that differ from their gold tree (:func:`differing_sentences`); ``ValueError`` when they are more
    than ``max_differing`` of the sentences."""
    differing = differing_sentences(words, gold)
    if differing and len(differing) > max_differing * len(gold):
        raise ValueError(
            differing_message(differing, len(gold), input_path, gold_path)
            + f": more than --max-differing {max_differing:g} of them: give the trees the sentences were taken from, "
            "in their order (or a larger --max-differing)")
    return differing


def check_alignment(words: Sequence[Sequence[str]], gold: Sequence[GoldSentence], input_path: str,
                    gold_path: str) -> None:
    """Raise unless sentence i has as many words as gold tree i has words that count, and at least
    :data:`MIN_MATCHING_WORDS` of all words match (sentence by sentence: :func:`check_sentences`)."""
    if len(words) != len(gold):
        raise ValueError(f"{input_path} has {len(words)} sentences but {gold_path} has {len(gold)} trees")
    for line, (sentence, reference) in enumerate(zip(words, gold), 1):
        if len(sentence) != len(reference.words):
            raise ValueError(
                f"{input_path}:{line}: {len(sentence)} words, but gold tree {line} of {gold_path} has "
                f"{len(reference.words)} words that count ({' '.join(reference.words)}); write the sentences "
                "without punctuation (see fairseq_syntax.methods.tree_transformer.parseval.WORD_TAGS)"
            )
    total = sum(len(reference.words) for reference in gold)
    matching = sum(word_matches(word, gold_word) for sentence, reference in zip(words, gold)
                   for word, gold_word in zip(sentence, reference.words))
    if total and matching < MIN_MATCHING_WORDS * total:
        raise ValueError(
            f"{gold_path}: {matching} of {total} words match those of {input_path} ({100 * matching / total:.1f}%; "
            f"a word matches ignoring case, with digits as N, or as {UNKNOWN_WORD}): not the gold trees of these "
            "sentences: give the trees the sentences were taken from, in their order")


#: the thresholds tried for Algorithm 1 when a rule is chosen on a dev split (the paper's is 0.8)
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)


def candidate_rules(num_layers: int) -> Dict[str, dict]:
    """Parsing rules from one model's links: Algorithm 1 for every minimum layer and threshold, and top-down greedy
    parsing from each single layer; name -> ``induce_tree`` settings."""
    rules = {f"Algorithm 1, m={m}, threshold {t}": dict(min_layer=m, threshold=t)
             for m in range(num_layers) for t in THRESHOLDS}
    rules.update({f"greedy from layer {layer}": dict(min_layer=layer, top_layer=layer, threshold=float("inf"))
                  for layer in range(num_layers)})
    return rules


def select_rule(links: Sequence[np.ndarray], gold: Sequence[GoldSentence],
                dev: Sequence[int]) -> Tuple[str, dict, Dict[str, float]]:
    """The rule of :func:`candidate_rules` with the best mean sentence F1 on the sentences ``dev`` (ties: the first
    in candidate order); returns (name, settings, dev sentence F1 of every rule)."""
    rules = candidate_rules(links[0].shape[0])
    dev_f1 = {}
    for name, settings in rules.items():
        trees = [tree_spans(induce_tree(links[i], **settings)) for i in dev]
        dev_f1[name] = score_trees(trees, [gold[i] for i in dev]).sentence_f1
    best = max(dev_f1, key=dev_f1.get)
    return best, rules[best], dev_f1


def score_systems(systems: Dict[str, List[List[Node]]], gold: Sequence[GoldSentence],
                  keep: Sequence[int]) -> Dict[str, InductionScores]:
    """Scores of every system (a list of runs, each a tree per sentence) on the sentences ``keep``."""
    subset = [gold[i] for i in keep]
    return {
        name: average_scores([score_trees([tree_spans(run[i]) for i in keep], subset) for run in runs])
        for name, runs in systems.items()
    }


def print_report(subsets: Dict[str, Dict[str, InductionScores]]) -> None:
    """One row per system: sentence-level and corpus-level F1 (%) on each subset; then recall by gold label."""
    names = list(next(iter(subsets.values())))
    width = max(len(name) for name in names) + 2
    column = 26
    print(" " * width + "".join(f"{subset} ({next(iter(scores.values())).sentences} sent.)".ljust(column)
                                for subset, scores in subsets.items()))
    print(" " * width + "sent-F1  corpus-F1".ljust(column) * len(subsets))
    for name in names:
        cells = "".join(f"{100 * scores[name].sentence_f1:7.1f}{100 * scores[name].corpus_f1:11.1f}".ljust(column)
                        for scores in subsets.values())
        print(name.ljust(width) + cells)
    subset, scores = next(iter(subsets.items()))
    print(f"recall by gold label, %, {subset} sentences:")
    for name in names:
        recalls = scores[name].label_recall
        cells = "  ".join(
            f"{label} {100 * recalls[label][0] / recalls[label][1]:.1f}" if recalls.get(label, (0, 0))[1]
            else f"{label} -" for label in REPORTED_LABELS
        )
        print(name.ljust(width) + cells)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairseq-syntax-induce", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="tree_transformer_lm* or transformer_constituent* checkpoint")
    parser.add_argument("--input", required=True, help="sentences the model reads, one per line (BPE allowed)")
    parser.add_argument("--gold", required=True, help="gold PTB trees (.mrg, .gz allowed), aligned with --input")
    parser.add_argument("--output", help="write the induced trees here, one a line, constituents labelled X")
    parser.add_argument("--json", dest="json_out", help="write all scores to this JSON file")
    parser.add_argument("--min-layer", type=int, default=2, help="Algorithm 1's minimum layer m (default 2)")
    parser.add_argument("--threshold", type=float, default=0.8, help="breakpoint threshold (default 0.8)")
    parser.add_argument("--descend-above", type=float, default=None, metavar="P",
                        help="the authors' released variant: a half moves one layer down only when its weakest "
                             "link is above P (they use 0.7); default: always, as in the paper's Algorithm 1")
    parser.add_argument("--layer", type=int, default=None,
                        help="parse from this layer's links alone, top-down greedy (the paper's Figure 4b); "
                             "ignores --min-layer and --threshold")
    parser.add_argument("--short", type=int, default=10, help="also score sentences of at most this many words")
    parser.add_argument("--random-seeds", type=int, default=5, help="random-tree baseline: mean over this many seeds")
    parser.add_argument("--select-on-dev", type=int, default=None, metavar="K",
                        help="choose the parsing rule (Algorithm 1's m and threshold, or greedy from one layer) on "
                             "every K-th sentence (a dev split) by sentence F1, and report every system on the other "
                             "sentences only, with the paper's rule beside the chosen one")
    parser.add_argument("--without-eos", action="store_true",
                        help="read each sentence without fairseq's final </s>, as the authors' input is")
    parser.add_argument("--max-differing", type=float, default=MAX_DIFFERING_SENTENCES, metavar="SHARE",
                        help="refuse --gold when more than this share of the sentences differ from their gold tree "
                             "(under half of a sentence's words match it); fewer are warned of in one line "
                             f"(default {MAX_DIFFERING_SENTENCES:g})")
    parser.add_argument("--data", help="data dir with the model's dictionary, if it moved since training")
    parser.add_argument("--batch-size", type=int, default=32)
    return parser


def cli_main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    if not 0 <= args.max_differing <= 1:
        raise SystemExit(f"error: --max-differing {args.max_differing:g}: a share of the sentences, in [0, 1]")
    require_files({"--input": args.input, "--gold": args.gold, "the checkpoint": args.checkpoint})
    try:
        induce_and_report(args)
    except ValueError as error:  # a malformed tree, input and gold trees that do not line up: FILE:LINE: problem
        raise SystemExit(f"error: {error}") from None


def check_layers(args, num_layers: int) -> None:
    """Stop with one line before the model reads anything when the layers asked for are not the model's."""
    option, layer = ("--layer", args.layer) if args.layer is not None else ("--min-layer", args.min_layer)
    if not 0 <= layer < num_layers:
        raise SystemExit(f"error: {option} {layer}: {args.checkpoint} has {num_layers} layers, 0 to "
                         f"{num_layers - 1}: give {option} {min(max(layer, 0), num_layers - 1)} (or another of them)")


def induce_and_report(args) -> None:
    torch.set_num_threads(1)

    token_lines = read_sentences(args.input)
    words = [merge_bpe(tokens)[0] for tokens in token_lines]
    gold = [gold_sentence(tree) for tree in read_ptb(args.gold)]
    check_alignment(words, gold, args.input, args.gold)
    differing = check_sentences(words, gold, args.input, args.gold, args.max_differing)
    if differing:
        print(f"warning: {differing_message(differing, len(gold), args.input, args.gold)}", file=sys.stderr)

    model, task = load_model(args.checkpoint, args.data)
    check_layers(args, len(tree_encoder(model).layers))
    links = sentence_links(model, task, token_lines, args.batch_size, args.input, append_eos=not args.without_eos)
    num_layers = links[0].shape[0]
    if args.layer is not None:
        settings = dict(min_layer=args.layer, top_layer=args.layer, threshold=float("inf"))
    else:
        settings = dict(min_layer=args.min_layer, threshold=args.threshold, descend_above=args.descend_above)
    induced = [induce_tree(sentence, **settings) for sentence in links]
    evaluated, selection = range(len(gold)), None
    if args.select_on_dev:
        dev = [i for i in range(len(gold)) if i % args.select_on_dev == 0]
        evaluated = [i for i in range(len(gold)) if i % args.select_on_dev != 0]
        name, chosen, dev_f1 = select_rule(links, gold, dev)
        selection = {"rule": name, "settings": chosen, "dev_sentences": len(dev), "dev_sentence_f1": dev_f1}
        print(f"rule chosen on {len(dev)} dev sentences (every {args.select_on_dev}-th): {name}, dev sentence F1 "
              f"{100 * dev_f1[name]:.1f}%; the scores below are on the other {len(evaluated)} sentences")

    lengths = [len(sentence) for sentence in words]
    systems = {
        "Tree Transformer": [induced],
        "left-branching": [[left_branching(n) for n in lengths]],
        "right-branching": [[right_branching(n) for n in lengths]],
        **{f"random, {draw_name} ({args.random_seeds} seeds)": [
            [draw(n, rng) for n in lengths]
            for rng in (np.random.default_rng(seed) for seed in range(1, args.random_seeds + 1))
        ] for draw_name, draw in RANDOM_DRAWS.items()},
    }
    if selection is not None:
        systems["Tree Transformer (rule chosen on dev)"] = [  # the rule's name is in the JSON's "selection"
            [induce_tree(sentence, **selection["settings"]) for sentence in links]]
    subsets = {"all": score_systems(systems, gold, evaluated)}
    short = [index for index in evaluated if lengths[index] <= args.short]
    if short:
        subsets[f"<={args.short} words"] = score_systems(systems, gold, short)
    print(f"{args.checkpoint}: {num_layers} layers, "
          + (f"greedy from layer {args.layer}" if args.layer is not None else
             f"Algorithm 1 (min layer {args.min_layer}, threshold {args.threshold}"
             + (f", descend above {args.descend_above})" if args.descend_above is not None else ")")))
    print("F1 in %; sent-F1 = mean sentence-level F1, corpus-F1 = corpus-level F1 (trivial spans discarded)")
    print_report(subsets)
    agreement = {offset: link_agreement(links, gold, offset) for offset in (0, -1, 1)}
    print("links vs gold, per layer (Spearman's rho of a_k and minus the smallest gold constituent holding words "
          "k, k+1): " + ", ".join(f"{layer}: {rho:+.3f}" for layer, rho in enumerate(agreement[0])))
    for offset, side in ((-1, "left"), (1, "right")):
        print(f"the same with the link one pair to the {side} (a_{{k{offset:+d}}}): "
              + ", ".join(f"{layer}: {rho:+.3f}" for layer, rho in enumerate(agreement[offset])))
    tag_pairs = links_by_tag_pair(links, gold)
    print("mean link per layer of the most frequent POS tag pairs of adjacent words, and the median size of their "
          "smallest gold constituent:")
    for row in tag_pairs:
        print(f"  {' '.join(row.tags):10} {row.count:6d} pairs  links " + " ".join(f"{v:.2f}" for v in row.mean_links)
              + f"  gold size {row.median_gold_size:g}")

    if args.output:
        with open_output(args.output) as out:
            out.writelines(to_bracketed(to_tree(tree, sentence)) + "\n" for tree, sentence in zip(induced, words))
    if args.json_out:
        write_json(args.json_out, {
            "checkpoint": args.checkpoint, "input": args.input, "gold": args.gold, "layers": num_layers,
            "settings": {key: value for key, value in vars(args).items()
                         if key in ("min_layer", "threshold", "descend_above", "layer", "short", "select_on_dev",
                                    "without_eos")},
            "selection": selection,
            "differing_sentences": differing,
            "subsets": {subset: {name: dataclasses.asdict(s) for name, s in scores.items()}
                        for subset, scores in subsets.items()},
            "link_agreement": agreement[0],
            "link_agreement_shifted": {f"{offset:+d}": agreement[offset] for offset in (-1, 1)},
            "links_by_tag_pair": [dataclasses.asdict(row) for row in tag_pairs],
        }, indent=2)


if __name__ == "__main__":
    cli_main()
