"""``sentence_masked_lm`` shows the model fresh masks every epoch, through fairseq's own batch iterator."""
import random

import pytest
from conftest import only_source_data
from fairseq import options, tasks
from fairseq.data import MaskTokensDataset
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.trainer import Trainer

import fairseq_syntax

#: a multiple of 8: fairseq-fixed's batch_by_size drops a last batch short of --required-batch-size-multiple
SENTENCES = 64
WORDS = 20  # per sentence: with <s> and </s> 22 tokens, int(0.15 * 22 + u) = 3 or 4 of them masked


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("masking")
    rng = random.Random(0)
    vocabulary = [f"w{n}" for n in range(30)]
    lines = [" ".join(rng.choice(vocabulary) for _ in range(WORDS)) for _ in range(SENTENCES)]
    return only_source_data(root, lines, lines[:4])


def fed_per_epoch(data: str, num_workers: int, epochs: int = 2):
    """[{sentence id: (masked input, target)}] per epoch, as fairseq-train's loop gets them; and the task."""
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        data, "--user-dir", fairseq_syntax.__path__[0], "--task", "sentence_masked_lm", "--criterion", "masked_lm",
        "--arch", "tree_transformer_lm_tiny", "--tokens-per-sample", "32", "--batch-size", "8", "--optimizer", "adam",
        "--lr", "1e-3", "--cpu", "--seed", "1", "--num-workers", str(num_workers)])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    model, criterion = task.build_model(cfg.model), task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, criterion)
    epoch_itr = trainer.get_train_iterator(epoch=1, load_dataset=True)  # as checkpoint_utils.load_checkpoint does
    fed = []
    for _ in range(epochs):
        seen = {}
        for sample in epoch_itr.next_epoch_itr(shuffle=True):
            for index, tokens, target in zip(sample["id"].tolist(), sample["net_input"]["src_tokens"],
                                             sample["target"]):
                seen[index] = (tokens.tolist(), target.tolist())
        fed.append(seen)
        # fairseq_cli.train's next epoch: the same (cached) iterator, whose DataLoader and worker are kept
        epoch_itr = trainer.get_train_iterator(epoch_itr.next_epoch_idx, load_dataset=False)
    return fed, task


def fairseq_draw(task, epoch: int) -> dict:
    """Sentence index -> fairseq's own MaskTokensDataset draw for (seed 1, epoch, index), input and target."""
    sentences = task._load_dataset_split("train", 1, False)
    kwargs = dict(pad_idx=task.source_dictionary.pad(), mask_idx=task.mask_idx, seed=1)
    inputs, targets = MaskTokensDataset.apply_mask(sentences, task.source_dictionary, **kwargs)
    inputs.set_epoch(epoch)
    targets.set_epoch(epoch)
    return {index: (inputs[index].tolist(), targets[index].tolist()) for index in range(len(sentences))}


@pytest.mark.parametrize("num_workers", [1, 0])
def test_every_epoch_draws_fresh_masks(data, num_workers):
    fed, task = fed_per_epoch(data, num_workers)
    assert [sorted(epoch) for epoch in fed] == [list(range(SENTENCES))] * 2  # every sentence once per epoch
    draws = [fairseq_draw(task, epoch) for epoch in (1, 2)]
    repeated = sum(fed[0][index][0] == fed[1][index][0] for index in range(SENTENCES))
    # fairseq's draws for two epochs agree only by chance: 3-4 of 22 positions, the same ones with probability
    # about 1 / C(22, 3) = 1/1540 (1 of 3,000 such sentences measured: here sentence 27)
    coincide = sum(draws[0][index][0] == draws[1][index][0] for index in range(SENTENCES))
    assert repeated == coincide <= SENTENCES // 32, (
        f"{repeated} of {SENTENCES} sentences had the same masked input in epochs 1 and 2")
    for epoch in (1, 2):
        assert fed[epoch - 1] == draws[epoch - 1], f"epoch {epoch}: not fairseq's draw for that epoch"
    mask = task.mask_idx
    for tokens, target in fed[1].values():  # the target holds the original word wherever the input says <mask>
        assert all(t != task.source_dictionary.pad() for token, t in zip(tokens, target) if token == mask)
    assert any(mask in tokens for tokens, _ in fed[1].values())

