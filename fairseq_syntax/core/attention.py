"""Multi-head self-attention with one hook for the step each syntax method changes.

Vaswani et al. (2017), eq. 1: ``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V``, per head. Methods change:

* an additive score bias (syntax masks, McDonald & Chiang 2021): :meth:`score_bias`; the fused
  ``scaled_dot_product_attention`` kernel is used unless the weights are requested;
* anything else: ``fused = False`` and :meth:`attention_scores` (LDD) or :meth:`attention_weights` (constituent
  attention).

Shapes: ``x`` ``T x B x C``, ``key_padding_mask`` ``B x T`` (True at padding), ``structure`` the encoder's
per-batch dict. Output ``T x B x C``, weights ``B x H x T x T`` when asked for, and ``carry`` for the next layer's
attention (None here; the Tree Transformer's links)."""
from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

Structure = Dict[str, Tensor]


class StructuredSelfAttention(nn.Module):
    """Self-attention whose scores or weights a subclass may change; parameter names match fairseq's."""

    #: True when the method only adds :meth:`score_bias`, so the fused kernel computes the same thing.
    fused = True
    #: True when :meth:`attention_weights` returns float32 probabilities (for a method that takes their log)
    float32_weights = False

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim**-0.5
        self.dropout = dropout
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.reset_parameters()

    def reset_parameters(self):
        # fairseq's MultiheadAttention initialisation, so a zero-bias model starts like fairseq's transformer
        gain = 1 / 2**0.5
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(proj.weight, gain=gain)
        nn.init.xavier_uniform_(self.out_proj.weight)
        if self.out_proj.bias is not None:
            nn.init.constant_(self.out_proj.bias, 0.0)

    def score_bias(self, structure: Structure) -> Optional[Tensor]:
        """Additive bias on the scaled scores, broadcastable to ``B x H x T x T``; None for plain attention."""
        return None

    def attention_scores(self, q: Tensor, k: Tensor, structure: Structure) -> Tensor:
        """``B x H x T x T`` scores before the softmax from ``q, k`` of shape ``B x H x T x d``."""
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scaling
        bias = self.score_bias(structure)
        return scores if bias is None else scores + bias.to(scores.dtype)

    def attention_weights(
        self, q: Tensor, k: Tensor, key_padding_mask: Optional[Tensor], structure: Structure
    ) -> Tensor:
        """``B x H x T x T`` attention probabilities: the softmax of :meth:`attention_scores` over unpadded keys."""
        scores = self.attention_scores(q, k, structure)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        probabilities = torch.softmax(scores, dim=-1, dtype=torch.float32)
        return probabilities if self.float32_weights else probabilities.type_as(q)

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Optional[Tensor] = None,
        structure: Optional[Structure] = None,
        need_weights: bool = False,
        carry: Optional[Tensor] = None,
    ) -> Tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
        tgt_len, bsz, _ = x.shape
        structure = structure if structure is not None else {}
        q, k, v = self.project(x)
        dropout_p = self.dropout if self.training else 0.0
        weights = None
        if self.fused and not need_weights:
            mask = self._additive_mask(self.score_bias(structure), key_padding_mask, q.dtype)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        else:
            weights = self.attention_weights(q, k, key_padding_mask, structure)
            out = torch.matmul(F.dropout(weights, p=dropout_p, training=self.training).to(v.dtype), v)
        out = out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, self.embed_dim)
        # the weights leave only when asked for: a side input returned from a checkpointed layer makes fairseq's
        # checkpoint function recurse until memory runs out
        return self.out_proj(out), weights if need_weights else None, None

    def project(self, x: Tensor) -> Tuple[Optional[Tensor], Optional[Tensor], Tensor]:
        """Queries, keys and values ``B x H x T x d`` of ``x`` (``T x B x C``)."""
        return self._split_heads(self.q_proj(x)), self._split_heads(self.k_proj(x)), self._split_heads(self.v_proj(x))

    def _split_heads(self, x: Tensor) -> Tensor:
        """``T x B x C`` -> ``B x H x T x d``."""
        tgt_len, bsz, _ = x.shape
        return x.view(tgt_len, bsz, self.num_heads, self.head_dim).permute(1, 2, 0, 3)

    @staticmethod
    def _additive_mask(
        bias: Optional[Tensor], key_padding_mask: Optional[Tensor], dtype: torch.dtype
    ) -> Optional[Tensor]:
        if key_padding_mask is None:
            return None if bias is None else bias.to(dtype)
        # a large finite value rather than -inf: a padded query row then stays finite under any bias
        padding = torch.zeros(key_padding_mask.shape, dtype=dtype, device=key_padding_mask.device)
        padding = padding.masked_fill(key_padding_mask, torch.finfo(dtype).min)[:, None, None, :]
        return padding if bias is None else bias.to(dtype) + padding
