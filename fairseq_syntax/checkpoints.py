"""Loading fairseq checkpoints under torch >= 2.6.

torch 2.6 made ``torch.load(weights_only=True)`` the default. fairseq checkpoints hold their training arguments as
an ``argparse.Namespace``, which the weights-only unpickler refuses, so ``fairseq-generate``,
``fairseq-interactive`` and ``fairseq-train --restore-file`` fail on any checkpoint. Rather than turning
``weights_only`` off (which would let a checkpoint run arbitrary code), we allow exactly the one extra class a
fairseq checkpoint needs; ``Namespace`` only stores attributes, so allowing it executes nothing.
"""
import argparse

import torch

FAIRSEQ_CHECKPOINT_GLOBALS = (argparse.Namespace,)


def allow_fairseq_checkpoints() -> None:
    """Allow-list the classes found in fairseq checkpoints for torch's weights-only unpickler."""
    add_safe_globals = getattr(torch.serialization, "add_safe_globals", None)
    if add_safe_globals is not None:  # torch < 2.4 has no weights-only default to fix
        add_safe_globals(list(FAIRSEQ_CHECKPOINT_GLOBALS))
