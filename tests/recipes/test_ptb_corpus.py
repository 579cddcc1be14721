"""examples/ptb_induction/make_corpus.py --text ptb: WSJ text and the PTB sample's words in Mikolov's preprocessing
(the Tree Transformer's in-domain training text)."""
import json
import os
import runpy
import subprocess
import sys

import pytest
from conftest import REPO

SHARED = os.path.join(os.path.dirname(REPO), "shared", "data")


def test_mikolov_preprocessing_of_a_sentence():
    mikolov = runpy.run_path(os.path.join(REPO, "examples", "ptb_induction", "make_corpus.py"))["mikolov"]
    vocabulary = {"pierre", "years", "old", "N"}
    assert mikolov(["Pierre", "Vinken", "61", "years", "old", "10-year", "3.5"], vocabulary) == [
        "pierre", "<unk>", "N", "years", "old", "N", "N"]


# the real corpora (ptb-lm, the PTB sample) lie in shared/ beside the repository, as in CI; a clone elsewhere skips
@pytest.mark.skipif(not os.path.isdir(os.path.join(SHARED, "ptb-sample")), reason=f"{SHARED} not present")
def test_ptb_text_holds_wsj_text_and_the_samples_words_aligned_with_its_trees(tmp_path):
    subprocess.run([sys.executable, os.path.join(REPO, "examples", "ptb_induction", "make_corpus.py"), "--data",
                    SHARED, "--out", str(tmp_path)], check=True, capture_output=True, cwd=REPO)
    stats = json.loads((tmp_path / "corpus_stats.json").read_text())
    ptb_lines = (tmp_path / "ptb.txt").read_text().splitlines()
    train_lines = (tmp_path / "train.txt").read_text().splitlines()
    # 3,370 + 3,761 ptb-lm lines: every 20th (357) is the validation text, the other 6,774 train; then the 3,396
    # sentences of the PTB sample (one per tree), in the same preprocessing as ptb.txt
    assert stats["valid/ptb-lm"]["sentences"] == 357 and stats["train/ptb-lm"]["sentences"] == 6774
    assert len(ptb_lines) == stats["eval/ptb-sample"]["sentences"] == 3396
    assert train_lines[-len(ptb_lines):] == ptb_lines and len(train_lines) == 6774 + 3396
    wsj = train_lines[:6774] + (tmp_path / "valid.txt").read_text().splitlines()
    vocabulary = {word for line in wsj for word in line.split()}
    assert all(word in vocabulary for line in ptb_lines for word in line.split())  # <unk> and N included
    assert all((word == word.lower() or word == "N") and not any(c.isdigit() for c in word) for line in ptb_lines
               for word in line.split())
