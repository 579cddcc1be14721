"""Unlabeled bracketing F1 of induced trees in the grammar-induction convention, and recall per gold label.

The PRPN / ON-LSTM convention (Shen et al. 2018a,b), as Tree Transformer (Wang, Lee & Chen 2019, section 7.2,
Tables 1-2) follows; per-label recall is its Table 3 (after Kim et al. 2019b):

* words: a leaf counts only if its POS tag is in ``WORD_TAGS`` (ON-LSTM's), so punctuation, traces, currency
  symbols and brackets leave the sentence and the gold tree;
* gold spans: the constituents over the remaining words, as a set (unary chains count once); function tags
  stripped;
* trivial spans (single words, the whole sentence) are discarded from gold and prediction;
* sentence level: mean of per-sentence precision, recall and F1 (the headline number); no gold spans: recall 1, and
  precision 1 when nothing is predicted;
* corpus level: matched / predicted and matched / gold summed over sentences;
* label recall: per gold label, the share of its non-trivial constituents predicted (each node of a unary chain
  under its own label).

Spans are ``(start, end)``, end exclusive."""
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, Sequence, Tuple

from fairseq_syntax.core.trees import Tree, TreeError, clean_ptb

Span = Tuple[int, int]
LabeledSpan = Tuple[int, int, str]

#: POS tags of the words that count (ON-LSTM's data_ptb.py); all other leaves are removed before evaluation.
WORD_TAGS = frozenset({
    "CC", "CD", "DT", "EX", "FW", "IN", "JJ", "JJR", "JJS", "LS", "MD", "NN", "NNS", "NNP", "NNPS", "PDT", "POS",
    "PRP", "PRP$", "RB", "RBR", "RBS", "RP", "SYM", "TO", "UH", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "WDT", "WP",
    "WP$", "WRB",
})
#: The labels of the paper's Table 3.
REPORTED_LABELS = ("NP", "VP", "PP", "ADJP", "SBAR", "ADVP")


@dataclass(frozen=True)
class GoldSentence:
    words: Tuple[str, ...]  # the words that count, in order
    spans: FrozenSet[Span]  # non-trivial gold spans
    labeled_spans: FrozenSet[LabeledSpan]  # non-trivial gold constituents with their labels
    tags: Tuple[str, ...] = ()  # the POS tag of each word


def nontrivial(spans: Iterable[Span], num_words: int) -> FrozenSet[Span]:
    """``spans`` without single words and without the whole sentence."""
    return frozenset((start, end) for start, end in spans if end - start > 1 and (start, end) != (0, num_words))


def gold_sentence(tree: Tree) -> GoldSentence:
    """Words and non-trivial spans of a PTB tree under the convention above (``tree`` may still hold traces)."""
    tree = clean_ptb(tree)
    words: list = []
    tags: list = []
    labeled: set = set()

    def visit(node: Tree) -> None:
        if node.is_preterminal:
            if len(node.children) > 1:
                raise TreeError(f"({node.label} {' '.join(leaf.label for leaf in node.children)}): a POS tag over "
                                f"{len(node.children)} words; the gold tree needs one tag per word")
            if node.label in WORD_TAGS:
                words.extend(leaf.label for leaf in node.children)
                tags.append(node.label)
            return
        start = len(words)
        for child in node.children:
            if child.is_leaf:
                raise TreeError(f"word {child.label!r} has no POS tag (it is a child of ({node.label} ...))")
            visit(child)
        if len(words) - start > 1:
            labeled.add((start, len(words), node.label))

    visit(tree)
    labeled_spans = frozenset(
        (start, end, label) for start, end, label in labeled if (start, end) != (0, len(words))
    )
    return GoldSentence(tuple(words), frozenset((s, e) for s, e, _ in labeled_spans), labeled_spans, tuple(tags))


def sentence_scores(predicted: FrozenSet[Span], gold: FrozenSet[Span]) -> Tuple[float, float, float]:
    """(precision, recall, F1) of one sentence's non-trivial spans, with the empty-set rules above."""
    matched = len(predicted & gold)
    if not gold:
        recall = 1.0
        precision = 1.0 if not predicted else 0.0
    else:
        recall = matched / len(gold)
        precision = matched / len(predicted) if predicted else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return precision, recall, f1


@dataclass
class InductionScores:
    sentences: int
    sentence_precision: float  # means over sentences, in [0, 1]
    sentence_recall: float
    sentence_f1: float
    corpus_precision: float  # micro averages, in [0, 1]
    corpus_recall: float
    corpus_f1: float
    label_recall: Dict[str, Tuple[int, int]]  # label -> (gold constituents predicted, gold constituents)


def average_scores(runs: Sequence[InductionScores]) -> InductionScores:
    """The mean of several scorings of the same sentences (e.g. random trees with different seeds); label recall
    counts are summed, so their ratio is the mean recall."""
    if not runs or len({run.sentences for run in runs}) != 1:
        raise ValueError("average_scores needs at least one scoring, all of the same sentences")
    labels = sorted({label for run in runs for label in run.label_recall})
    floats = {
        name: sum(getattr(run, name) for run in runs) / len(runs)
        for name in ("sentence_precision", "sentence_recall", "sentence_f1",
                     "corpus_precision", "corpus_recall", "corpus_f1")
    }
    label_recall = {
        label: (sum(run.label_recall.get(label, (0, 0))[0] for run in runs),
                sum(run.label_recall.get(label, (0, 0))[1] for run in runs))
        for label in labels
    }
    return InductionScores(sentences=runs[0].sentences, label_recall=label_recall, **floats)


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


def score_trees(predicted: Sequence[Iterable[Span]], gold: Sequence[GoldSentence]) -> InductionScores:
    """Scores of predicted span sets against gold sentences (same order, same number)."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted trees for {len(gold)} gold trees")
    if not gold:
        raise ValueError("no sentences to score")
    totals = {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    matched = predicted_count = gold_count = 0
    label_matched: Dict[str, int] = {}
    label_total: Dict[str, int] = {}
    for index, (spans, reference) in enumerate(zip(predicted, gold)):
        num_words = len(reference.words)
        spans = list(spans)
        outside = [span for span in spans if not 0 <= span[0] < span[1] <= num_words]
        if outside:
            raise ValueError(f"sentence {index + 1} has {num_words} words but predicted spans {outside[:3]}")
        all_spans = frozenset(spans)
        scored = nontrivial(all_spans, num_words)
        for name, value in zip(("precision", "recall", "f1"), sentence_scores(scored, reference.spans)):
            totals[name] += value
        matched += len(scored & reference.spans)
        predicted_count += len(scored)
        gold_count += len(reference.spans)
        for start, end, label in reference.labeled_spans:
            label_total[label] = label_total.get(label, 0) + 1
            label_matched[label] = label_matched.get(label, 0) + ((start, end) in all_spans)
    precision, recall = _ratio(matched, predicted_count), _ratio(matched, gold_count)
    return InductionScores(
        sentences=len(gold),
        sentence_precision=totals["precision"] / len(gold),
        sentence_recall=totals["recall"] / len(gold),
        sentence_f1=totals["f1"] / len(gold),
        corpus_precision=precision,
        corpus_recall=recall,
        corpus_f1=_ratio(2 * precision * recall, precision + recall),
        label_recall={label: (label_matched[label], label_total[label]) for label in sorted(label_total)},
    )
