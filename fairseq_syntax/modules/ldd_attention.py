"""The LDD sub-layer of Pu & Sima'an (2022), section 3.2: one attention head per dependency label group.

Head h (of 16, one per group of Appendix A) scales its scaled dot-product scores element-wise by the parser's
matrix ``LDD_h`` before the softmax:

    S_h = Q_h K_h^T / sqrt(d)          (eq. 3)
    N_h = softmax(S_h * LDD_h)         (eqs. 4-5)
    M_h = N_h V_h                      (eq. 6),   MultiHead = Concat(M_1 .. M_16) W_o   (eq. 7)

``LDD_h[i, j]`` is the probability that token i's word depends on token j's word with a label of group h (the
EOS column holds the root). A pair the parser gives probability 0 keeps score 0, so the head still attends there;
the distributions nudge the scores rather than mask them. Padding keys are masked as usual.

:class:`DependencyAttentionOnly` is Table 1's LDA: "attention weights fixed equal to LDD (not learned)", so there
are no query and key projections and ``N_h = LDD_h`` itself (no softmax: a softmax over probabilities in [0, 1]
would be nearly uniform, and "replace S with the distributions" names the weights, eq. 5's output).
A row of ``LDD_h`` sums to P(group h | i) <= 1, so a token that rarely takes a group-h head gets little from head h.

Shapes: ``x`` ``T x B x C``; ``structure["ldd"]`` ``B x 16 x T x T`` (see
:func:`fairseq_syntax.dependency.variant_distribution`); output ``T x B x C`` and weights ``B x 16 x T x T``.
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fairseq_syntax.dependency import NUM_GROUPS
from fairseq_syntax.modules.structured_attention import Structure, StructuredSelfAttention


class LabeledDependencyAttention(StructuredSelfAttention):
    """Eqs. 3-7 with ``NUM_GROUPS`` heads; ``embed_dim`` must be divisible by 16."""

    fused = False  # a multiplicative change of the scores has no fused kernel

    def __init__(self, embed_dim: int, dropout: float = 0.0):
        super().__init__(embed_dim, NUM_GROUPS, dropout=dropout)

    def attention_scores(self, q: Tensor, k: Tensor, structure: Structure) -> Tensor:
        return torch.matmul(q, k.transpose(-1, -2)) * self.scaling * structure["ldd"].to(q.dtype)


class DependencyAttentionOnly(nn.Module):
    """LDA: ``M_h = LDD_h V_h``; only value and output projections (initialised like fairseq's)."""

    def __init__(self, embed_dim: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if embed_dim % NUM_GROUPS != 0:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by the {NUM_GROUPS} LDD heads")
        self.embed_dim = embed_dim
        self.num_heads = NUM_GROUPS
        self.head_dim = embed_dim // NUM_GROUPS
        self.dropout = dropout
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        nn.init.xavier_uniform_(self.v_proj.weight, gain=1 / 2**0.5)
        nn.init.xavier_uniform_(self.out_proj.weight)
        if self.out_proj.bias is not None:
            nn.init.constant_(self.out_proj.bias, 0.0)

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Optional[Tensor] = None,
        structure: Optional[Structure] = None,
        need_weights: bool = False,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        tgt_len, bsz, _ = x.shape
        v = self.v_proj(x).view(tgt_len, bsz, self.num_heads, self.head_dim).permute(1, 2, 0, 3)
        # padding keys already have zero columns in every variant's tensor
        weights = structure["ldd"].to(v.dtype)
        out = torch.matmul(F.dropout(weights, p=self.dropout, training=self.training), v)
        out = out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, self.embed_dim)
        return self.out_proj(out), weights if need_weights else None
