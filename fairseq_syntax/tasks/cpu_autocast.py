"""``--cpu-bf16-autocast``: a task's train and valid steps under ``torch.autocast("cpu", torch.bfloat16)``.

Why a task option: fairseq's ``--bf16`` casts the model's weights (its ``FP16Optimizer`` path) and its ``--amp`` is
CUDA-only, while CPUs with bf16 matrix units gain most from autocast with fp32 weights: matmuls run in bf16, softmax,
layer norm and the loss stay fp32 as autocast decides, the optimizer and checkpoints are fp32. Measured in
``bench/RESULTS.md`` ("CPU speed options": 1.7-2.2x less CPU time per target token than fp32 on the benchmark's
Multi30k-sized models, one torch thread) with BLEU parity in ``bench/PARITY.md``.

oneDNN keeps a bf16 kernel per batch shape: with fairseq's variable batch shapes the process grows to several GB
unless ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` and ``LRU_CACHE_CAPACITY`` are small (the recipes set both to 64). The
option has no effect on CUDA tensors (use fairseq's ``--fp16`` / ``--bf16`` / ``--amp`` there). Generation is fp32.
"""
import contextlib
from dataclasses import dataclass, field

import torch
from fairseq.dataclass import FairseqDataclass


@dataclass
class CpuAutocastConfig(FairseqDataclass):
    cpu_bf16_autocast: bool = field(
        default=False,
        metadata={"help": "run training and validation steps under torch.autocast('cpu', torch.bfloat16): "
                  "fp32 weights and optimizer, bf16 matmuls (CPU only; see fairseq_syntax/tasks/cpu_autocast.py)"},
    )


def cpu_bf16_autocast(enabled: bool):
    """The autocast context when ``enabled``, else a no-op context."""
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast("cpu", dtype=torch.bfloat16)


class CpuAutocastMixin:
    """Put before a fairseq task class in the bases; its config must have ``cpu_bf16_autocast``."""

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        with cpu_bf16_autocast(self.cfg.cpu_bf16_autocast):
            return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad=ignore_grad)

    def valid_step(self, sample, model, criterion):
        with cpu_bf16_autocast(self.cfg.cpu_bf16_autocast):
            return super().valid_step(sample, model, criterion)
