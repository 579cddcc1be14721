"""Dependency-supervised self-attention (Deguchi et al. 2019): targets, biaffine scores and the loss, by hand."""
import logging
import math
import os
import re

import pytest
import torch
from conftest import THE_CAT_SAT, TINY, TRANSLATION, build_on_cpu, one_word_batch, run, train_here

from fairseq_syntax.methods.dependency_supervision.attention import (
    DependencyBasedSelfAttention,
)
from fairseq_syntax.methods.dependency_supervision.criterion import dependency_loss
from fairseq_syntax.methods.dependency_supervision.targets import IGNORE, parent_targets

def targets_of(record, pieces, length, left_pad=False):
    return parent_targets(*one_word_batch(record, pieces, length, left_pad))[0].tolist()


def test_targets_chain_pieces_to_the_last_and_words_to_their_heads_first_piece():
    # a word's last piece -> its head word's FIRST piece; the root on itself; EOS none
    assert targets_of(THE_CAT_SAT, [1, 2, 1], 5) == [1, 2, 3, 3, IGNORE]
    # cat -> the root sat's first piece 2; s@@ -> 3; the root's last piece stays on itself
    assert targets_of(THE_CAT_SAT, [1, 1, 2], 5) == [1, 2, 3, 3, IGNORE]
    # left padding, a split head: pads 0-1, t@@(2) he(3) cat(4) sat(5) EOS(6); the -> cat 4, cat -> sat 5
    assert targets_of(THE_CAT_SAT, [2, 1, 1], 7, left_pad=True) == [IGNORE, IGNORE, 3, 4, 5, 5, IGNORE]
    # unsplit, with one padding position: the -> 1, cat -> 2, sat -> 2
    assert targets_of(THE_CAT_SAT, [1, 1, 1], 5) == [1, 2, 2, IGNORE, IGNORE]
    # left padding: two pads, then the(2) cat(3) sat(4) EOS(5)
    assert targets_of(THE_CAT_SAT, [1, 1, 1], 6, left_pad=True) == [IGNORE, IGNORE, 3, 4, 4, IGNORE]


def test_biaffine_scores_of_the_dependency_head_and_plain_scores_elsewhere():
    attention = DependencyBasedSelfAttention(embed_dim=4, num_heads=2, dependency_heads=1)
    with torch.no_grad():
        attention.biaffine_weight.copy_(torch.tensor([[0.0, 1.0], [1.0, 0.0]]))  # swaps the query's two features
        attention.biaffine_bias.copy_(torch.tensor([1.0, -1.0]))
    q = torch.tensor([[1.0, 0.0], [0.0, 2.0]]).expand(1, 2, 2, 2)  # same queries in both heads
    k = torch.tensor([[3.0, 1.0], [0.0, 1.0]]).expand(1, 2, 2, 2)
    scores = attention.attention_scores(q, k, {})
    s = 1 / math.sqrt(2)
    # head 0: (q W^T) = [[0, 1], [2, 0]]; . k = [[1, 1], [6, 0]] * s; plus b . k = [3 - 1, 0 - 1] = [2, -1] per key
    assert scores[0, 0].flatten().tolist() == pytest.approx([s + 2, s - 1, 6 * s + 2, -1])
    # head 1: plain q . k * s = [[3, 0], [2, 2]] * s
    assert scores[0, 1].flatten().tolist() == pytest.approx([3 * s, 0, 2 * s, 2 * s])


def test_dependency_loss_sums_minus_log_attention_at_the_parent():
    attention = torch.tensor([[[0.2, 0.8], [0.6, 0.4]]])
    summed, tokens, correct = dependency_loss(attention, torch.tensor([[1, IGNORE]]))
    assert summed.item() == pytest.approx(-math.log(0.8)) and (tokens.item(), correct.item()) == (1, 1)
    summed, tokens, correct = dependency_loss(attention, torch.tensor([[0, 1]]))
    assert summed.item() == pytest.approx(-math.log(0.2) - math.log(0.4)) and (tokens.item(), correct.item()) == (2, 0)


@pytest.fixture
def ldd_dir(ldd_data):
    return ldd_data[0]  # conftest's sequence data directory with src_ldd


