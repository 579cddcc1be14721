"""Tests for the ``tree_classification`` task, the ``tree_cross_entropy`` criterion and the classifier models."""
import argparse
import math
import os

import pytest
import torch
import torch.nn.functional as F
from conftest import LOVELY, TREES, build_on_cpu, train_here, write_sst_data
from fairseq import checkpoint_utils

import fairseq_syntax.methods.hier_accum.model  # noqa: F401  (registers the classifiers)
from fairseq_syntax.core import trees
from fairseq_syntax.core.classification_task import (
    TreeClassificationConfig,
    TreeClassificationTask,
    labelled_example,
)
from fairseq_syntax.core.classifier import (
    TreeClassifierModel,
    tiny_classifier_architecture,
)
from fairseq_syntax.core.tree_cross_entropy import TreeCrossEntropyCriterion
from fairseq_syntax.methods.syntax_mask.model import SyntaxMaskTransformerModel

torch.set_num_threads(1)
USER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(trees.__file__)))  # the fairseq_syntax package


@pytest.mark.parametrize(
    "form, preterminals, tokens, parents, labels",
    [
        # the POS nodes of SST are the words' own nodes: dropped, their labels go to the words; the root's label is
        # the sentence's, not a token's
        ("preorder", "drop", ["(X", "It", "(X", "(X", "'s", "lovely", "."], [-1, 0, 0, 2, 3, 3, 2],
         [None, "2", "4", "4", "2", "4", "2"]),
        ("preorder", "keep",
         ["(X", "(X", "It", "(X", "(X", "(X", "'s", "(X", "lovely", "(X", "."], [-1, 0, 1, 0, 3, 4, 5, 4, 7, 3, 9],
         [None, "2", None, "4", "4", "2", None, "4", None, "2", None]),
        ("sequence", "drop", ["It", "'s", "lovely", "."], None, ["2", "2", "4", "2"]),
        ("linearized", "drop", ["(X", "It", "(X", "(X", "'s", "lovely", ")", ".", ")", ")"], None,
         [None, "2", "4", "4", "2", "4", None, "2", None, None]),
    ],
)
def test_labelled_example_by_hand(form, preterminals, tokens, parents, labels):
    out_tokens, out_parents, out_labels = labelled_example(trees.parse_tree(LOVELY), form, preterminals)
    assert out_tokens == tokens
    assert (out_parents is None and parents is None) or out_parents.tolist() == parents
    assert out_labels == labels


def test_one_word_tree_keeps_its_word_label():
    tokens, parents, labels = labelled_example(trees.parse_tree("(4 Wow)"), "preorder", "drop")
    assert (tokens, parents.tolist(), labels) == (["Wow"], [-1], ["4"])


def test_a_tree_deeper_than_the_recursion_limit_is_an_example_in_every_form():
    # a chain of 3000 nodes labelled 1 over (3 good) (2 .): the task's walk is iterative, as the tree forms' are
    depth = 3000
    tree = trees.parse_tree("(1 " * depth + "(3 good) (2 .)" + ")" * depth)
    assert labelled_example(tree, "sequence", "keep") == (["good", "."], None, ["3", "2"])
    tokens, parents, labels = labelled_example(tree, "preorder", "keep")
    assert tokens == ["(X"] * depth + ["(X", "good", "(X", "."]
    assert parents.tolist() == [-1, *range(depth - 1), depth - 1, depth, depth - 1, depth + 2]
    assert labels == [None] + ["1"] * (depth - 1) + ["3", None, "2", None]
    tokens, _, labels = labelled_example(tree, "linearized", "drop")
    assert tokens == ["(X"] * depth + ["good", "."] + [")"] * depth
    assert labels == [None] + ["1"] * (depth - 1) + ["3", "2"] + [None] * depth


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_sst_data(tmp_path_factory.mktemp("sst"))


def setup(data_dir, arch, *extra):
    """(task, model in eval mode, criterion, the batch of the 8 valid trees)."""
    return build_on_cpu([data_dir, "--user-dir", USER_DIR, "--task", "tree_classification", "--arch", arch,
                         "--criterion", "tree_cross_entropy", *extra])[:4]


