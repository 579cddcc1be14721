"""``fairseq-train --bf16`` on a GPU (and on a CPU with ``--cpu``), not only on a TPU.

fairseq 0.12 turns ``--bf16`` into ``--tpu`` while parsing ("use bfloat16; implies --tpu"), so on a GPU it takes
the XLA path and stops for want of ``torch_xla`` (fairseq issue #4696). Its ``Trainer`` has the bf16 path a GPU
needs once ``tpu`` is off (bfloat16 model, fp32 master weights, no loss scaling).

:func:`decouple_bf16_from_tpu` wraps ``fairseq.distributed.utils.call_main`` to turn ``tpu`` off where only
``--bf16`` implied it (``--tpu`` given keeps it); installed when the plugin is imported, before ``call_main``
runs."""
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
