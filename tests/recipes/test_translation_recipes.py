"""The translation recipes run as a user runs them (``bash examples/NAME/run.sh``) on tiny studies on the CPU."""
import html
import json
import os
import random
import subprocess
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU

from fairseq_syntax.evaluation.records import load_record

from conftest import REPO
from study.test_prepare import parser_stub
from study.tiny_study_file import TINY_MODEL

RECIPE = "examples/iwslt15_en_vi/run.sh"
#: the tiny studies' decoding, test and systems: Sequence and Mask, one seed
TAIL = """\
[decoding]
beam = 1
batch_size = 256
[seeds]
count = 1
[test]
bootstrap_rounds = 100
run_bootstrap_rounds = 100
by_length = []
[[systems]]
name = "sequence"
[[systems]]
name = "mask"
"""
STUDY = """\
[study]
base = "{base}"
name = "iwslt-stand-in"
[parses]
constituency = "stand-in-parser.pt"
tagger = ""
[bpe]
merges = 100
""" + TINY_MODEL + """\
[training]
batch_sentences = 16
device = "cpu"
precision = "fp32"
max_epoch = 1
""" + TAIL
WORDS = ["the", "cat", "dog", "&apos;s", "&quot;", "&amp;", "(", ")", "sees", "a", "man", "&#91;", "&#93;", "big"]
TARGET = ["con", "mèo", "&apos;", "&quot;", "&amp;", "chó", "thấy", "một", "người", "&#91;", "lớn"]


def stand_in(folder: Path) -> None:
    """The release's six files: 40 training pairs, a 114-word pair and one with an empty side, dev and test."""
    rng = random.Random(1)
    folder.mkdir()
    line = lambda words: " ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) + " ."  # noqa: E731
    for stem, pairs in (("train", 40), ("tst2012", 1553), ("tst2013", 1268)):
        sources, targets = [line(WORDS) for _ in range(pairs)], [line(TARGET) for _ in range(pairs)]
        if stem == "train":
            sources += [" ".join(["the"] * 114), "a cat ."]
            targets += ["con mèo .", ""]
        (folder / f"{stem}.en").write_text("".join(f"{text}\n" for text in sources), encoding="utf-8")
        (folder / f"{stem}.vi").write_text("".join(f"{text}\n" for text in targets), encoding="utf-8")


def test_the_recipe_fetches_filters_unescapes_and_scores_on_tokens(tmp_path):
    stand_in(tmp_path / "iwslt")
    (tmp_path / "study.toml").write_text(STUDY.format(base=Path(REPO) / "examples/iwslt15_en_vi/study.toml"),
                                         encoding="utf-8")
    (tmp_path / "stand-in-parser.pt").write_bytes(b"a parser")  # there: no parser is trained
    claims = tmp_path / "claims"  # the runs claim their cores here, not beside this machine's other studies
    claims.mkdir()
    env = {**os.environ, **parser_stub(tmp_path), "TMPDIR": str(claims), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", RECIPE, "--corpus", str(tmp_path / "iwslt"), "--study", str(tmp_path / "study.toml"),
                           "--jobs", "2"], cwd=REPO, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    work = tmp_path / "work"
    assert sorted(path.name for path in (work / "raw").iterdir()) == sorted(
        f"{stem}.{lang}" for stem in ("train", "tst2012", "tst2013") for lang in ("en", "vi"))
    assert "every parser it needs is there" in done.stdout
    assert [json.loads(call)[0] for call in (tmp_path / "calls.jsonl").read_text().splitlines()] == ["constituency"] * 3
    # the 114-word pair and the empty side left out and listed; the other 40 kept, escaped as the recipe says
    removed = (work / "tok/train.removed.tsv").read_text().splitlines()
    assert [row.split("\t")[0] for row in removed[1:]] == ["41", "42"]
    tokens = (work / "tok/train.en").read_text().splitlines()
    raw = (tmp_path / "iwslt/train.en").read_text().splitlines()[:40]
    escapes = {"(": "-LRB-", ")": "-RRB-", "[": "-LSB-", "]": "-RSB-"}  # the PTB escapes of tree leaves
    assert tokens == [" ".join(escapes.get(word, word) for word in html.unescape(text).split()) for text in raw]
    # the reference scored against: tst2013.vi's tokens with their entities unescaped, nothing else changed
    references = (work / "test.vi.ref").read_text().splitlines()
    assert references == [html.unescape(text) for text in (tmp_path / "iwslt/tst2013.vi").read_text().splitlines()]
    from fairseq_syntax.evaluation.scoring import read_generate_output

    for run in ("sequence.seed1", "mask.seed1"):
        record = load_record(tmp_path / "runs" / f"{run}.run.json")
        hypotheses = read_generate_output(str(tmp_path / "runs" / f"{run}.gen.gz"), len(references))
        assert "--lang" not in record["score_command"]
        assert record["metrics"]["BLEU"] == pytest.approx(BLEU().corpus_score(hypotheses, [references]).score,
                                                          abs=1e-9)
    assert (tmp_path / "RESULTS.md").is_file() and "| mask | 1 of 1 | " in done.stdout


