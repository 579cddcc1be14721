"""Shared fixtures: a tiny corpus ``the N V the N .`` (father BPE-split, target reordered) and tiny parsers."""
import itertools
import json
import os
import random
import socket
import subprocess
import sys

import numpy as np
import pytest
import torch
from fairseq import options, tasks

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOUNS = ["cat", "dog", "father", "man"]
VERBS = ["sees", "likes"]
BPE = {"father": ["fa@@", "ther"]}
# subword-nmt merges that rebuild every word whole but father -> fa@@ ther; raw_corpus writes them to CODES
BPE_MERGES = ["f a", "t h", "th e", "the r</w>", "th e</w>", "c a", "ca t</w>", "d o", "do g</w>", "m a", "ma n</w>",
              "s e", "se e", "see s</w>", "l i", "li k", "lik e", "like s</w>"]
CODES = "codes"
#: the dependency treebank: every ``the N V the N .`` with two different nouns, in CoNLL-U by :func:`conllu`
TREEBANK_NOUNS = ["cat", "dog", "man", "father"]
TREEBANK = [(subject, verb, obj) for subject, verb, obj in itertools.product(TREEBANK_NOUNS, VERBS, TREEBANK_NOUNS)
            if subject != obj]
#: fairseq_syntax.parsing.training.SuparSize of the tiny parsers (trained in seconds)
TINY_SUPAR_SIZES = dict(n_embed=16, n_char_embed=8, n_char_hidden=16, n_feat_embed=16, n_lstm_hidden=16,
                        n_lstm_layers=1, n_mlp=16, n_label_mlp=8)


def pytest_addoption(parser):
    parser.addoption("--step4-on-parses", action="store_true",
                     help="also run the GPU window's step 4 on the committed Multi30k parses (its data-bins and one "
                          "epoch of Sequence: about 10 minutes on 2 cores)")


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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(cmd, **kwargs):
    """Runs a command from the repository root; fails the test with its output when it fails."""
    result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
        )
    return result


def run_preprocess(raw, dest, form, *extra, splits=("train", "valid")):
    """fairseq-syntax-preprocess in this process (no interpreter start, for tests that run it many times)."""
    from fairseq_syntax.cli import preprocess as command

    command.main(["-s", "en", "-t", "de", *(f"--{split}pref={raw}/{split}" for split in splits), "--form", form,
                  "--destdir", str(dest), "--joined-dictionary", "--workers", "1", *extra])


def write_codes(raw_dir) -> str:
    """Writes BPE_MERGES as a subword-nmt codes file ``raw_dir/codes``; returns its path."""
    path = os.path.join(raw_dir, CODES)
    with open(path, "w") as codes:
        codes.write("#version: 0.2\n" + "\n".join(BPE_MERGES) + "\n")
    return path


def preprocess_arguments(raw_dir: str, dest: str, form: str, *extra: str) -> list[str]:
    """fairseq-syntax-preprocess's arguments for raw_dir's three splits, with its BPE codes where it has them."""
    codes = os.path.join(raw_dir, CODES)
    return ["-s", "en", "-t", "de",
            "--trainpref", f"{raw_dir}/train", "--validpref", f"{raw_dir}/valid", "--testpref", f"{raw_dir}/test",
            "--form", form, "--destdir", dest, "--joined-dictionary", "--workers", "1",
            *(["--bpe-codes", codes] if os.path.exists(codes) else []), *extra]


def preprocess(raw_dir: str, dest: str, form: str, *extra: str):
    """fairseq-syntax-preprocess of raw_dir's three splits, the command (a new interpreter), as a user runs it."""
    return run([sys.executable, "-m", "fairseq_syntax.cli.preprocess", *preprocess_arguments(raw_dir, dest, form,
                                                                                              *extra)])


def preprocess_in_process(raw_dir: str, dest: str, form: str, *extra: str) -> None:
    """What :func:`preprocess` makes with the same arguments, made in this process (no interpreter start)."""
    from fairseq_syntax.cli import preprocess as command

    command.main(preprocess_arguments(raw_dir, dest, form, *extra))


@pytest.fixture(scope="session")
def raw_corpus(tmp_path_factory):
    raw = tmp_path_factory.mktemp("raw")
    for split, n, seed in (("train", 200, 1), ("valid", 20, 2), ("test", 21, 3)):
        tiny_corpus(str(raw / split), n, seed)
    write_codes(str(raw))
    return str(raw)


