"""Tests for fairseq_syntax.core.trees."""
import gzip
import pickle
from pathlib import Path

import numpy as np
import pytest

from fairseq_syntax.core.trees import (
    Tree,
    TreeError,
    apply_bpe,
    clean_ptb,
    has_pos_tags,
    linearize,
    parse_tree,
    preorder,
    read_ptb,
    read_trees,
    resolve_preterminals,
    to_bracketed,
    words,
)

FATHER = "(S (NP (PRP He)) (VP (VBZ is) (NP (PRP$ my) (NN father))) (. .))"
FATHER_BPE = "(S (NP (PRP He)) (VP (VBZ is) (NP (PRP$ my) (NN fa@@ ther))) (. .))"
# shared/ lies beside the repository (as in CI)
PTB_SAMPLE = Path(__file__).resolve().parents[3] / "shared" / "data" / "ptb-sample" / "wsj_0001-0159.mrg.gz"


def split_father(word):
    return {"father": ["fa@@", "ther"]}.get(word, [word])


def rebuild(tokens, parents):
    """The tree a preorder spells (the inverse of ``preorder``): ``(X`` tokens become nodes labelled X, the other
    tokens leaves, each appended to the children of its parent. Asserts what a preorder parent array must be:
    one root first, every other parent an earlier node token."""
    assert len(tokens) == len(parents) and int(parents[0]) == -1
    nodes = [Tree(token.removeprefix("(")) for token in tokens]
    for index in range(1, len(tokens)):
        parent = int(parents[index])
        assert 0 <= parent < index and tokens[parent].startswith("("), (index, parent)
        nodes[parent].children.append(nodes[index])
    return nodes[0]


@pytest.fixture
def father():
    return parse_tree(FATHER)


@pytest.fixture
def father_bpe(father):
    return apply_bpe(father, split_father)


# --- the Tree class
def test_tree_structure_and_leaves(father):
    assert father.label == "S"
    assert [child.label for child in father.children] == ["NP", "VP", "."]
    assert father.leaves() == ["He", "is", "my", "father", "."]
    assert words(father) == ["He", "is", "my", "father", "."]
    noun_phrase = father.children[0]
    assert not noun_phrase.is_preterminal and not noun_phrase.is_leaf
    assert noun_phrase.children[0].is_preterminal
    assert noun_phrase.children[0].children[0].is_leaf
    assert not noun_phrase.children[0].children[0].is_preterminal


def test_bracketed_output_round_trips(father):
    assert to_bracketed(father) == FATHER
    assert str(father) == FATHER
    assert parse_tree(str(father)) == father


def test_bracketed_output_rejects_unwritable_words():
    with pytest.raises(TreeError, match="'a b'"):
        to_bracketed(Tree("NP", [Tree("NN", [Tree("a b")])]))
    with pytest.raises(TreeError, match="brackets"):
        to_bracketed(Tree("NP", [Tree("NN", [Tree(":)")])]))


def test_tree_error_message_and_pickling():
    error = TreeError("unbalanced brackets", "train.tree", 7)
    assert str(error) == "train.tree:7: unbalanced brackets"
    assert (error.problem, error.source, error.line) == ("unbalanced brackets", "train.tree", 7)
    assert str(TreeError("bad", "x.mrg")) == "x.mrg: bad"
    assert isinstance(error, ValueError)
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error) and copy.line == 7


# --- parsing
@pytest.mark.parametrize(
    "text",
    [
        "( (S (NP (PRP He)) (VP (VBZ left))) )",
        "(ROOT (S (NP (PRP He)) (VP (VBZ left))))",
        "(TOP (S (NP (PRP He)) (VP (VBZ left))))",
        "( (ROOT (S (NP (PRP He)) (VP (VBZ left)))) )",
    ],
)
def test_wrappers_are_removed(text):
    assert to_bracketed(parse_tree(text)) == "(S (NP (PRP He)) (VP (VBZ left)))"


