"""Counting, on a CPU, the operators that would make the host wait for a GPU: a torch dispatch mode over any code,
forward and backward, recording each such operator and the line of ``fairseq_syntax`` it comes from.

An operator counts when it reads data-dependent values back (:func:`sync_reason`: ``.item()``, ``bool()``, an ``if``
on a tensor, ``nonzero``, a boolean mask, ...) or copies to the host (:data:`TO_HOST`; ``.to(device)`` is not
counted: on a CPU it cannot tell ``.to("cpu")`` from ``.to(x.device)``), and reads a tensor that would be on the GPU.
Host tensors: outputs of :data:`FACTORIES` without ``device=``, of :data:`HOST_OUTPUTS`, and of operators whose
tensor inputs are all host tensors; every other tensor is a device tensor.

Where: the innermost frame outside torch, and when that is in fairseq, the innermost ``fairseq_syntax`` line that
led there (``via``); in the backward pass, where the autograd node was made (its anomaly-mode traceback: anomaly
mode is on, without its NaN check).

``with SyncCounter() as counter: f()``: ``counter.events`` (one :class:`SyncEvent` each), ``counter.operators``
(every operator dispatched)."""
import os
import re
import sys
from collections import Counter
from typing import NamedTuple, Optional

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

import fairseq_syntax

PACKAGE = os.path.dirname(os.path.abspath(fairseq_syntax.__file__))
TORCH = os.path.dirname(os.path.abspath(torch.__file__))
HERE = os.path.abspath(__file__)
#: operators that always read data-dependent values back (by their overload packet's name)
ALWAYS = {"_local_scalar_dense", "equal", "nonzero", "masked_select", "bincount", "_unique", "_unique2", "unique_dim",
          "unique_consecutive", "unique_dim_consecutive"}
#: factories whose output stays on the host when called without ``device=`` (the torch functions' names)
FACTORIES = {"arange", "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "eye", "linspace",
             "range", "rand", "randn", "randint", "randperm", "scalar_tensor"}
#: operators whose output is a host tensor whatever their input (a shape read as a tensor: fairseq's sinusoidal
#: positions take the sequence length that way)
HOST_OUTPUTS = {"_shape_as_tensor"}
#: tensor methods that copy a device tensor to the host
TO_HOST = {"tolist", "numpy", "cpu"}
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


class SyncEvent(NamedTuple):
    operator: str  # e.g. "aten::_local_scalar_dense", "aten::index (bool mask)", "Tensor.tolist"
    where: str  # the line that ran it, e.g. "fairseq_syntax/core/structure.py:159 (_ancestor_steps)"
    via: str  # where is outside the package (in fairseq): the package's innermost line that led there, else ""
    phase: str  # "forward" or "backward"


def _tensors(values) -> list:
    return [v for v in tree_flatten(values)[0] if isinstance(v, torch.Tensor)]


def sync_reason(func, args, kwargs) -> Optional[str]:
    """The operator's name when it reads data back to the host on a GPU (:data:`ALWAYS`; ``repeat_interleave`` with
    tensor repeats and no ``output_size``; ``index``, ``index_put`` with a boolean mask), else None."""
    name = func._overloadpacket.__name__
    if name in ALWAYS:
        return f"aten::{name}"
    if name == "repeat_interleave" and func._overloadname in ("Tensor", "self_Tensor") and kwargs.get(
            "output_size") is None:  # repeats given as a tensor: the output's size is their sum
        return "aten::repeat_interleave (no output_size)"
    if name in ("index", "index_put", "index_put_", "_index_put_impl_"):
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        if any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices):
            return f"aten::{name} (bool mask)"
    return None


def _short(path: str) -> str:
    if path.startswith(PACKAGE + os.sep):
        return "fairseq_syntax/" + os.path.relpath(path, PACKAGE)
    parts = path.split(os.sep)
    for root in ("fairseq", "torch"):  # site-packages/fairseq/trainer.py -> fairseq/trainer.py
        if root in parts:
            return "/".join(parts[len(parts) - 1 - parts[::-1].index(root):])
    return os.path.basename(path)


