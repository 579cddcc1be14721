"""Parse archives: parses come back byte for byte, whole or by tokens; damage refused by file and line; coverage."""
import gzip
import json
import lzma
import os
from pathlib import Path

import pytest

from fairseq_syntax.parsing import archive, coverage
from fairseq_syntax.parsing.coverage import read_bytes as read  # uncompressed, for .gz
from fairseq_syntax.parsing.dependency import conllu_of_record

SENTENCES = ["a dog runs", "the cat", "a dog runs", "birds fly high"]
TREES = ["(S (NP (DT a) (NN dog)) (VP (VBZ runs)))", "(NP (DT the) (NN cat))",
         "(S (NP (DT a) (NN dog)) (VP (VBZ runs)))", "(S (X birds) (X fly) (X high))"]


def record(words, heads, labels, fallback=None):
    arcs = [[dependent, head, 0.9, {label: 0.99}] for dependent, (head, label) in enumerate(zip(heads, labels), 1)]
    arcs += [[1, 0, 0.1, {"dep": 1.0}]]
    out = {"words": words, "arcs": arcs, "best": [[h, lab] for h, lab in zip(heads, labels)]}
    if fallback:
        out["fallback"] = fallback
    return out


RECORDS = [record(["a", "dog", "runs"], [2, 3, 0], ["det", "nsubj", "root"]),
           record(["the", "cat"], [2, 0], ["det", "root"]),
           record(["a", "dog", "runs"], [2, 3, 0], ["det", "nsubj", "root"]),
           record(["birds", "fly", "high"], [0, 0, 0], ["_", "_", "_"], fallback="parser error: too\nlong")]


def write_tok(folder, split, lines):
    os.makedirs(folder, exist_ok=True)
    Path(folder, f"{split}.en").write_text("".join(line + "\n" for line in lines))


def make_parsed(folder):
    """A TOK_DIR as a study's data preparation leaves it: tokens, trees, arcs, CoNLL-U, fallback listings."""
    write_tok(folder, "train", SENTENCES)
    Path(folder, "train.tree").write_text("".join(tree + "\n" for tree in TREES))
    Path(folder, "train.arcs.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in RECORDS)
                                                                  .encode()))
    Path(folder, "train.conllu").write_text("".join(conllu_of_record(r, n) for n, r in enumerate(RECORDS, 1)))
    Path(folder, "train.tree.skipped").write_text("4\tover 300 words\n")
    Path(folder, "train.arcs.jsonl.gz.skipped").write_text("4\tparser error: too long\n")


@pytest.fixture
def packed(tmp_path):
    tok, store = str(tmp_path / "tok"), str(tmp_path / "parses")
    make_parsed(tok)
    archive.pack(tok, store, "en", ["train"], {}, str(tmp_path / "no-records"))
    return tok, store


def test_pack_stores_no_conllu_and_unpack_gives_every_file_back(packed, tmp_path):
    tok, store = packed
    assert sorted(os.listdir(store)) == ["MANIFEST.json", "SHA256SUMS", "train.arcs.jsonl.xz", "train.lines.xz",
                                         "train.tree.xz"]
    manifest = archive.verify(store)
    assert manifest["splits"]["train"]["lines"] == 4
    assert manifest["splits"]["train"]["fallbacks"]["tree"] == [[4, "over 300 words"]]
    fresh = str(tmp_path / "fresh")
    write_tok(fresh, "train", SENTENCES)
    [done] = archive.unpack(store, fresh, "en", ["train"])
    assert (done.lines, done.whole, done.fallbacks) == (4, True, 2)
    for name in ("train.tree", "train.arcs.jsonl.gz", "train.conllu", "train.tree.skipped",
                 "train.arcs.jsonl.gz.skipped"):
        assert read(os.path.join(fresh, name)) == read(os.path.join(tok, name)), name
    assert json.loads(read(os.path.join(fresh, "parses.json")))["archive"] == "parses"


def test_a_subset_gets_its_own_lines_parses_numbered_as_its_own_file(packed, tmp_path):
    _, store = packed
    subset = str(tmp_path / "subset")
    write_tok(subset, "train", ["birds fly high", "a dog runs", "the cat"])  # lines 4, 1 (or 3), 2
    [done] = archive.unpack(store, subset, "en", ["train"])
    assert (done.lines, done.whole, done.fallbacks) == (3, False, 2)
    assert read(os.path.join(subset, "train.tree")).decode().splitlines() == [TREES[3], TREES[0], TREES[1]]
    arcs = [json.loads(line) for line in read(os.path.join(subset, "train.arcs.jsonl.gz")).splitlines()]
    assert arcs == [RECORDS[3], RECORDS[0], RECORDS[1]]
    conllu = read(os.path.join(subset, "train.conllu")).decode()
    assert conllu == "".join(conllu_of_record(r, n) for n, r in enumerate([RECORDS[3], RECORDS[0], RECORDS[1]], 1))
    assert conllu.startswith("# sent_id = 1\n# text = birds fly high\n# fallback = parser error: too long\n")
    # the fallback of archive line 4 is line 1 of the subset
    assert read(os.path.join(subset, "train.tree.skipped")) == b"1\tover 300 words\n"


def test_a_line_without_a_parse_is_refused_naming_it(packed, tmp_path):
    _, store = packed
    other = str(tmp_path / "other")
    write_tok(other, "train", ["the cat", "a dog  walks"])
    with pytest.raises(archive.ArchiveError, match=r"other/train.en:2: no parse of this line"):
        archive.unpack(store, other, "en", ["train"])
    assert not os.path.exists(os.path.join(other, "train.tree"))


