"""Decoder cross-attention over the source leaves and nodes: Nguyen et al. (2020), paper 004, eqs. 21-24.

Target queries attend to all source positions ``[N'; L]`` without subtree masking; the node values are accumulated
from their subtrees as in the encoder (:func:`~fairseq_syntax.modules.hierarchical_accumulation.
hierarchical_accumulation`) with ``w = L u_c``, ``L`` the encoder's output at the leaves.

The module follows the call fairseq's ``TransformerDecoderLayerBase`` makes to its ``encoder_attn`` (query ``Tq x B
x C``, key = value = encoder output ``S x B x C``, ``key_padding_mask`` ``B x S``). The source tree is not part of
that call: the decoder sets :attr:`source_structure` (an ``accumulation_structure`` of the source) around each
forward. Keys and accumulated values depend only on the source, so during incremental decoding they are computed at
the first step, kept in the incremental state (``B x H x S x d`` each) and reordered with the beams; the original
implementation recomputed the accumulation at every step.

Returns ``(Tq x B x C, weights)``; weights, when asked for, are ``B x Tq x S`` (mean over heads) or ``H x B x Tq x S``
with ``need_head_weights``, as fairseq's ``MultiheadAttention`` returns them.
"""
from typing import Dict, Optional, Tuple

from fairseq.incremental_decoding_utils import with_incremental_state
from torch import Tensor, nn

from fairseq_syntax.modules.hierarchical_accumulation import (
    HierarchicalEmbeddings,
    attend,
    hierarchical_accumulation,
)
from fairseq_syntax.modules.structured_attention import Structure, StructuredSelfAttention

IncrementalState = Dict[str, Dict[str, Optional[Tensor]]]


@with_incremental_state
class HierarchicalCrossAttention(StructuredSelfAttention):
    """Shares the base's projections and initialisation; ``embedding_size`` 0 disables hierarchical embeddings;
    ``implementation`` is :func:`hierarchical_accumulation`'s."""

    def __init__(
        self, embed_dim: int, num_heads: int, dropout: float = 0.0, embedding_size: int = 100,
        implementation: str = "fast",
    ):
        super().__init__(embed_dim, num_heads, dropout=dropout)
        self.implementation = implementation
        self.leaf_weight = nn.Linear(embed_dim, 1, bias=False)  # u_c
        self.embeddings = HierarchicalEmbeddings(embedding_size, self.head_dim) if embedding_size else None
        self.source_structure: Optional[Structure] = None

    def source_keys_values(self, source: Tensor, structure: Structure) -> Tuple[Tensor, Tensor]:
        """Keys ``L W_K; N W_K`` and values ``L W_V; N'`` (eq. 23) of the source ``S x B x C``: ``B x H x S x d``."""
        keys = self._split_heads(self.k_proj(source))
        values = self._split_heads(self.v_proj(source))
        leaf_weights = self.leaf_weight(source).squeeze(-1).t()
        return keys, hierarchical_accumulation(values, leaf_weights, structure, self.embeddings, self.implementation)

    def has_cached_source(self, incremental_state: Optional[IncrementalState]) -> bool:
        return "prev_key" in self._get_input_buffer(incremental_state)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Optional[Tensor] = None,
        incremental_state: Optional[IncrementalState] = None,
        static_kv: bool = True,
        need_weights: bool = False,
        need_head_weights: bool = False,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        if not static_kv:
            raise ValueError("HierarchicalCrossAttention attends to a fixed source (static_kv=True)")
        if self.has_cached_source(incremental_state):
            cache = self._get_input_buffer(incremental_state)
            keys, values = cache["prev_key"], cache["prev_value"]
        else:
            if self.source_structure is None:
                raise RuntimeError(
                    "HierarchicalCrossAttention needs the source tree: the decoder must set source_structure"
                )
            keys, values = self.source_keys_values(value, self.source_structure)
            if incremental_state is not None:
                self._set_input_buffer(incremental_state, {"prev_key": keys, "prev_value": values})
        length, batch, _ = query.shape
        q = self._split_heads(self.q_proj(query))
        mask = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]
        dropout_p = self.dropout if self.training else 0.0
        out, weights = attend(q, keys, values, mask, dropout_p, need_weights or need_head_weights)
        out = out.permute(2, 0, 1, 3).reshape(length, batch, self.embed_dim)
        if weights is not None:
            weights = weights.transpose(0, 1)  # H x B x Tq x S
            if not need_head_weights:
                weights = weights.mean(dim=0)
        return self.out_proj(out), weights

    def reorder_incremental_state(self, incremental_state: IncrementalState, new_order: Tensor) -> IncrementalState:
        """Follow the beam search: row b of the cache becomes row ``new_order[b]``."""
        cache = self._get_input_buffer(incremental_state)
        if cache:
            reordered = {name: tensor.index_select(0, new_order) for name, tensor in cache.items()}
            incremental_state = self._set_input_buffer(incremental_state, reordered)
        return incremental_state

    def _get_input_buffer(self, incremental_state: Optional[IncrementalState]) -> Dict[str, Optional[Tensor]]:
        return self.get_incremental_state(incremental_state, "attn_state") or {}

    def _set_input_buffer(self, incremental_state: IncrementalState, buffer: Dict[str, Optional[Tensor]]):
        return self.set_incremental_state(incremental_state, "attn_state", buffer)
