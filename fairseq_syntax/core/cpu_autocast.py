"""``--cpu-bf16-autocast``: a task's train and valid steps under ``torch.autocast("cpu", torch.bfloat16)``: bf16
matmuls, fp32 weights, optimizer and checkpoints; generation is fp32. Its speed, memory and the CPUs it pays on:
docs/gpu.md; the task warns on the others, and the recipes default to fp32 there (:func:`default_cpu_precision`)."""
import logging
from dataclasses import dataclass

import torch
from fairseq.dataclass import FairseqDataclass

from fairseq_syntax.core.command_help import option

logger = logging.getLogger(__name__)


@dataclass
class CpuAutocastConfig(FairseqDataclass):
    cpu_bf16_autocast: bool = option(
        False, "run training and validation steps under torch.autocast('cpu', torch.bfloat16): fp32 weights and "
        "optimizer, bf16 matmuls (CPU only; see docs/gpu.md)")


def cpu_has_bf16() -> bool:
    """Whether oneDNN runs bf16 matmuls natively on this CPU (AVX512-BF16 or AMX) rather than emulating them."""
    return torch.backends.mkldnn.is_available() and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def default_cpu_precision() -> str:
    """``bf16`` (train with ``--cpu-bf16-autocast``) where the CPU has bf16 instructions, else ``fp32``."""
    return "bf16" if cpu_has_bf16() else "fp32"


class CpuAutocastMixin:
    """Put before a fairseq task class in the bases; its config must have ``cpu_bf16_autocast``."""

    def __init__(self, cfg, *args, **kwargs):
        super().__init__(cfg, *args, **kwargs)
        if cfg.cpu_bf16_autocast and not cpu_has_bf16():
            logger.warning(
                "--cpu-bf16-autocast on a CPU without bf16 instructions (no AVX512-BF16 or AMX): oneDNN emulates "
                "bf16 and training runs many times slower than fp32 (about 10x measured on an AVX2 CPU); leave the "
                "option out here"
            )

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        with torch.autocast("cpu", torch.bfloat16, enabled=self.cfg.cpu_bf16_autocast):
            return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad=ignore_grad)

    def valid_step(self, sample, model, criterion):
        with torch.autocast("cpu", torch.bfloat16, enabled=self.cfg.cpu_bf16_autocast):
            return super().valid_step(sample, model, criterion)
