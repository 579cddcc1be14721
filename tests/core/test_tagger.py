"""The POS tagger (fairseq_syntax.parsing.tagger), training that resumes, and the parser run records."""
import hashlib
import json
import os
import runpy
from pathlib import Path

import pytest
import torch
from conftest import TINY_SUPAR_SIZES, TREEBANK, bracketed, conllu

from fairseq_syntax.core.trees import parse_tree
from fairseq_syntax.evaluation.tables import table_rows
from fairseq_syntax.parsing import training
from fairseq_syntax.parsing.tagger import (
    TaggedSentence,
    TaggerSize,
    load_tagger,
    sentences_from_conllu,
    sentences_from_trees,
    train_tagger,
)
from fairseq_syntax.parsing.torch_load import load_supar_parser

REPO = Path(__file__).resolve().parents[2]
TINY_TAGGER = TaggerSize(word_embed=8, char_embed=8, char_hidden=8, hidden=16, layers=1, dropout=0.0,
                         word_dropout=0.0)


def tiny_tagged():
    """Every word's tag is fixed by the word: DT the, NN noun, VBZ verb, . ."""
    return [TaggedSentence(["the", s, v, "the", o, "."], ["DT", "NN", "VBZ", "DT", "NN", "."])
            for s, v, o in TREEBANK]


def test_tree_words_are_unescaped_and_tags_read_left_to_right():
    tree = parse_tree("(S (NP (-LRB- -LRB-) (NN cat)) (VP (VBZ sits)) (. .))")
    [sentence] = sentences_from_trees([tree])
    assert sentence.words == ["(", "cat", "sits", "."]
    assert sentence.tags == ["-LRB-", "NN", "VBZ", "."]


def test_conllu_gives_forms_and_xpos_without_multiword_ranges(tmp_path):
    path = tmp_path / "a.conllu"
    path.write_text("# text = I can't\n1\tI\tI\tPRON\tPRP\t_\t2\tnsubj\t_\t_\n2-3\tcan't\t_\t_\t_\t_\t_\t_\t_\t_\n"
                    "2\tca\tcan\tAUX\tMD\t_\t0\troot\t_\t_\n3\tn't\tnot\tPART\tRB\t_\t2\tadvmod\t_\t_\n\n")
    [sentence] = sentences_from_conllu(str(path))
    assert (sentence.words, sentence.tags) == (["I", "ca", "n't"], ["PRP", "MD", "RB"])
    path.write_text("1\tI\tPRP\n")
    with pytest.raises(ValueError, match=r"a\.conllu, line 1: 3 tab-separated columns"):
        sentences_from_conllu(str(path))


def test_tagger_learns_word_determined_tags_and_resumes_exactly(tmp_path):
    data = tiny_tagged()
    log = []
    straight, split = str(tmp_path / "straight.pt"), str(tmp_path / "split.pt")
    for path, epochs in ((straight, 4), (split, 2), (split, 4)):
        train_tagger(data, data, path, epochs=epochs, size=TINY_TAGGER, batch_size=8, learning_rate=2e-2,
                     log=log.append)
    assert any("resuming from" in line and "at epoch 3" in line for line in log)
    state = {name: torch.load(training.checkpoint_path(path), weights_only=False)["tagger"]["state_dict"]
             for name, path in (("straight", straight), ("split", split))}
    for name, value in state["straight"].items():
        assert torch.equal(value, state["split"][name]), name
    tagger = load_tagger(straight)
    assert tagger.tag([["the", "dog", "sees", "the", "cat", "."], []]) == [["DT", "NN", "VBZ", "DT", "NN", "."], []]
    assert training.TrainingState.of(straight).epochs == 4


def test_supar_training_resumes_exactly_from_its_last_epoch(tmp_path, dependency_model):
    """1 epoch, then on to 2: the same weights as conftest's dependency_model, trained 2 epochs straight alike."""
    train = tmp_path / "train.conllu"
    train.write_text("".join(conllu(*sentence) for sentence in TREEBANK))
    split = str(tmp_path / "split.pt")
    arguments = dict(size=training.SuparSize(**TINY_SUPAR_SIZES), batch_tokens=8, learning_rate=1e-2, verbose=False,
                     log=lambda line: None)
    training.train_supar_dependency(str(train), str(train), split, epochs=1, **arguments)
    assert training.TrainingState.of(split).epochs == 1
    training.train_supar_dependency(str(train), str(train), split, epochs=2, **arguments)
    models = [load_supar_parser(training.checkpoint_path(path)).model.state_dict() for path in (dependency_model,
                                                                                                  split)]
    for name, value in models[0].items():
        assert torch.equal(value, models[1][name]), name
    state = training.TrainingState.of(split)
    assert (state.epochs, 1 <= state.best_epoch <= 2) == (2, True)


def test_train_parser_tagger_command_skips_foreign_tags_and_writes_its_record_only_where_asked(tmp_path, capsys):
    ptb = tmp_path / "tiny.mrg"
    ptb.write_text("".join(bracketed(*sentence) for sentence in TREEBANK))
    extra = tmp_path / "extra.conllu"
    extra.write_text("1\tthe\t_\t_\tDT\t_\t2\tdet\t_\t_\n2\tcat\t_\t_\tNN\t_\t0\troot\t_\t_\n\n"
                     "1\twww.x.com\t_\t_\tADD\t_\t0\troot\t_\t_\n\n")
    runs = sorted(os.listdir(REPO / "preprocess" / "runs"))
    output = tmp_path / "models" / "tagger.pt"  # its folder is made
    main = runpy.run_path(str(REPO / "preprocess" / "train_parser.py"))["main"]
    common = ["tagger", "--ptb", str(ptb), "--extra-conllu", str(extra), "--output", str(output), "--work-dir",
              str(tmp_path / "work"), "--hidden", "8", "--layers", "1", "--dropout", "0"]
    main([*common, "--epochs", "1"])
    err = capsys.readouterr().err
    assert "1 of 2 sentences added to the training data; 1 skipped" in err
    assert err.strip().splitlines()[-1].startswith(f"{output}: 1 epochs (") and "; record " not in err
    assert sorted(os.listdir(output.parent)) == ["tagger.pt", "tagger.pt.checkpoint"]
    record = tmp_path / "records" / "record.json"
    main([*common, "--epochs", "2", "--record", str(record)])  # resumes, and records
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(f"; record {record}")
    assert sorted(os.listdir(REPO / "preprocess" / "runs")) == runs  # never preprocess/runs/tagger.json by default
    row = json.loads(record.read_text())
    # the held-out part: round(24 trees x 0.1) = 2 sentences
    assert (row["parser"], row["epochs"], row["evaluated_sentences"]) == ("tagger", 2, 2)
    assert 1 <= row["best_epoch"] <= 2
    assert row["data"] == "tiny.mrg + extra.conllu" and 0 <= row["scores"]["POS accuracy"] <= 100
    # the digest of the model file, by which the data it tags name this record (parsing.provenance)
    assert row["sha256"] == hashlib.sha256(output.read_bytes()).hexdigest()[:16]
    render = runpy.run_path(str(REPO / "preprocess" / "make_results.py"))["render"]
    markdown, data = render([row])
    # a goal belongs to the published model it names (make_results.GOALS), not to any tagger's file
    [first] = table_rows(data["table"])
    assert first["metric"] == "POS accuracy" and first["goal"] is None
    _, published = render([dict(row, model="tagger-ptb-sample.pt")])
    assert table_rows(published["table"])[0]["goal"] == 96.0
    assert "| tagger | tagger.pt | tiny.mrg + extra.conllu |" in markdown
