"""The attention modules of hierarchical accumulation: Nguyen et al. (2020), eqs. 12-18 (encoder) and 21-24 (decoder
cross-attention). With the leaves ``L`` (``n x d``) and nodes ``N`` (``m x d``) of a source tree, its subtree rule
``R``, per head:

    A_XY  = (X W_Q)(Y W_K)^T / sqrt(d)  for X, Y in {N, L}                              (eqs. 12-15)
    N'    = V(U(F(L W_V, N W_V, R) + E), w),  w = L u_s;    L' = L W_V                   (eq. 16)
    Att_N = softmax(mu([A_NN; A_NL])) [N'; L'],   Att_L = softmax(mu([A_LN; A_LL])) [N'; L']   (eqs. 17-18)
    Att_Q = softmax([A_QN; A_QL]) [N'; L'],  target queries Q, w = L u_c, no mu            (eqs. 21-24)

``mu`` is subtree masking (eq. 11); ``N'`` comes from :mod:`fairseq_syntax.methods.hier_accum.accumulation`
without the ``m x n x d`` tensor ``S = F(...)``.

:class:`HierarchicalSelfAttention`: ``x`` ``T x B x C`` -> ``T x B x C`` (weights ``B x H x T x T``).
:class:`HierarchicalCrossAttention`: target queries over all source positions ``[N'; L]``, no subtree masking, node
values accumulated with ``w = L u_c``. Called as fairseq's ``encoder_attn`` (query ``Tq x B x C``, key = value =
encoder states ``S x B x C``); its ``key_padding_mask`` is a :class:`SourceTree` (the padding ``B x S`` and the
encoder's structure). Keys and accumulated values depend only on the source: computed at the first decoding step and
cached (``B x H x S x d`` each). Returns ``(Tq x B x C, weights)``; weights ``B x Tq x S`` (head mean) or
``H x B x Tq x S`` with ``need_head_weights``, as fairseq's ``MultiheadAttention``."""
from typing import Dict, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F
from fairseq.incremental_decoding_utils import with_incremental_state
from torch import Tensor, nn

from fairseq_syntax.core.attention import Structure, StructuredSelfAttention
from fairseq_syntax.core.fused_linear import FusedPart, fused_linear
from fairseq_syntax.methods.hier_accum.accumulation import (
    HierarchicalEmbeddings,
    NodeAccumulation,
    as_dtype,
    hierarchical_accumulation,
)

IncrementalState = Dict[str, Dict[str, Optional[Tensor]]]


class SourceTree(NamedTuple):
    """The cross-attention's ``key_padding_mask``: the source padding ``B x S`` and its ``accumulation_structure``."""

    padding_mask: Tensor
    structure: Structure


def attend(
    q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], dropout_p: float, need_weights: bool,
    bias: Optional[Tensor] = None,
) -> Tuple[Tensor, Optional[Tensor]]:
    """Scaled dot-product attention, ``B x H x Tq x d`` queries over ``B x H x Tk x d`` keys and values.

    ``mask`` (broadcastable to ``B x H x Tq x Tk``): True where a query may attend; every row needs one. ``bias``:
    the same mask as an additive float mask (0 / -inf), built once per batch. Returns the output
    ``B x H x Tq x d`` and, with ``need_weights``, the probabilities ``B x H x Tq x Tk``."""
    if not need_weights:
        additive = mask if bias is None else as_dtype(bias, q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=additive, dropout_p=dropout_p), None
    scores = torch.matmul(q, k.transpose(-1, -2)) * q.size(-1) ** -0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).type_as(q)
    return torch.matmul(F.dropout(weights, p=dropout_p, training=dropout_p > 0), v), weights


