"""Several linear maps of one input as one: ``[y_1; ...; y_k] = x [W_1; ...; W_k]^T + [b_1; ...; b_k]``.

A method's attention often applies several ``C -> C_i`` maps to the same input (queries, keys and values; the Tree
Transformer's link queries and keys). As one ``C -> sum C_i`` map it is one matrix product forward and two backward
instead of ``k`` and ``2k``, and two parameters instead of ``2k``, each of which costs fairseq's Adam, its gradient
clipping and its gradient zeroing about forty operators a step on a device without fused optimizers (issue 48:
operators dispatched per training step). The function is the same; checkpoints of the separate maps load through
:func:`merge_checkpoint_entries` in the module's ``upgrade_state_dict_named``.

* :func:`fused_linear`: one ``nn.Linear`` holding the given maps' values, rows stacked in order
  (``sum C_i x C`` weight, ``sum C_i`` bias): a model built with it starts exactly as one built with the separate
  maps, and draws nothing from the random generator itself.
* :class:`LinearPart` / :func:`linear_part`: map ``i`` of a fused linear as views of its parameters, for reading or
  setting one part (``C_i x C`` weight, ``C_i`` bias).
* :func:`merge_checkpoint_entries`: replace entries of an old state dict by their concatenation (or stack).
"""
from typing import Callable, Dict, NamedTuple, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def fused_linear(*linears: nn.Linear) -> nn.Linear:
    """One ``nn.Linear`` whose output is ``linears``' outputs side by side, holding copies of their parameters."""
    if not linears:
        raise ValueError("fused_linear needs at least one linear map")
    in_features = linears[0].in_features
    has_bias = linears[0].bias is not None
    if any(linear.in_features != in_features or (linear.bias is not None) != has_bias for linear in linears):
        raise ValueError("fused_linear needs maps of the same input size, all with a bias or all without")
    # built on the meta device, so no initialisation draws from the random generator: the values are the maps'
    fused = nn.Linear(in_features, sum(linear.out_features for linear in linears), bias=has_bias, device="meta")
    fused.weight = nn.Parameter(torch.cat([linear.weight.detach() for linear in linears]))
    if has_bias:
        fused.bias = nn.Parameter(torch.cat([linear.bias.detach() for linear in linears]))
    return fused


class LinearPart(NamedTuple):
    """One part of a fused linear map: ``weight`` ``C_i x C`` and ``bias`` ``C_i`` (or None), views of the fused
    parameters."""

    weight: Tensor
    bias: Optional[Tensor]

    def __call__(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)


def linear_part(fused: nn.Linear, index: int, parts: int) -> LinearPart:
    """Part ``index`` of ``parts`` equal parts of ``fused`` (its rows ``index * C_i`` to ``(index + 1) * C_i``)."""
    size = fused.out_features // parts
    rows = slice(index * size, (index + 1) * size)
    return LinearPart(fused.weight[rows], None if fused.bias is None else fused.bias[rows])


def merge_checkpoint_entries(
    state_dict: Dict[str, Tensor], old_keys: Sequence[str], new_key: str,
    combine: Callable[[Sequence[Tensor]], Tensor] = torch.cat,
) -> None:
    """When ``state_dict`` holds every one of ``old_keys`` (a checkpoint written before the maps were fused), replace
    them by ``combine`` of their values (rows stacked, in order) under ``new_key``; otherwise leave it as it is."""
    if all(key in state_dict for key in old_keys):
        state_dict[new_key] = combine([state_dict.pop(key) for key in old_keys])


class FusedPart:
    """A class attribute naming part ``index`` of ``parts`` of the module's fused linear ``fused`` (an attribute
    name), read as :func:`linear_part`: ``q_proj = FusedPart("in_proj", 0, 3)``. Before ``fused`` exists (while a
    base class's ``__init__`` still builds the separate maps), reading it raises AttributeError, which hands the
    lookup to ``nn.Module.__getattr__`` and so to the module's own submodule of that name."""

    def __init__(self, fused: str, index: int, parts: int):
        self.fused, self.index, self.parts = fused, index, parts

    def __get__(self, module, owner=None):
        if module is None:
            return self
        return linear_part(getattr(module, self.fused), self.index, self.parts)
