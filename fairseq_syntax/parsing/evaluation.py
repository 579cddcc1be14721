"""Labeled bracketing precision / recall / F1 of predicted constituency trees, EVALB style (COLLINS.prm).

Conventions, as EVALB with its standard parameter file: words whose *gold* POS tag is punctuation
(``, : `` '' .``) are deleted from both trees before spans are taken; preterminals (POS nodes) are not
brackets; ``PRT`` counts as ``ADVP``; a bracket left without words is dropped; brackets are matched as a
multiset of (label, start, end), so a unary chain counts once per node. Scores are corpus-level (micro).
Trees are compared after removing ``TOP``/``ROOT`` wrappers (the callers pass unwrapped trees).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from fairseq_syntax.core.trees import Tree

PUNCTUATION_TAGS = frozenset({",", ":", "``", "''", "."})
EQUAL_LABELS = {"PRT": "ADVP"}


def word_tags(tree: Tree) -> list[str]:
    """The label above every word (its POS tag), left to right."""
    tags: list[str] = []

    def visit(node: Tree) -> None:
        for child in node.children:
            if child.is_leaf:
                tags.append(node.label)
            else:
                visit(child)

    visit(tree)
    return tags


def labeled_brackets(tree: Tree, deleted: set[int]) -> Counter:
    """Multiset of (label, start, end) over the words not in ``deleted`` (word positions, 0-based)."""
    brackets: Counter = Counter()

    def visit(node: Tree, position: int, kept: int) -> tuple[int, int]:
        """Returns (words seen, kept words seen) after ``node``."""
        if node.is_leaf:
            return position + 1, kept + (position not in deleted)
        start = kept
        for child in node.children:
            position, kept = visit(child, position, kept)
        if not node.is_preterminal and kept > start:
            brackets[EQUAL_LABELS.get(node.label, node.label), start, kept] += 1
        return position, kept

    visit(tree, 0, 0)
    return brackets


@dataclass
class BracketScore:
    matched: int = 0
    gold: int = 0
    predicted: int = 0
    sentences: int = 0

    @property
    def precision(self) -> float:
        return self.matched / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return self.matched / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        total = self.precision + self.recall
        return 2 * self.precision * self.recall / total if total else 0.0

    def __str__(self) -> str:
        return (f"{self.sentences} sentences: P {100 * self.precision:.2f} R {100 * self.recall:.2f} F1 "
                f"{100 * self.f1:.2f} ({self.matched} matched / {self.gold} gold / {self.predicted} predicted "
                "brackets)")


def bracket_score(gold_trees: list[Tree], predicted_trees: list[Tree]) -> BracketScore:
    """Corpus-level labeled bracketing scores; the i-th trees of both lists must have the same words."""
    if len(gold_trees) != len(predicted_trees):
        raise ValueError(f"{len(gold_trees)} gold trees but {len(predicted_trees)} predicted trees")
    score = BracketScore()
    for index, (gold, predicted) in enumerate(zip(gold_trees, predicted_trees)):
        if gold.leaves() != predicted.leaves():
            raise ValueError(f"tree {index + 1}: the predicted tree has other words than the gold tree")
        deleted = {position for position, tag in enumerate(word_tags(gold)) if tag in PUNCTUATION_TAGS}
        gold_brackets, predicted_brackets = labeled_brackets(gold, deleted), labeled_brackets(predicted, deleted)
        score.matched += sum((gold_brackets & predicted_brackets).values())
        score.gold += sum(gold_brackets.values())
        score.predicted += sum(predicted_brackets.values())
        score.sentences += 1
    return score
