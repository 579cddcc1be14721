"""fairseq-syntax-preprocess: outputs on the tiny corpus and every documented error."""
import gzip
import json
import os
import re
import shutil

import numpy as np
import pytest
from conftest import run_preprocess
from fairseq.data import Dictionary
from fairseq.data.indexed_dataset import MMapIndexedDataset

from fairseq_syntax.core.bpe import group_bpe_words, merge_pieces
from fairseq_syntax.core.data_dir import data_files, read_meta


def decode(data_dir, split, index):
    d = Dictionary.load(os.path.join(data_dir, "dict.en.txt"))
    ids = MMapIndexedDataset(os.path.join(data_dir, f"{split}.en-de.en"))[index]
    return [d[i] for i in ids.tolist()]


def first_line(path):
    with open(path) as f:
        return f.readline().split()


def test_group_bpe_words():
    assert group_bpe_words("the fa@@ th@@ er sees .".split()) == [["the"], ["fa@@", "th@@", "er"], ["sees"], ["."]]
    assert merge_pieces(["fa@@", "th@@", "er"]) == "father"


def test_sequence_form_is_the_bpe_source(data_dirs, raw_corpus):
    assert decode(data_dirs["sequence"], "train", 0) == first_line(f"{raw_corpus}/train.en") + ["</s>"]


def test_preorder_form_and_parents(data_dirs, raw_corpus):
    words = first_line(f"{raw_corpus}/train.en")  # the N V the N .
    tokens = decode(data_dirs["preorder"], "train", 0)[:-1]
    subj = words[1:words.index("sees" if "sees" in words else "likes")]
    expected = ["(S", "(NP", "(DT", "the", "(NN", *subj]
    assert tokens[: len(expected)] == expected
    parents = MMapIndexedDataset(os.path.join(data_dirs["preorder"], "train.en-de.en.parents"))
    assert parents._index.dtype == np.int16  # O(n) storage, two bytes a token
    p = parents[0].tolist()
    assert len(p) == len(tokens)
    assert p[:5] == [-1, 0, 1, 2, 1]  # (S root, (NP under S, (DT under NP, the under DT, (NN under NP
    # every subword of the subject noun hangs from (NN
    assert all(p[k] == 4 for k in range(5, 5 + len(subj)))
    meta = json.load(open(os.path.join(data_dirs["preorder"], "syntax.json")))
    assert meta["form"] == "preorder" and meta["preterminals"] == "auto"  # the tiny trees have POS tags: kept


def test_linearized_form(data_dirs):
    tokens = decode(data_dirs["linearized"], "train", 0)[:-1]
    assert tokens[:3] == ["(S", "(NP", "(DT"] and tokens[-3:] == [".", ")", ")"]
    assert tokens.count(")") == sum(t.startswith("(") for t in tokens)


def test_no_side_data_for_token_only_forms(data_dirs):
    for form in ("sequence", "linearized"):
        assert not os.path.exists(os.path.join(data_dirs[form], "train.en-de.en.parents.bin"))


VALID = ("valid.en", "valid.de", "valid.tree")


def corrupt(raw_corpus, tmp_path, split_file, line_no, new_line: bytes | None):
    """A copy of raw_corpus in tmp_path/raw whose split_file has line line_no replaced (None: removed)."""
    raw = tmp_path / "raw"
    shutil.copytree(raw_corpus, raw)
    path = raw / split_file
    lines = path.read_bytes().split(b"\n")
    lines[line_no - 1:line_no] = [] if new_line is None else [new_line]
    path.write_bytes(b"\n".join(lines))
    return str(raw)


def preprocess_fails(raw, dest, form="preorder", *extra) -> str:
    """The one line fairseq-syntax-preprocess (in this process) stops with."""
    with pytest.raises(SystemExit) as error:
        run_preprocess(raw, dest, form, *extra)
    return str(error.value)


@pytest.mark.parametrize("split_file, line, new_line, said", [
    ("valid.de", 3, None, ["error: line-count mismatch", "valid.en has 20 lines", "valid.de 19", "valid.tree 20"]),
    ("train.tree", 7, b"(S (NP (DT the) (NN cat)) (VP (VBZ sees)", ["train.tree:7:"]),  # malformed
    ("valid.tree", 5, b"(S (NP (DT the) (NN cow)) (VP (VBZ sees) (NP (DT the) (NN cat))) (. .))",
     ["valid.tree:5:", "'cow'", "word 2"]),  # a leaf that is not the source's word
], ids=["line counts", "malformed tree", "leaf mismatch"])
def test_bad_input_names_file_line_and_problem(raw_corpus, tmp_path, split_file, line, new_line, said):
    err = preprocess_fails(corrupt(raw_corpus, tmp_path, split_file, line, new_line), tmp_path / "out")
    assert all(words in err for words in said), err


