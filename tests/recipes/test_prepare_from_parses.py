"""examples/prepare_translation.sh with PARSES: the data directories are made from a parse archive, for a subset of
its corpus too, without training or running a parser, and each form's parsers.json names the archive's parsers."""
import gzip
import json
import os
import shutil
import subprocess

import pytest

from conftest import REPO, arcs_record, tiny_corpus

from fairseq_syntax.parsing import archive
from fairseq_syntax.parsing.dependency import conllu_of_record
from fairseq_syntax.parsing.provenance import model_digest

SPLITS = {"train": (12, 1), "valid": (4, 2), "test": (5, 3)}


def words_of(prefix):
    with open(prefix + ".en") as handle:
        return [line.replace("@@ ", "").split() for line in handle]


def parsed_corpus(folder):
    """tok/ as prepare_translation.sh leaves it after parsing: word-level tokens, trees, arcs, CoNLL-U."""
    folder.mkdir()
    for split, (n, seed) in SPLITS.items():
        prefix = str(folder / split)
        tiny_corpus(prefix, n, seed)  # BPE'd .en: back to words below
        sentences = words_of(prefix)
        (folder / f"{split}.en").write_text("".join(" ".join(words) + "\n" for words in sentences))
        records = [arcs_record(words) for words in sentences]
        with gzip.open(f"{prefix}.arcs.jsonl.gz", "wt") as out:
            out.write("".join(json.dumps(record) + "\n" for record in records))
        (folder / f"{split}.conllu").write_text("".join(conllu_of_record(r, k) for k, r in enumerate(records, 1)))


def packed_parses(tmp_path):
    """(tok/, the parse archive made of it, the parser models it names) in ``tmp_path``."""
    tok = tmp_path / "tok"
    parsed_corpus(tok)
    models = tmp_path / "parser-models"
    models.mkdir()
    for name in ("crf-con.pt", "tagger.pt", "biaffine.pt"):
        (models / name).write_bytes(name.encode())
    store = str(tmp_path / "parses")
    archive.main(["pack", str(tok), store, "--source", "en", "--splits", *SPLITS, "--models",
                  f"constituency={models / 'crf-con.pt'}", f"tagger={models / 'tagger.pt'}",
                  f"dependency={models / 'biaffine.pt'}"])
    return tok, store, models


COMMAND = ["bash", "examples/prepare_translation.sh", "RAW", "OUT", "en", "de", "tokenized", "train:train",
           "valid:valid", "test:test"]


def prepare_command(raw, out):
    return [str(raw) if word == "RAW" else str(out) if word == "OUT" else word for word in COMMAND]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The recipe run once on a subset of the archive's corpus (its two tests read it): (folder, tok/, archive,
    models, OUT_DIR, the run's result, its environment)."""
    tmp_path = tmp_path_factory.mktemp("prepare")
    tok, store, models = packed_parses(tmp_path)
    # the raw corpus: training lines 3..10 only (a subset), valid and test whole; already tokenized text
    raw = tmp_path / "raw"
    raw.mkdir()
    for split in SPLITS:
        lines = (tok / f"{split}.en").read_text().splitlines()
        targets = (tok / f"{split}.de").read_text().splitlines()
        keep = slice(2, 10) if split == "train" else slice(None)
        (raw / f"{split}.en").write_text("".join(line + "\n" for line in lines[keep]))
        (raw / f"{split}.de").write_text("".join(line + "\n" for line in targets[keep]))
    out = tmp_path / "out"
    env = {**os.environ, "PARSES": store, "BPE_SIZE": "20", "MODELS": str(tmp_path / "no-models")}
    result = subprocess.run(prepare_command(raw, out), cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=600)
    return tmp_path, tok, store, models, out, result, env


