"""What fairseq-interactive makes of its lines: format said, buffers parsed together, parser and BPE checked."""
import json
import os
import re
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest
import torch
from conftest import BPE_MERGES, REPO, run_preprocess

from fairseq_syntax.core import source_parsers
from fairseq_syntax.core.bpe import SubwordNmtBpe
from fairseq_syntax.core.interactive_source import InteractiveSource
from fairseq_syntax.core.side_inputs import BadLine
from fairseq_syntax.core.translation_task import JoinerRemoval, SyntaxTranslationConfig, SyntaxTranslationTask
from fairseq_syntax.parsing.constituency import backend_of_model

PREORDER = {"form": "preorder", "preterminals": "auto"}
SEQUENCE = {"form": "sequence", "preterminals": "auto"}


def options(**given):
    return Namespace(**{"source_format": None, "source_parser": None, "source_parser_backend": None,
                        "source_tagger": None, **given})


def segment_father(word):
    return ["fa@@", "ther"] if word == "father" else [word]


def source(meta, side_inputs=(), **given):
    return InteractiveSource(options(**given), meta, "DATA", side_inputs, segment_father)


@pytest.mark.parametrize("meta, given, message", [
    (PREORDER, {}, "the model reads the preorder form of a constituency tree: give --source-parser MODEL (the "
                   "parser of the data directory's trees) to parse sentences of tokenized words, or --source-format "
                   "tree to give one bracketed tree per line"),
    (PREORDER, {"source_format": "text"}, "--source-format text: the model reads the preorder form of a "
                                          "constituency tree; give --source-parser MODEL to parse the sentences"),
    (PREORDER, {"source_format": "tree", "source_parser": "p.pt"}, "--source-format tree reads one bracketed tree per "
                                                                   "line: leave out --source-parser"),
    (PREORDER, {"source_tagger": "t.pt"}, "--source-tagger without --source-parser: give the parser too"),
    (PREORDER, {"source_format": "html"}, "--source-format html: choose from text, tree"),
    (SEQUENCE, {"source_parser": "p.pt"}, "the model reads no constituency tree (the sequence form): leave out "
                                          "--source-parser"),
])
def test_options_that_do_not_fit_the_model_are_one_line(meta, given, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        source(meta, **given)


def test_a_sentence_that_starts_with_a_bracket_is_a_sentence_and_the_format_is_said():
    sequence = source(SEQUENCE)
    assert sequence.format == "text"
    lines = ["( the fox ) held the father .", "", "the\tcat  sees .", "(S (NN father))"]
    converted = sequence(lines, [1, 2, 3, 4], str)
    assert converted[0] == ("-LRB- the fox -RRB- held the fa@@ ther .".split(), {})  # escaped as the recipes do
    assert converted[1] == BadLine("<input>:2: empty line; expected a sentence of tokenized words")
    assert converted[2] == (["the", "cat", "sees", "."], {})
    assert converted[3] == (["-LRB-S", "-LRB-NN", "father-RRB--RRB-"], {})  # text is text, brackets escaped
    trees = source(SEQUENCE, source_format="tree")([lines[3], lines[0], ""], [5, 6, 7], str)
    assert trees[0] == (["fa@@", "ther"], {})  # the leaves
    assert trees[1] == BadLine("<input>:6: text after the tree: 'held'")
    assert trees[2] == BadLine("<input>:7: empty line; expected a bracketed tree")


def test_a_tree_becomes_the_form_and_side_data_of_the_data_directory():
    tree_source = source(PREORDER, ("src_parents",), source_format="tree")
    [(tokens, side), bad] = tree_source(["(S (NP (DT the) (NN father)) (. .))", "the father ."], [1, 2], str)
    assert tokens == ["(S", "(NP", "(DT", "the", "(NN", "fa@@", "ther", "(.", "."]
    assert side["src_parents"].tolist() == [-1, 0, 1, 2, 1, 4, 4, 0, 7]
    assert bad.message.startswith("<input>:2: expected a bracketed tree (--source-format tree); for sentences give "
                                  "--source-format text and --source-parser")


class FakeParsers:
    """A registered parser writing flat NN trees, recording its calls; over 3 words it gives the flat fallback."""

    def __init__(self):
        self.calls, self.loaded = [], []

    def load(self, backend, model, tagger):
        self.loaded.append((backend, model, tagger))

        def parse(sentences):
            self.calls.append(sentences)
            return [source_parsers.ParsedSentence("(S " + " ".join(f"(NN {w})" for w in words) + ")",
                                                  "too long: 4 words > 3" if len(words) > 3 else None)
                    for words in sentences]

        return parse


@pytest.fixture
def fake_parsers(monkeypatch):
    fake = FakeParsers()
    monkeypatch.setattr(source_parsers, "_registered", source_parsers.ConstituencyParsers(
        load=fake.load, backend_of=lambda model: "crf-con", identity=lambda path: {}))
    return fake


def test_a_buffer_is_parsed_together_and_an_empty_line_never(fake_parsers):
    text = source({**PREORDER, "pos_tags": "tagged"}, ("src_parents",), source_parser="p.pt", source_tagger="t.pt")
    converted = text(["the father", "", "( a", "a b c d"], [1, 2, 3, 4], str)
    assert fake_parsers.loaded == [("crf-con", "p.pt", "t.pt")]  # the backend the model file tells
    assert fake_parsers.calls == [[["the", "father"], ["-LRB-", "a"], ["a", "b", "c", "d"]]]
    assert converted[0][0] == ["(S", "(NN", "the", "(NN", "fa@@", "ther"]
    assert converted[1] == BadLine("<input>:2: empty line; expected a sentence of tokenized words")
    assert converted[2][0] == ["(S", "(NN", "-LRB-", "(NN", "a"]
    assert converted[3] == BadLine("<input>:4: the constituency parser gave no parse of 'a b c d': too long: 4 "
                                   "words > 3")


@pytest.mark.parametrize("meta, given, message", [
    ({"pos_tags": "tagged"}, {}, "DATA/syntax.json: the data directory's trees carry POS tags, but crf-con without "
                                 "--source-tagger writes every POS node as XX, which the model reads as <unk>: give "
                                 "the POS tagger that tagged them as --source-tagger"),
    ({"pos_tags": "untagged"}, {"source_parser_backend": "benepar"},
     "DATA/syntax.json: the data directory's trees have no POS tags (XX, crf-con without a tagger), but this parser "
     "writes them (benepar): parse as they were parsed"),
    ({"parser": {"backend": "crf-con", "model": {"name": "crf.pt", "sha256": "0"}, "tagger": None}},
     {"source_tagger": "t.pt"}, "DATA/syntax.json records trees of a crf-con parser without a POS tagger: leave out "
                                "--source-tagger"),
    ({"parser": {"backend": "benepar", "model": "benepar_en3", "tagger": None}}, {"source_parser_backend": "crf-con"},
     "DATA/syntax.json records trees of a benepar parser (benepar_en3), --source-parser-backend is crf-con"),
])
def test_a_parser_that_does_not_fit_the_data_directory_is_one_line(fake_parsers, meta, given, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        source({**PREORDER, **meta}, ("src_parents",), source_parser="p.pt", **given)
    assert fake_parsers.loaded == []  # refused before any model is loaded
    source({**PREORDER, **meta, "preterminals": "drop", "parser": None}, (), source_parser="p.pt",
           source_parser_backend="crf-con")  # without POS nodes the tags do not matter


def test_the_backend_is_read_from_the_model_file(tmp_path):
    torch.save({"config": {"d_model": 8}, "state_dict": {}}, tmp_path / "benepar.pt")  # preprocess/train_parser.py's
    torch.save({"size": {}, "words": [], "state_dict": {}}, tmp_path / "tagger.pt")
    assert backend_of_model(str(tmp_path / "benepar.pt")) == "benepar"
    assert backend_of_model(str(tmp_path / "tagger.pt")) is None
    assert backend_of_model(str(tmp_path)) == "benepar"  # a benepar model directory
    assert (backend_of_model("benepar_en3"), backend_of_model("crf-con-en"), backend_of_model("x.pt")) == (
        "benepar", "crf-con", None)


def test_subword_nmt_bpe_is_apply_bpe_with_its_vocabulary(tmp_path):
    # "one" with the codes alone is one piece; the vocabulary undoes merges whose result is rarer than the threshold
    (tmp_path / "codes").write_text("#version: 0.2\nn e</w>\no ne</w>\n")
    (tmp_path / "vocab").write_text("o@@ 3\nn@@ 2\ne 2\nne 1\none 0\n")
    for vocabulary, threshold, expected in ((None, None, "one n@@ one"), ("vocab", 1, "o@@ ne n@@ o@@ ne"),
                                            ("vocab", 2, "o@@ n@@ e n@@ o@@ n@@ e")):
        cli = ["subword-nmt", "apply-bpe", "-c", str(tmp_path / "codes")]
        if vocabulary:
            cli += ["--vocabulary", str(tmp_path / vocabulary), "--vocabulary-threshold", str(threshold)]
        assert subprocess.run(cli, input="one none\n", capture_output=True, text=True, check=True).stdout.strip() == \
            expected
        bpe = SubwordNmtBpe(str(tmp_path / "codes"), vocabulary and str(tmp_path / vocabulary), threshold)
        assert " ".join(bpe.segment("one") + bpe.segment("none")) == expected
    (tmp_path / "bad").write_text("#version: 0.2\na b c\n")
    with pytest.raises(ValueError, match="bad: not a subword-nmt BPE codes file"):
        SubwordNmtBpe(str(tmp_path / "bad"))


def test_fairseq_interactive_decodes_hypotheses_as_its_bpe_would():
    assert JoinerRemoval().encode("fa@@ ther") == "fa@@ ther"  # the task segments the words itself
    assert JoinerRemoval().decode("die fa@@ ther@@ s sieht .") == "die fathers sieht ."


def test_preprocessing_records_the_bpe_and_refuses_other_codes(data_dirs, raw_corpus, tmp_path):
    data = Path(data_dirs["preorder"])  # made with --bpe-codes RAW/codes (conftest)
    meta = json.loads((data / "syntax.json").read_text())
    assert meta["bpe"] == {"codes": "bpe.codes", "vocabulary": None, "vocabulary_threshold": None}
    assert (data / "bpe.codes").read_text() == (Path(raw_corpus) / "codes").read_text()
    assert meta["pos_tags"] == "tagged" and meta["parser"] is None
    # without the merge "the r</w>", father stays "fa the r": not how the source was segmented
    (tmp_path / "other").write_text("#version: 0.2\n" + "\n".join(m for m in BPE_MERGES if m != "the r</w>") + "\n")
    first = next(n for n, line in enumerate(open(f"{raw_corpus}/train.en").read().splitlines(), 1) if "fa@@" in line)
    with pytest.raises(SystemExit, match=rf"^error: {raw_corpus}/train.en:{first}: the word 'father' is segmented "
                                         rf"'fa@@ ther', but the BPE of --bpe-codes {tmp_path}/other makes it "
                                         r"'fa@@ the@@ r': give the BPE files"):
        run_preprocess(raw_corpus, tmp_path / "data", "preorder", "--bpe-codes", str(tmp_path / "other"))


def test_a_data_directory_without_its_bpe_is_one_line_where_its_dictionary_has_pieces(small_corpus, tmp_path):
    run_preprocess(small_corpus, tmp_path / "data", "sequence")  # no --bpe-codes: nothing recorded
    task = SyntaxTranslationTask.setup_task(SyntaxTranslationConfig(data=str(tmp_path / "data")))
    with pytest.raises(SystemExit, match=rf"^error: {tmp_path}/data/syntax.json records no BPE \(the directory was "
                                         r"made without fairseq-syntax-preprocess --bpe-codes\), but the source "
                                         r"dictionary holds BPE pieces \(e.g. 'fa@@'\)"):
        task.get_interactive_tokens_and_lengths(["the cat sees the dog ."], str)


def test_help_lists_the_options_of_the_task(tmp_path, monkeypatch, capsys):
    """--help prints the task's options through the plugin's wrapper, before DATA (missing) would be read."""
    from fairseq_cli import interactive

    monkeypatch.setattr(sys, "argv", ["fairseq-interactive", str(tmp_path / "missing"), "--user-dir",
                                      os.path.join(REPO, "fairseq_syntax"), "--task", "syntax_translation", "--help"])
    with pytest.raises(SystemExit) as stopped:  # fairseq-interactive, in this process
        interactive.cli_main()
    help_text = capsys.readouterr().out
    assert stopped.value.code == 0 and help_text.startswith("usage: fairseq-interactive")
    for option in ("--source-format", "--source-parser ", "--source-parser-backend", "--source-tagger",
                   "--source-dependency-parser"):
        assert re.search(rf"^  {option.strip()} [A-Z_]+\n", help_text, re.M), option  # described, not only in usage
    assert "'text' (a sentence of tokenized words)" in " ".join(help_text.split())  # the option's help text
    assert "--beam" in help_text  # fairseq's own options stay
