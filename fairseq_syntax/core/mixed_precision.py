"""``fairseq-train --bf16`` on a GPU (and on a CPU with ``--cpu``), not only on a TPU.

fairseq 0.12 turns ``--bf16`` into ``--tpu`` while it parses the command line (``options.parse_args_and_arch``:
"use bfloat16; implies --tpu"), so ``fairseq-train --bf16`` on a GPU takes the XLA path and stops for want of
``torch_xla`` (fairseq issue #4696, open: "bf16 with A100 GPUs"; its suggested fix is to decouple the two flags).
fairseq's ``Trainer`` already has the bf16 path a GPU needs once ``tpu`` is off: the model and criterion in
bfloat16, fp32 master weights in ``FP16Optimizer``, no loss scaling (bfloat16 has float32's exponent range).

:func:`decouple_bf16_from_tpu` makes that decoupling: fairseq's CLIs hand their configuration to
``fairseq.distributed.utils.call_main`` right after parsing, which is wrapped here to turn ``tpu`` off again when it
was implied by ``--bf16`` and not asked for (``--tpu`` on the command line keeps the TPU path). The wrapper is
installed when the plugin is imported (``--user-dir fairseq_syntax``), which fairseq does while parsing, before
``call_main`` runs. Precision itself is fairseq's: ``--fp16`` (model in float16, dynamic loss scaling), ``--bf16``
(model in bfloat16), ``--amp`` (float32 weights under autocast).
"""
import functools
import logging
import sys

logger = logging.getLogger(__name__)


def tpu_implied_by_bf16(common, argv) -> bool:
    """True when ``common`` (fairseq's ``cfg.common``) says ``tpu`` only because ``--bf16`` implied it: the command
    line ``argv`` does not ask for ``--tpu``."""
    return bool(getattr(common, "bf16", False) and getattr(common, "tpu", False) and "--tpu" not in argv)


def untie_bf16_from_tpu(cfg, argv=None) -> bool:
    """Turns ``cfg.common.tpu`` off where only ``--bf16`` set it; True when it did."""
    argv = sys.argv if argv is None else argv
    if not tpu_implied_by_bf16(cfg.common, argv):
        return False
    # fairseq copied the flag into other groups when it made the config (the optimizer's, distributed training's)
    for group in cfg.values() if hasattr(cfg, "values") else (cfg.common,):
        if getattr(group, "tpu", None) is True:
            group.tpu = False
    logger.info("--bf16 without --tpu: training in bfloat16 on %s (fairseq's --bf16 implies --tpu otherwise)",
                "the CPU" if cfg.common.cpu else "the GPU if there is one")
    return True


def decouple_bf16_from_tpu() -> None:
    """Wraps ``fairseq.distributed.utils.call_main`` (once) with :func:`untie_bf16_from_tpu`."""
    from fairseq.distributed import utils as distributed_utils

    call_main = distributed_utils.call_main
    if getattr(call_main, "unties_bf16_from_tpu", False):
        return

    @functools.wraps(call_main)
    def call_main_with_bf16(cfg, main, **kwargs):
        untie_bf16_from_tpu(cfg)
        return call_main(cfg, main, **kwargs)

    call_main_with_bf16.unties_bf16_from_tpu = True
    distributed_utils.call_main = call_main_with_bf16
