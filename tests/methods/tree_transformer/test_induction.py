"""Algorithm 1 and trivial trees on hand-set links; fairseq-syntax-induce, masked-word perplexity, prior plot."""
import argparse
import json
import math
import shutil

import numpy as np
import pytest
import torch
from conftest import only_source_data, train_here
from fairseq.data import Dictionary

import fairseq_syntax
from fairseq_syntax.core.checkpoints import TRAINED_DICTIONARIES
from fairseq_syntax.core.model import tiny_architecture
from fairseq_syntax.core.model_inputs import encode, load_model
from fairseq_syntax.core.trees import parse_tree, to_bracketed
from fairseq_syntax.methods.tree_transformer import induce, masked_lm
from fairseq_syntax.methods.tree_transformer.analysis import plot_constituent_priors, sentence_priors
from fairseq_syntax.methods.tree_transformer.induction import (
    induce_tree,
    left_branching,
    random_shift_reduce_tree,
    random_tree,
    right_branching,
    to_tree,
    tree_spans,
)
from fairseq_syntax.methods.tree_transformer.model import ConstituentTransformerModel, tree_encoder
from fairseq_syntax.methods.tree_transformer.parseval import gold_sentence

# "the cute dog is wagging its tail": links k join words k and k+1; layers 0..3
CUTE_DOG = np.array([
    [0.10, 0.30, 0.05, 0.10, 0.10, 0.40],  # layer 0
    [0.40, 0.85, 0.10, 0.20, 0.30, 0.90],  # layer 1
    [0.70, 0.90, 0.20, 0.60, 0.85, 0.95],  # layer 2
    [0.95, 0.97, 0.50, 0.90, 0.90, 0.99],  # layer 3 (top)
])


def test_algorithm_1_on_hand_set_links():
    # top: weakest link 2 (0.5) -> (0..2)(3..6), both at layer 2
    assert induce_tree(CUTE_DOG, min_layer=1) == ((0, (1, 2)), (3, (4, (5, 6))))


def test_a_span_without_breakpoint_moves_down_and_stays_flat_at_the_minimum_layer():
    links = np.array([[0.85, 0.30, 0.90], [0.90, 0.95, 0.90]])
    # top layer has no link <= 0.8, so the sentence is parsed at layer 0
    assert induce_tree(links, min_layer=0) == ((0, 1), (2, 3))
    # with layer 0 discarded (m = 1) no breakpoint is left: one flat constituent
    assert induce_tree(links, min_layer=1) == (0, 1, 2, 3)
    # a lower threshold makes layer 0's 0.3 no breakpoint either
    assert induce_tree(links, min_layer=0, threshold=0.2) == (0, 1, 2, 3)


def test_released_variant_splits_again_at_the_same_layer_unless_the_half_is_strongly_linked():
    links = np.array([
        [0.10, 0.10, 0.10, 0.10],
        [0.40, 0.30, 0.20, 0.60],
        [0.60, 0.50, 0.75, 0.65],
    ])
    # paper: split at link 1 (0.5), then words 2..4 at layer 1: weakest link 2 (0.2) -> 2 | (3 4)
    assert induce_tree(links, min_layer=0) == ((0, 1), (2, (3, 4)))
    # released: words 2..4 have a link of 0.65 <= 0.7 at layer 2, so they split there: (2 3) | 4
    assert induce_tree(links, min_layer=0, descend_above=0.7) == ((0, 1), ((2, 3), 4))


def test_single_layer_greedy_parsing():
    # layer 2 alone, always splitting at the weakest link: link 2, then link 0, then links 3 and 4
    tree = induce_tree(CUTE_DOG, min_layer=2, top_layer=2, threshold=math.inf)
    assert tree == ((0, (1, 2)), (3, (4, (5, 6))))
    assert induce_tree(CUTE_DOG[:, :1], min_layer=0) == (0, 1)  # two words
    assert induce_tree(np.zeros((4, 0)), min_layer=0) == 0  # one word


