"""Syntax attention masks: McDonald & Chiang (2021), "Syntax-Based Attention Masking for Neural Machine
Translation", section 2:

    alpha = softmax(Q K^T / sqrt(d_k) - exp(sum_m s^m M^m))

with one binary mask ``M^m`` per tree relation (self, parent, child, left-sib, right-sib, anc, desc, left-other,
right-other) and a learnable strength ``s^m`` per head, initialised to zero. The masks partition all pairs, so the
sum picks one strength per pair: ``bias[b, h, i, j] = -exp(s[h, rel[b, i, j]])``. A relation left out of the
chosen subset keeps strength 0, which adds the same constant ``-1`` to every score it covers.

Shapes: ``structure["relations"]`` is ``B x T x T`` (relation ids from
:func:`fairseq_syntax.methods.syntax_mask.relations.relation_ids`, ``PAD_RELATION`` at padding); the bias is
``B x H x T x T``.

Two computations of the same bias (tested equal, values and gradients): ``gather`` looks each pair's penalty up in
the ``H x 10`` table (its backward scatter-adds ``B·T·T·H`` values into the table's 10·H cells), ``one_hot``
multiplies the one-hot relations ``B x T x T x 10`` (built once per batch, ``structure["relation_one_hot"]``) by the
table (its backward is a matrix product, which a GPU does without atomics). ``--mask-bias`` chooses; its default,
``auto``, takes the one-hot product on CUDA and the gather elsewhere.
"""
from typing import Optional, Sequence

import torch
from torch import Tensor, nn

from fairseq_syntax.core.attention import Structure, StructuredSelfAttention
from fairseq_syntax.methods.syntax_mask.relations import NUM_RELATIONS

#: exp(9) ~ 8100 already removes a key from the softmax; capping there keeps every strength finite in fp16/bf16
#: and avoids -inf rows (NaN) whatever the optimiser does to the strengths.
MAX_LOG_PENALTY = 9.0


class RelationMaskAttention(StructuredSelfAttention):
    """Self-attention with a learnable penalty per head and tree relation.

    ``strengths`` (``H x NUM_RELATIONS``) may be shared by several layers; ``relations`` selects which relations
    use it (the others stay at zero strength).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        strengths: nn.Parameter,
        relations: Optional[Sequence[int]] = None,
        dropout: float = 0.0,
    ):
        super().__init__(embed_dim, num_heads, dropout=dropout)
        if strengths.shape != (num_heads, NUM_RELATIONS):
            raise ValueError(f"strengths must be {num_heads} x {NUM_RELATIONS}, got {tuple(strengths.shape)}")
        self.strengths = strengths
        used = torch.zeros(NUM_RELATIONS + 1, dtype=torch.bool)
        used[list(range(NUM_RELATIONS)) if relations is None else list(relations)] = True
        self.register_buffer("relation_used", used, persistent=False)

    def penalty_table(self) -> Tensor:
        """``H x (NUM_RELATIONS + 1)`` penalties ``exp(s)``; the last column (padding) is never reached unmasked."""
        zeros = self.strengths.new_zeros(self.num_heads, 1)
        strengths = torch.cat([self.strengths, zeros], dim=1) * self.relation_used
        return torch.exp(strengths.clamp(max=MAX_LOG_PENALTY))

    def score_bias(self, structure: Structure) -> Tensor:
        penalties = self.penalty_table()  # H x R
        if "relation_one_hot" in structure:  # B x T x T x R
            return -torch.einsum("bijr,hr->bhij", structure["relation_one_hot"].to(penalties.dtype), penalties)
        relations = structure["relations"].long()  # B x T x T
        # The lookup reads a float32 table: its backward adds B·T·T·H values into 10·H cells, which on a CPU sums in
        # the table's dtype, and a bfloat16 sum stops growing once it is a few hundred times a term (2^8 to 2^9: 8
        # significant bits). The bias comes back in the strengths' dtype.
        # B x T x T x H -> B x H x T x T
        return -penalties.float().t()[relations].permute(0, 3, 1, 2).to(penalties.dtype)
