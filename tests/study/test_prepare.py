"""study.prepare: a tiny study's data made once, exactly the grid's directories; reruns, changes, kills, refusals."""
import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO

from fairseq_syntax.study.config import load_study
from fairseq_syntax.study.grid import data_directories, data_fingerprint
from fairseq_syntax.study.prepare import prepare
from fairseq_syntax.study.prepare.corpus import subset_lines
from fairseq_syntax.study.prepare.engine import MANIFEST, STAGING, PrepareError, damaged
from fairseq_syntax.study.prepare.needs import grid_needs

SPLITS = {"train": 60, "valid": 10, "test": 10}
SUBSET = 50
MERGES = 50
STUDY = """\
[study]
name = "tiny"
work = "{work}"
[corpus]
raw = "raw"
text = "tokenized"
subset = {subset}
[parses]
archive = "parses"
[bpe]
merges = {merges}
[seeds]
count = 2
[[systems]]
name = "sequence"
[[systems]]
name = "mask"
controls = ["random"]
[[systems]]
name = "udp"
"""
GRID = ["sequence", "preorder", "preorder.random", "preorder.random-s2"]
STEPS = ["subset", "tokens", "parses:archive", "bpe", "controls:random", "controls:random-s2", "data-bin/sequence",
         "data-bin/preorder", "data-bin/preorder.random", "data-bin/preorder.random-s2", "reference"]