@pytest.fixture
def small_corpus(tmp_path):
    """A fresh copy per test of a smaller corpus with arcs files: train 12, valid 4, test 5 pairs."""
    raw = tmp_path / "small"
    raw.mkdir()
    for split, n, seed in (("train", 12, 1), ("valid", 4, 2), ("test", 5, 3)):
        tiny_corpus(str(raw / split), n, seed)
        write_arcs(str(raw / split))
    return raw


@pytest.fixture(scope="session")
def data_dirs(raw_corpus, tmp_path_factory):
    """form -> fairseq data directory made by fairseq-syntax-preprocess."""
    out = {}
    for form in ("sequence", "linearized", "preorder"):
        dest = str(tmp_path_factory.mktemp(form))
        preprocess_in_process(raw_corpus, dest, form)
        out[form] = dest
    return out


def conllu(subject, verb, obj):
    """One treebank sentence with UD labels (det, nsubj, root, det, obj, punct)."""
    rows = [("the", 2, "det"), (subject, 3, "nsubj"), (verb, 0, "root"), ("the", 5, "det"), (obj, 3, "obj"),
            (".", 3, "punct")]
    return "".join(f"{i}\t{w}\t_\t_\t_\t_\t{h}\t{r}\t_\t_\n" for i, (w, h, r) in enumerate(rows, 1)) + "\n"


def bracketed(subject, verb, obj):
    """One treebank sentence as a PTB tree."""
    return f"(TOP (S (NP (DT the) (NN {subject})) (VP (VBZ {verb}) (NP (DT the) (NN {obj}))) (. .)))\n"


def _tiny_supar(tmp_path_factory, kind: str, train_name: str, text, model_name: str) -> str:
    """Path of a tiny SuPar parser (train_supar_KIND) trained 2 epochs on TREEBANK written by ``text``."""
    from fairseq_syntax.parsing import training

    train = tmp_path_factory.mktemp(f"{kind}_parser") / train_name
    train.write_text("".join(text(*sentence) for sentence in TREEBANK))
    path = str(train.parent / model_name)
    getattr(training, f"train_supar_{kind}")(str(train), str(train), path, epochs=2, batch_tokens=8, verbose=False,
                                             size=training.SuparSize(**TINY_SUPAR_SIZES), learning_rate=1e-2)
    return path


@pytest.fixture(scope="session")
def constituency_model(tmp_path_factory):
    """Path of a tiny SuPar crf-con parser trained (2 epochs) on TREEBANK."""
    return _tiny_supar(tmp_path_factory, "constituency", "train.pid", bracketed, "crf-con.pt")


@pytest.fixture(scope="session")
def dependency_model(tmp_path_factory):
    """Path of a tiny SuPar biaffine dependency parser trained (2 epochs) on TREEBANK."""
    return _tiny_supar(tmp_path_factory, "dependency", "train.conllu", conllu, "dep.pt")


@pytest.fixture(scope="session")
def tagger_model(tmp_path_factory):
    """Path of a tiny untrained POS tagger of TREEBANK's tags, seed 1: arbitrary tags, the same on every run."""
    from fairseq_syntax.core.trees import parse_tree
    from fairseq_syntax.parsing.tagger import Tagger, TaggerSize, sentences_from_trees

    torch.manual_seed(1)
    size = TaggerSize(word_embed=8, char_embed=4, char_hidden=8, hidden=8, layers=1, dropout=0.0, word_dropout=0.0)
    tagger = Tagger.build(sentences_from_trees(parse_tree(bracketed(*sentence)) for sentence in TREEBANK), size)
    path = tmp_path_factory.mktemp("tagger") / "tagger.pt"
    torch.save(tagger.state(), path)
    return str(path)


# --- helpers several test folders share
#: the tiny models of fairseq-train runs in the tests
TINY = ["--optimizer", "adam", "--lr", "0.005", "--max-tokens", "1000", "--cpu", "--seed", "1",
        "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "1", "--num-workers", "0",
        "--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
        "--decoder-ffn-embed-dim", "64"]


def train(data, save_dir, arch, epochs, *extra):
    return run(["fairseq-train", data, "--user-dir", "fairseq_syntax", "--task", "syntax_translation",
                "--arch", arch, "--max-epoch", str(epochs), "--save-dir", save_dir, *TINY, *extra])


