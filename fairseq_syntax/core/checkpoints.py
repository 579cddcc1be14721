"""Loading fairseq checkpoints under torch >= 2.6.

torch 2.6 made ``torch.load(weights_only=True)`` the default. fairseq checkpoints hold their training arguments as
an ``argparse.Namespace``, which the weights-only unpickler refuses, so ``fairseq-generate``,
``fairseq-interactive`` and ``fairseq-train --restore-file`` fail on any checkpoint. Rather than turning
``weights_only`` off (which would let a checkpoint run arbitrary code), we allow exactly the one extra class a
fairseq checkpoint needs; ``Namespace`` only stores attributes, so allowing it executes nothing.

Training with ``--eval-bleu`` also stores numpy arrays and scalars (the BLEU n-gram counts in the meters), which
need numpy's array and scalar reconstructors and dtype classes; these build arrays from bytes and run no other code
(torch's documentation lists them for numpy checkpoints).
"""
import argparse

import numpy
import torch

try:  # numpy >= 2
    from numpy._core import multiarray as _multiarray
except ImportError:  # numpy 1.x
    from numpy.core import multiarray as _multiarray

_NUMPY_DTYPES = tuple(type(numpy.dtype(kind)) for kind in (
    numpy.bool_, numpy.int8, numpy.int16, numpy.int32, numpy.int64, numpy.uint8, numpy.uint16, numpy.uint32,
    numpy.uint64, numpy.float16, numpy.float32, numpy.float64,
))
FAIRSEQ_CHECKPOINT_GLOBALS = (argparse.Namespace, numpy.ndarray, numpy.dtype, _multiarray._reconstruct,
                              _multiarray.scalar) + _NUMPY_DTYPES


def allow_fairseq_checkpoints() -> None:
    """Allow-list the classes found in fairseq checkpoints for torch's weights-only unpickler."""
    add_safe_globals = getattr(torch.serialization, "add_safe_globals", None)
    if add_safe_globals is not None:  # torch < 2.4 has no weights-only default to fix
        add_safe_globals(list(FAIRSEQ_CHECKPOINT_GLOBALS))
