"""fairseq_syntax.parsing.controls: control structures over the parses' words, POS nodes and labels."""
import itertools
from collections import Counter

import gzip
import json
import os
import random

import pytest
from conftest import run_preprocess, tiny_corpus

from fairseq_syntax.core import trees
from fairseq_syntax.parsing import controls
from fairseq_syntax.parsing.dependency import read_arc_distributions

SENTENCE = "(S (NP (DT the) (NN dog)) (VP (VBZ sees) (NP (NNS cats))))"
#: the controls that draw binary X-labelled trees and make dependency side data
BINARY = ("random", "left", "right")
LONGER = ("(S (NP (DT a) (JJ big) (NN dog)) (VP (VBD saw) (NP (DT the) (NN cat)) (PP (IN in) (NP (DT the) (NN park))))"
          " (. .))")
#: a 1-best tree of "the dog sees cats" (UD labels)
BEST = [[2, "det"], [3, "nsubj"], [0, "root"], [3, "obj"]]
RECORD = {"words": ["the", "dog", "sees", "cats"],
          "arcs": [[1, 2, 0.9, {"det": 1.0}], [1, 3, 0.1, {"det": 1.0}], [2, 3, 1.0, {"nsubj": 0.8, "obj": 0.2}],
                   [3, 0, 1.0, {"root": 1.0}], [4, 3, 1.0, {"obj": 1.0}]],
          "best": BEST}


def control(text, kind, seed=1, line=1):
    return str(controls.control_tree(trees.parse_tree(text), kind, controls.line_rng(seed, line)))


def test_a_random_bracketing_of_four_words_by_hand():
    rng = random.Random("10:1")
    # the span of 4 POS nodes splits after node randrange(1, 4) = 3; its left span of 3 after randrange(1, 3) = 1;
    # spans of two nodes draw nothing
    assert (rng.randrange(1, 4), rng.randrange(1, 3)) == (3, 1)
    assert control(SENTENCE, "random", seed=10) == "(S (X (DT the) (X (NN dog) (VBZ sees))) (NNS cats))"


def test_right_and_left_branching_keep_the_root_label():
    assert control(SENTENCE, "right") == "(S (DT the) (X (NN dog) (X (VBZ sees) (NNS cats))))"
    assert control(SENTENCE, "left") == "(S (X (X (DT the) (NN dog)) (VBZ sees)) (NNS cats))"
    assert control("(FRAG (NP (NN dog)) (. .))", "random") == "(FRAG (NN dog) (. .))"


def test_one_word_and_bare_words():
    for kind in BINARY:
        assert control("(S (NP (NN dog)))", kind) == "(S (NN dog))"  # one POS node stays under the root
        assert control("(XX dog)", kind) == "(XX dog)"  # a root that is a POS node stays as it is
    # a word attached directly to a phrase (no POS node) is kept as a bare word
    assert control("(S (NP the (NN dog)) (VBZ runs))", "right") == "(S the (X (NN dog) (VBZ runs)))"


def test_a_control_tree_keeps_the_leaves_and_the_pos_nodes_with_their_tags():
    parses = [SENTENCE, LONGER, "(S (XX fa@@) (XX ther))", "(NP (XX a) (XX b) (XX c))"]
    for text in parses:
        tree = trees.parse_tree(text)
        preterminals = [str(node) for node in controls.units_and_phrases(tree)[0]]
        for kind in BINARY:
            for seed in range(1, 20):
                made = controls.control_tree(tree, kind, controls.line_rng(seed, 3))
                assert made.leaves() == tree.leaves() and made.label == tree.label
                units, inner = controls.units_and_phrases(made)
                assert [str(node) for node in units] == preterminals
                # binary above the POS nodes, every inner node but the root labelled X
                assert all(len(node.children) == 2 for node in inner)
                assert all(node.label == controls.CONTROL_LABEL for node in inner if node is not made)
    assert str(trees.parse_tree(SENTENCE)) == SENTENCE  # the parse is not changed