def test_criterion_adds_the_weighted_per_token_dependency_loss(ldd_dir):
    argv = [ldd_dir, *TRANSLATION, "--arch", "transformer_dependency_supervised_tiny",
            "--criterion", "label_smoothed_cross_entropy_with_dependency", "--label-smoothing", "0.1",
            "--dependency-weight", "0.5"]
    _, model, criterion, sample, _ = build_on_cpu(argv)
    loss, sample_size, log = criterion(model, sample)
    translation, _ = criterion.compute_loss(model, model(**sample["net_input"]), sample)
    assert log["dependency_tokens"].item() == int(sample["net_input"]["src_tokens"].ne(1).sum() - len(sample["id"]))
    expected = translation + 0.5 * log["dependency_loss"] * sample_size / log["dependency_tokens"]
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert "src_ldd" in sample["net_input"] and model.encoder.side_inputs == ()
    # the supervised layer by default: encoder layer 0, as the authors' released config
    layers = model.encoder.layers
    assert [type(layer.self_attn) is DependencyBasedSelfAttention for layer in layers][:2] == [True, False]


def test_train_with_the_loss_then_decode_plain_text_without_a_parser(ldd_dir, tmp_path, caplog):
    save = str(tmp_path / "model")
    with caplog.at_level(logging.INFO):
        train_here([ldd_dir, *TRANSLATION, "--arch", "transformer_dependency_supervised_tiny", "--criterion",
                    "label_smoothed_cross_entropy_with_dependency", "--max-update", "2", "--save-dir", save, *TINY])
    epochs = [record.getMessage() for record in caplog.records if record.name == "train"]
    assert re.search(r"\| dependency_loss [\d.]+ \| dependency_accuracy [\d.]+ .*num_updates 2 ", epochs[-1]), epochs
    checkpoint = os.path.join(save, "checkpoint_last.pt")
    out = run(["fairseq-interactive", ldd_dir, "--user-dir", "fairseq_syntax", "--task", "syntax_translation",
               "--path", checkpoint, "--beam", "2", "--cpu"], input="the cat sees a dog .\nthe dog runs .\n").stdout
    assert len(re.findall(r"^H-\d+\t", out, re.MULTILINE)) == 2


def setup(argv):
    """The task, model and criterion built in fairseq-train's order (model, criterion, then the datasets)."""
    from fairseq import options, tasks

    args = options.parse_args_and_arch(options.get_training_parser(), [*argv, "--cpu"])
    task = tasks.setup_task(args)
    model = task.build_model(args)
    return task, model, task.build_criterion(args)


def test_training_without_the_parses_is_refused_where_the_data_is_loaded(data_dirs):
    """The system on a directory without src_ldd is refused in one line as the split is loaded."""
    data = data_dirs["sequence"]
    argv = [data, *TRANSLATION, "--arch", "transformer_dependency_supervised_tiny",
            "--criterion", "label_smoothed_cross_entropy_with_dependency"]
    task, _, _ = setup(argv)
    message = ("--criterion label_smoothed_cross_entropy_with_dependency trains on side data ['src_ldd'], which this "
               "data directory lacks (made by src_ldd: fairseq-syntax-preprocess-dependencies): make it, or train "
               "another system")
    with pytest.raises(SystemExit) as error:
        task.load_dataset("valid")
    assert str(error.value) == f"error: {data}/valid: {message}"
    with pytest.raises(SystemExit) as error:  # a split loaded before the criterion is built is checked then
        build_on_cpu(argv)
    assert str(error.value) == f"error: {data}/test: {message}"


def test_the_supervised_model_and_its_criterion_go_together(ldd_dir):
    """The model with another criterion, or the criterion with another model, is refused."""
    with pytest.raises(SystemExit) as error:
        setup([ldd_dir, *TRANSLATION, "--arch", "transformer_dependency_supervised_tiny",
               "--criterion", "label_smoothed_cross_entropy"])
    assert str(error.value) == (
        "error: --arch transformer_dependency_supervised_tiny is trained on side data ['src_ldd'] by a criterion "
        "that reads it (--criterion label_smoothed_cross_entropy_with_dependency); --criterion "
        "label_smoothed_cross_entropy would train it without that supervision")
    with pytest.raises(SystemExit) as error:
        setup([ldd_dir, *TRANSLATION, "--arch", "transformer", "--criterion",
               "label_smoothed_cross_entropy_with_dependency"])
    assert str(error.value) == (
        "error: --criterion label_smoothed_cross_entropy_with_dependency trains a model on side data ['src_ldd'], "
        "which --arch transformer does not learn from: give an --arch that does, or another --criterion")
