"""Issue 60, item 8: ``fairseq-syntax-induce`` refuses a ``--gold`` that is not the trees of its ``--input``."""
import gzip
import importlib.util
import itertools
import os
import subprocess

import pytest
from conftest import REPO

from fairseq_syntax.core.trees import parse_tree, read_ptb, to_bracketed
from fairseq_syntax.methods.tree_transformer.induce import MIN_MATCHING_WORDS, check_alignment, word_matches
from fairseq_syntax.methods.tree_transformer.parseval import gold_sentence

SHARED = os.path.join(os.path.dirname(REPO), "shared", "data")
SAMPLE_TREES = 400  # the first trees of the PTB sample: reading them takes a second, not the whole sample's ten


@pytest.mark.parametrize("word, gold_word, matches", [
    ("pierre", "Pierre", True), ("N", "61", True), ("N", "10-year", True), ("Ns", "1980s", True),
    ("<unk>", "Vinken", True), ("pierre", "Vinken", False), ("N", "years", False), ("years", "61", False),
])
def test_a_word_matches_its_gold_word_as_the_recipes_write_it(word, gold_word, matches):
    assert word_matches(word, gold_word) is matches


def test_a_gold_file_of_other_word_orders_is_refused_with_its_count():
    gold = [gold_sentence(tree) for tree in map(parse_tree, [
        "(S (NP (DT the) (NN cat)) (VP (VBD saw) (NP (DT a) (NN dog))) (. .))",
        "(S (NP (DT a) (NN man)) (VP (VBD liked) (NP (DT the) (NN bird))))",
        "(S (NP (DT the) (NN dog)) (VP (VBD chased) (NP (DT a) (NN woman) (, ,) (NN zebra))))"])]
    reversed_words = [list(reversed(reference.words)) for reference in gold]
    # by hand: 2 of the 5 + 5 + 6 words keep their place
    with pytest.raises(ValueError) as error:
        check_alignment(reversed_words, gold, "in.txt", "gold.mrg")
    assert str(error.value) == (
        "gold.mrg: 2 of 16 words match those of in.txt (12.5%; a word matches ignoring case, with digits as N, or as "
        "<unk>): not the gold trees of these sentences: give the trees the sentences were taken from, in their order")
    check_alignment([list(reference.words) for reference in gold], gold, "in.txt", "gold.mrg")  # the true pairing
    # 8 of 16 (a half) pass: the first sentence and "a man" right, the rest reversed
    half = [list(gold[0].words), ["a", "man", "bird", "the", "liked"], list(reversed(gold[2].words))]
    assert sum(word_matches(w, g) for line, reference in zip(half, gold) for w, g in zip(line, reference.words)) == 8
    assert MIN_MATCHING_WORDS == 0.5
    check_alignment(half, gold, "in.txt", "gold.mrg")


@pytest.fixture(scope="module")
def ptb_recipe(tmp_path_factory):
    """(gold file, input file, gold sentences): the first SAMPLE_TREES PTB sample trees and their ptb.txt words."""
    if not os.path.isdir(os.path.join(SHARED, "ptb-sample")):
        pytest.skip(f"{SHARED} not present")
    spec = importlib.util.spec_from_file_location(
        "make_corpus", os.path.join(REPO, "examples", "ptb_induction", "make_corpus.py"))
    make_corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_corpus)
    vocabulary = {word for split in ("valid", "test")
                  for line in gzip.open(os.path.join(SHARED, "ptb-lm", f"ptb.{split}.txt.gz"), "rt", encoding="utf-8")
                  for word in line.split()}
    trees = list(itertools.islice(read_ptb(os.path.join(SHARED, "ptb-sample", "wsj_0001-0159.mrg.gz")), SAMPLE_TREES))
    gold = [gold_sentence(tree) for tree in trees]
    root = tmp_path_factory.mktemp("ptb_recipe")
    (root / "gold.mrg").write_text("".join(to_bracketed(tree) + "\n" for tree in trees))
    (root / "ptb.txt").write_text("".join(" ".join(make_corpus.mikolov(list(reference.words), vocabulary)) + "\n"
                                          for reference in gold))
    return root / "gold.mrg", root / "ptb.txt", gold


def test_the_ptb_recipes_own_pairing_passes(ptb_recipe):
    gold_path, input_path, gold = ptb_recipe
    words = [line.split() for line in input_path.read_text().splitlines()]
    assert sum(word == "<unk>" for line in words for word in line) > 0  # the recipe's <unk> and N are in it
    assert sum(word == "N" for line in words for word in line) > 0
    # every input word is its gold word in the recipe's preprocessing, so every word matches
    assert all(word_matches(w, g) for line, reference in zip(words, gold) for w, g in zip(line, reference.words))
    check_alignment(words, gold, str(input_path), str(gold_path))


def test_fairseq_syntax_induce_refuses_the_reversed_probe_in_one_line(ptb_recipe, tmp_path):
    gold_path, input_path, gold = ptb_recipe
    reversed_input = tmp_path / "reversed.txt"
    reversed_input.write_text("".join(" ".join(reversed(line.split())) + "\n"
                                      for line in input_path.read_text().splitlines()))
    (tmp_path / "model.pt").write_bytes(b"")  # refused before any model is loaded
    done = subprocess.run(["fairseq-syntax-induce", str(tmp_path / "model.pt"), "--input", str(reversed_input),
                           "--gold", str(gold_path)], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr and "F1" not in done.stdout
    total = sum(len(reference.words) for reference in gold)
    assert total == 8259
    # measured: 975 of the first 400 trees' words match; 12.1% over the sample (induce.MIN_MATCHING_WORDS)
    assert done.stderr.strip().splitlines() == [
        f"error: {gold_path}: 975 of {total} words match those of {reversed_input} (11.8%; a word matches ignoring "
        "case, with digits as N, or as <unk>): not the gold trees of these sentences: give the trees the sentences "
        "were taken from, in their order"]