def _where(frames) -> tuple[str, str]:
    """``frames``: (file, line, function), innermost first -> (the innermost outside torch and this file, the
    innermost in the package when that one is not: the package's line that led there, or "")."""
    frames = [f for f in frames if os.path.abspath(f[0]) != HERE]
    inside = [f for f in frames if not os.path.abspath(f[0]).startswith(TORCH + os.sep)] or frames or [("?", 0, "?")]
    chosen = inside[0]
    via = "" if _in_package(chosen[0]) else next((_frame(f) for f in inside if _in_package(f[0])), "")
    return _frame(chosen), via


def _in_package(path: str) -> bool:
    return os.path.abspath(path).startswith(PACKAGE + os.sep)


def _frame(frame) -> str:
    return f"{_short(frame[0])}:{frame[1]} ({frame[2]})"


def _python_frames():
    frame, frames = sys._getframe(2), []
    while frame is not None:
        frames.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    return frames


def _forward_frames(node):
    """The frames (innermost first) where ``node`` was made, from its anomaly-mode traceback."""
    lines = (node.metadata or {}).get("traceback_") or []
    frames = [m.groups() for m in (_FRAME.search(line) for line in lines) if m]
    return [(path, int(line), function) for path, line, function in reversed(frames)]


class _HostFactories(TorchFunctionMode):
    """Marks the outputs of factories called without ``device=`` as host tensors; records copies to the host."""

    def __init__(self, counter: "SyncCounter"):
        super().__init__()
        self.counter = counter

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in TO_HOST:
            source = args[0] if args and isinstance(args[0], torch.Tensor) else None
            if source is not None and not self.counter.is_host(source):
                self.counter.record(f"Tensor.{name}", _python_frames(), "forward")
        out = func(*args, **kwargs)
        if name in HOST_OUTPUTS or (name in FACTORIES and kwargs.get("device") is None
                                    and getattr(func, "__module__", "") == "torch"):
            for tensor in _tensors(out):
                self.counter.host[tensor] = True
        return out


class _SyncOperators(TorchDispatchMode):
    def __init__(self, counter: "SyncCounter"):
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        counter = self.counter
        inputs = _tensors((args, kwargs))
        counter.operators[f"aten::{func._overloadpacket.__name__}"] += 1
        reason = sync_reason(func, args, kwargs)
        host_inputs = bool(inputs) and all(counter.is_host(t) for t in inputs)
        if reason is not None and not host_inputs:
            node = torch._C._current_autograd_node()
            if node is None:
                counter.record(reason, _python_frames(), "forward")
            else:
                counter.record(reason, _forward_frames(node), "backward")
        out = func(*args, **kwargs)
        if host_inputs:
            for tensor in _tensors(out):
                counter.host[tensor] = True
        return out


class SyncCounter:
    """``with SyncCounter() as counter: ...``: the synchronising operators run inside (module docstring)."""

    def __init__(self):
        self.events: list[SyncEvent] = []
        self.operators: Counter = Counter()  # every aten operator dispatched, by name
        self.host = WeakIdKeyDictionary()  # tensors that a GPU run would hold on the host

    def is_host(self, tensor: torch.Tensor) -> bool:
        return tensor in self.host

    def record(self, operator: str, frames, phase: str) -> None:
        self.events.append(SyncEvent(operator, *_where(frames), phase))

    def __enter__(self) -> "SyncCounter":
        self._anomaly = torch.autograd.set_detect_anomaly(True, check_nan=False)
        self._anomaly.__enter__()
        self._modes = [_HostFactories(self), _SyncOperators(self)]
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)
        self._anomaly.__exit__(*exc)

    def by_place(self) -> list[dict]:
        """The events grouped: ``{"where", "operator", "phase", "count"}``, most frequent first."""
        counts = Counter(self.events)
        return [{"where": e.where, "via": e.via, "operator": e.operator, "phase": e.phase, "count": n}
                for e, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]


def own_events(events) -> list:
    """The synchronisations that lines of ``fairseq_syntax`` run themselves (not those inside fairseq it calls)."""
    return [event for event in events if event.where.startswith("fairseq_syntax/")]
