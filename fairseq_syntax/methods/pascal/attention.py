"""Parent-scaled self-attention (PASCAL): Bugliarello & Okazaki (2020), section 3 (the PASCAL head), as the authors'
code computes it (``fairseq/modules/multihead_pascal.py``).

In the first encoder layer, the last ``pascal_heads`` heads scale their scores element-wise by the Gaussian
centred on the query token's parent (:mod:`.parents`) before the softmax; the other heads are plain:

    S_h = Q_h K_h^T / sqrt(d)
    N_h[t, j] = S_h[t, j] * dist(p_t, j)          (PASCAL heads)
    M_h = softmax(N_h) V_h

While training, each (head, query) row of a PASCAL head keeps its plain scores with probability
``parent_ignoring`` (the authors' "parent ignoring", 0.4 in their recipes). Shapes: ``x`` ``T x B x C``;
``structure["parent_density"]`` ``B x T x T``; output ``T x B x C``, weights ``B x H x T x T``.

The formula is the authors', their indexing is not: ``multihead_pascal.py`` scales rows of another sentence of the
batch and misaligns left-padded sentences. Here each sentence's density is built on its padded positions and
scales that sentence's PASCAL heads only."""
import torch
from torch import Tensor

from fairseq_syntax.core.attention import Structure, StructuredSelfAttention


class ParentScaledSelfAttention(StructuredSelfAttention):
    fused = False  # a multiplicative change of the scores has no fused kernel

    def __init__(self, embed_dim: int, num_heads: int, pascal_heads: int, parent_ignoring: float = 0.0,
                 dropout: float = 0.0):
        super().__init__(embed_dim, num_heads, dropout=dropout)
        if not 1 <= pascal_heads <= num_heads:
            raise ValueError(f"--pascal-heads {pascal_heads} must be between 1 and the layer's {num_heads} heads")
        if not 0.0 <= parent_ignoring < 1.0:
            raise ValueError(f"--pascal-parent-ignoring {parent_ignoring} is not a probability below 1")
        self.pascal_heads = pascal_heads
        self.parent_ignoring = parent_ignoring

    def attention_scores(self, q: Tensor, k: Tensor, structure: Structure) -> Tensor:
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scaling  # B x H x T x T
        # float32 to the softmax: with a small sigma the scaled scores leave float16's range
        scores = scores.float()
        density = structure["parent_density"].float()[:, None]  # B x 1 x T x T
        bsz, _, length, _ = scores.shape
        density = density.expand(bsz, self.pascal_heads, length, length)
        if self.training and self.parent_ignoring > 0:
            ignored = torch.rand(bsz, self.pascal_heads, length, 1, device=scores.device) < self.parent_ignoring
            density = density.masked_fill(ignored, 1.0)
        plain = self.num_heads - self.pascal_heads
        return torch.cat([scores[:, :plain], scores[:, plain:] * density], dim=1)