def test_a_damaged_corpus_file_stops_the_recipe(tmp_path):  # its --help: test_script_options.py
    stand_in(tmp_path / "iwslt")
    with open(tmp_path / "iwslt/tst2013.vi", "a", encoding="utf-8") as extra:
        extra.write("một dòng thừa .\n")  # 1,269 lines: not the release's test set
    (tmp_path / "study.toml").write_text(f'[study]\nbase = "{Path(REPO) / "examples/iwslt15_en_vi/study.toml"}"\n',
                                         encoding="utf-8")
    done = subprocess.run(["bash", RECIPE, "--corpus", str(tmp_path / "iwslt"), "--study",
                           str(tmp_path / "study.toml")], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"error: {tmp_path / 'iwslt/tst2013.vi'}: not the corpus's file tst2013.vi: "
                                        "1269 lines, not 1268"]
    raw = tmp_path / "work" / "raw"
    assert "tst2013.vi" not in os.listdir(raw) and not any(name.startswith(".") for name in os.listdir(raw))
    assert not (tmp_path / "work" / "tok").exists()  # nothing parsed or prepared


MULTI30K = """\
[study]
base = "{base}"
name = "multi30k-tiny"
[corpus]
raw = "{raw}"
subset = 100
[parses]
archive = "{parses}"
[bpe]
merges = 200
""" + TINY_MODEL + """\
[training]
max_epoch = 1
warmup_updates = 10
""" + TAIL


def test_the_multi30k_recipe_runs_its_study_from_the_committed_parses(tmp_path):
    """100 pairs, Sequence and Mask from the committed parses: no parser runs, the report ends in the verdict table."""
    raw = Path(REPO).parent / "shared" / "data" / "multi30k"
    if not raw.is_dir():
        pytest.skip(f"{raw}: the Multi30k corpus is not beside the repository")
    multi30k = Path(REPO) / "examples" / "multi30k"
    (tmp_path / "study.toml").write_text(MULTI30K.format(base=multi30k / "study.toml", raw=raw,
                                                         parses=multi30k / "parses"), encoding="utf-8")
    claims = tmp_path / "claims"
    claims.mkdir()
    done = subprocess.run(["bash", "examples/multi30k/run.sh", "--study", str(tmp_path / "study.toml"), "--jobs", "2"],
                          cwd=REPO, env={**os.environ, "TMPDIR": str(claims), "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{raw}: multi30k: 0 files fetched, 6 there already and whole" in done.stdout
    assert "parses:archive: parses from parses: lines train 100, valid 1014, test 1000 (found by their tokens)" in \
        done.stdout
    tokens = (tmp_path / "work-study" / "tok" / "train.en").read_text().splitlines()
    trees = (tmp_path / "work-study" / "tok" / "train.tree").read_text().splitlines()
    assert len(tokens) == len(trees) == 100
    from fairseq_syntax.core.trees import parse_tree

    assert all(parse_tree(tree).leaves() == line.split() for tree, line in zip(trees, tokens))
    for run in ("sequence.seed1", "mask.seed1"):
        assert json.loads((tmp_path / "runs" / f"{run}.run.json").read_text())["dataset"] == "multi30k-tiny"
    assert "| mask | 1 of 1 | " in done.stdout and (tmp_path / "RESULTS.md").is_file()