def test_a_random_projective_dependency_tree_of_four_words_by_hand():
    rng = random.Random("10:1")
    # span 1..4 takes head randint(1, 4) = 1 (the root); its right span 2..4 head randint(2, 4) = 4, whose left
    # span 2..3 head randint(2, 3) = 3; the one-word span 2 draws nothing (head 3)
    assert (rng.randint(1, 4), rng.randint(2, 4), rng.randint(2, 3)) == (1, 4, 3)
    assert controls.control_heads(4, "random", controls.line_rng(10, 1)) == [0, 3, 4, 1]
    made = controls.control_record(RECORD, "random", controls.line_rng(10, 1))
    # word 1 (det) is the control's root and word 3 (root) the parse's: they trade labels
    assert made["best"] == [[0, "root"], [3, "nsubj"], [4, "det"], [1, "obj"]]
    assert made["arcs"] == [[1, 0, 1.0, {"root": 1.0}], [2, 3, 1.0, {"nsubj": 1.0}], [3, 4, 1.0, {"det": 1.0}],
                            [4, 1, 1.0, {"obj": 1.0}]]
    assert made["words"] == RECORD["words"] and "fallback" not in made


def test_the_chains():
    assert controls.control_heads(4, "left", None) == [0, 1, 2, 3]
    assert controls.control_heads(4, "right", None) == [2, 3, 4, 0]
    assert controls.control_heads(1, "left", None) == controls.control_heads(1, "right", None) == [0]
    assert controls.control_heads(0, "random", random.Random(1)) == []
    assert controls.control_record(RECORD, "left", None)["best"] == [[0, "root"], [1, "nsubj"], [2, "det"],
                                                                      [3, "obj"]]
    assert controls.control_record(RECORD, "right", None)["best"] == [[2, "det"], [3, "nsubj"], [4, "obj"],
                                                                       [0, "root"]]


def _is_projective_tree(heads):
    from fairseq_syntax.parsing.dependency import _cycle

    if heads.count(0) != 1 or _cycle(heads):  # one root, every word's chain of heads reaches it
        return False
    arcs = [(min(word, head), max(word, head)) for word, head in enumerate(heads, 1) if head]
    return not any(a < c < b < d for a, b in arcs for c, d in arcs)  # no two arcs cross


def test_random_dependency_trees_are_projective_and_use_every_head_position():
    roots = set()
    for n in range(1, 13):
        for seed in range(1, 60):
            heads = controls.control_heads(n, "random", controls.line_rng(seed, n))
            assert _is_projective_tree(heads), (n, seed, heads)
            if n == 5:
                roots.add(heads.index(0))
    assert roots == set(range(5))


def test_control_side_data_is_a_one_hot_distribution_on_one_tree():
    from fairseq_syntax.parsing.dependency import _check_record

    for kind in BINARY:
        for seed in range(1, 20):
            made = controls.control_record(RECORD, kind, controls.line_rng(seed, 1))
            _check_record(made, "control", 1)  # the reader's checks
            assert sorted(dependent for dependent, *_ in made["arcs"]) == [1, 2, 3, 4]  # one head per word
            for (dependent, head, probability, labels), (best_head, best_label) in zip(made["arcs"], made["best"]):
                assert probability == 1.0 and labels == {best_label: 1.0} and head == best_head
            assert [head for head, _ in made["best"]].count(0) == 1
            assert sorted(label for _, label in made["best"]) == sorted(label for _, label in BEST)
            assert dict(made["best"])[0] == "root"


def test_a_fallback_keeps_its_reason_and_a_record_without_a_tree_is_refused():
    flat = {"words": ["a", "b", "c"], "arcs": [[k, 0, 1.0, {"dep": 1.0}] for k in (1, 2, 3)],
            "best": [[0, "dep"]] * 3, "fallback": "too long"}
    made = controls.control_record(flat, "right", None)
    assert made["best"] == [[2, "dep"], [3, "dep"], [0, "dep"]] and made["fallback"] == "too long"
    with pytest.raises(ValueError, match=r"^f.jsonl:7: the record has no 1-best tree"):
        controls.control_record({"words": ["a"], "arcs": []}, "left", None, "f.jsonl", 7)