def test_prepare_makes_every_form_from_the_archive_for_a_subset_without_parsers(prepared):
    tmp_path, tok, store, models, out, result, _ = prepared
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert os.listdir(tmp_path / "no-models") == []  # nothing trained
    assert "train_parser" not in result.stdout + result.stderr
    assert "parses of train from" in result.stderr and "8 lines (its lines found by their tokens)" in result.stderr
    trees = (tok / "train.tree").read_text().splitlines()[2:10]
    assert (out / "tok" / "train.tree").read_text().splitlines() == trees
    for form in ("sequence", "linearized", "preorder", "preorder-split"):
        assert os.path.exists(out / "data-bin" / form / "syntax.json"), form
    preorder = json.loads((out / "data-bin" / "preorder" / "parsers.json").read_text())
    assert list(preorder) == ["constituency", "tagger"]
    assert preorder["constituency"] == {"model": "crf-con.pt", "sha256": model_digest(str(models / "crf-con.pt"))}
    sequence = json.loads((out / "data-bin" / "sequence" / "parsers.json").read_text())
    assert list(sequence) == ["dependency"]
    side_data = json.loads((out / "data-bin" / "sequence" / "syntax.json").read_text())["side_data"]
    assert set(side_data["ldd"]) == set(SPLITS)


def test_controls_only_adds_the_control_data_of_each_seed_to_a_prepared_folder(prepared, tmp_path):
    """CONTROLS_ONLY=1: from the parses, BPE'd text and dictionaries an earlier run left, the control data
    directories of each control and seed (seed 1 DATA.CONTROL, seed K DATA.CONTROL-sK; struct: the tree forms only),
    each recording its control; a directory made already is kept; a folder never prepared is named."""
    folder, _, _, _, prepared_out, result, env = prepared
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    raw, out = folder / "raw", tmp_path / "out"  # CONTROLS_ONLY does not read RAW_DIR
    command = prepare_command(raw, out)
    missing = subprocess.run(command, cwd=REPO, env={**env, "CONTROLS_ONLY": "1", "CONTROLS": "struct"},
                             capture_output=True, text=True, timeout=600)
    assert missing.returncode == 1 and f"CONTROLS_ONLY: {out} lacks what an earlier run of this script makes: " \
                                       "tok/train.tree tok/train.arcs.jsonl.gz" in missing.stderr
    shutil.copytree(prepared_out, out, symlinks=True)  # the folder the other test's run made, left as it was
    made = {path.name for path in (out / "data-bin").iterdir()}
    # the structure-only control (the random one's seed-K directories are named by the same function,
    # control_kinds.control_data_name; each control a few fairseq-syntax-preprocess runs, so one is made here)
    only = {**env, "CONTROLS_ONLY": "1", "CONTROLS": "struct", "CONTROL_SEEDS": "2"}
    result = subprocess.run(command, cwd=REPO, env=only, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    new = {path.name for path in (out / "data-bin").iterdir()} - made
    assert new == {"linearized.struct-s2", "preorder.struct-s2", "preorder-split.struct-s2"}  # the tree forms
    for name in new:
        structure = name.split(".")[1].split("-")[0]
        assert json.loads((out / "data-bin" / name / "syntax.json").read_text())["control"] == {
            "structure": structure, "seed": 2}
    # the struct trees: each line the parse's words, phrases and labels, drawn with seed 2 and the line's number
    from fairseq_syntax.core import trees
    from fairseq_syntax.parsing import controls
    parses = list(trees.read_trees(str(out / "tok" / "train.tree")))
    drawn = list(trees.read_trees(str(out / "bpe" / "struct-s2" / "train.tree")))
    assert [str(tree) for tree in drawn] == [str(controls.control_tree(tree, "struct", controls.line_rng(2, line)))
                                             for line, tree in enumerate(parses, 1)]
    assert not (out / "bpe" / "struct-s2" / "train.arcs.jsonl.gz").exists()
    # again: every directory records its control and seed, and is kept
    stamps = {name: os.stat(out / "data-bin" / name / "syntax.json").st_mtime_ns for name in new}
    again = subprocess.run(command, cwd=REPO, env=only, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "control struct (seed 2): made already, kept" in again.stdout
    assert {name: os.stat(out / "data-bin" / name / "syntax.json").st_mtime_ns for name in new} == stamps
