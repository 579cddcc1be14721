"""--cpu-bf16-autocast: the task's train/valid steps run their matmuls in bf16 and leave weights and gradients
fp32; without the flag nothing changes; fairseq-train accepts it and writes an fp32 checkpoint."""
import logging

import pytest
import torch
from conftest import TINY, TRANSLATION, train_here
from torch import nn

from fairseq_syntax.core import cpu_autocast
from fairseq_syntax.core.cpu_autocast import CpuAutocastConfig, CpuAutocastMixin


class StepsOfATask:
    """What fairseq's FairseqTask.train_step / valid_step do, reduced to a forward and a backward pass."""

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        output = model(sample)
        output.float().sum().backward()
        return output.dtype

    def valid_step(self, sample, model, criterion):
        with torch.no_grad():
            return model(sample).dtype


class Task(CpuAutocastMixin, StepsOfATask):
    def __init__(self, enabled: bool):
        self.cfg = CpuAutocastConfig(cpu_bf16_autocast=enabled)


def test_matmuls_run_in_bf16_with_fp32_weights_and_gradients():
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    sample = torch.randn(2, 4)
    task = Task(enabled=True)
    assert task.train_step(sample, model, None, None, 0) == torch.bfloat16
    assert not torch.is_autocast_enabled("cpu")  # it does not leak out of the step
    assert task.valid_step(sample, model, None) == torch.bfloat16
    assert model.weight.dtype == torch.float32 and model.weight.grad.dtype == torch.float32
    # the gradient is the bf16 computation's: d(sum(W x + b))/dW = sum over the batch of x, rounded to bf16
    expected = sample.sum(0).expand(3, 4)
    assert torch.allclose(model.weight.grad, expected, rtol=1e-2)


def test_without_the_flag_steps_stay_fp32():
    model = nn.Linear(4, 3)
    task = Task(enabled=False)
    assert task.train_step(torch.randn(2, 4), model, None, None, 0) == torch.float32
    assert task.valid_step(torch.randn(2, 4), model, None) == torch.float32


def test_fairseq_train_with_the_flag_writes_an_fp32_checkpoint(data_dirs, tmp_path, caplog):
    with caplog.at_level(logging.INFO):  # fairseq-train, in this process
        train_here([data_dirs["preorder"], *TRANSLATION, "--arch", "transformer_syntax_mask_tiny", "--max-epoch", "1",
                    "--save-dir", str(tmp_path), *TINY, "--cpu-bf16-autocast"])
    assert "cpu_bf16_autocast': True" in caplog.text
    state = torch.load(tmp_path / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    assert {tensor.dtype for tensor in state["model"].values() if tensor.is_floating_point()} == {torch.float32}


class Base:
    def __init__(self, cfg):
        self.cfg = cfg


class TaskOnABase(CpuAutocastMixin, Base):
    pass


@pytest.mark.parametrize("has_bf16", [False, True])
def test_the_option_warns_on_a_cpu_without_bf16_instructions_only(monkeypatch, caplog, has_bf16):
    monkeypatch.setattr(cpu_autocast, "cpu_has_bf16", lambda: has_bf16)
    TaskOnABase(CpuAutocastConfig(cpu_bf16_autocast=False))
    assert not caplog.records
    task = TaskOnABase(CpuAutocastConfig(cpu_bf16_autocast=True))
    assert task.cfg.cpu_bf16_autocast  # the base class got the config
    assert ("without bf16 instructions" in caplog.text) is not has_bf16


def test_recipes_default_to_bf16_only_where_it_pays(monkeypatch):
    monkeypatch.setattr(cpu_autocast, "cpu_has_bf16", lambda: True)
    assert cpu_autocast.default_cpu_precision() == "bf16"
    monkeypatch.setattr(cpu_autocast, "cpu_has_bf16", lambda: False)
    assert cpu_autocast.default_cpu_precision() == "fp32"
