"""Shared fixtures: a tiny parallel corpus with gold trees, written by the tests themselves.

Source sentences are ``the N V the N .`` with gold trees; one noun (``father``) is BPE-split into ``fa@@ ther`` so
split words are exercised; the target reorders subject/object, so a model must read the source.
"""
import os
import random
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOUNS = ["cat", "dog", "father", "man"]
VERBS = ["sees", "likes"]
BPE = {"father": ["fa@@", "ther"]}


def tiny_corpus(prefix: str, n: int, seed: int) -> None:
    """Writes ``prefix.en`` (BPE applied), ``prefix.de``, ``prefix.tree`` (word level)."""
    rng = random.Random(seed)
    with open(prefix + ".en", "w") as en, open(prefix + ".de", "w") as de, open(prefix + ".tree", "w") as tree:
        for _ in range(n):
            subj, obj, verb = rng.choice(NOUNS), rng.choice(NOUNS), rng.choice(VERBS)
            bpe = lambda w: " ".join(BPE.get(w, [w]))  # noqa: E731
            tree.write(f"(S (NP (DT the) (NN {subj})) (VP (VBZ {verb}) (NP (DT the) (NN {obj}))) (. .))\n")
            en.write(f"the {bpe(subj)} {verb} the {bpe(obj)} .\n")
            de.write(f"die {obj} {verb}-t die {subj} .\n")


def run(cmd, **kwargs):
    """Runs a command from the repository root; fails the test with its output when it fails."""
    result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result


def preprocess(raw_dir: str, dest: str, form: str, *extra: str):
    return run([sys.executable, "-m", "fairseq_syntax.cli.preprocess", "-s", "en", "-t", "de",
                "--trainpref", f"{raw_dir}/train", "--validpref", f"{raw_dir}/valid", "--testpref", f"{raw_dir}/test",
                "--form", form, "--destdir", dest, "--joined-dictionary", "--workers", "1", *extra])


@pytest.fixture(scope="session")
def raw_corpus(tmp_path_factory):
    raw = tmp_path_factory.mktemp("raw")
    for split, n, seed in (("train", 200, 1), ("valid", 20, 2), ("test", 21, 3)):
        tiny_corpus(str(raw / split), n, seed)
    return str(raw)


@pytest.fixture(scope="session")
def data_dirs(raw_corpus, tmp_path_factory):
    """form -> fairseq data directory made by fairseq-syntax-preprocess."""
    out = {}
    for form in ("sequence", "linearized", "preorder"):
        dest = str(tmp_path_factory.mktemp(form))
        preprocess(raw_corpus, dest, form)
        out[form] = dest
    return out