class HierarchicalSelfAttention(StructuredSelfAttention):
    """Encoder self-attention over leaves and nodes (eqs. 12-18).

    One attention over all ``T`` positions computes the blocks ``A_NL, A_LL, A_NN, A_LN`` at once;
    ``structure["attention_mask"]`` applies subtree masking (or only hides padding: the -SubMask ablation).
    Values: ``L W_V`` at the leaves, ``N'`` (eq. 16) at the nodes, ``w = L u_s``. ``embedding_size``: |E| of
    ``--hier-embed-size``; 0 is the -HierEmb ablation. ``key_padding_mask`` is accepted and not needed."""

    #: computes the node values (None: :func:`position_accumulation`); the benchmark's dense variant sets it
    node_accumulation: Optional[NodeAccumulation] = None

    def __init__(self, embed_dim: int, num_heads: int, dropout: float, embedding_size: int):
        super().__init__(embed_dim, num_heads, dropout=dropout)
        # W_Q, W_K, W_V as one C -> 3C map initialised as the base's three (fused_linear)
        self.in_proj = fused_linear(*(self._modules.pop(name) for name in ("q_proj", "k_proj", "v_proj")))
        self.leaf_weight = nn.Linear(embed_dim, 1, bias=False)  # u_s
        self.embeddings = HierarchicalEmbeddings(embedding_size, self.head_dim) if embedding_size else None

    q_proj = FusedPart("in_proj", 0, 3)  # W_Q, the first third of in_proj (views of its parameters)
    k_proj = FusedPart("in_proj", 1, 3)  # W_K
    v_proj = FusedPart("in_proj", 2, 3)  # W_V

    def project(self, x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values ``B x H x T x d`` of ``x`` ``T x B x C``: one product, then views."""
        length, batch, _ = x.shape
        return self.in_proj(x).view(length, batch, 3, self.num_heads, self.head_dim).permute(2, 1, 3, 0, 4).unbind(0)

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Optional[Tensor] = None,
        structure: Optional[Structure] = None,
        need_weights: bool = False,
        carry: Optional[Tensor] = None,
    ) -> Tuple[Tensor, Optional[Tensor], None]:
        if structure is None or "attention_mask" not in structure:
            raise ValueError("HierarchicalSelfAttention needs accumulation_structure(..., subtree_mask=True/False)")
        length, batch, _ = x.shape
        q, k, v = self.project(x)
        leaf_weights = self.leaf_weight(x).squeeze(-1).t()
        v = hierarchical_accumulation(v, leaf_weights, structure, self.embeddings, self.node_accumulation)
        dropout_p = self.dropout if self.training else 0.0
        out, weights = attend(q, k, v, structure["attention_mask"], dropout_p, need_weights,
                              structure.get("attention_bias"))
        out = out.permute(2, 0, 1, 3).reshape(length, batch, self.embed_dim)
        return self.out_proj(out), weights, None


@with_incremental_state
class HierarchicalCrossAttention(StructuredSelfAttention):
    """Shares the base's projections and initialisation; ``embedding_size`` 0 disables hierarchical embeddings."""

    node_accumulation: Optional[NodeAccumulation] = None

    def __init__(self, embed_dim: int, num_heads: int, dropout: float, embedding_size: int):
        super().__init__(embed_dim, num_heads, dropout=dropout)
        # W_K and W_V read the same source: one C -> 2C map, initialised as the base's two (fused_linear)
        self.kv_proj = fused_linear(*(self._modules.pop(name) for name in ("k_proj", "v_proj")))
        self.leaf_weight = nn.Linear(embed_dim, 1, bias=False)  # u_c
        self.embeddings = HierarchicalEmbeddings(embedding_size, self.head_dim) if embedding_size else None

    k_proj = FusedPart("kv_proj", 0, 2)  # W_K, the first half of kv_proj (views of its parameters)
    v_proj = FusedPart("kv_proj", 1, 2)  # W_V

    def source_keys_values(self, source: Tensor, structure: Structure) -> Tuple[Tensor, Tensor]:
        """Keys ``L W_K; N W_K`` and values ``L W_V; N'`` (eq. 23) of the source ``S x B x C``: ``B x H x S x d``."""
        length, batch, _ = source.shape
        projected = self.kv_proj(source).view(length, batch, 2, self.num_heads, self.head_dim)
        keys, values = projected.permute(2, 1, 3, 0, 4).unbind(0)
        leaf_weights = self.leaf_weight(source).squeeze(-1).t()
        return keys, hierarchical_accumulation(values, leaf_weights, structure, self.embeddings, self.node_accumulation)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Optional[SourceTree] = None,
        incremental_state: Optional[IncrementalState] = None,
        static_kv: bool = True,
        need_weights: bool = False,
        need_head_weights: bool = False,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        if not static_kv:
            raise ValueError("HierarchicalCrossAttention attends to a fixed source (static_kv=True)")
        cache = self._get_input_buffer(incremental_state)
        if "prev_key" in cache:
            keys, values = cache["prev_key"], cache["prev_value"]
        else:
            if not isinstance(key_padding_mask, SourceTree):
                raise TypeError("HierarchicalCrossAttention needs the source tree with its padding (a SourceTree as "
                                f"key_padding_mask), got {type(key_padding_mask).__name__}: use it in HierAccumDecoder")
            keys, values = self.source_keys_values(value, key_padding_mask.structure)
            if incremental_state is not None:
                self._set_input_buffer(incremental_state, {"prev_key": keys, "prev_value": values})
        length, batch, _ = query.shape
        q = self._split_heads(self.q_proj(query))
        need_weights = need_weights or need_head_weights
        bias = key_padding_mask.structure.get("padding_bias")  # built once per batch by the encoder
        # the boolean mask only where it is read: the weights, or a structure without the bias
        mask = ~key_padding_mask.padding_mask[:, None, None, :] if need_weights or bias is None else None
        dropout_p = self.dropout if self.training else 0.0
        out, weights = attend(q, keys, values, mask, dropout_p, need_weights, bias)
        out = out.permute(2, 0, 1, 3).reshape(length, batch, self.embed_dim)
        if weights is not None:
            weights = weights.transpose(0, 1)  # H x B x Tq x S
            if not need_head_weights:
                weights = weights.mean(dim=0)
        return self.out_proj(out), weights

    def reorder_incremental_state(self, incremental_state: IncrementalState, new_order: Tensor) -> IncrementalState:
        """Follow the beam search: row b of the cache becomes row ``new_order[b]``.

        Skipped when the batch size is kept, as fairseq's encoder-decoder attention does: beams of one sentence
        share its source rows. Rows are selected when finished sentences leave the batch (``new_order`` shorter
        than the cache)."""
        cache = self._get_input_buffer(incremental_state)
        if cache and cache["prev_key"].size(0) != new_order.size(0):
            reordered = {name: tensor.index_select(0, new_order) for name, tensor in cache.items()}
            incremental_state = self._set_input_buffer(incremental_state, reordered)
        return incremental_state

    def _get_input_buffer(self, incremental_state: Optional[IncrementalState]) -> Dict[str, Optional[Tensor]]:
        return self.get_incremental_state(incremental_state, "attn_state") or {}

    def _set_input_buffer(self, incremental_state: IncrementalState, buffer: Dict[str, Optional[Tensor]]):
        return self.set_incremental_state(incremental_state, "attn_state", buffer)
