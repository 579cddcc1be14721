"""The LDD sub-layer of Pu & Sima'an (2022), section 3.2: one attention head per dependency label group.

Head h (of 16, Appendix A's groups) scales its scores element-wise by the parser's ``LDD_h`` before the softmax:

    S_h = Q_h K_h^T / sqrt(d)          (eq. 3)
    N_h = softmax(S_h * LDD_h)         (eqs. 4-5)
    M_h = N_h V_h                      (eq. 6),   MultiHead = Concat(M_1 .. M_16) W_o   (eq. 7)

``LDD_h[i, j]``: the probability that token i's word depends on token j's word with a label of group h (the EOS
column holds the root). A pair of probability 0 keeps score 0: the distributions nudge the scores, not mask them.

:class:`DependencyAttentionOnly` is Table 1's LDA, "attention weights fixed equal to LDD (not learned)": no query
or key projections. ``--syntax-variant lda`` (the paper as written) gives ``N_h = softmax_j(LDD_h)`` (near
uniform: a probability of 1 weighs e times a 0); ``lda_weights`` uses ``N_h = LDD_h`` itself (rows sum to P(group
h | i)).

Shapes: ``x`` ``T x B x C``; ``structure["ldd"]`` ``B x 16 x T x T``
(:func:`fairseq_syntax.methods.ldd.distributions.variant_distribution`); output ``T x B x C``, weights
``B x 16 x T x T``."""
from typing import Optional, Tuple

import torch
from torch import Tensor

from fairseq_syntax.core.attention import Structure, StructuredSelfAttention
from fairseq_syntax.methods.ldd.distributions import NUM_GROUPS


class LabeledDependencyAttention(StructuredSelfAttention):
    """Eqs. 3-7 with ``NUM_GROUPS`` heads; ``embed_dim`` must be divisible by 16."""

    fused = False  # a multiplicative change of the scores has no fused kernel

    def __init__(self, embed_dim: int, dropout: float = 0.0):
        super().__init__(embed_dim, NUM_GROUPS, dropout=dropout)

    def attention_scores(self, q: Tensor, k: Tensor, structure: Structure) -> Tensor:
        return torch.matmul(q, k.transpose(-1, -2)) * self.scaling * structure["ldd"].to(q.dtype)


class DependencyAttentionOnly(StructuredSelfAttention):
    """LDA: ``M_h = softmax_j(LDD_h) V_h`` (``normalise``, the paper) or ``M_h = LDD_h V_h``; only value and output
    projections (initialised like fairseq's)."""

    fused = False

    def __init__(self, embed_dim: int, dropout: float = 0.0, bias: bool = True, normalise: bool = True):
        super().__init__(embed_dim, NUM_GROUPS, dropout=dropout, bias=bias)
        del self.q_proj, self.k_proj  # the weights come from the parser, not from queries and keys
        self.normalise = normalise

    def project(self, x: Tensor) -> Tuple[None, None, Tensor]:
        return None, None, self._split_heads(self.v_proj(x))

    def attention_weights(
        self, q: None, k: None, key_padding_mask: Optional[Tensor], structure: Structure
    ) -> Tensor:
        ldd = structure["ldd"]
        if not self.normalise:
            return ldd  # padding keys already have zero columns in every variant's tensor
        if key_padding_mask is not None:
            ldd = ldd.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        return torch.softmax(ldd.float(), dim=-1).to(ldd.dtype)
