"""bf16 training on CPU with fairseq's ``Trainer``: the variants the benchmark and the parity check train with. Each
call changes the whole process, so use it in a process of its own.

  ``fp32``                  fairseq as it is;
  ``bf16_autocast``         ``Trainer.train_step`` under ``torch.autocast("cpu", torch.bfloat16)``: fp32 weights and
                            optimizer, matmuls in bf16;
  ``bf16_autocast_layers``  autocast only inside the encoder and decoder layers, outputs cast back to fp32;
  ``bf16_weights``          model and criterion in bf16, fp32 master weights: fairseq's ``--bf16`` path
                            (``FP16Optimizer`` without loss scaling), set on the cfg to run on CPU."""
import functools

import torch

PRECISIONS = ("fp32", "bf16_autocast", "bf16_autocast_layers", "bf16_weights")


def configure(cfg, precision: str) -> None:
    """Before the Trainer is built: sets ``cfg.common.bf16`` / wraps ``Trainer.train_step`` in autocast."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: choose from {PRECISIONS}")
    # (fairseq's own --bf16 among the training options stays on: the benchmark's --precision bf16)
    cfg.common.bf16 = bool(cfg.common.bf16) or precision == "bf16_weights"
    if precision == "bf16_autocast":
        from fairseq.trainer import Trainer

        Trainer.train_step = in_bf16_autocast(Trainer.train_step)


def wrap_model(model: torch.nn.Module, precision: str) -> None:
    """After the model is built: ``bf16_autocast_layers`` puts each encoder and decoder layer under autocast."""
    if precision == "bf16_autocast_layers":
        for layer in list(model.encoder.layers) + list(model.decoder.layers):
            layer.forward = in_bf16_autocast(layer.forward, fp32_outputs=True)


def in_bf16_autocast(function, fp32_outputs: bool = False):
    @functools.wraps(function)
    def wrapped(*args, **kwargs):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = function(*args, **kwargs)
        return to_float32(out) if fp32_outputs else out

    return wrapped


def to_float32(value):
    """bf16 tensors (also inside tuples, lists, dicts) -> fp32, for the fp32 code that reads them."""
    if torch.is_tensor(value):
        return value.float() if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(to_float32(v) for v in value)
    if isinstance(value, dict):
        return {k: to_float32(v) for k, v in value.items()}
    return value