def test_wrappers_kept_when_asked_or_not_single():
    assert parse_tree("(ROOT (S (NP (PRP He)) (VP (VBZ left))))", unwrap=False).label == "ROOT"
    wrapped = parse_tree("( (S (NP (PRP He)) (VP (VBZ left))) )", unwrap=False)
    assert wrapped.label == "" and wrapped.children[0].label == "S"
    # ROOT over two constituents is a real node, not a wrapper.
    assert parse_tree("(ROOT (NP (PRP He)) (VP (VBZ left)))").label == "ROOT"
    # A one-word tree under ROOT is unwrapped down to the preterminal, not further.
    assert to_bracketed(parse_tree("(ROOT (UH Hello))")) == "(UH Hello)"


def test_unary_chains_escapes_and_numeric_labels_kept():
    assert to_bracketed(parse_tree("(S (VP (VB Go)))")) == "(S (VP (VB Go)))"
    brackets = parse_tree("(NP (-LRB- -LRB-) (NN aside) (-RRB- -RRB-) (-LCB- -LCB-) (-RCB- -RCB-))")
    assert [child.label for child in brackets.children] == ["-LRB-", "NN", "-RRB-", "-LCB-", "-RCB-"]
    assert brackets.leaves() == ["-LRB-", "aside", "-RRB-", "-LCB-", "-RCB-"]
    sst = parse_tree("(3 (2 good) (2 film))")
    assert sst.label == "3" and [child.label for child in sst.children] == ["2", "2"]
    assert sst.leaves() == ["good", "film"]


@pytest.mark.parametrize(
    "text, problem",
    [
        ("(S (NP (PRP He)) (VP (VBZ left))", "1 '(' not closed"),
        ("(S (NP (PRP He))) )", "')' after the tree"),
        ("(S (NN a)) leftover", "text after the tree: 'leftover'"),
        ("   \t ", "empty input"),
        ("He left", "bare word 'He'"),
        (")", "')' without a matching '('"),
        ("(S () (NN a))", "empty brackets"),
        ("(S (NP ) (NN a))", "node (NP has no children"),
        ("(S (NP (PRP He)) ( (VBZ left)))", "node without a label"),
        ("( (S (NN a)) (S (NN b)) )", "outer wrapper '( ... )' holds 2 items"),
    ],
)
def test_malformed_trees_name_source_and_line(text, problem):
    with pytest.raises(TreeError) as caught:
        parse_tree(text, source="train.en.tree", line=42)
    assert str(caught.value).startswith("train.en.tree:42: ")
    assert problem in str(caught.value)
    assert caught.value.line == 42


def test_error_line_is_the_line_of_the_problem():
    with pytest.raises(TreeError) as caught:
        parse_tree("(S\n  (NP (PRP He))\n  (VP ))", source="a.mrg", line=10)
    assert str(caught.value).startswith("a.mrg:12: node (VP has no children;")
    # Without a line from the caller, no line is invented.
    with pytest.raises(TreeError) as caught:
        parse_tree("(S (VP ))")
    assert str(caught.value).startswith("<string>: node (VP has no children;")


def test_a_word_with_a_bracket_is_told_to_be_ptb_escaped():
    with pytest.raises(TreeError, match=r"node \(x has no children; a word containing '\(' or '\)' must be written "
                                        r"PTB-escaped, -LRB- and -RRB-"):
        parse_tree("(S (NN f(x)) (VB runs))")


# --- reading files
def test_read_trees_plain_and_gzip(tmp_path):
    lines = ["(S (NP (PRP He)) (VP (VBZ left)))", "(ROOT (UH Hello))", "(3 (2 good) (2 film))"]
    plain = tmp_path / "trees.txt"
    plain.write_text("\n".join(lines) + "\n")
    packed = tmp_path / "trees.txt.gz"
    with gzip.open(packed, "wt") as out:
        out.write("\n".join(lines) + "\n")
    expected = ["(S (NP (PRP He)) (VP (VBZ left)))", "(UH Hello)", "(3 (2 good) (2 film))"]
    assert [to_bracketed(tree) for tree in read_trees(str(plain))] == expected
    assert [to_bracketed(tree) for tree in read_trees(str(packed))] == expected
    plain.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())  # a byte order mark: not a bare word before the tree
    assert [to_bracketed(tree) for tree in read_trees(str(plain))] == expected