def test_a_line_draws_from_its_own_seed_and_number_only(tmp_path):
    other = "(S (NP (DT a) (NN cat)) (VP (VBZ runs)))"
    for name, first in (("a", SENTENCE), ("b", other)):
        (tmp_path / f"{name}.tree").write_text(f"{first}\n{SENTENCE}\n{SENTENCE}\n")
        controls.control_tree_file(str(tmp_path / f"{name}.tree"), str(tmp_path / f"{name}.out"), "random", 5)
    a, b = ((tmp_path / f"{name}.out").read_text().splitlines() for name in "ab")
    assert a[1:] == b[1:] == [control(SENTENCE, "random", seed=5, line=2), control(SENTENCE, "random", seed=5, line=3)]
    assert {control(SENTENCE, "random", seed=seed) for seed in range(1, 30)} == {
        # all five binary bracketings of four POS nodes occur
        "(S (X (DT the) (X (NN dog) (VBZ sees))) (NNS cats))", "(S (X (X (DT the) (NN dog)) (VBZ sees)) (NNS cats))",
        "(S (X (DT the) (NN dog)) (X (VBZ sees) (NNS cats)))", "(S (DT the) (X (X (NN dog) (VBZ sees)) (NNS cats)))",
        "(S (DT the) (X (NN dog) (X (VBZ sees) (NNS cats))))"}


def test_bad_input_names_file_and_line(tmp_path):
    (tmp_path / "p.tree").write_text(f"{SENTENCE}\n(S (NN dog)\n")
    with pytest.raises(SystemExit, match=r"p\.tree:2: unbalanced brackets"):
        controls.main(["make", "--control", "random", str(tmp_path / "p"), str(tmp_path / "q")])
    assert not (tmp_path / "q.tree").exists() and not (tmp_path / "q.tree.partial").exists()
    with pytest.raises(SystemExit, match=r"neither .*p2\.tree nor .*p2\.arcs\.jsonl\.gz exists"):
        controls.main(["make", "--control", "left", str(tmp_path / "p2"), str(tmp_path / "q")])


@pytest.mark.parametrize("real, control", [
    ("the 10\n(S 4\n(NN 3\nmadeupword0000 0\nmadeupword0001 0\n", "the 10\n(S 4\n(NN 3\n(X 0\nmadeupword0001 0\n"),
    ("the 10\n(S 4\n", "the 10\n(S 4\n(X 0\n"),  # no filler: added at the end
])
def test_the_dictionary_takes_the_control_label_in_place_of_a_padding_filler(tmp_path, real, control):
    (tmp_path / "dict.en.txt").write_text(real)
    controls.main(["dictionary", str(tmp_path / "dict.en.txt"), str(tmp_path / "control.txt")])
    assert (tmp_path / "control.txt").read_text() == control