def whole_split(task, split="valid"):
    dataset = task.dataset(split).batching(task.model_side_inputs)
    return dataset.collater([dataset[i] for i in range(len(dataset))])


def test_batches_hold_the_side_inputs_the_model_needs_and_aligned_labels(data_dir):
    task, _, _, sample = setup(data_dir, "transformer_hier_accum_classifier_tiny")
    net_input = sample["net_input"]
    # src_parents_sizes: the batch's tree shapes, computed on the host as it collates (structure.tree_sizes)
    assert set(net_input) == {"src_tokens", "src_lengths", "src_parents", "src_parents_sizes"}
    assert sample["target"].tolist() == [3, 1, 4, 0, 4, 1, 3, 0]
    row = net_input["src_tokens"][0]
    assert task.source_dictionary.string(row[row.ne(task.source_dictionary.pad())]) == "(X It (X (X 's lovely ."
    # labels of ``(X It (X (X 's lovely . </s>``, then padding
    assert sample["token_labels"][0, :8].tolist() == [-1, 2, 4, 4, 2, 4, 2, -1]
    assert (sample["token_labels"][0, 8:] == -1).all()
    assert net_input["src_parents"][0, :8].tolist() == [-1, 0, 0, 2, 3, 3, 2, -1]
    # that tree alone: leaves It 's lovely . </s> (5), nodes at 0, 2, 3 (3), and 's under 3, 2 and 0 (depth 3)
    dataset = task.dataset("valid").batching(task.model_side_inputs)
    alone = [dataset.collater([dataset[i]])["net_input"] for i in range(len(dataset))]
    first = next(batch for batch in alone if batch["src_parents"][0].tolist() == [-1, 0, 0, 2, 3, 3, 2, -1])
    assert first["src_parents_sizes"] == {"leaves": 5, "nodes": 3, "depth": 3}

    plain = setup(data_dir, "transformer_classifier_tiny", "--input-form", "sequence")[3]
    assert set(plain["net_input"]) == {"src_tokens", "src_lengths"}


def test_a_model_needing_parents_refuses_the_sequence_form(data_dir):
    with pytest.raises(KeyError, match="use --input-form preorder"):  # as the batch is collated
        setup(data_dir, "transformer_hier_accum_classifier_tiny", "--input-form", "sequence")


def test_root_label_that_is_not_a_class_names_file_and_line(data_dir, tmp_path):
    for name in ("dict.txt", "labels.txt"):
        (tmp_path / name).write_text(open(os.path.join(data_dir, name)).read())
    (tmp_path / "valid.tree").write_text(LOVELY + "\n(7 (2 odd))\n")
    task = TreeClassificationTask.setup_task(TreeClassificationConfig(data=str(tmp_path)))
    with pytest.raises(trees.TreeError, match=r"valid.tree:2: root label '7'"):
        task.load_dataset("valid")


def test_every_tree_is_batched(data_dir):
    task = setup(data_dir, "transformer_hier_accum_classifier_tiny")[0]
    iterator = task.get_batch_iterator(dataset=task.dataset("valid"), max_tokens=20, required_batch_size_multiple=8)
    ids = sorted(i for batch in iterator.next_epoch_itr(shuffle=False) for i in batch["id"].tolist())
    assert ids == list(range(len(TREES)))


class FixedLogits(torch.nn.Module):
    def __init__(self, sentence, tokens):
        super().__init__()
        self.sentence, self.tokens = sentence, tokens

    def forward(self, src_tokens, src_lengths):
        return self.sentence, self.tokens