def test_read_trees_errors_give_line(tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_text("(S (NN a))\n(S (NN b))\n\n(S (NN c))\n")
    with pytest.raises(TreeError) as caught:
        list(read_trees(str(blank)))
    assert str(caught.value) == f"{blank}:3: blank line: expected one tree per line"
    broken = tmp_path / "broken.txt"
    broken.write_text("(S (NN a))\n(S (NN b)\n")
    with pytest.raises(TreeError) as caught:
        list(read_trees(str(broken)))
    assert str(caught.value).startswith(f"{broken}:2: unbalanced brackets")


MRG = """
( (S
    (NP-SBJ-1 (NNP Rudolph) )
    (VP (VBD was)
      (VP (VBN named)
        (S
          (NP-SBJ (-NONE- *-1) )
          (NP-PRD (DT a) (NN director) ))))
    (. .) ))

((NP (NN Yes) (. .) ))
"""


def test_read_ptb_multiline(tmp_path):
    path = tmp_path / "wsj_0003.mrg"
    path.write_text(MRG)
    trees = list(read_ptb(str(path)))
    assert [to_bracketed(tree) for tree in trees] == [
        "(S (NP-SBJ-1 (NNP Rudolph)) (VP (VBD was) (VP (VBN named) (S (NP-SBJ (-NONE- *-1)) "
        "(NP-PRD (DT a) (NN director))))) (. .))",
        "(NP (NN Yes) (. .))",
    ]


@pytest.mark.parametrize(
    "text, line, problem",
    [
        ("(S (NN a))\n\n( (S\n  (NN b)\n", 3, "2 '(' not closed in the tree starting here"),
        ("(S (NN a))\nstray words\n(S (NN b))\n", 2, "bare word 'stray'"),
        ("(S (NN a)))\n", 1, "')' without a matching '('"),
        ("(S (NN a))\n( (S\n   (NP )\n   (NN b)))\n", 3, "node (NP has no children"),
    ],
)
def test_read_ptb_errors_give_line(tmp_path, text, line, problem):
    path = tmp_path / "bad.mrg"
    path.write_text(text)
    with pytest.raises(TreeError) as caught:
        list(read_ptb(str(path)))
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert problem in str(caught.value)


@pytest.mark.skipif(not PTB_SAMPLE.exists(), reason="shared PTB sample not present")
def test_ptb_sample_counts_and_round_trips():
    trees = list(read_ptb(str(PTB_SAMPLE)))
    assert len(trees) == 3396  # SOURCES.md
    assert sum(len(tree.leaves()) for tree in trees) == 87514  # leaves incl. -NONE-
    cleaned = [clean_ptb(tree) for tree in trees]
    assert sum(len(tree.leaves()) for tree in cleaned) == 81793  # words excl. -NONE-
    assert not any("-NONE-" in to_bracketed(tree) for tree in cleaned)
    assert not any("-SBJ" in to_bracketed(tree) for tree in cleaned)
    for tree in cleaned:
        tokens, parents = preorder(tree)
        assert rebuild(tokens, parents) == tree
        assert parse_tree(to_bracketed(tree)) == tree


# --- transforms
def test_clean_ptb():
    tree = parse_tree(MRG.split("\n\n")[0])
    assert to_bracketed(clean_ptb(tree)) == (
        "(S (NP (NNP Rudolph)) (VP (VBD was) (VP (VBN named) (S (NP (DT a) (NN director))))) (. .))"
    )
    assert to_bracketed(clean_ptb(tree, strip_function_tags=False)) == (
        "(S (NP-SBJ-1 (NNP Rudolph)) (VP (VBD was) (VP (VBN named) (S (NP-PRD (DT a) (NN director))))) (. .))"
    )
    assert to_bracketed(clean_ptb(tree, remove_empty=False)) == (
        "(S (NP (NNP Rudolph)) (VP (VBD was) (VP (VBN named) (S (NP (-NONE- *-1)) (NP (DT a) (NN director))))) (. .))"
    )
    # The input tree is not changed.
    assert tree.children[0].label == "NP-SBJ-1"


def test_clean_ptb_labels_and_nested_empties():
    tree = parse_tree(
        "(S (NP-SBJ=2 (NP (-NONE- *)) (SBAR (-NONE- 0) (S (-NONE- *T*-1)))) (PP-CLR (IN of) (WHNP-2 (WDT which)))"
        " (PRN (-LRB- -LRB-) (NP=2 (CD 61-year-old)) (-RRB- -RRB-)))"
    )
    assert to_bracketed(clean_ptb(tree)) == (
        "(S (PP (IN of) (WHNP (WDT which))) (PRN (-LRB- -LRB-) (NP (CD 61-year-old)) (-RRB- -RRB-)))"
    )
    with pytest.raises(TreeError, match="no words left"):
        clean_ptb(parse_tree("(S (NP-SBJ (-NONE- *)))"))


def test_apply_bpe(father, father_bpe):
    assert to_bracketed(father_bpe) == FATHER_BPE
    assert father_bpe.children[1].children[1].children[1].is_preterminal
    assert to_bracketed(father) == FATHER  # input unchanged
    # A word whose parent also has interior children: the pieces become leaves of that parent.
    mixed = apply_bpe(parse_tree("(S (NP (PRP He)) father)"), split_father)
    assert to_bracketed(mixed) == "(S (NP (PRP He)) fa@@ ther)"
    with pytest.raises(TreeError, match="'father' gave no subwords"):
        apply_bpe(father, lambda word: [] if word == "father" else [word])


# --- preorder
@pytest.mark.parametrize("text, mode, tokens, parents", [
    (FATHER, "keep", "(S (NP (PRP He (VP (VBZ is (NP (PRP$ my (NN father (. .",
     [-1, 0, 1, 2, 0, 4, 5, 4, 7, 8, 7, 10, 0, 12]),
    # no word is split, so "split" drops every POS node, like "drop"
    (FATHER, "split", "(S (NP He (VP is (NP my father .", [-1, 0, 1, 0, 3, 3, 5, 5, 0]),
    (FATHER, "drop", "(S (NP He (VP is (NP my father .", [-1, 0, 1, 0, 3, 3, 5, 5, 0]),
    (FATHER_BPE, "keep", "(S (NP (PRP He (VP (VBZ is (NP (PRP$ my (NN fa@@ ther (. .",
     [-1, 0, 1, 2, 0, 4, 5, 4, 7, 8, 7, 10, 10, 0, 13]),
    (FATHER_BPE, "split", "(S (NP He (VP is (NP my (NN fa@@ ther .", [-1, 0, 1, 0, 3, 3, 5, 5, 7, 7, 0]),
    (FATHER_BPE, "drop", "(S (NP He (VP is (NP my fa@@ ther .", [-1, 0, 1, 0, 3, 3, 5, 5, 5, 0]),
    ("(S (VP (VB Go)))", "auto", "(S (VP (VB Go", [-1, 0, 1, 2]),
    ("(S (VP (VB Go)))", "drop", "(S (VP Go", [-1, 0, 1]),
    ("(UH Hello)", "keep", "(UH Hello", [-1, 0]),
    ("(UH Hello)", "split", "Hello", [-1]),
    ("(UH Hello)", "drop", "Hello", [-1]),
    # a split one-word sentence keeps its POS node as the one root, whatever the mode
    ("(UH Hel@@ lo)", "keep", "(UH Hel@@ lo", [-1, 0, 0]),
    ("(UH Hel@@ lo)", "split", "(UH Hel@@ lo", [-1, 0, 0]),
    ("(UH Hel@@ lo)", "drop", "(UH Hel@@ lo", [-1, 0, 0]),
])
def test_preorder_by_hand(text, mode, tokens, parents):
    got_tokens, got_parents = preorder(parse_tree(text), mode)
    assert (got_tokens, got_parents.tolist(), got_parents.dtype) == (tokens.split(), parents, np.int16)


def test_auto_keeps_real_pos_tags_and_splits_placeholder_ones():
    tagged = parse_tree("(S (NP (PRP$ my) (NN fa@@ ther)) (VP (VBZ runs)))")
    untagged = parse_tree("(S (NP (XX my) (XX fa@@ ther)) (VP (XX runs)))")  # SuPar crf-con output
    assert has_pos_tags(tagged) and not has_pos_tags(untagged)
    assert resolve_preterminals(tagged, "auto") == "keep" and resolve_preterminals(untagged, "auto") == "split"
    assert resolve_preterminals(untagged, "drop") == "drop"  # an explicit mode is taken as given
    for tree, mode in ((tagged, "keep"), (untagged, "split")):
        tokens, parents = preorder(tree)
        expected_tokens, expected_parents = preorder(tree, mode)
        assert tokens == expected_tokens and parents.tolist() == expected_parents.tolist()
        assert linearize(tree) == linearize(tree, mode)
    # by hand: the untagged tree keeps one POS node, over the split word
    tokens, parents = preorder(untagged)
    assert tokens == ["(S", "(NP", "my", "(XX", "fa@@", "ther", "(VP", "runs"]
    assert parents.tolist() == [-1, 0, 1, 1, 3, 3, 0, 6]


def test_preorder_rejects_bad_mode_and_bare_words(father):
    with pytest.raises(ValueError, match="preterminals must be one of"):
        preorder(father, "remove")
    with pytest.raises(TreeError, match="bare word 'Hello'"):
        preorder(Tree("Hello"))


def test_preorder_refuses_trees_too_long_for_int16():
    wide = Tree("S", [Tree("x") for _ in range(32767)])  # 32768 tokens with the root
    with pytest.raises(TreeError, match="32768 tokens"):
        preorder(wide)
    tokens, parents = preorder(Tree("S", [Tree("x") for _ in range(32766)]))
    assert len(tokens) == 32767 and parents[-1] == 0


# --- linearize
def test_linearize(father, father_bpe):
    assert linearize(father) == [
        "(S", "(NP", "(PRP", "He", ")", ")", "(VP", "(VBZ", "is", ")", "(NP", "(PRP$", "my", ")", "(NN", "father",
        ")", ")", ")", "(.", ".", ")", ")",
    ]  # fmt: skip
    assert linearize(father, "drop") == ["(S", "(NP", "He", ")", "(VP", "is", "(NP", "my", "father", ")", ")", ".", ")"]
    assert linearize(father_bpe, "split") == [
        "(S", "(NP", "He", ")", "(VP", "is", "(NP", "my", "(NN", "fa@@", "ther", ")", ")", ")", ".", ")",
    ]  # fmt: skip
    assert linearize(parse_tree("(UH Hello)"), "drop") == ["Hello"]


@pytest.mark.parametrize("mode", ["keep", "split", "drop"])
def test_linearize_without_closing_brackets_is_preorder(father_bpe, mode):
    assert [token for token in linearize(father_bpe, mode) if token != ")"] == preorder(father_bpe, mode)[0]


# --- parent arrays
@pytest.mark.parametrize("tree_text", [FATHER, "(UH Hello)", "(S (VP (VB Go)))", "(3 (2 good) (2 film))"])
def test_preorder_round_trips(tree_text):
    tree = parse_tree(tree_text)
    assert rebuild(*preorder(tree)) == tree
    bpe = apply_bpe(tree, split_father)
    assert rebuild(*preorder(bpe)) == bpe


# --- deep trees
DEPTH = 3000  # far past Python's recursion limit (1000): a parser's long unary chain must not be a RecursionError


def deep_chain(inner: str) -> str:
    return "(X " * DEPTH + inner + ")" * DEPTH


@pytest.mark.parametrize("mode", ["keep", "split", "drop"])
def test_trees_deeper_than_the_recursion_limit_convert_in_every_form(mode):
    tree = apply_bpe(parse_tree(deep_chain("(NN wx)")), lambda word: ["w@@", "x"])
    assert words(tree) == ["w@@", "x"]
    # (NN is over two pieces: a token under keep and split, gone under drop (the pieces hang from the last (X)
    pos = [] if mode == "drop" else ["(NN"]
    assert linearize(tree, mode) == ["(X"] * DEPTH + pos + ["w@@", "x"] + [")"] * (len(pos) + DEPTH)
    tokens, parents = preorder(tree, mode)
    assert tokens == ["(X"] * DEPTH + pos + ["w@@", "x"]
    # each (X under the one before; the pieces under the last node token, (NN at index DEPTH or the last (X
    pieces_parent = DEPTH if pos else DEPTH - 1
    assert parents.tolist() == [-1, *range(DEPTH - 1), *([DEPTH - 1] if pos else []), pieces_parent, pieces_parent]
    assert to_bracketed(tree) == deep_chain("(NN w@@ x)")


def test_clean_ptb_of_a_deep_tree():
    cleaned = clean_ptb(parse_tree(deep_chain("(NP-SBJ (NN w)) (-NONE- *T*-1)"), unwrap=False))
    assert to_bracketed(cleaned) == deep_chain("(NP (NN w))")