def test_end_to_end_the_preprocess_commands_read_the_controls_unchanged(tmp_path):
    """``make`` on a tiny parse set, then the preprocess commands on its output, and ``record_control``."""
    from conftest import arcs_record
    from fairseq.data import Dictionary
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    from fairseq_syntax.methods.ldd import preprocess as preprocess_dependencies

    real, control_dir, data = tmp_path / "real", tmp_path / "random", tmp_path / "data-bin"
    real.mkdir()
    control_dir.mkdir()
    for split, n, seed in (("train", 24, 1), ("valid", 4, 2), ("test", 4, 3)):
        tiny_corpus(str(real / split), n, seed)
        with open(real / f"{split}.en") as source, gzip.open(real / f"{split}.arcs.jsonl.gz", "wt") as arcs:
            for line in source:
                arcs.write(json.dumps(arcs_record(line.replace("@@ ", "").split())) + "\n")
        controls.main(["make", "--control", "random", "--seed", "3", str(real / split), str(control_dir / split)])
        for lang in ("en", "de"):
            os.symlink(real / f"{split}.{lang}", control_dir / f"{split}.{lang}")
    assert sorted(os.listdir(control_dir))[:3] == ["test.arcs.jsonl.gz", "test.conllu", "test.de"]

    # the record of line 2 of train is the one the function gives (the trees': test_a_line_draws_from_its_own_seed...)
    parses = list(trees.read_trees(str(real / "train.tree")))
    records = list(read_arc_distributions(str(control_dir / "train.arcs.jsonl.gz")))  # the reader's checks pass
    real_records = list(read_arc_distributions(str(real / "train.arcs.jsonl.gz")))
    assert records[1] == controls.control_record(real_records[1], "random", controls.line_rng(3, 2))
    conllu = (control_dir / "train.conllu").read_text().split("\n\n")[1].splitlines()
    assert conllu[0] == "# sent_id = 2"
    assert [row.split("\t")[6:8] for row in conllu[2:]] == [[str(head), label] for head, label in records[1]["best"]]

    splits = ("train", "valid", "test")
    run_preprocess(real, data / "preorder", "preorder", splits=splits)
    controls.main(["dictionary", str(data / "preorder" / "dict.en.txt"), str(tmp_path / "dict.preorder.txt")])
    run_preprocess(control_dir, data / "preorder.random", "preorder", "--srcdict", str(tmp_path / "dict.preorder.txt"),
                   splits=splits)
    run_preprocess(real, data / "sequence", "sequence", splits=splits)
    run_preprocess(control_dir, data / "sequence.random", "sequence", "--srcdict",
                   str(data / "sequence" / "dict.en.txt"), splits=splits)
    preprocess_dependencies.main(["--destdir", str(data / "sequence.random"), "-s", "en", "-t", "de", "--labels",
                                  "universal", "--arcs-suffix", "arcs.jsonl.gz",
                                  *(f"--{split}pref={control_dir}/{split}" for split in splits)])
    (data / "preorder.random" / "parsers.json").write_text('{"constituency": {"model": "gold"}}\n')
    for name in ("preorder.random", "sequence.random"):
        controls.record_control(str(data / name), "random", 3)

    # the same dictionary (plus "(X" in a filler's place) and, for the sequence form, the same tokens
    real_dict, control_dict = (Dictionary.load(str(data / name / "dict.en.txt")) for name in ("preorder",
                                                                                              "preorder.random"))
    real_symbols, control_symbols = ([d[k] for k in range(len(d))] for d in (real_dict, control_dict))
    assert [symbol for symbol in control_symbols if symbol not in real_symbols] == ["(X"]
    assert all(control_dict.index(symbol) == k for k, symbol in enumerate(real_symbols)
               if not symbol.startswith(controls.PADDING_FILLER))
    for split in ("train", "test"):
        tokens = [MMapIndexedDataset(str(data / name / f"{split}.en-de.en")) for name in ("sequence",
                                                                                         "sequence.random")]
        assert [item.tolist() for item in tokens[0]] == [item.tolist() for item in tokens[1]]
        assert os.path.exists(data / "sequence.random" / f"{split}.en-de.en.ldd.bin")
    first = MMapIndexedDataset(str(data / "preorder.random" / "train.en-de.en"))[0].tolist()
    assert control_dict.string(first[:-1]).split() == trees.preorder(
        trees.apply_bpe(controls.control_tree(parses[0], "random", controls.line_rng(3, 1)),
                        lambda word: {"father": ["fa@@", "ther"]}.get(word, [word])))[0]

    syntax = json.loads((data / "sequence.random" / "syntax.json").read_text())
    assert syntax["control"] == {"structure": "random", "seed": 3} and syntax["form"] == "sequence" and "ldd" in syntax
    assert json.loads((data / "preorder.random" / "parsers.json").read_text()) == {
        "constituency": {"model": "gold"}, "control": {"structure": "random", "seed": 3}}
    assert json.loads((data / "sequence.random" / "parsers.json").read_text()) == {
        "control": {"structure": "random", "seed": 3}}
    with pytest.raises(ValueError, match="records the control .* not .*'left'"):
        controls.record_control(str(data / "preorder.random"), "left", 1)


# --- the structure-only control
def test_a_structure_only_tree_of_four_words_by_hand():
    rng = random.Random("1:1")
    # the parse's phrases S, NP, VP, NP have 2, 2, 2, 1 children; with the 4 POS nodes (0 children) shuffled:
    counts = [2, 2, 2, 1, 0, 0, 0, 0]
    rng.shuffle(counts)
    labels = ["NP", "VP", "NP"]  # the phrase labels but the root's, in preorder
    rng.shuffle(labels)
    assert (counts, labels) == ([2, 0, 1, 0, 2, 2, 0, 0], ["VP", "NP", "NP"])
    # count - 1: 1 -1 0 -1 1 1 -1 -1, partial sums 1 0 0 -1 0 1 0 -1: the first minimum is at position 4, so the
    # tree's preorder counts start after it: 2 2 0 0 | 2 0 1 0, i.e. root(x(DT NN) x(VBZ x(NNS)))
    assert controls.lukasiewicz_rotation(counts) == [2, 2, 0, 0, 2, 0, 1, 0]
    assert control(SENTENCE, "struct") == "(S (VP (DT the) (NN dog)) (NP (VBZ sees) (NP (NNS cats))))"