def test_overlong_sentence_is_an_error_and_can_be_skipped_with_a_count(raw_corpus, tmp_path, caplog):
    err = preprocess_fails(raw_corpus, tmp_path / "out", "preorder", "--max-source-positions", "16")
    assert "train.tree:1:" in err and "exceed --max-source-positions 16" in err
    # longest preorder here: (S (NP (DT the (NN fa@@ ther (VP (VBZ v (NP (DT the (NN fa@@ ther (. . = 18 tokens
    out = tmp_path / "skip"
    run_preprocess(raw_corpus, out, "preorder", "--max-source-positions", "18", "--skip-invalid")
    meta = json.load(open(out / "syntax.json"))
    skipped = meta["splits"]["train"]["skipped"].get("over-long source", 0)
    listing = (out / "train.skipped.tsv").read_text().splitlines()
    assert skipped == len(listing) > 0
    kept = MMapIndexedDataset(str(out / "train.en-de.en"))
    target = MMapIndexedDataset(str(out / "train.en-de.de"))
    assert len(kept) == len(target) == 200 - skipped
    assert f"skipped {skipped} of 200 pairs" in caplog.text


@pytest.mark.parametrize("split_file", VALID)
def test_invalid_utf8_names_file_line_and_byte_and_can_be_skipped(raw_corpus, tmp_path, split_file, caplog):
    original = open(f"{raw_corpus}/{split_file}", "rb").read().split(b"\n")[3]
    raw = corrupt(raw_corpus, tmp_path, split_file, 4, original[:3] + b"\xff" + original[3:])
    err = preprocess_fails(raw, tmp_path / "out")
    assert err.startswith("error: ") and f"{split_file}:4: not valid UTF-8 (byte 0xff at byte 4 of the line)" in err
    if split_file != "valid.tree":
        return  # --skip-invalid treats the three files alike: one of them is enough
    out = tmp_path / "skip"
    run_preprocess(raw, out, "preorder", "--skip-invalid")
    meta = json.load(open(out / "syntax.json"))
    assert meta["splits"]["valid"]["skipped"] == {"unreadable line": 1}
    assert (out / "valid.skipped.tsv").read_text().startswith("4\tunreadable line\t")
    assert len(MMapIndexedDataset(str(out / "valid.en-de.en"))) == 19
    assert "skipped 1 of 20 pairs" in caplog.text


def test_a_carriage_return_inside_a_line_is_named_not_a_line_break(raw_corpus, tmp_path):
    original = open(raw_corpus + "/valid.de", "rb").read().split(b"\n")[6]
    raw = corrupt(raw_corpus, tmp_path, "valid.de", 7, original[:2] + b"\r" + original[2:])
    err = preprocess_fails(raw, tmp_path / "out")
    assert "valid.de:7: a carriage return inside the line (byte 3)" in err and "line-count mismatch" not in err


def test_crlf_files_read_as_their_lines(raw_corpus, tmp_path):
    raw = tmp_path / "raw"
    shutil.copytree(raw_corpus, raw)
    for name in VALID:
        path = raw / name
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    out = tmp_path / "crlf"
    run_preprocess(raw, out, "preorder")
    assert len(MMapIndexedDataset(str(out / "valid.en-de.en"))) == 20


def test_a_byte_order_mark_is_no_part_of_the_first_word(small_corpus, tmp_path):
    for name in VALID:
        path = small_corpus / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    out = tmp_path / "bom"
    run_preprocess(small_corpus, out, "sequence")
    first_target = (small_corpus / "valid.de").read_bytes()[3:].decode().splitlines()[0].split()
    target = MMapIndexedDataset(str(out / "valid.en-de.de"))[0]
    assert [Dictionary.load(str(out / "dict.de.txt"))[i] for i in target.tolist()] == first_target + ["</s>"]
    assert first_target[0] == "die" and decode(str(out), "valid", 0)[0] == "the"


@pytest.mark.parametrize("form", ["sequence", "preorder"])
def test_an_empty_split_is_refused_naming_it_and_nothing_is_written(small_corpus, tmp_path, form):
    for name in VALID:
        (small_corpus / name).write_text("")
    message = preprocess_fails(small_corpus, tmp_path / "out", form)
    assert message == (f"error: {small_corpus}/valid.en: the valid split is empty; fairseq cannot train or validate "
                       "on a split without pairs: give it pairs, or leave the split out")
    assert data_files(tmp_path / "out") == []  # no half-written directory