def only_source_data(root, train, valid) -> str:
    """ROOT/bin: fairseq-preprocess --only-source (in this process) of the lines ``train`` and ``valid``."""
    from fairseq_cli import preprocess

    for split, lines in (("train", train), ("valid", valid)):
        (root / f"{split}.txt").write_text("\n".join(lines) + "\n")
    preprocess.main(options.get_preprocessing_parser().parse_args([
        "--only-source", "--trainpref", str(root / "train.txt"), "--validpref", str(root / "valid.txt"),
        "--destdir", str(root / "bin"), "--workers", "1"]))
    return str(root / "bin")


def train_here(argv):
    """fairseq-train with ``argv``, in this process (no interpreter to start)."""
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq_cli import train as fairseq_train

    fairseq_train.main(convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv)))


def arcs_record(words):
    """An uncertain parse of "the N V the N ." in Stanford labels: 0.3 of word 5's mass on "prep"."""
    return {"words": words, "arcs": [
        [1, 2, 0.9, {"det": 0.95, "amod": 0.05}], [1, 5, 0.1, {"det": 1.0}],
        [2, 3, 1.0, {"nsubj": 0.8, "dobj": 0.2}],
        [3, 0, 1.0, {"root": 1.0}],
        [4, 5, 1.0, {"det": 1.0}],
        [5, 3, 0.7, {"dobj": 0.9, "nsubj": 0.1}], [5, 2, 0.3, {"prep": 1.0}],
        [6, 3, 1.0, {"punct": 1.0}],
    ], "best": ([[2, "det"], [3, "nsubj"], [0, "root"], [5, "det"], [3, "dobj"], [3, "punct"]]
                + [[3, "dep"]] * (len(words) - 6))[:len(words)]}


def write_arcs(prefix):
    with open(prefix + ".en") as source, open(prefix + ".arcs.jsonl", "w") as out:
        for line in source:
            words = line.replace("@@ ", "").split()
            out.write(json.dumps(arcs_record(words)) + "\n")


@pytest.fixture(scope="session")
def ldd_data(raw_corpus, tmp_path_factory):
    """(data directory, reports): the sequence form of the tiny corpus plus LDD side data from :func:`arcs_record`
    parses."""
    dest = str(tmp_path_factory.mktemp("ldd"))
    for split in ("train", "valid", "test"):
        write_arcs(os.path.join(raw_corpus, split))
    preprocess_in_process(raw_corpus, dest, "sequence")
    from fairseq_syntax.methods.ldd import preprocess as preprocess_dependencies

    return dest, preprocess_dependencies.main(
        ["--destdir", dest, "-s", "en", "-t", "de", "--labels", "stanford", "--trainpref", f"{raw_corpus}/train",
         "--validpref", f"{raw_corpus}/valid", "--testpref", f"{raw_corpus}/test"])


LOVELY = "(3 (2 It) (4 (4 (2 's) (4 lovely)) (2 .)))"

TREES = [
    LOVELY,
    "(1 (2 The) (1 (1 plot) (1 (2 is) (1 thin))))",
    "(4 (4 Wow))",
    "(0 (0 (2 a) (0 disaster)) (2 .))",
    "(4 (2 I) (4 (4 loved) (2 it)))",
    "(1 (2 It) (1 (2 is) (1 dull)))",
    "(3 (2 The) (3 (3 acting) (2 (2 is) (3 good))))",
    "(0 (0 awful) (2 .))",
]


def write_sst_data(directory) -> str:
    """A tree_classification data directory: TREES as train and valid, labels 0-4, their dictionary."""
    for split in ("train", "valid"):
        (directory / f"{split}.tree").write_text("\n".join(TREES) + "\n")
    (directory / "labels.txt").write_text("0\n1\n2\n3\n4\n")
    from fairseq_syntax.core import trees
    from fairseq_syntax.core.classification_task import build_dictionary

    build_dictionary(trees.parse_tree(tree) for tree in TREES).save(str(directory / "dict.txt"))
    return str(directory)


# --- one batch through a tiny model built on the CPU
TRANSLATION = ["--task", "syntax_translation", "--user-dir", os.path.join(REPO, "fairseq_syntax")]


def build_on_cpu(argv):
    """(task, model, criterion, sample, args): the model in eval mode; the sample: 8 test sentences."""
    args = options.parse_args_and_arch(options.get_training_parser(), [*argv, "--cpu", "--dropout", "0"])
    task = tasks.setup_task(args)
    torch.manual_seed(1)
    model = task.build_model(args).eval()
    split = "valid" if args.task == "tree_classification" else "test"
    task.load_dataset(split)
    dataset = task.dataset(split)
    if hasattr(dataset, "batching"):  # the syntax datasets; fairseq's masked-LM dataset batches everything it has
        batched = task.batched_side_inputs(dataset) if hasattr(task, "batched_side_inputs") else task.model_side_inputs
        dataset = dataset.batching(batched)
    sample = dataset.collater([dataset[i] for i in range(min(len(dataset), 8))])
    return task, model, task.build_criterion(args), sample, args


