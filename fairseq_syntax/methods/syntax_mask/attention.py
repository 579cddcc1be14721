"""Syntax attention masks: McDonald & Chiang (2021), section 2:

    alpha = softmax(Q K^T / sqrt(d_k) - exp(sum_m s^m M^m))

one binary mask ``M^m`` per tree relation (self, parent, child, left-sib, right-sib, anc, desc, left-other,
right-other), a learnable strength ``s^m`` per head, initialised to zero. The masks partition all pairs:
``bias[b, h, i, j] = -exp(s[h, rel[b, i, j]])``. A relation outside the chosen subset keeps strength 0 (a constant
``-1``).

Shapes: ``structure["relations"]`` ``B x T x T``
(:func:`fairseq_syntax.methods.syntax_mask.relations.relation_ids`, ``PAD_RELATION`` at padding); bias
``B x H x T x T``.

``--mask-bias``: ``gather`` looks penalties up in the ``H x 10`` table (backward: scatter-add), ``one_hot``
multiplies the one-hot relations ``B x T x T x 10`` (``structure["relation_one_hot"]``) by it (backward: a matrix
product); ``auto`` takes the one-hot product on CUDA. Same values and gradients."""
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
        # the lookup reads a float32 table: a bfloat16 scatter-add stops growing at a few hundred terms
        return -penalties.float().t()[relations].permute(0, 3, 1, 2).to(penalties.dtype)
