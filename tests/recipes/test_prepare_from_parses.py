"""examples/prepare_translation.sh with PARSES: the data directories are made from a parse archive, for a subset of
its corpus too, without training or running a parser, and each form's parsers.json names the archive's parsers."""
import gzip
import json
import os
import subprocess

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


def test_prepare_makes_every_form_from_the_archive_for_a_subset_without_parsers(tmp_path):
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
    result = subprocess.run(["bash", "examples/prepare_translation.sh", str(raw), str(out), "en", "de", "tokenized",
                             "train:train", "valid:valid", "test:test"], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=600)
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
