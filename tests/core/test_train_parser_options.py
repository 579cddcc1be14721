"""``preprocess/train_parser.py`` checks its options before anything is read or written, one line each
(``--heldout 8`` meant 8%, not 800%). Its run record: tests/core/test_tagger.py."""
import os
import runpy
from pathlib import Path

import pytest
from conftest import REPO, TREEBANK, bracketed

SCRIPT = Path(REPO) / "preprocess" / "train_parser.py"
HELDOUT = "a fraction in (0, 1) is meant (0.1 keeps the last tenth of the trees for evaluation)"


@pytest.fixture
def treebank(tmp_path):
    ptb = tmp_path / "tiny.mrg"
    ptb.write_text("".join(bracketed(*sentence) for sentence in TREEBANK))
    return ptb


def train_parser(argv):
    """train_parser.py's main in this process: its SystemExit's message (None when it ran through)."""
    main = runpy.run_path(str(SCRIPT))["main"]
    try:
        main(argv)
    except SystemExit as stop:
        return str(stop.code)
    return None


@pytest.mark.parametrize("option, value, line", [
    ("--heldout", "8", f"--heldout 8: {HELDOUT}"),
    ("--heldout", "0", f"--heldout 0: {HELDOUT}"),
    ("--dev-fraction", "1", "--dev-fraction 1: a fraction in (0, 1) is meant (0.1 selects the epoch on the last "
                            "tenth of the rest)"),
    ("--epochs", "0", "--epochs 0: train at least 1 epoch (--epochs is the total, over every sitting)"),
    ("--ptb", "missing.mrg", "--ptb {tmp}/missing.mrg: no such file"),
    ("--extra-conllu", "missing.conllu", "--extra-conllu {tmp}/missing.conllu: no such file"),
    ("--output", "", "--output {tmp}/: a folder, not a file: give a file's path"),
    ("--record", "", "--record {tmp}/: a folder, not a file: give a file's path"),
])
def test_a_bad_option_is_one_line_and_nothing_is_written(treebank, tmp_path, option, value, line):
    path_options = ("--ptb", "--extra-conllu", "--output", "--record")
    value = f"{tmp_path}/{value}" if option in path_options else value
    argv = {"--ptb": str(treebank), "--output": str(tmp_path / "models" / "tagger.pt"),
            "--work-dir": str(tmp_path / "work"), "--epochs": "1", option: value}
    before = sorted(os.listdir(tmp_path))
    message = train_parser(["tagger", *[word for pair in argv.items() for word in pair]])
    assert message == f"error: {line.format(tmp=tmp_path)}"
    assert sorted(os.listdir(tmp_path)) == before  # no models/, no work/


def test_each_bad_option_has_its_line(tmp_path):
    message = train_parser(["dependency", "--train", str(tmp_path / "train.conllu"), "--dev", str(tmp_path),
                            "--output", str(tmp_path / "dep.pt"), "--work-dir", str(tmp_path / "work"),
                            "--epochs", "0"])
    assert message.splitlines() == [
        "error: --epochs 0: train at least 1 epoch (--epochs is the total, over every sitting)",
        f"error: --train {tmp_path}/train.conllu: no such file",
        f"error: --dev {tmp_path}: a folder, not a file"]