def test_a_split_whose_every_pair_is_skipped_is_refused_naming_it(small_corpus, tmp_path):
    # every source has at least 6 words: with EOS none fits 6 positions
    message = preprocess_fails(small_corpus, tmp_path / "out", "sequence", "--skip-invalid",
                               "--max-source-positions", "6")
    assert message.startswith(f"error: {small_corpus}/train: --skip-invalid left out all 12 pairs of the train split "
                              f"{{'over-long source': 12}}, the first: {small_corpus}/train.tree:1: ")
    assert data_files(tmp_path / "out") == []


def test_a_data_directory_is_not_written_over_unless_asked(small_corpus, tmp_path):
    out = tmp_path / "out"
    run_preprocess(small_corpus, out, "preorder")
    (out / "notes.txt").write_text("mine")
    message = preprocess_fails(small_corpus, out, "sequence")
    # 2 dictionaries, preprocess.log, syntax.json; per split source, target and parents, each .bin and .idx
    assert message == (f"error: {out} already holds a data directory (16 files: dict.de.txt, dict.en.txt, "
                       "preprocess.log, syntax.json, ...): remove it, or pass --overwrite to replace those files")
    (out / "syntax.json").unlink()  # what a run stopped before its end leaves
    assert "(15 files: dict.de.txt, dict.en.txt, preprocess.log, train.en-de.de.bin, ..., without syntax.json: a " \
           "run that was stopped)" in preprocess_fails(small_corpus, out, "sequence")
    # bad input stops --overwrite before anything is removed
    (small_corpus / "valid.de").write_text("x\n")
    assert "line-count mismatch" in preprocess_fails(small_corpus, out, "sequence", "--overwrite")
    assert (out / "train.en-de.en.parents.bin").exists()
    tiny = small_corpus.parent / "again"
    shutil.copytree(small_corpus, tiny)
    (tiny / "valid.de").write_text((tiny / "valid.en").read_text())  # 4 lines again
    run_preprocess(tiny, out, "sequence", "--overwrite")
    # the preorder run's parent arrays are gone (the mask model read them with the sequence tokens), the rest is new
    assert data_files(out) == sorted(["dict.de.txt", "dict.en.txt", "preprocess.log", "syntax.json"] + [
        f"{split}.en-de.{lang}.{ext}" for split in ("train", "valid") for lang in ("de", "en")
        for ext in ("bin", "idx")])
    assert (out / "notes.txt").read_text() == "mine"
    assert read_meta(str(out))["form"] == "sequence" and read_meta(str(out))["side_data"] == {}


def test_a_missing_input_file_is_one_error_line(raw_corpus, tmp_path):
    raw = tmp_path / "raw"
    shutil.copytree(raw_corpus, raw)
    os.remove(raw / "valid.tree")
    assert preprocess_fails(raw, tmp_path / "out") == f"error: {raw}/valid.tree: no such file"


def test_a_gzip_file_cut_short_is_one_error_line(raw_corpus, tmp_path):
    raw = tmp_path / "raw"
    shutil.copytree(raw_corpus, raw)
    for split in ("train", "valid"):
        tree = raw / f"{split}.tree"
        data = gzip.compress(tree.read_bytes())
        (raw / f"{split}.tree.gz").write_bytes(data[:-30] if split == "valid" else data)  # valid: a write cut short
    err = preprocess_fails(raw, tmp_path / "out", "preorder", "--trees-suffix", "tree.gz")
    assert re.match(rf"error: {re.escape(str(raw))}/valid.tree.gz: not a whole gzip file .*write it again", err)


def test_an_unescaped_bracket_in_the_source_is_told_to_be_escaped(raw_corpus, tmp_path):
    raw = corrupt(raw_corpus, tmp_path, "valid.tree", 5,
                  b"(S (NP (DT the) (NN cat)) (-LRB- -LRB-) (VP (VBZ sees) (NP (DT the) (NN dog))) (. .))")
    source = tmp_path / "raw" / "valid.en"
    lines = source.read_text().splitlines()
    lines[4] = "the cat ( sees the dog ."
    source.write_text("\n".join(lines) + "\n")
    err = preprocess_fails(raw, tmp_path / "out")
    assert "valid.tree:5: tree leaves differ from the source words at word 3: tree '-LRB-', source '('" in err
    assert "the tree is PTB-escaped and the source is not" in err