def test_damage_is_found_before_anything_is_written(packed, tmp_path):
    _, store = packed
    path = os.path.join(store, "train.tree.xz")
    data = bytearray(read(path))
    data[-20] ^= 1
    with open(path, "wb") as out:
        out.write(bytes(data))
    with pytest.raises(archive.ArchiveError, match=r"train.tree.xz: its SHA-256 is not the one .*SHA256SUMS lists"):
        archive.verify(store)
    fresh = str(tmp_path / "fresh")
    write_tok(fresh, "train", SENTENCES)
    with pytest.raises(archive.ArchiveError):
        archive.unpack(store, fresh, "en", ["train"])
    assert sorted(os.listdir(fresh)) == ["train.en"]


def test_pack_refuses_a_conllu_that_is_not_the_records_trees(tmp_path):
    tok = str(tmp_path / "tok")
    make_parsed(tok)
    with open(os.path.join(tok, "train.conllu"), "a") as out:
        out.write("# sent_id = 5\n")
    with pytest.raises(archive.ArchiveError, match=r"train.conllu is not the 1-best trees of .*train.arcs.jsonl.gz"):
        archive.pack(tok, str(tmp_path / "parses"), "en", ["train"], {}, str(tmp_path))


def test_provenance_takes_the_roles_of_a_form(tmp_path):
    parses = tmp_path / "parses.json"
    parses.write_text(json.dumps({"parsers": {"constituency": {"model": "c.pt"}, "tagger": {"model": "t.pt"},
                                              "dependency": {"model": "d.pt"}}}))
    out = str(tmp_path / "parsers.json")
    archive.write_provenance(str(parses), out, ["constituency", "tagger"])
    assert json.loads(read(out)) == {"constituency": {"model": "c.pt"}, "tagger": {"model": "t.pt"}}
    archive.write_provenance(str(parses), out, [], without=["dependency"])
    assert list(json.loads(read(out))) == ["constituency", "tagger"]
    with pytest.raises(archive.ArchiveError, match="names no benepar parser"):
        archive.write_provenance(str(parses), out, ["benepar"])


def test_the_command_prints_one_line_on_error(tmp_path):
    with pytest.raises(SystemExit, match=r"^error: .*nowhere/SHA256SUMS: no such file$"):
        archive.main(["verify", str(tmp_path / "nowhere")])


def test_an_archive_of_the_arcs_only_gives_back_the_arcs_and_no_trees(tmp_path):
    """German without a constituency parser: ``--arcs-only`` packs and unpacks the dependency parses, no trees."""
    tok, store = str(tmp_path / "tok"), str(tmp_path / "parses")
    make_parsed(tok)
    for name in ("train.tree", "train.tree.skipped"):
        os.remove(os.path.join(tok, name))
    with pytest.raises(archive.ArchiveError, match="train.tree: no such file"):  # both kinds by default
        archive.pack(tok, store, "en", ["train"], {}, str(tmp_path / "no-records"))
    archive.main(["pack", tok, store, "--source", "en", "--splits", "train", "--records", str(tmp_path / "none"),
                  "--arcs-only"])
    assert sorted(os.listdir(store)) == ["MANIFEST.json", "SHA256SUMS", "train.arcs.jsonl.xz", "train.lines.xz"]
    fresh = str(tmp_path / "fresh")
    write_tok(fresh, "train", SENTENCES)
    [done] = archive.unpack(store, fresh, "en", ["train"])
    assert (done.lines, done.whole, done.fallbacks) == (4, True, 1)
    for name in ("train.arcs.jsonl.gz", "train.conllu", "train.arcs.jsonl.gz.skipped"):
        assert read(os.path.join(fresh, name)) == read(os.path.join(tok, name)), name
    assert not os.path.exists(os.path.join(fresh, "train.tree"))


def test_a_lines_key_is_what_tokenization_leaves_of_it():
    # sacremoses -a: spaces between tokens, @-@ around a split hyphen; the study's tokens: brackets PTB-escaped
    raw = "A well-known dog (sic) doesn't\tbark."
    tokens = "A well @-@ known dog -LRB- sic -RRB- doesn 't bark ."
    assert coverage.line_key(raw) == coverage.line_key(tokens) == "Awell-knowndog(sic)doesn'tbark."
    # Moses-tokenized text: its entities unescaped as the tokens step unescapes them
    assert coverage.line_key("doesn &apos;t &amp; more", entities=True) == coverage.line_key("doesn 't & more")
    assert coverage.line_key("doesn &apos;t") != coverage.line_key("doesn 't")  # raw text keeps its entities
    assert coverage.line_digest(raw) == coverage.line_digest(tokens) != coverage.line_digest("A dog (sic)")
    assert len(coverage.line_digest(raw)) == 16


def test_an_archive_lists_the_digest_of_each_of_its_lines(packed):
    _, store = packed
    with lzma.open(os.path.join(store, "train.lines.xz"), "rt") as listed:
        assert listed.read().splitlines() == [coverage.line_digest(line) for line in SENTENCES]
    assert archive.verify(store)  # listed in SHA256SUMS
    assert coverage.covered(store, "train") == {coverage.line_digest(line) for line in SENTENCES}  # 3 distinct
    assert coverage.line_digest("a  dog runs") in coverage.covered(store, "train")
    assert coverage.line_digest("a dog walks") not in coverage.covered(store, "train")
    with pytest.raises(archive.ArchiveError, match=r"MANIFEST.json holds no parses of the test split \(it has: "
                                                   r"train\)"):
        coverage.covered(store, "test")
