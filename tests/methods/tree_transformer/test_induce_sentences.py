"""fairseq-syntax-induce warns of lines whose words differ from their gold tree's; over --max-differing: refused."""
import pytest

from fairseq_syntax.core.trees import parse_tree
from fairseq_syntax.methods.tree_transformer.induce import (
    MAX_DIFFERING_SENTENCES,
    build_parser,
    check_alignment,
    check_sentences,
    cli_main,
    differing_sentences,
)
from fairseq_syntax.methods.tree_transformer.parseval import gold_sentence

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