def write_study(folder: Path, work: str, merges: int = MERGES, name: str = "study.toml") -> Path:
    path = folder / name
    path.write_text(STUDY.format(work=work, subset=SUBSET, merges=merges), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """The demo corpus as raw text, its gold parses packed into a parse archive (stand-in parser models); once a
    session for tests/study (conftest.py), once for this module, which writes studies into it."""
    from fairseq_syntax.parsing import archive
    from fairseq_syntax.parsing.dependency import conllu_of_record

    folder = tmp_path_factory.mktemp("study")
    demo = folder / "demo"
    subprocess.run([sys.executable, "examples/demo/make_data.py", "--out", str(demo), "--seed", "1",
                    *[f"--{split}={count}" for split, count in SPLITS.items()]], cwd=REPO, check=True,
                   capture_output=True)
    raw, tok, models = folder / "raw", folder / "tok", folder / "parser-models"
    for made in (raw, tok, models):
        made.mkdir()
    for split in SPLITS:
        for lang in ("en", "de"):
            shutil.copy(demo / f"{split}.{lang}", raw / f"{split}.{lang}")
            shutil.copy(demo / f"{split}.{lang}", tok / f"{split}.{lang}")
        shutil.copy(demo / f"{split}.tree", tok / f"{split}.tree")
        lines = (demo / f"{split}.arcs.jsonl").read_text().splitlines()
        with gzip.open(tok / f"{split}.arcs.jsonl.gz", "wt") as out:
            out.write("".join(line + "\n" for line in lines))
        (tok / f"{split}.conllu").write_text("".join(conllu_of_record(json.loads(line), k)
                                                     for k, line in enumerate(lines, 1)))
    for name in ("crf-con.pt", "tagger.pt", "biaffine.pt"):
        (models / name).write_bytes(name.encode())
    archive.pack(str(tok), str(folder / "parses"), "en", list(SPLITS),
                 {"constituency": str(models / "crf-con.pt"), "tagger": str(models / "tagger.pt"),
                  "dependency": str(models / "biaffine.pt")}, str(folder / "no-records"))
    return folder


@pytest.fixture(scope="module")
def prepared(corpus):
    """(config, progress lines, returned names) of the tiny study prepared once."""
    config = load_study(write_study(corpus, "work"))
    lines = []
    names = prepare(config, lines.append)
    return config, lines, names


def test_only_some_runs_need_the_directories_they_read_and_their_controls_bases(corpus):
    config = load_study(write_study(corpus, "work-only", name="only.toml"))
    needs = grid_needs(config, only=["udp.seed2", "mask_random.seed2"])
    assert [d.name for d in needs.directories] == ["sequence", "preorder", "preorder.random-s2"]
    assert needs.controls == [("random", 2)] and needs.trees and needs.arcs
    assert [[side.input for side in d.side_data] for d in needs.directories] == [["src_ldd"], [], []]
    assert [d.reads for d in needs.directories] == [("arcs",), ("trees",), ("trees",)]
    assert needs.directories == [d for d in grid_needs(config).directories
                                 if d.name in ("sequence", "preorder", "preorder.random-s2")]
    assert grid_needs(config, only=[]).directories == []


def test_a_controls_structures_are_made_alike_for_whichever_of_its_runs_remain(corpus):
    """One step makes the random control's trees and dependency arcs, which its Mask and UDP runs read: a study run
    again once its Mask runs finished (``only`` the UDP runs) finds the structures made for the whole grid, not a
    step that reads the arcs only and is refused as made from other inputs."""
    path = corpus / "both.toml"
    path.write_text(STUDY.format(work="work-both", subset=SUBSET, merges=MERGES).replace(
        'name = "udp"\n', 'name = "udp"\ncontrols = ["random"]\n'), encoding="utf-8")
    config = load_study(path)
    needs = grid_needs(config, only=["udp_random.seed1"])
    assert [d.name for d in needs.directories] == ["sequence", "sequence.random"]
    assert needs.control_reads[("random", 1)] == ("trees", "arcs") and needs.trees and needs.arcs
    prepare(config, lambda line: None, only=["mask_random.seed1"])
    made = json.loads((corpus / "work-both" / MANIFEST).read_text())["steps"]["controls:random"]["outputs"]
    assert sorted(made) == sorted(f"bpe/random/{split}.{kind}" for split in SPLITS
                                  for kind in ("tree", "arcs.jsonl.gz", "conllu"))
    lines = []
    prepare(config, lines.append, only=["udp_random.seed1"])
    assert [line for line in lines if line.startswith("controls:")] == [
        "controls:random: made already, kept (random trees and dependency trees (seed 1) for lines train 50, valid 10, "
        "test 10)"]
    assert (corpus / "work-both/data-bin/sequence.random/syntax.json").is_file()


def snapshot(folder: Path) -> dict:
    return {str(path.relative_to(folder)): (path.stat().st_mtime_ns, path.stat().st_size)
            for path in sorted(folder.rglob("*")) if path.is_file()}


def test_prepare_makes_exactly_the_grids_directories(corpus, prepared):
    config, lines, names = prepared
    work = corpus / "work"
    assert names == data_directories(config) == GRID
    assert sorted(path.name for path in (work / "data-bin").iterdir()) == sorted(GRID)
    assert not (work / STAGING).exists()
    assert [line.split(":")[0] if not line.startswith("parses:") and not line.startswith("controls:")
            else ":".join(line.split(":")[:2]) for line in lines[:-1]] == STEPS
    assert lines[0] == (f"subset: {SUBSET} of {SPLITS['train']} training pairs drawn (seed 1) into "
                        "raw/train.{en,de}.gz")
    assert f"pairs: train {SUBSET}, valid 10, test 10" in lines[1]
    chosen = sorted(number + 1 for number in random.Random(1).sample(range(SPLITS["train"]), SPLITS["train"])[:SUBSET])
    assert chosen == subset_lines(SPLITS["train"], SUBSET, 1)
    assert (work / "raw/train.lines").read_text() == "".join(f"{n}\n" for n in chosen)
    raw = (corpus / "raw/train.en").read_text().splitlines()
    assert (work / "tok/train.en").read_text().splitlines() == [raw[n - 1] for n in chosen]
    sequence = json.loads((work / "data-bin/sequence/syntax.json").read_text())
    assert sequence["form"] == "sequence" and set(sequence["side_data"]) == {"ldd"}
    assert list(json.loads((work / "data-bin/sequence/parsers.json").read_text())) == ["dependency"]
    from fairseq_syntax.parsing.provenance import model_digest

    preorder = json.loads((work / "data-bin/preorder/parsers.json").read_text())
    assert preorder["constituency"] == {"model": "crf-con.pt",
                                        "sha256": model_digest(str(corpus / "parser-models" / "crf-con.pt"))}
    for name, control in (("preorder", None), ("preorder.random", {"structure": "random", "seed": 1}),
                          ("preorder.random-s2", {"structure": "random", "seed": 2})):
        meta = json.loads((work / "data-bin" / name / "syntax.json").read_text())
        assert meta["form"] == "preorder" and set(meta["side_data"]) == {"parents"} and meta.get("control") == control
        parsers = json.loads((work / "data-bin" / name / "parsers.json").read_text())
        assert list(parsers) == ["constituency", "tagger"] + (["control"] if control else [])
    one, two = ((work / f"bpe/{name}/train.tree").read_text() for name in ("random", "random-s2"))
    assert one != two and [t.split() for t in one.splitlines()] != [t.split() for t in two.splitlines()]
    assert (work / "test.de.ref").read_bytes() == (corpus / "raw/test.de").read_bytes()
    manifest = json.loads((work / MANIFEST).read_text())
    assert list(manifest["steps"]) == STEPS


def test_a_side_input_no_method_makes_is_refused(prepared, monkeypatch):
    from fairseq_syntax import methods

    config, _, _ = prepared
    monkeypatch.setattr(methods, "side_data", lambda: {})
    with pytest.raises(PrepareError) as refused:
        grid_needs(config)
    assert str(refused.value) == (f"{config.path}: systems: udp reads side input src_ldd, which neither its input "
                                  "form sequence nor a method of the registry makes")


def test_a_changed_setting_is_refused_naming_the_output(corpus, prepared, tmp_path):
    """bpe.merges changed: refused in one line naming bpe/codes and the key, nothing written."""
    shutil.copytree(corpus / "work", corpus / "work-merges", symlinks=True)
    try:
        config = load_study(write_study(corpus, "work-merges", merges=MERGES - 10, name="merges.toml"))
        before = snapshot(corpus / "work-merges")
        with pytest.raises(PrepareError) as refused:
            prepare(config, lambda line: None)
        message = str(refused.value)
        assert "\n" not in message
        assert message.startswith(f"{corpus / 'work-merges' / 'bpe' / 'codes'}: made from other inputs or settings")
        assert f"bpe.merges: {MERGES} when made, {MERGES - 10} now" in message
        assert snapshot(corpus / "work-merges") == before
    finally:
        shutil.rmtree(corpus / "work-merges")


def test_missing_files_are_named_at_once_before_anything_runs(corpus, tmp_path):
    (tmp_path / "raw").mkdir()
    shutil.copy(corpus / "raw/train.en", tmp_path / "raw/train.en")
    shutil.copytree(corpus / "parses", tmp_path / "parses")
    study = write_study(tmp_path, "work")
    study.write_text(study.read_text().replace('archive = "parses"', 'archive = "no-parses"'))
    with pytest.raises(PrepareError) as refused:
        prepare(load_study(study), lambda line: None)
    assert str(refused.value).splitlines() == [
        f"{study}: corpus.raw: {tmp_path / 'raw'} lacks train.de[.gz], valid.en[.gz], valid.de[.gz], test.en[.gz], "
        "test.de[.gz] (corpus.train = 'train', corpus.valid = 'valid', corpus.test = 'test', corpus.source 'en', "
        "corpus.target 'de')",
        f"{study}: parses.archive: {tmp_path / 'no-parses'}: no parse archive there (no MANIFEST.json)"]
    assert not (tmp_path / "work").exists()


def test_a_killed_prepare_leaves_nothing_that_looks_whole(corpus, prepared):
    """Killed while building the last control: only whole directories stand; the next prepare remakes the same."""
    config, _, _ = prepared
    work = corpus / "work-killed"
    shutil.copytree(corpus / "work", work, symlinks=True)
    try:
        recorded = {name: data_fingerprint(corpus / "work/data-bin" / name) for name in GRID}
        for name in ("preorder.random", "preorder.random-s2"):
            shutil.rmtree(work / "data-bin" / name)
        study = write_study(corpus, "work-killed", name="killed.toml")
        building = work / STAGING / "data-bin_preorder.random-s2" / "data-bin" / "preorder.random-s2"
        process = subprocess.Popen([sys.executable, "-c", "import sys; from fairseq_syntax.study.config import "
                                    "load_study; from fairseq_syntax.study.prepare import prepare; "
                                    "prepare(load_study(sys.argv[1]))", str(study)], cwd=REPO,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 300
        while not building.exists() and process.poll() is None and time.time() < deadline:
            time.sleep(0.002)
        process.send_signal(signal.SIGKILL)
        assert process.wait() == -signal.SIGKILL
        manifest = json.loads((work / MANIFEST).read_text())
        for name in (path.name for path in (work / "data-bin").iterdir()):
            outputs = manifest["steps"][f"data-bin/{name}"]["outputs"]
            assert damaged(work / "data-bin" / name, outputs[f"data-bin/{name}"]) is None, name
        assert not (work / "data-bin/preorder.random-s2").exists()
        assert (work / "data-bin/preorder.random").is_dir()
        lines = []
        assert prepare(load_study(study), lines.append) == GRID
        assert "data-bin/preorder.random-s2: made again (data-bin/preorder.random-s2: missing)" in lines
        assert {name: data_fingerprint(work / "data-bin" / name) for name in GRID} == recorded
        assert not (work / STAGING).exists()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_a_parser_named_by_a_name_that_cannot_be_downloaded_stops_it_before_anything_is_made(corpus, tmp_path,
                                                                                            monkeypatch):
    """benepar_en3 behind a dead proxy: one line, no WORK made."""
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    shutil.copytree(corpus / "raw", tmp_path / "raw")
    study = tmp_path / "study.toml"
    study.write_text(STUDY.format(work="work", subset=0, merges=MERGES).replace(
        'archive = "parses"', 'constituency = "benepar_en3"\nconstituency_backend = "benepar"').replace(
        '[[systems]]\nname = "udp"\n', ""))
    with pytest.raises(PrepareError) as refused:
        prepare(load_study(study), lambda line: None)
    assert len(str(refused.value).splitlines()) == 1
    assert str(refused.value).startswith(f"{study}: parses.constituency: could not download benepar_en3: ")
    assert not (tmp_path / "work").exists()


def test_a_second_prepare_started_meanwhile_waits_then_finds_everything_made(corpus, prepared, monkeypatch):
    """WORK/prepare.lock held: prepare says it waits, then finds every step made and changes no file, with the side
    data of a method added since (which no system reads: not made)."""
    import fcntl
    import threading

    from fairseq_syntax import methods
    from fairseq_syntax.core.side_data import SideData

    def never(job):
        raise AssertionError("made")

    added = {**methods.side_data(), "src_other": SideData("src_other", "other", ("trees",), never)}
    monkeypatch.setattr(methods, "side_data", lambda: added)
    config, _, _ = prepared
    lines, names = [], []
    with open(corpus / "work" / "prepare.lock", "a") as lock:
        before = snapshot(corpus / "work")
        fcntl.flock(lock, fcntl.LOCK_EX)
        waiting = threading.Thread(target=lambda: names.extend(prepare(config, lines.append)))
        waiting.start()
        deadline = time.time() + 120
        while not lines and time.time() < deadline:
            time.sleep(0.01)
        assert lines == [f"waiting for another preparation of {corpus / 'work'} (prepare.lock) to end"]
        fcntl.flock(lock, fcntl.LOCK_UN)
    waiting.join(timeout=300)
    assert names == GRID and snapshot(corpus / "work") == before
    assert all(": made already, kept (" in line for line in lines[1:-1]) and len(lines) == len(STEPS) + 2


PARSER_STUB = '''#!/usr/bin/env python3
"""A stand-in fairseq-syntax-parse: logs its arguments, writes a flat tree or a left chain."""
import argparse, gzip, json, os, sys
if sys.argv[1] == "fetch":
    sys.exit(0)
with open(os.environ["PARSE_STUB_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
parser = argparse.ArgumentParser()
parser.add_argument("kind")
for option in ("--backend", "--model", "--tagger", "--lang", "--input", "--output", "--conllu", "--workers",
               "--num-shards"):
    parser.add_argument(option)
args = parser.parse_args()
sentences = [line.split() for line in open(args.input)]
if args.kind == "constituency":
    with open(args.output, "w") as out:
        out.write("".join("(S " + " ".join(f"(NN {w})" for w in words) + ")\\n" for words in sentences))
else:
    from fairseq_syntax.parsing.dependency import conllu_of_record
    records = [{"words": words, "arcs": [[k, k - 1, 1.0, {"root" if k == 1 else "dep": 1.0}]
                                         for k in range(1, len(words) + 1)],
                "best": [[k - 1, "root" if k == 1 else "dep"] for k in range(1, len(words) + 1)]}
               for words in sentences]
    with gzip.open(args.output, "wt") as out:
        out.write("".join(json.dumps(record) + "\\n" for record in records))
    with open(args.conllu, "w") as out:
        out.write("".join(conllu_of_record(record, k) for k, record in enumerate(records, 1)))
from fairseq_syntax.parsing.parse_records import write_record
models = {args.kind: args.model} | ({"tagger": args.tagger} if args.tagger else {})
write_record([args.output] + ([args.conllu] if args.conllu else []), args.kind, args.backend, models,
             "universal" if args.kind == "dependency" else None, args.input, args.lang, False)
'''


def parser_stub(folder: Path) -> dict:
    """The environment in which fairseq-syntax-parse is PARSER_STUB (FOLDER/bin), logging to FOLDER/calls.jsonl."""
    (folder / "bin").mkdir()
    (folder / "bin" / "fairseq-syntax-parse").write_text(PARSER_STUB)
    (folder / "bin" / "fairseq-syntax-parse").chmod(0o755)
    return {"PATH": f"{folder / 'bin'}{os.pathsep}{os.environ['PATH']}", "PARSE_STUB_LOG": str(folder / "calls.jsonl"),
            "PYTHONPATH": REPO}


def test_the_parsers_the_file_names_parse_the_source_side(corpus, tmp_path, monkeypatch):
    """No archive: each named parser runs once a split; the directories record them (name, or file and digest)."""
    for name, value in parser_stub(tmp_path).items():
        monkeypatch.setenv(name, value)
    shutil.copytree(corpus / "raw", tmp_path / "raw")
    (tmp_path / "biaffine.pt").write_bytes(b"a dependency parser")
    study = tmp_path / "study.toml"
    study.write_text(STUDY.format(work="work", subset=0, merges=MERGES)
                     .replace('archive = "parses"', 'constituency = "crf-con-en"\ndependency = "biaffine.pt"\n'
                                                   'workers = 2')
                     .replace('controls = ["random"]\n', "").replace("count = 2", "count = 1"))
    lines = []
    assert prepare(load_study(study), lines.append) == ["sequence", "preorder"]
    work = tmp_path / "work"
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    staging = {split: work / STAGING / "parses_constituency" / "tok" for split in SPLITS}
    assert calls[:3] == [["constituency", "--backend", "crf-con", "--model", "crf-con-en", "--lang", "en", "--input",
                          str(work / f"tok/{split}.en"), "--output", str(staging[split] / f"{split}.tree"),
                          "--workers", "2", "--num-shards", "2"] for split in SPLITS]
    assert [call[:5] for call in calls[3:]] == [["dependency", "--backend", "biaffine", "--model",
                                                 str(tmp_path / "biaffine.pt")]] * 3
    assert "parses:constituency: lines parsed by crf-con-en: train 60, valid 10, test 10; 0 fallback lines" \
        in "\n".join(lines)
    preorder = json.loads((work / "data-bin/preorder/syntax.json").read_text())
    assert preorder["parser"] == {"backend": "crf-con", "model": "crf-con-en", "tagger": None}
    assert json.loads((work / "data-bin/preorder/parsers.json").read_text()) == {
        "constituency": {"model": "crf-con-en"}}
    dependency = json.loads((work / "data-bin/sequence/parsers.json").read_text())["dependency"]
    assert dependency["model"] == "biaffine.pt" and len(dependency["sha256"]) == 16
    assert dependency["labels"] == "universal"
    assert json.loads((work / "data-bin/sequence/syntax.json").read_text())["ldd"]["labels"] == "universal"
    assert json.loads((work / "tok/valid.arcs.jsonl.parse.json").read_text())["input"]["file"] == "valid.en"
    assert (work / "tok/train.tree").read_text().splitlines()[0] == \
        "(S " + " ".join(f"(NN {w})" for w in (work / "tok/train.en").read_text().split("\n")[0].split()) + ")"
    prepare(load_study(study), lambda line: None)
    assert len((tmp_path / "calls.jsonl").read_text().splitlines()) == 6