def _shape(tree):
    """(phrase labels, sorted; child counts of the phrases, sorted; units)"""
    units, phrases = controls.units_and_phrases(tree)
    return (sorted(node.label for node in phrases), sorted(len(node.children) for node in phrases),
            [str(node) for node in units])


def test_a_structure_only_tree_keeps_phrases_arities_labels_and_words():
    unary = "(S (NP (NNP John)) (VP (VBZ runs)) (. .))"
    for text in (SENTENCE, LONGER, unary, "(S (NP the (NN dog)) (VBZ runs))"):
        tree = trees.parse_tree(text)
        seen = set()
        for seed in range(1, 40):
            made = controls.control_tree(tree, "struct", controls.line_rng(seed, 2))
            assert _shape(made) == _shape(tree) and made.label == tree.label and made.leaves() == tree.leaves()
            seen.add(str(made))
        assert len(seen) > 1, text  # the structure does change
    # one phrase over the words, or one word: the parse is its own control
    for text in ("(S (NP (NN dog)))", "(NP (DT a) (NN dog))", "(XX dog)"):
        assert control(text, "struct") == text


def test_every_arrangement_of_the_counts_rotates_to_one_tree_each_tree_equally_often():
    # a unary and a binary phrase over two words: three trees, (U (B a b)) = 1 2 0 0, (B (U a) b) = 2 1 0 0 and
    # (B a (U b)) = 2 0 1 0; each of the 4! / 2! = 12 arrangements rotates to one of them, each 12 / 3 = 4 times
    arrangements = set(itertools.permutations([2, 1, 0, 0]))
    rotated = Counter(tuple(controls.lukasiewicz_rotation(list(a))) for a in arrangements)
    assert rotated == {(1, 2, 0, 0): 4, (2, 1, 0, 0): 4, (2, 0, 1, 0): 4}
    # the parse's four phrases (2, 2, 2, 1 children) over four words: 8! / (3! 1! 4!) = 280 arrangements, 35 trees
    rotated = Counter(tuple(controls.lukasiewicz_rotation(list(a))) for a in set(itertools.permutations(
        [2, 2, 2, 1, 0, 0, 0, 0])))
    assert len(rotated) == 35 and set(rotated.values()) == {8}
    with pytest.raises(ValueError, match="sum to 3, a tree of 3 nodes needs 2"):
        controls.lukasiewicz_rotation([2, 1, 0])


def test_the_draws_are_uniform_over_the_three_trees():
    tree = trees.parse_tree("(S (NP (DT the) (NN dog)))")  # S has 1 child, NP 2: the three trees above
    drawn = Counter(control(str(tree), "struct", seed=seed) for seed in range(1, 3001))
    assert set(drawn) == {"(S (NP (DT the) (NN dog)))", "(S (NP (DT the)) (NN dog))", "(S (DT the) (NP (NN dog)))"}
    # 1,000 each expected, binomial sd 26: within 150 of it
    assert all(850 <= count <= 1150 for count in drawn.values()), drawn


def test_the_structure_only_control_makes_no_dependency_data(tmp_path, capsys):
    with pytest.raises(ValueError, match="struct control changes the trees only, not the arcs"):
        controls.control_record(RECORD, "struct", random.Random(1))
    (tmp_path / "p.tree").write_text(SENTENCE + "\n")
    with gzip.open(tmp_path / "p.arcs.jsonl.gz", "wt") as out:
        out.write(json.dumps(RECORD) + "\n")
    controls.main(["make", "--control", "struct", str(tmp_path / "p"), str(tmp_path / "q")])
    assert (tmp_path / "q.tree").read_text() == control(SENTENCE, "struct") + "\n"
    assert not (tmp_path / "q.arcs.jsonl.gz").exists()
    assert "p.arcs.jsonl.gz: left as it is (the struct control changes the trees only)" in capsys.readouterr().err