def test_bad_layers_are_refused():
    with pytest.raises(ValueError, match="min_layer"):
        induce_tree(CUTE_DOG, min_layer=4)
    with pytest.raises(ValueError, match="layers x"):
        induce_tree(CUTE_DOG[0], min_layer=0)


def test_trivial_trees_and_spans():
    assert tree_spans(right_branching(4)) == [(2, 4), (1, 4), (0, 4)]
    assert tree_spans(left_branching(4)) == [(0, 2), (0, 3), (0, 4)]
    assert tree_spans(((0, 1), 2, (3, (4, 5)))) == [(0, 2), (4, 6), (3, 6), (0, 6)]
    first = random_tree(9, np.random.default_rng(3))
    assert first == random_tree(9, np.random.default_rng(3))
    spans = tree_spans(first)
    assert len(spans) == 8 and spans[-1] == (0, 9)  # binary: n - 1 constituents
    assert to_bracketed(to_tree(((0, 1), 2), ["a", "b", "c"])) == "(X (X a b) c)"
    assert to_bracketed(to_tree(0, ["hi"])) == "(X hi)"


@pytest.mark.parametrize("draw, expected", [
    # uniform split: the root splits after word 1, 2 or 3 with 1/3 each; a 3-word side splits either way, 1/2
    (random_tree, {((0, 1), (2, 3)): 1 / 3, (0, (1, (2, 3))): 1 / 6, (0, ((1, 2), 3)): 1 / 6,
                   (((0, 1), 2), 3): 1 / 6, ((0, (1, 2)), 3): 1 / 6}),
    # shift-reduce after "shift shift": left-branching, balanced, right-branching 1/4 each, the other two 1/8
    (random_shift_reduce_tree, {((0, 1), (2, 3)): 1 / 4, (0, (1, (2, 3))): 1 / 4, (0, ((1, 2), 3)): 1 / 8,
                                (((0, 1), 2), 3): 1 / 4, ((0, (1, 2)), 3): 1 / 8}),
])
def test_random_tree_draws_have_their_distributions(draw, expected):
    rng = np.random.default_rng(0)
    draws = 8000
    counts = {}
    for _ in range(draws):
        tree = draw(4, rng)
        counts[tree] = counts.get(tree, 0) + 1
    assert set(counts) == set(expected)
    for tree, probability in expected.items():  # 4 binomial standard deviations at most (about 0.02)
        assert abs(counts[tree] / draws - probability) < 4 * math.sqrt(probability * (1 - probability) / draws)
    assert draw(1, rng) == 0 and draw(2, rng) == (0, 1)


def test_bpe_pieces_join_and_links_are_taken_at_word_boundaries():
    assert induce.merge_bpe(["the", "ca@@", "t", "s@@", "a@@", "t"]) == (["the", "cat", "sat"], [0, 2, 5])
    with pytest.raises(ValueError, match="nothing follows"):
        induce.merge_bpe(["ca@@"])


def test_sentence_links_of_a_translation_model_on_bpe_input():
    class Task:  # a translation task: sentences are "w_1 .. w_n </s>"
        source_dictionary = target_dictionary = Dictionary()

    for symbol in "the ca@@ t sa@@ t a dog".split():
        Task.source_dictionary.add_symbol(symbol)
    args = argparse.Namespace()
    tiny_architecture(args)
    model = ConstituentTransformerModel.build_model(args, Task()).eval()
    lines = [["the", "ca@@", "t", "sa@@", "t"], ["a", "dog"]]
    links = induce.sentence_links(model, Task(), lines, batch_size=2)
    token_links = model.encoder.link_probabilities(encode(Task(), lines[0])[None])[:, 0]  # L x 5
    # words end at tokens 0 ("the"), 2 ("t" of cat), 4; the word links follow tokens 0 and 2
    assert links[0].shape == (2, 2) and np.allclose(links[0], token_links[:, [0, 2]].numpy(), atol=1e-5)
    assert links[1].shape == (2, 1)