def test_criterion_sums_root_and_node_losses():
    sentence = torch.tensor([[2.0, 0.0], [0.0, 1.0]])
    tokens = torch.tensor([[[1.0, 0.0], [0.0, 3.0], [5.0, 5.0]], [[0.0, 0.0], [2.0, 0.0], [0.0, 0.0]]])
    sample = {
        "net_input": {"src_tokens": torch.zeros(2, 3, dtype=torch.long), "src_lengths": torch.tensor([3, 3])},
        "target": torch.tensor([0, 0]),
        "token_labels": torch.tensor([[1, -1, -1], [-1, 0, -1]]),
        "ntokens": 6,
    }
    model = FixedLogits(sentence, tokens)
    root = -math.log(math.exp(2) / (math.exp(2) + 1)) - math.log(1 / (1 + math.e))
    nodes = -math.log(1 / (1 + math.e)) - math.log(math.exp(2) / (math.exp(2) + 1))
    loss, size, log = TreeCrossEntropyCriterion(None)(model, sample)
    assert (loss.item(), size, log["correct"]) == (pytest.approx(root), 2, 1)
    assert (log["node_correct"], log["node_count"]) == (1, 2)  # token (0, 0) predicts 0 for label 1; (1, 1) right
    loss, size, _ = TreeCrossEntropyCriterion(None, node_labels=True)(model, sample)
    assert (loss.item(), size) == (pytest.approx(root + nodes), 4)


def test_any_syntax_encoder_plugs_into_the_task(data_dir):
    task, _, criterion, _ = setup(data_dir, "transformer_classifier_tiny")
    mask_classifier = type("MaskClassifier", (TreeClassifierModel,), {"encoder_model": SyntaxMaskTransformerModel})
    parser = argparse.ArgumentParser(argument_default=argparse.SUPPRESS)  # as fairseq's model options
    mask_classifier.add_args(parser)
    args = parser.parse_args(["--dropout", "0"])
    tiny_classifier_architecture(args)
    model = mask_classifier.build_model(args, task)
    task.model_side_inputs = model.side_inputs  # what build_model records for a model it builds
    loss, _, log = criterion(model, whole_split(task))
    loss.backward()
    assert log["nsentences"] == len(TREES)
    assert model.encoder.layers[0].self_attn.strengths.grad is not None


def test_hier_classifier_learns_the_training_trees_end_to_end(data_dir, tmp_path):
    train_here([
        data_dir, "--user-dir", USER_DIR, "--task", "tree_classification",
        "--arch", "transformer_hier_accum_classifier_tiny", "--criterion", "tree_cross_entropy", "--node-labels",
        "--cpu", "--optimizer", "adam", "--lr", "0.005", "--max-tokens", "400", "--max-update", "40",
        "--save-dir", str(tmp_path), "--no-epoch-checkpoints", "--no-progress-bar", "--seed", "1", "--num-workers", "0",
        "--best-checkpoint-metric", "accuracy", "--maximize-best-checkpoint-metric",
    ])
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(tmp_path / "checkpoint_last.pt")])
    task.load_dataset("valid")
    model = models[0].eval()
    sample = whole_split(task)
    with torch.no_grad():
        sentence_logits, _ = model(**sample["net_input"])
    # 40 updates on 8 trees: a classifier that ignored the input would get at most 2 of 8 (two per class)
    assert (sentence_logits.argmax(-1) == sample["target"]).sum() >= 7
    assert F.cross_entropy(sentence_logits, sample["target"]) < 0.5


def test_the_sentence_is_read_at_the_root_whatever_the_padding(data_dir):
    task, model, _, sample = setup(data_dir, "transformer_hier_accum_classifier_tiny")
    dataset = task.dataset("valid").batching(task.model_side_inputs)
    tokens = sample["net_input"]["src_tokens"]
    pad = task.source_dictionary.pad()
    # right padding: position 0 of every row is the preorder root "(X", and the shorter rows end in padding
    assert {task.source_dictionary[t] for t in tokens[:, 0].tolist()} == {"(X"}
    assert tokens[:, -1].eq(pad).any() and not tokens[:, 0].eq(pad).any()
    with torch.no_grad():
        batch_logits, token_logits = model(**sample["net_input"])
        torch.testing.assert_close(batch_logits, token_logits[:, 0])  # the root's state is the sentence's
        for row, index in enumerate(sample["id"].tolist()):  # each sentence alone (no padding) gives the same
            alone = dataset.collater([dataset[index]])
            torch.testing.assert_close(model(**alone["net_input"])[0][0], batch_logits[row], atol=1e-5, rtol=1e-5)
