"""Dependency-based self-attention: Deguchi, Tamura & Ninomiya (2019), section 3.1, after LISA (Strubell et al.
2018): in one encoder layer the first ``dependency_heads`` heads score keys with a biaffine function, trained (by
the criterion, :mod:`.criterion`) to put their attention on each token's dependency parent:

    S_dep[t, j] = (q_t W) . k_j / sqrt(d) + b . k_j        (q, k: the dependency heads' queries and keys, concatenated)
    A_dep = softmax(S_dep),   the other heads as usual

as the authors' code computes it (``dbsa/modules/dbsa.py``: ``W`` and ``b`` of size ``h d``, Xavier-initialised with
gain 1/sqrt(2), ``b`` zero). At test time nothing else changes: no parse is needed.

Returns as ``carry`` the dependency heads' attention averaged over them, ``B x T x T`` (query t, key j) in float32,
which the encoder hands to the criterion. Shapes: ``x`` ``T x B x C``; output ``T x B x C``; weights ``B x H x T x T``
(float32).
"""
import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fairseq_syntax.core.attention import Structure, StructuredSelfAttention


class DependencyBasedSelfAttention(StructuredSelfAttention):
    fused = False  # the dependency heads' probabilities are an output
    # float32: the criterion takes their log, and float16 underflows below 6e-8
    float32_weights = True

    def __init__(self, embed_dim: int, num_heads: int, dependency_heads: int = 1, dropout: float = 0.0):
        super().__init__(embed_dim, num_heads, dropout=dropout)
        if not 1 <= dependency_heads <= num_heads:
            raise ValueError(f"--dependency-heads {dependency_heads} must be between 1 and the layer's {num_heads}")
        self.dependency_heads = dependency_heads
        width = self.head_dim * dependency_heads
        self.biaffine_weight = nn.Parameter(torch.empty(width, width))
        self.biaffine_bias = nn.Parameter(torch.zeros(width))
        nn.init.xavier_uniform_(self.biaffine_weight, gain=1 / math.sqrt(2))

    def _concat(self, x: Tensor) -> Tensor:
        """The dependency heads of ``B x H x T x d`` side by side: ``B x T x (h d)``."""
        bsz, _, length, _ = x.shape
        return x[:, :self.dependency_heads].transpose(1, 2).reshape(bsz, length, -1)

    def attention_scores(self, q: Tensor, k: Tensor, structure: Structure) -> Tensor:
        bsz, _, length, dim = q.shape
        h = self.dependency_heads
        q_dep = F.linear(self._concat(q), self.biaffine_weight).view(bsz, length, h, dim).transpose(1, 2)
        scores = torch.matmul(torch.cat([q_dep, q[:, h:]], dim=1), k.transpose(-1, -2)) * self.scaling
        key_bias = F.linear(self._concat(k), self.biaffine_bias[None])  # B x T x 1: b . k_j
        return torch.cat([scores[:, :h] + key_bias.transpose(1, 2)[:, None], scores[:, h:]], dim=1)

    def forward(self, x: Tensor, key_padding_mask: Optional[Tensor] = None, structure: Optional[Structure] = None,
                need_weights: bool = False, carry: Optional[Tensor] = None
                ) -> Tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
        out, weights, _ = super().forward(x, key_padding_mask, structure, need_weights=True, carry=carry)
        return out, weights if need_weights else None, weights[:, :self.dependency_heads].mean(dim=1)
