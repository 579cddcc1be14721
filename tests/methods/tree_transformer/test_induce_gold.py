"""fairseq-syntax-induce refuses a ``--gold`` that is not the trees of its ``--input``: the whole file (under half its
words match) and sentence by sentence (above ``--max-differing``, else a warning)."""
import gzip
import itertools
import os
import runpy
import subprocess

import pytest
from conftest import REPO

from fairseq_syntax.core.trees import parse_tree, read_ptb, to_bracketed
from fairseq_syntax.methods.tree_transformer.induce import (
    MAX_DIFFERING_SENTENCES,
    MIN_MATCHING_WORDS,
    build_parser,
    check_alignment,
    check_sentences,
    cli_main,
    differing_sentences,
    word_matches,
)
from fairseq_syntax.methods.tree_transformer.parseval import gold_sentence

SHARED = os.path.join(os.path.dirname(REPO), "shared", "data")
SAMPLE_TREES = 400  # the first trees of the PTB sample: reading them takes a second, not the whole sample's ten
GOLD_TREES = [
    "(S (NP (DT the) (NN cat)) (VP (VBD saw) (NP (DT a) (NN dog))) (. .))",
    "(S (NP (DT a) (NN man)) (VP (VBD liked) (NP (DT the) (NN bird))))",
    "(S (NP (DT the) (NN dog)) (VP (VBD chased) (NP (DT a) (NN woman))))",
    "(S (NP (DT the) (NN bird)) (VP (VBD sang)) (. .))",
]
# lines 1 and 2 are their trees' sentences; 3 and 4 are other sentences of the same lengths
INPUT = ["the cat saw a dog", "a man liked the bird", "a girl found the ball", "the sun rose"]
REFUSAL = ("in.txt: 2 of 4 sentences' words differ from their gold tree's in gold.mrg (under half of a sentence's "
           "words match; first: line 3)")


@pytest.mark.parametrize("word, gold_word, matches", [
    ("pierre", "Pierre", True), ("N", "61", True), ("N", "10-year", True), ("Ns", "1980s", True),
    ("<unk>", "Vinken", True), ("pierre", "Vinken", False), ("N", "years", False), ("years", "61", False),
])
def test_a_word_matches_its_gold_word_as_the_recipes_write_it(word, gold_word, matches):
    assert word_matches(word, gold_word) is matches


def test_a_gold_file_of_other_word_orders_is_refused_with_its_count():
    gold = [gold_sentence(parse_tree(tree)) for tree in GOLD_TREES]
    reversed_words = [list(reversed(reference.words)) for reference in gold]
    # by hand: the middle word of each sentence (5 + 5 + 5 + 3 words) keeps its place
    with pytest.raises(ValueError) as error:
        check_alignment(reversed_words, gold, "in.txt", "gold.mrg")
    assert str(error.value) == (
        "gold.mrg: 4 of 18 words match those of in.txt (22.2%; a word matches ignoring case, with digits as N, or as "
        "<unk>): not the gold trees of these sentences: give the trees the sentences were taken from, in their order")
    # 9 of 18 (a half) pass: the first sentence, "a man _ the" of the second, the third's middle word, the fourth none
    half = [list(gold[0].words), ["a", "man", "bird", "the", "liked"], list(reversed(gold[2].words)),
            ["sang", "the", "bird"]]
    assert sum(word_matches(w, g) for line, reference in zip(half, gold) for w, g in zip(line, reference.words)) == 9
    assert MIN_MATCHING_WORDS == 0.5
    check_alignment(half, gold, "in.txt", "gold.mrg")


