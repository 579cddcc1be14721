"""Shared fixtures: a tiny parallel corpus with gold trees, written by the tests themselves, and a tiny dependency
parser trained on the same kind of sentences.

Source sentences are ``the N V the N .`` with gold trees; one noun (``father``) is BPE-split into ``fa@@ ther`` so
split words are exercised; the target reorders subject/object, so a model must read the source.
"""
import itertools
import os
import random
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOUNS = ["cat", "dog", "father", "man"]
VERBS = ["sees", "likes"]
BPE = {"father": ["fa@@", "ther"]}
#: the dependency treebank: every ``the N V the N .`` with two different nouns, in CoNLL-U by :func:`conllu`
TREEBANK_NOUNS = ["cat", "dog", "man", "father"]
TREEBANK = [(subject, verb, obj) for subject, verb, obj in itertools.product(TREEBANK_NOUNS, VERBS, TREEBANK_NOUNS)
            if subject != obj]
#: fairseq_syntax.parsing.training.SuparSize of the tiny parsers (trained in seconds)
TINY_SUPAR_SIZES = dict(n_embed=16, n_char_embed=8, n_char_hidden=16, n_feat_embed=16, n_lstm_hidden=16,
                        n_lstm_layers=1, n_mlp=16, n_label_mlp=8)


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


def conllu(subject, verb, obj):
    """One treebank sentence with UD labels (det, nsubj, root, det, obj, punct)."""
    rows = [("the", 2, "det"), (subject, 3, "nsubj"), (verb, 0, "root"), ("the", 5, "det"), (obj, 3, "obj"),
            (".", 3, "punct")]
    return "".join(f"{i}\t{w}\t_\t_\t_\t_\t{h}\t{r}\t_\t_\n" for i, (w, h, r) in enumerate(rows, 1)) + "\n"


@pytest.fixture(scope="session")
def dependency_model(tmp_path_factory):
    """Path of a tiny SuPar biaffine dependency parser trained (2 epochs) on TREEBANK."""
    from fairseq_syntax.parsing import training

    root = tmp_path_factory.mktemp("dependency_parser")
    train = root / "train.conllu"
    train.write_text("".join(conllu(*sentence) for sentence in TREEBANK))
    path = str(root / "dep.pt")
    training.train_supar_dependency(str(train), str(train), path, epochs=2,
                                    size=training.SuparSize(**TINY_SUPAR_SIZES), batch_tokens=8, learning_rate=1e-2,
                                    verbose=False)
    return path
