"""Several linear maps of one input as one: ``[y_1; ...; y_k] = x [W_1; ...; W_k]^T + [b_1; ...; b_k]``.

One ``C -> sum C_i`` map is one matrix product forward and two backward instead of ``k`` and ``2k``, and two
parameters instead of ``2k`` (each costs the optimizer, clipping and zeroing operators every step).

* :func:`fused_linear`: one ``nn.Linear`` holding the given maps' values, rows stacked in order (``sum C_i x C``
  weight, ``sum C_i`` bias); it draws nothing from the random generator.
* :class:`LinearPart` / :func:`linear_part`: map ``i`` as views of the fused parameters (``C_i x C``, ``C_i``)."""
from typing import NamedTuple, Optional

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


class FusedPart:
    """A class attribute naming part ``index`` of ``parts`` of the module's fused linear ``fused``, read as
    :func:`linear_part` (``q_proj = FusedPart("in_proj", 0, 3)``). Before ``fused`` exists it raises
    AttributeError, so ``nn.Module.__getattr__`` finds the module's own submodule of that name."""

    def __init__(self, fused: str, index: int, parts: int):
        self.fused, self.index, self.parts = fused, index, parts

    def __get__(self, module, owner=None):
        if module is None:
            return self
        return linear_part(getattr(module, self.fused), self.index, self.parts)
