"""fairseq-syntax-parse: names and paths, the record beside each parse, --lang de, stanza; offline."""
import gzip
import hashlib
import json
import os
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO, TINY_SUPAR_SIZES, TREEBANK

from fairseq_syntax.cli import parse
from fairseq_syntax.parsing import labels, parse_records, training
from fairseq_syntax.parsing.dependency import read_arc_distributions

torch.set_num_threads(1)
GSD_DEV = Path(REPO).parent / "shared" / "data" / "ud-de-gsd" / "de_gsd-ud-dev.conllu.gz"
GERMAN = ["Das Haus, das ich sah.", "Ich hatte Gelegenheit, seine Seminare zu besuchen.", ""]
#: sacremoses -l de -a on GERMAN, by hand: the commas and full stops split off, nothing else
GERMAN_TOKENS = [["Das", "Haus", ",", "das", "ich", "sah", "."],
                 ["Ich", "hatte", "Gelegenheit", ",", "seine", "Seminare", "zu", "besuchen", "."], []]


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No download can succeed here, whatever the machine's network; stanza's resources folder is a fresh one."""
    for variable in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.setenv(variable, "http://127.0.0.1:9")
    monkeypatch.setenv("STANZA_RESOURCES_DIR", str(tmp_path / "stanza_resources"))


def run_parse(argv, capfd):
    """fairseq-syntax-parse in this process: (exit status, stderr lines)."""
    try:
        parse.main(argv)
        status = 0
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else 1
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
    return status, capfd.readouterr().err.strip().splitlines()


def stanford_conllu(subject, verb, obj):
    """A treebank sentence in Stanford labels: "the N V the N on the mat ."."""
    rows = [("the", 2, "det"), (subject, 3, "nsubj"), (verb, 0, "root"), ("the", 5, "det"), (obj, 3, "dobj"),
            ("on", 3, "prep"), ("the", 8, "det"), ("mat", 6, "pobj"), (".", 3, "punct")]
    return "".join(f"{i}\t{w}\t_\t_\t_\t_\t{h}\t{r}\t_\t_\n" for i, (w, h, r) in enumerate(rows, 1)) + "\n"


def train_tiny_supar(conllu_text, folder, name):
    path = folder / f"{name}.conllu"
    path.write_text(conllu_text, encoding="utf-8")
    model = str(folder / f"{name}.pt")
    training.train_supar_dependency(str(path), str(path), model, epochs=1, size=training.SuparSize(
        **TINY_SUPAR_SIZES), batch_tokens=40, learning_rate=1e-2, verbose=False)
    return model


def gsd_slice(count):
    """The first ``count`` sentences of GSD dev, without multi-word token ranges and empty nodes."""
    blocks = gzip.open(GSD_DEV, "rt", encoding="utf-8").read().split("\n\n")[:count]
    keep = lambda line: line.startswith("#") or not ("-" in line.split("\t")[0] or "." in line.split("\t")[0])  # noqa
    return "".join("\n".join(filter(keep, block.split("\n"))) + "\n\n" for block in blocks)


@pytest.fixture(scope="module")
def german_model(tmp_path_factory):
    """A tiny SuPar biaffine parser trained (one epoch) on 40 sentences of German GSD dev."""
    return train_tiny_supar(gsd_slice(40), tmp_path_factory.mktemp("german"), "biaffine-de-gsd-tiny")


# --- names and paths
@pytest.mark.parametrize("argv", [
    ["dependency", "--backend", "biaffine", "--model", "biaffine-dep-en"],
    ["constituency", "--backend", "crf-con", "--model", "crf-con-en"],
    ["constituency", "--backend", "benepar", "--model", "benepar_en3"],
    ["dependency", "--backend", "stanza", "--model", "en"],
    ["constituency", "--backend", "stanza", "--model", "de", "--lang", "de"],
], ids=lambda argv: argv[4])
def test_a_name_not_on_disk_ends_in_one_line_and_writes_nothing(tmp_path, monkeypatch, capfd, argv):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "input.txt").write_text("the cat sees the dog .\n")
    output = "out.arcs.jsonl.gz" if argv[0] == "dependency" else "out.tree"
    status, lines = run_parse([*argv, "--input", "input.txt", "--output", output], capfd)
    name = argv[4]
    assert status != 0
    assert len(lines) == 1 and lines[0].startswith(f"error: could not download {name}: "), lines
    assert len(lines[0]) > len(f"error: could not download {name}: ")  # a reason is given
    assert sorted(os.listdir(tmp_path)) == ["input.txt"]  # no model trained, nothing parsed, no record
    assert not (tmp_path / "stanza_resources").exists()  # a resources folder the failed download made is gone


def test_a_path_that_is_not_there_is_named_as_a_missing_file_not_downloaded(tmp_path, capfd):
    (tmp_path / "input.txt").write_text("a b\n")
    status, lines = run_parse(["dependency", "--backend", "biaffine", "--model", "models/biaffine.pt", "--input",
                               str(tmp_path / "input.txt"), "--output", str(tmp_path / "a.arcs.jsonl")], capfd)
    assert status == 1 and lines == ["error: models/biaffine.pt: no such model file or folder"]


def test_fetch_offline_is_one_line(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    status, lines = run_parse(["fetch", "--kind", "dependency", "--backend", "biaffine", "--model",
                               "biaffine-dep-en"], capfd)
    assert status == 1 and len(lines) == 1 and lines[0].startswith("error: could not download biaffine-dep-en: ")
    assert os.listdir(tmp_path) == []


# --- label schemes
def test_label_schemes_by_the_labels_only_one_has():
    assert labels.label_scheme(["det", "nsubj", "dobj", "prep", "pobj", "root"]) == "stanford"
    assert labels.label_scheme(["det", "nsubj", "obj", "case", "root"]) == "universal"
    assert labels.label_scheme(["nsubj:pass", "det"]) == "universal"  # a UD subtype
    with pytest.raises(labels.UnknownLabelScheme, match=r"mix Stanford \(dobj\) and universal \(obl\)"):
        labels.label_scheme(["dobj", "obl"])
    with pytest.raises(labels.UnknownLabelScheme, match="hold no label that only"):
        labels.label_scheme(["det", "nsubj", "root"])


def test_the_label_scheme_follows_the_model_and_the_record_names_it_by_digest(tmp_path, capfd, dependency_model):
    stanford_model = train_tiny_supar("".join(stanford_conllu(*sentence) for sentence in TREEBANK), tmp_path,
                                      "stanford")
    source = tmp_path / "train.en"
    source.write_text("the cat sees the dog on the mat .\n")
    for model, scheme in ((stanford_model, "stanford"), (dependency_model, "universal")):
        arcs = tmp_path / f"{scheme}.arcs.jsonl.gz"
        status, lines = run_parse(["dependency", "--backend", "biaffine", "--model", model, "--input", str(source),
                                   "--output", str(arcs), "--conllu", str(tmp_path / "train.conllu"), "--device",
                                   "cpu"], capfd)
        assert status == 0
        assert f"{arcs}: {scheme} dependency labels (fairseq-syntax-preprocess-dependencies --labels {scheme})" in lines
        assert parse_records.labels_of(str(arcs)) == scheme  # the record's: read from the model's own labels
    record = json.loads((tmp_path / "universal.arcs.jsonl.parse.json").read_text())
    digest = hashlib.sha256(Path(dependency_model).read_bytes()).hexdigest()[:16]
    assert record["models"] == {"dependency": {"model": "dep.pt", "sha256": digest}}
    assert record["input"] == {"file": "train.en", "sha256": hashlib.sha256(source.read_bytes()).hexdigest()}
    assert record["outputs"] == ["universal.arcs.jsonl.gz", "train.conllu"]


# --- German
def test_german_raw_text_parsed_by_a_tiny_gsd_parser_grouped_into_the_16_ldd_groups(tmp_path, capfd,
                                                                                      german_model):
    from fairseq_syntax.methods.ldd import distributions

    raw = tmp_path / "raw.de"
    raw.write_text("\n".join(GERMAN) + "\n", encoding="utf-8")
    arcs = tmp_path / "raw.arcs.jsonl.gz"
    status, lines = run_parse(["dependency", "--backend", "biaffine", "--lang", "de", "--raw", "--model",
                               german_model, "--input", str(raw), "--output", str(arcs), "--conllu",
                               str(tmp_path / "raw.conllu"), "--device", "cpu"], capfd)
    assert status == 0, lines
    records = list(read_arc_distributions(str(arcs)))
    assert [record["words"] for record in records] == GERMAN_TOKENS
    assert records[2]["fallback"] == "empty line"
    assert parse_records.labels_of(str(arcs)) == "universal"  # GSD is UD: read from the model's labels
    index = distributions.label_index(distributions.UNIVERSAL_GROUPS)
    inside = outside = 0.0
    for record in records[:2]:
        for arc in distributions.labeled_arcs(record):
            if distributions.label_group(arc.label, index) == distributions.OUTSIDE:
                outside += arc.probability
            else:
                inside += arc.probability
    words = sum(len(words) for words in GERMAN_TOKENS)
    print(f"German, tiny GSD parser: {100 * outside / words:.1f}% of the labeled mass outside the 16 groups")
    assert 0 < inside + outside <= words + 1e-3  # at most one unit of mass a word (the floors drop some)
    assert 0 <= outside < inside + outside


# --- stanza
@pytest.fixture(scope="module")
def stanza_german_model(tmp_path_factory):
    """A tiny stanza graph parser trained offline for 2 steps on 20 GSD sentences by stanza's own trainer."""
    from stanza.models import parser as stanza_parser

    folder = tmp_path_factory.mktemp("stanza")
    treebank = folder / "de_gsd.conllu"
    treebank.write_text("\n\n".join(gzip.open(GSD_DEV, "rt", encoding="utf-8").read().split("\n\n")[:20]) + "\n\n",
                        encoding="utf-8")
    stanza_parser.main(["--train_file", str(treebank), "--eval_file", str(treebank), "--lang", "de", "--shorthand",
                        "de_gsd", "--no_pretrain", "--no_upos", "--no_xpos", "--no_ufeats", "--hidden_dim", "16",
                        "--char_hidden_dim", "16", "--deep_biaff_hidden_dim", "16", "--deep_biaff_output_dim", "8",
                        "--word_emb_dim", "16", "--char_emb_dim", "8", "--tag_emb_dim", "8", "--transformed_dim",
                        "16", "--num_layers", "1", "--max_steps", "2", "--eval_interval", "2", "--batch_size", "300",
                        "--no_checkpoint", "--save_dir", str(folder), "--save_name", "de_tiny_parser.pt", "--cpu",
                        "--output_file", str(folder / "dev.pred.conllu")])
    return str(folder / "de_tiny_parser.pt")


def test_stanza_parses_german_with_its_full_distributions(tmp_path, capfd, stanza_german_model):
    raw = tmp_path / "raw.de"
    raw.write_text("\n".join(GERMAN) + "\n", encoding="utf-8")
    arcs = tmp_path / "stanza.arcs.jsonl"
    status, lines = run_parse(["dependency", "--backend", "stanza", "--lang", "de", "--raw", "--model",
                               stanza_german_model, "--input", str(raw), "--output", str(arcs), "--device", "cpu"],
                              capfd)
    assert status == 0, lines
    records = list(read_arc_distributions(str(arcs)))  # checked: each dependent's heads sum to <= 1, a tree
    assert [record["words"] for record in records] == GERMAN_TOKENS
    for record in records[:2]:
        heads = {}
        for dependent, head, probability, _ in record["arcs"]:
            heads[dependent] = heads.get(dependent, 0) + probability
        assert all(0.98 <= mass <= 1 + 1e-3 for mass in heads.values())  # the 1e-3 floor drops little
        assert len(record["best"]) == len(record["words"])
    assert json.loads((tmp_path / "stanza.arcs.jsonl.parse.json").read_text())["labels"] == "universal"