# --- measures
def test_tree_and_dependency_shapes_by_hand():
    # S, NP, VP, NP; the longest path S -> VP -> NP -> (NNS cats) passes 3 phrases
    assert controls.tree_shape(trees.parse_tree(SENTENCE)) == (4, 3)
    assert controls.tree_shape(trees.parse_tree("(XX dog)")) == (0, 0)
    # the dog sees cats: heads 2 3 0 3 -> words 2 and 3 head others; the -> dog -> sees is 3 words deep; every arc
    # joins neighbours
    assert controls.dependency_shape([2, 3, 0, 3]) == (2, 3, [1, 1, 1])
    # the random control of line 1 under seed 10 (test above): heads 0 3 4 1: words 1, 3, 4 head; 1 <- 4 <- 3 <- 2
    assert controls.dependency_shape([0, 3, 4, 1]) == (3, 4, [1, 1, 3])
    with pytest.raises(ValueError, match="cycle"):
        controls.dependency_shape([2, 1])


def test_stats_of_the_parse_and_its_controls(tmp_path):
    (tmp_path / "test.tree").write_text(SENTENCE + "\n")
    with gzip.open(tmp_path / "test.arcs.jsonl.gz", "wt") as out:
        out.write(json.dumps(RECORD) + "\n")
    rows = controls.structure_stats(str(tmp_path / "test"), ["random", "struct"], [10])
    shapes = [(row["structure"], row["seed"], row["kind"], row["inner_nodes"], row["depth"], row["arc_length"])
              for row in rows]
    # random seed 10 of line 1: (S (X (DT the) (X (NN dog) (VBZ sees))) (NNS cats)), 3 phrases, 3 deep;
    # struct keeps the 4 phrases; the dependency rows are the shapes of the test above
    drawn = controls.control_tree(trees.parse_tree(SENTENCE), "struct", controls.line_rng(10, 1))
    struct = controls.tree_shape(drawn)
    assert shapes == [("parse", None, "trees", 4, 3, None), ("random", 10, "trees", 3, 3, None),
                      ("struct", 10, "trees", 4, struct[1], None), ("parse", None, "arcs", 2, 3, 1.0),
                      ("random", 10, "arcs", 3, 4, 5 / 3)]
    controls.main(["stats", str(tmp_path / "test"), "--controls", "random", "--seeds", "10", "--out",
                   str(tmp_path / "structures.md")])
    table = (tmp_path / "structures.md").read_text()
    assert "| random | 10 | dependency: words with a dependent | 1 | 3.00 | 4.00 | 1.67 |" in table
    assert "| parse | – | constituency: phrases above the POS nodes | 1 | 4.00 | 3.00 | – |" in table
    assert json.loads((tmp_path / "structures.json").read_text())["rows"][1]["inner_nodes"] == 3


def test_the_parsers_summary_of_a_run_record_names_its_control():
    from fairseq_syntax.parsing.provenance import summary

    assert summary({"constituency": {"model": "crf-con.pt"}, "control": {"structure": "random", "seed": 2}}) == (
        "constituency crf-con.pt; control random (seed 2)")
    assert summary({"control": {"structure": "left", "seed": 1}}) == "control left"


def test_a_control_runs_data_directory_is_named_by_its_training_seed():
    """Seed 1 reads DATA.CONTROL, seed K DATA.CONTROL-sK; controls that draw nothing have one directory (the
    for-seed command: test_methods' test_a_control_run_reads_the_structures_of_its_training_seed)."""
    from fairseq_syntax.core.control_kinds import control_data_name, control_seed_for_run

    assert [control_data_name("sequence", "random", seed) for seed in (1, 2, 5)] == [
        "sequence.random", "sequence.random-s2", "sequence.random-s5"]
    assert control_data_name("preorder", "struct", 3) == "preorder.struct-s3"
    assert control_data_name("preorder", "left", 4) == "preorder.left"
    assert (control_seed_for_run("random", 4), control_seed_for_run("right", 4)) == (4, 1)
    with pytest.raises(ValueError, match="positive"):
        control_data_name("sequence", "random", 0)