@pytest.fixture(scope="module")
def ptb_recipe(tmp_path_factory):
    """(gold file, input file, gold sentences): the first SAMPLE_TREES PTB sample trees and their ptb.txt words."""
    if not os.path.isdir(os.path.join(SHARED, "ptb-sample")):
        pytest.skip(f"{SHARED} not present")
    mikolov = runpy.run_path(os.path.join(REPO, "examples", "ptb_induction", "make_corpus.py"))["mikolov"]
    vocabulary = {word for split in ("valid", "test")
                  for line in gzip.open(os.path.join(SHARED, "ptb-lm", f"ptb.{split}.txt.gz"), "rt", encoding="utf-8")
                  for word in line.split()}
    trees = list(itertools.islice(read_ptb(os.path.join(SHARED, "ptb-sample", "wsj_0001-0159.mrg.gz")), SAMPLE_TREES))
    gold = [gold_sentence(tree) for tree in trees]
    root = tmp_path_factory.mktemp("ptb_recipe")
    (root / "gold.mrg").write_text("".join(to_bracketed(tree) + "\n" for tree in trees))
    (root / "ptb.txt").write_text("".join(" ".join(mikolov(list(reference.words), vocabulary)) + "\n"
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


def test_half_the_trees_of_other_sentences_pass_the_whole_file_rule_but_not_the_sentence_count():
    gold = [gold_sentence(parse_tree(tree)) for tree in GOLD_TREES]
    words = [line.split() for line in INPUT]
    # by hand: lines 1-2 match 5 + 5 words, line 3 none of 5, line 4 1 of 3: 11 of 18, over half
    check_alignment(words, gold, "in.txt", "gold.mrg")
    assert differing_sentences(words, gold) == [3, 4]  # 0 < 5 / 2 and 1 < 3 / 2
    with pytest.raises(ValueError) as error:
        check_sentences(words, gold, "in.txt", "gold.mrg")
    assert str(error.value) == (
        f"{REFUSAL}: more than --max-differing 0.05 of them: give the trees the sentences were taken from, in their "
        "order (or a larger --max-differing)")
    assert check_sentences(words, gold, "in.txt", "gold.mrg", max_differing=0.5) == [3, 4]  # 2 of 4 is not above
    assert check_sentences(words[:2], gold[:2], "in.txt", "gold.mrg") == []
    assert MAX_DIFFERING_SENTENCES == 0.05


def induce(*extra):
    """fairseq-syntax-induce in this process: what it wrote to stderr before the one line it stopped with."""
    with pytest.raises(SystemExit) as stopped:
        cli_main(["model.pt", "--input", "in.txt", "--gold", "gold.mrg", *extra])
    return str(stopped.value)


def test_the_command_warns_of_one_sentence_in_25_and_goes_on(tmp_path, monkeypatch, capsys):
    # 24 pairs that match, then line 25 from another sentence: 1 of 25 (4%) is not above 5%
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("".join(line + "\n" for line in INPUT[:2] * 12 + ["a girl found the ball"]))
    (tmp_path / "gold.mrg").write_text("".join(tree + "\n" for tree in GOLD_TREES[:2] * 12 + [GOLD_TREES[2]]))
    (tmp_path / "model.pt").write_bytes(b"")  # the lines below come before any model is loaded
    # the model comes next: the check did not stop the run
    assert induce() == ("error: model.pt is cut short (0 bytes): a run killed while writing it leaves it so; there "
                        "is no whole checkpoint beside it")
    assert capsys.readouterr().err == ("warning: in.txt: 1 of 25 sentences' words differ from their gold tree's in "
                                       "gold.mrg (under half of a sentence's words match; first: line 25)\n")
    assert induce("--max-differing", "0") == (  # above the threshold: one line, before any model is read
        "error: in.txt: 1 of 25 sentences' words differ from their gold tree's in gold.mrg (under half of a sentence's "
        "words match; first: line 25): more than --max-differing 0 of them: give the trees the sentences were taken "
        "from, in their order (or a larger --max-differing)")
    assert capsys.readouterr() == ("", "")
    assert induce("--max-differing", "2") == "error: --max-differing 2: a share of the sentences, in [0, 1]"


def test_the_help_says_where_it_refuses():
    text = " ".join(build_parser().format_help().split())
    assert ("--max-differing SHARE refuse --gold when more than this share of the sentences differ from their gold "
            "tree (under half of a sentence's words match it); fewer are warned of in one line (default 0.05)") in text