# --- a tiny trained model
SENTENCES = ["the cat saw a dog", "a man liked the bird", "the dog chased a woman zebra"]
GOLD = [
    "( (S (NP (DT the) (NN cat)) (VP (VBD saw) (NP (DT a) (NN dog))) (. .)) )",
    "(S (NP (DT a) (NN man)) (VP (VBD liked) (NP (DT the) (NN bird))))",
    "(S (NP (DT the) (NN dog)) (VP (VBD chased) (NP (DT a) (NN woman) (, ,) (NN zebra))))",
]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 3-layer tree_transformer_lm_tiny after 4 updates of sentence_masked_lm on a toy corpus (fairseq-preprocess
    and fairseq-train in this process)."""
    root = tmp_path_factory.mktemp("tree_transformer")
    rng = np.random.default_rng(0)
    words = {"det": ["the", "a"], "noun": ["cat", "dog", "man", "woman", "bird"], "verb": ["saw", "chased", "liked"]}
    corpus = [" ".join(rng.choice(words[kind]) for kind in ("det", "noun", "verb", "det", "noun")) for _ in range(200)]
    train_here([
        only_source_data(root, corpus, corpus[:16]), "--user-dir", fairseq_syntax.__path__[0], "--task", "sentence_masked_lm",
        "--criterion", "masked_lm", "--arch", "tree_transformer_lm_tiny", "--tokens-per-sample", "16",
        "--optimizer", "adam", "--lr", "1e-3", "--max-update", "4", "--batch-size", "16", "--cpu", "--seed", "1",
        "--save-dir", str(root / "checkpoints"), "--no-epoch-checkpoints", "--no-last-checkpoints",
        "--num-workers", "0"])
    (root / "input.txt").write_text("\n".join(SENTENCES) + "\n")
    (root / "gold.mrg").write_text("\n".join(GOLD) + "\n")
    return root


def test_induce_command_reports_f1_and_writes_trees(trained, capsys):
    argv = [str(trained / "checkpoints" / "checkpoint_best.pt"), "--input", str(trained / "input.txt"),
            "--gold", str(trained / "gold.mrg"), "--min-layer", "1", "--output", str(trained / "induced.txt"),
            "--json", str(trained / "scores.json")]
    induce.cli_main(argv)
    printed = capsys.readouterr().out
    assert "right-branching" in printed and "recall by gold label" in printed
    trees = (trained / "induced.txt").read_text().splitlines()
    assert [" ".join(parse_tree(tree).leaves()) for tree in trees] == SENTENCES
    scores = json.loads((trained / "scores.json").read_text())
    right = scores["subsets"]["all"]["right-branching"]
    # right-branching: sentences 1-2 F1 2/3; sentence 3 (the comma goes) P 1/2, R 2/3
    assert right["sentence_f1"] == pytest.approx((2 / 3 + 2 / 3 + 4 / 7) / 3)
    assert right["corpus_precision"] == pytest.approx(6 / 10) and right["corpus_recall"] == pytest.approx(6 / 9)
    assert sorted(name for name in scores["subsets"]["all"] if name.startswith("random")) == [
        "random, shift-reduce (5 seeds)", "random, uniform split (5 seeds)"]  # each draw named
    assert "random, shift-reduce (5 seeds)" in printed
    assert scores["layers"] == 3
    assert len(scores["link_agreement"]) == 3 and all(-1 <= rho <= 1 for rho in scores["link_agreement"])
    assert "links vs gold, per layer" in printed

    # the rule chosen on every 3rd sentence (sentence 1) and scored on sentences 2-3; without the final </s>
    induce.cli_main(argv[:5] + ["--select-on-dev", "3", "--without-eos", "--json", str(trained / "dev.json")])
    assert "rule chosen on 1 dev sentences (every 3-th)" in capsys.readouterr().out
    selected = json.loads((trained / "dev.json").read_text())
    assert selected["selection"]["dev_sentences"] == 1 and len(selected["selection"]["dev_sentence_f1"]) == 3 * 5 + 3
    assert selected["subsets"]["all"]["right-branching"]["sentences"] == 2
    assert selected["subsets"]["all"]["right-branching"]["sentence_f1"] == pytest.approx((2 / 3 + 4 / 7) / 2)

    (trained / "bad.txt").write_text("the cat saw a dog\na man liked the bird\nthe dog chased a woman , zebra\n")
    argv[argv.index("--input") + 1] = str(trained / "bad.txt")
    with pytest.raises(SystemExit) as error:  # one line, not a traceback around it
        induce.cli_main(argv)
    assert str(error.value) == (
        f"error: {trained}/bad.txt:3: 7 words, but gold tree 3 of {trained}/gold.mrg has 6 words that count (the dog "
        "chased a woman zebra); write the sentences without punctuation (see "
        "fairseq_syntax.methods.tree_transformer.parseval.WORD_TAGS)")


@pytest.mark.parametrize("option, value, fits", [("--min-layer", "3", "2"), ("--layer", "-1", "0")])
def test_layers_the_model_lacks_are_refused_before_any_link_is_computed(trained, monkeypatch, option, value, fits):
    def no_links(*args, **kwargs):
        raise AssertionError("the links were computed before the layers were checked")

    monkeypatch.setattr(induce, "sentence_links", no_links)
    checkpoint = str(trained / "checkpoints" / "checkpoint_best.pt")
    with pytest.raises(SystemExit) as error:
        induce.cli_main([checkpoint, "--input", str(trained / "input.txt"), "--gold", str(trained / "gold.mrg"),
                         f"{option}={value}"])
    assert str(error.value) == (f"error: {option} {value}: {checkpoint} has 3 layers, 0 to 2: give {option} {fits} (or "
                                "another of them)")


def test_missing_files_of_the_evaluation_commands_are_one_line(tmp_path):
    """fairseq-syntax-induce with a missing input, fairseq-syntax-masked-ppl with a missing checkpoint: one line."""
    (tmp_path / "input.txt").write_text("the cat saw a dog\n")
    with pytest.raises(SystemExit) as error:
        induce.cli_main([str(tmp_path / "model.pt"), "--input", str(tmp_path / "missing.txt"), "--gold",
                         str(tmp_path / "input.txt")])
    assert str(error.value) == f"error: --input {tmp_path}/missing.txt: no such file"
    with pytest.raises(SystemExit) as error:
        masked_lm.cli_main([str(tmp_path / "missing.pt"), "--input", str(tmp_path / "input.txt")])
    assert str(error.value) == f"error: the checkpoint {tmp_path}/missing.pt: no such file"
    with pytest.raises(SystemExit) as error:
        masked_lm.cli_main([str(tmp_path), "--input", str(tmp_path / "input.txt")])
    assert str(error.value) == f"error: the checkpoint {tmp_path}: a directory, not a file"


def test_masked_word_perplexity_masks_each_word_once(trained):
    model, task = load_model(str(trained / "checkpoints" / "checkpoint_best.pt"))
    sentences = [sentence.split() for sentence in SENTENCES] + [["the", "zebra", "ran"]]
    result = masked_lm.masked_word_perplexity(model, task, sentences)
    # reference: one forward pass per word, that word alone masked; "zebra" and "ran" are unknown
    nll, count = 0.0, 0
    with torch.no_grad():
        for words in sentences:
            tokens = encode(task, words)
            for position in range(1, len(words) + 1):
                if tokens[position] == task.source_dictionary.unk():
                    continue
                masked = tokens.clone()
                masked[position] = task.mask_idx
                logits = model(masked[None])[0][0, position]
                nll -= float(torch.log_softmax(logits, -1)[tokens[position]])
                count += 1
    assert (result.scored_words, result.unknown_words, result.sentences) == (count, 3, 4) == (16, 3, 4)
    assert result.perplexity == pytest.approx(math.exp(nll / count), rel=1e-4)


def test_constituent_prior_heatmaps(trained):
    pytest.importorskip("matplotlib")
    model, task = load_model(str(trained / "checkpoints" / "checkpoint_best.pt"))
    words = SENTENCES[0].split()
    priors = sentence_priors(model, task, words)
    assert priors.shape == (3, 5, 5)
    assert np.allclose(np.diagonal(priors, axis1=1, axis2=2), 1.0) and np.allclose(priors, priors.transpose(0, 2, 1))
    assert (priors[1:] >= priors[:-1] - 1e-6).all()  # constituents only grow from layer to layer
    assert np.allclose(priors[:, 0, 2], priors[:, 0, 1] * priors[:, 1, 2], rtol=1e-4)
    path = trained / "prior.png"
    plot_constituent_priors(priors, words, str(path), layers=[0, 2])
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="layers \\[3\\] do not exist"):
        plot_constituent_priors(priors, words, str(path), layers=[3])
    # a model with C_ii = 0 (--constituent-diagonal zero) is drawn with its own diagonal
    for layer in tree_encoder(model).layers:
        layer.self_attn.diagonal = 0.0
    without_self = sentence_priors(model, task, words)
    off_diagonal = ~np.eye(5, dtype=bool)
    assert np.allclose(np.diagonal(without_self, axis1=1, axis2=2), 0.0)
    assert np.allclose(without_self[0][off_diagonal], priors[0][off_diagonal])


def test_the_rule_is_chosen_on_dev_sentences_only():
    # gold ((a b) c): layer 0 cuts b-c, layer 1 links all: Algorithm 1 from m = 1 gives F1 0, from layer 0 F1 1
    gold = [gold_sentence(parse_tree("(S (NP (DT a) (NN b)) (VP (VBZ c)))"))] * 2
    links = [np.array([[0.9, 0.1], [0.95, 0.95]])] * 2
    assert len(induce.candidate_rules(2)) == 2 * 5 + 2  # m in {0, 1} x 5 thresholds, greedy from each layer
    name, settings, dev_f1 = induce.select_rule(links, gold, dev=[0])
    assert dev_f1["Algorithm 1, m=1, threshold 0.8"] == 0.0 and dev_f1["greedy from layer 0"] == 1.0
    assert dev_f1[name] == 1.0 and name == "Algorithm 1, m=0, threshold 0.5"  # the first rule that scores 1
    assert settings == {"min_layer": 0, "threshold": 0.5}


def test_another_dictionary_is_refused_in_one_line(trained, tmp_path):
    """The masked LM task's check_checkpoint: its recorded dictionary (with <mask>) against another dict.txt. The
    sizes message and resumed training go through the same check: tests/core/test_checkpoint_dictionaries.py."""
    checkpoint = str(trained / "checkpoints" / "checkpoint_best.pt")
    lines = (trained / "bin" / "dict.txt").read_text().splitlines()
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    symbols = state["task_state"][TRAINED_DICTIONARIES]["source"]
    assert symbols[:4] == ["<s>", "<pad>", "</s>", "<unk>"] and symbols[-1] == "<mask>"
    assert symbols[4:-1] == [line.split()[0] for line in lines]  # every word of dict.txt, in order
    swapped = tmp_path / "swapped"
    shutil.copytree(trained / "bin", swapped)
    (swapped / "dict.txt").write_text("\n".join([lines[1], lines[0], *lines[2:]]) + "\n")
    with pytest.raises(SystemExit) as stopped:
        induce.cli_main([checkpoint, "--input", str(trained / "input.txt"), "--gold", str(trained / "gold.mrg"),
                         "--data", str(swapped)])
    assert str(stopped.value) == (
        f"error: {checkpoint} was trained with another source dictionary than {swapped}/dict.txt: entry 4 is "
        f"{symbols[4]!r} in the checkpoint, {symbols[5]!r} at {swapped}/dict.txt:1; give the data directory it was "
        f"trained on ({trained / 'bin'}), or one made with its dictionary (fairseq-preprocess --only-source --srcdict "
        "with that directory's dict.txt)")
