"""fairseq-interactive with transformer_ldd: each line gets the offline path's source tokens and ``src_ldd``."""
import json
import logging
import os
import re
import runpy
import shutil

import numpy as np
import pytest
import torch
from conftest import REPO, TINY, TRANSLATION, preprocess_in_process, tiny_corpus, train_here, write_codes
from fairseq import checkpoint_utils

import fairseq_syntax  # noqa: F401  (registers the task and models; lets torch load fairseq checkpoints)
from fairseq_syntax.methods.ldd import preprocess as preprocess_dependencies
from fairseq_syntax.methods.ldd.distributions import BEST_OFFSET, NUM_STORED_CHANNELS, expand_to_tokens
from fairseq_syntax.methods.ldd.side_input import ldd_settings
from fairseq_syntax.parsing.dependency import DependencyParser


@pytest.fixture(scope="module")
def offline(dependency_model, tmp_path_factory):
    """(data directory, raw directory): the corpus parsed by the tiny parser, with the offline commands."""
    raw = tmp_path_factory.mktemp("ldd_interactive_raw")
    parse = runpy.run_path(os.path.join(REPO, "preprocess", "parse_dependency.py"))["main"]
    for split, n, seed in (("train", 60, 1), ("valid", 8, 2), ("test", 12, 3)):
        prefix = str(raw / split)
        tiny_corpus(prefix, n, seed)
        with open(prefix + ".en") as bpe_lines, open(prefix + ".tok.en", "w") as words:
            words.writelines(line.replace("@@ ", "") for line in bpe_lines)
        parse(["--model", dependency_model, "--input", prefix + ".tok.en", "--arcs", prefix + ".arcs.jsonl",
               "--conllu", prefix + ".conllu"])
    write_codes(str(raw))
    dest = str(tmp_path_factory.mktemp("ldd_interactive_data"))
    preprocess_in_process(str(raw), dest, "sequence")  # records the codes: fairseq-interactive segments words with them
    preprocess_dependencies.main(["--destdir", dest, "-s", "en", "-t", "de", "--labels", "universal",
                                  "--trainpref", f"{raw}/train", "--validpref", f"{raw}/valid",
                                  "--testpref", f"{raw}/test"])
    return dest, str(raw)


@pytest.fixture(scope="module")
def checkpoint(offline, tmp_path_factory):
    save = str(tmp_path_factory.mktemp("ldd_interactive_model"))
    train_here([
        offline[0], *TRANSLATION, "--arch", "transformer_ldd_tiny", "--max-epoch", "1", "--disable-validation",
        "--save-dir", save, *TINY])
    return os.path.join(save, "checkpoint_last.pt")


def load(checkpoint, data, **overrides):
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint],
                                                                    arg_overrides={"data": data, **overrides})
    return models, task


def words_of(raw, split):
    with open(os.path.join(raw, f"{split}.tok.en")) as f:
        return [line.strip() for line in f]


class SideInputOf:
    """A generator that returns the ``src_ldd`` the task put into the batch."""

    def generate(self, models, sample, **kwargs):
        return sample["net_input"]["src_ldd"]


def rows_by_id(side, ids):
    """``src_ldd`` at token level (every channel, pieces copied), its rows in id order."""
    word_pairs, token_words = side
    return expand_to_tokens(word_pairs, token_words, "copy")[ids.argsort()]


def interactive_batch(task, models, lines):
    """(source tokens, ``src_ldd`` in line order) as fairseq-interactive gets them for one buffer of lines."""
    tokens, lengths = task.get_interactive_tokens_and_lengths(lines, str)
    inputs = task.build_dataset_for_inference(tokens, lengths)
    sample = inputs.collater([inputs[i] for i in range(len(inputs))])
    return tokens, rows_by_id(task.inference_step(SideInputOf(), models, sample), sample["id"])


def offline_batch(dataset, indices):
    stored = dataset.collater([dataset[i] for i in indices])
    return rows_by_id(stored["net_input"]["src_ldd"], stored["id"])


def test_interactive_tokens_and_side_input_equal_the_offline_ones(offline, checkpoint, dependency_model):
    dest, raw = offline
    models, task = load(checkpoint, dest, source_dependency_parser=dependency_model)
    task.load_dataset("test")
    dataset = task.datasets["test"].batching(task.model_side_inputs)  # the view the task batches for the model
    lines = words_of(raw, "test")
    assert any("father" in line for line in lines)  # a word split into two BPE tokens is exercised

    # one buffer of all lines: the parser sees the batch the offline parse saw
    tokens, ldd = interactive_batch(task, models, lines)
    assert [t.tolist() for t in tokens] == [dataset[i]["source"].tolist() for i in range(len(dataset))]
    expected = offline_batch(dataset, range(len(dataset)))
    assert expected.shape[:2] == (12, NUM_STORED_CHANNELS) and expected[:, :BEST_OFFSET].sum() > 0
    assert expected[:, BEST_OFFSET:].sum() > 0  # the parser's 1-best tree travels with the distributions
    assert torch.equal(ldd, expected)
    # one line per buffer (fairseq-interactive's default): each sentence parsed alone
    for index, line in enumerate(lines):
        torch.testing.assert_close(interactive_batch(task, models, [line])[1],
                                   offline_batch(dataset, [index]), rtol=1e-3, atol=1e-4)
    # with --source-format tree, a bracketed tree stands for its words
    models, task = load(checkpoint, dest, source_dependency_parser=dependency_model, source_format="tree")
    tree = "(S " + " ".join(f"(X {word})" for word in lines[0].split()) + ")"
    assert torch.equal(interactive_batch(task, models, [tree])[1], offline_batch(dataset, [0]))