def loss_and_gradients(model, criterion, sample):
    model.zero_grad()
    loss, _, _ = criterion(model, sample)
    loss.backward()
    gradients = {name: p.grad.detach().cpu() for name, p in model.named_parameters() if p.grad is not None}
    return loss.detach().cpu(), gradients


@pytest.fixture(scope="session")
def translation_data(data_dirs, raw_corpus, tmp_path_factory, request):
    """(data directory name, side inputs) -> directory of the tiny corpus."""
    made = {}

    def directory(system):
        key = (system.data, "src_ldd" in system.side_inputs)
        if key not in made:
            dest = str(tmp_path_factory.mktemp(system.data))
            if key[1]:
                dest = request.getfixturevalue("ldd_data")[0]
            elif system.data in data_dirs:
                dest = data_dirs[system.data]
            else:
                preprocess_in_process(raw_corpus, dest, system.form, "--preterminals", system.preterminals)
            made[key] = dest
        return made[key]

    return directory


@pytest.fixture(scope="session")
def hier_accum_data(translation_data):
    """The tiny corpus in the hier_accum system's form (preorder, POS nodes only over split words)."""
    from fairseq_syntax import methods

    return translation_data(next(s for s in methods.systems() if s.arch == "transformer_hier_accum"))


# --- random trees for the hierarchical-accumulation tests
def random_preorder_tree(rng, size):
    """Parent list of a random preorder tree of ``size`` nodes (node k hangs under a node on the path to k - 1)."""
    parents = [-1]
    for node in range(1, size):
        chain = [node - 1]
        while parents[chain[-1]] != -1:
            chain.append(parents[chain[-1]])
        parents.append(int(rng.choice(chain)))  # numpy's Generator gives numpy ints
    return parents


def parents_batch(*trees, **options):
    from fairseq_syntax.core import structure

    return structure.collate_parents([np.array(tree, dtype=np.int16) for tree in trees], **options)


def random_accumulation_inputs(rng, max_nodes, embedding_size, average, left_pad):
    """(parents, embeddings or None, values, leaf weights, structure) of three random trees, float64, with grads."""
    from fairseq_syntax.methods.hier_accum.accumulation import (
        HierarchicalEmbeddings,
        accumulation_structure,
    )

    parents = parents_batch(*[random_preorder_tree(rng, rng.randint(1, max_nodes)) for _ in range(3)],
                            left_pad=left_pad)
    size, length = parents.shape
    embeddings = HierarchicalEmbeddings(embedding_size, 4).double() if embedding_size else None
    values = torch.randn(size, 2, length, 4, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(size, length, dtype=torch.float64, requires_grad=True)
    return parents, embeddings, values, weights, accumulation_structure(parents, embedding_size, average)


def accumulation_cases(test):
    """``test`` over both averages, no and 3 hierarchical embeddings, and right and left padding."""
    for name, cases in (("left_pad", [False, True]), ("embedding_size", [0, 3]), ("average", ["paper", "official"])):
        test = pytest.mark.parametrize(name, cases)(test)
    return test


def assert_close_with_gradients(got, want, values, weights, embeddings, tolerance=1e-6):
    """``got`` equals ``want`` within ``tolerance``, and so do their gradients (values, weights, tables); returns
    ``got``'s gradients."""
    torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance)
    inputs = [values, weights] + ([embeddings.tables] if embeddings else [])
    upstream = torch.randn_like(want)
    got_grads, want_grads = (torch.autograd.grad((output * upstream).sum(), inputs, materialize_grads=True)
                             for output in (got, want))
    for got_grad, want_grad in zip(got_grads, want_grads):
        torch.testing.assert_close(got_grad, want_grad, rtol=tolerance, atol=tolerance)
    return got_grads


# "the cat sat": the <- cat (det), cat <- sat (nsubj), sat root; 0.1 of "the"'s head mass off the 1-best tree
THE_CAT_SAT = {"words": ["the", "cat", "sat"],
               "arcs": [[1, 2, 0.9, {"det": 1.0}], [1, 3, 0.1, {"dep": 1.0}], [2, 3, 1.0, {"nsubj": 1.0}],
                        [3, 0, 1.0, {"root": 1.0}]],
               "best": [[2, "det"], [3, "nsubj"], [0, "root"]]}


def one_word_batch(record, pieces, length, left_pad=False):
    """(word_pairs, token_words, not_dependent) of one parser record, words in ``pieces`` tokens, EOS, padding."""
    from fairseq_syntax.methods.ldd import distributions
    from fairseq_syntax.methods.ldd.side_input import collate_ldd, record_item

    item = record_item(record, pieces, distributions.label_index(distributions.STANFORD_GROUPS), 1e-3)
    word_pairs, token_words = collate_ldd([torch.from_numpy(item)], left_pad, length)
    n = sum(pieces)
    not_dependent = torch.ones(1, length, dtype=torch.bool)
    start = length - n - 1 if left_pad else 0
    not_dependent[0, start:start + n] = False
    return word_pairs, token_words, not_dependent


def tiny_encoder_parts(symbols, layers=2, heads=2, dim=8):
    """(config, dictionary of ``symbols``, token embedding) of a tiny Transformer encoder, drawn after seed 0."""
    from argparse import Namespace

    from fairseq.data import Dictionary
    from fairseq.models.transformer import TransformerConfig

    torch.manual_seed(0)
    dictionary = Dictionary()
    for symbol in symbols:
        dictionary.add_symbol(symbol)
    config = TransformerConfig.from_namespace(Namespace(
        encoder_layers=layers, encoder_attention_heads=heads, encoder_embed_dim=dim, encoder_ffn_embed_dim=16,
        dropout=0.0, attention_dropout=0.0))
    return config, dictionary, torch.nn.Embedding(len(dictionary), dim, padding_idx=dictionary.pad())


# --- half precision: one batch in float16 / bfloat16 against float32
def half_precision_errors(task, model, criterion, sample, dtype, device="cpu"):
    """Loss and gradient errors of ``model`` turned into ``dtype`` on ``device`` (as --fp16/--bf16) against float32."""
    import copy

    from fairseq import utils

    loss, gradients = loss_and_gradients(model, criterion, sample)
    half = copy.deepcopy(model).to(device=device, dtype=dtype)
    half_sample = utils.apply_to_sample(lambda t: t.to(dtype) if t.dtype is torch.float32 else t, sample)
    if device == "cuda":
        half_sample = utils.move_to_cuda(half_sample)
    half_loss, half_gradients = loss_and_gradients(half, criterion, half_sample)
    largest = max(float(g.norm()) for g in gradients.values())
    squared_error = squared_norm = 0.0
    worst, nonfinite = (0.0, ""), []
    for name, gradient in gradients.items():
        got = half_gradients.get(name)
        if got is None or not torch.isfinite(got).all():
            nonfinite.append(name)
            continue
        error = float((got.float() - gradient).norm())
        squared_error, squared_norm = squared_error + error ** 2, squared_norm + float(gradient.norm()) ** 2
        if float(gradient.norm()) > 1e-3 * largest:
            worst = max(worst, (error / float(gradient.norm()), name))
    return {"loss": abs(float(half_loss) - float(loss)) / abs(float(loss)),
            "gradients": (squared_error / squared_norm) ** 0.5, "worst": worst, "nonfinite": nonfinite}


#: dtype -> (loss, gradients): the largest relative errors of :func:`half_precision_errors` against float32
HALF_PRECISION_TOLERANCES = {torch.bfloat16: (3e-2, 0.15), torch.float16: (5e-3, 0.03)}


def check_half_precision(case, dtype, device="cpu"):
    """:func:`half_precision_errors` of ``case`` (``build_on_cpu``'s tuple) within HALF_PRECISION_TOLERANCES."""
    errors = half_precision_errors(*case[:4], dtype, device)
    loss_tolerance, gradient_tolerance = HALF_PRECISION_TOLERANCES[dtype]
    assert errors["nonfinite"] == [], f"{dtype}: gradients not finite: {errors['nonfinite']}"
    assert errors["loss"] <= loss_tolerance, f"{dtype}: loss {errors}"
    assert errors["gradients"] <= gradient_tolerance, f"{dtype}: gradients {errors}"
    return errors


class WordTask:
    """What a model's build_model asks of a task: a dictionary of eight words and <mask>, as source and target."""

    def __init__(self):
        from fairseq.data import Dictionary

        self.source_dictionary = self.target_dictionary = Dictionary()
        for word in "the cat sat on a mat dog ran".split():
            self.source_dictionary.add_symbol(word)
        self.source_dictionary.add_symbol("<mask>")

    def max_positions(self):
        return 64