def test_interactive_errors_say_what_to_pass_and_name_the_line(offline, checkpoint, dependency_model, monkeypatch,
                                                               caplog):
    dest, _ = offline
    _, task = load(checkpoint, dest)  # fairseq-interactive prints it: tests/recipes/test_interactive_parsing.py
    with pytest.raises(SystemExit, match=r"^error: the model reads labeled dependency distributions \(src_ldd\): give "
                                         "--source-dependency-parser"):
        task.get_interactive_tokens_and_lengths(["the cat sees the dog ."], str)

    _, task = load(checkpoint, dest, source_dependency_parser=dependency_model)
    # an empty line and one starting with a bracket, for this model: tests/recipes/test_interactive_parsing.py
    task.get_interactive_tokens_and_lengths(["the cat sees the dog .", "", "(S (NP the"], str)

    def parser_fails(self, sentences):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(DependencyParser, "_parse_chunk", parser_fails)
    with caplog.at_level(logging.ERROR):
        tokens, _ = task.get_interactive_tokens_and_lengths(["the dog sees the man ."], str)  # numbers count on
    assert tokens[0].tolist() == [task.source_dictionary.eos()]
    assert re.search(r"<input>:4: .*'the dog sees the man \.': parser error: RuntimeError", caplog.text)


def test_a_data_directory_without_the_ldd_side_data_is_one_line_naming_the_command(offline, checkpoint, tmp_path):
    # the sequence form of the same corpus, without what fairseq-syntax-preprocess-dependencies adds
    dest, _ = offline
    plain = tmp_path / "sequence"
    shutil.copytree(dest, plain, ignore=shutil.ignore_patterns("*.ldd.bin", "*.ldd.idx"))
    meta = json.loads((plain / "syntax.json").read_text())
    (plain / "syntax.json").write_text(json.dumps({key: meta[key] for key in ("form", "preterminals", "bpe")}))
    _, task = load(checkpoint, str(plain))
    with pytest.raises(SystemExit, match=rf"^error: {plain}/test: the model reads side inputs \['src_ldd'\], which "
                                         r"this data directory lacks \(made by src_ldd: "
                                         r"fairseq-syntax-preprocess-dependencies\)$"):
        task.load_dataset("test")  # fairseq-generate: stopped before any batch, not a KeyError under a traceback
    _, task = load(checkpoint, str(plain), source_dependency_parser="unused: stopped before it is loaded")
    with pytest.raises(SystemExit, match=rf"^error: {plain}/syntax.json does not record how the src_ldd side data "
                                         r"was made: make it again with fairseq-syntax-preprocess-dependencies$"):
        task.get_interactive_tokens_and_lengths(["the cat sees the dog ."], str)  # fairseq-interactive


def test_settings_come_from_syntax_json():
    assert ldd_settings({"form": "sequence", "ldd": {"labels": "stanford", "floor": 0.01}}, "D") == ("stanford", 0.01)
    with pytest.raises(ValueError, match="label table 'ud'"):
        ldd_settings({"ldd": {"labels": "ud", "floor": 0.002}}, "D")


def test_preprocessing_refuses_settings_other_than_those_recorded(offline, tmp_path):
    dest, raw = offline
    copy = str(tmp_path / "data")
    shutil.copytree(dest, copy)
    with pytest.raises(SystemExit, match=r"made with --labels universal --floor 0.001, this run asks for --labels "
                                         r"stanford --floor 0.001"):
        preprocess_dependencies.main(["--destdir", copy, "-s", "en", "-t", "de", "--labels", "stanford",
                                      "--testpref", f"{raw}/test"])


def test_ldd_attention_maps_and_plot_of_a_trained_model(offline, checkpoint, tmp_path):
    from fairseq_syntax.cli import plot
    from fairseq_syntax.core.model_inputs import load_model
    from fairseq_syntax.methods.ldd.analysis import sentence_ldd_attention

    dest, raw = offline
    model, task = load_model(checkpoint, dest)
    maps, tokens = sentence_ldd_attention(model, task, "test", 0)
    with open(os.path.join(raw, "test.en")) as f:
        first = f.readline().split()
    assert tokens == first + ["</s>"] and maps.shape == (16, len(tokens), len(tokens))
    np.testing.assert_allclose(maps.sum(-1), 1.0, rtol=1e-5)  # softmax rows
    output = str(tmp_path / "ldd.png")
    plot.main(["ldd-attention", "--path", checkpoint, "--data", dest, "--split", "test", "--index", "0",
               "--output", output])
    with open(output, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
