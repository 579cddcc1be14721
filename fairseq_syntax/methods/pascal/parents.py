"""Where each token's dependency parent is, and the Gaussian over key positions centred there: Bugliarello & Okazaki
(2020), section 3 (parent-scaled self-attention), as their code computes it (github.com/e-bug/pascal:
``scripts/bpe_tags_mean.py``, ``fairseq/modules/multihead_pascal.py``).

* Parent position: the 1-best head word of token t's word, at the mean position of that word's BPE pieces (the
  authors' "mean" tags). A root word, and fairseq's EOS, is its own parent.
* Weights: the normal density over key positions j, mean p_t, standard deviation sigma (with its constant, as the
  authors' ``normpdf``):

      dist(p_t, j) = exp(-(j - p_t)^2 / (2 sigma^2)) / sqrt(2 pi sigma^2)

The 1-best tree comes from ``src_ldd`` (channels ``BEST_OFFSET + group``,
:mod:`fairseq_syntax.methods.ldd.distributions`).

Shapes: ``word_pairs`` ``B x C x S x S``, ``token_words`` ``B x T`` -> parent positions ``B x T`` (float32);
``parent_density(positions, sigma)`` -> ``B x T x T`` (query t, key j)."""
import math

import torch
from torch import Tensor

from fairseq_syntax.methods.ldd.distributions import one_best_head_words


def parent_positions(word_pairs: Tensor, token_words: Tensor, not_dependent: Tensor,
                     check_one_best: bool = True) -> Tensor:
    """``B x T`` float32: the mean token position of each token's parent word (see the module docstring);
    ``check_one_best``: refuse side data without the 1-best tree (:func:`.one_best_head_words`)."""
    bsz, length = token_words.shape
    size = word_pairs.size(-1)
    # float32 whatever the side data's dtype: half precision cannot hold sums of positions
    positions = torch.arange(length, device=token_words.device, dtype=torch.float32).expand(bsz, length)
    position_sum = positions.new_zeros(bsz, size).scatter_add_(1, token_words, positions)
    pieces = positions.new_zeros(bsz, size).scatter_add_(1, token_words, torch.ones_like(positions))
    mean_position = position_sum / pieces.clamp(min=1)
    heads = one_best_head_words(word_pairs, token_words, not_dependent, "transformer_pascal", check_one_best)
    return mean_position.gather(1, heads)


def parent_density(positions: Tensor, sigma: float) -> Tensor:
    """``B x T x T``: ``dist(p_t, j)`` for query t (rows) and key position j (columns), in the dtype of
    ``positions`` (float32 from :func:`parent_positions`)."""
    keys = torch.arange(positions.size(1), device=positions.device, dtype=positions.dtype)
    squared = (keys[None, None, :] - positions[:, :, None]) ** 2
    return torch.exp(-squared / (2 * sigma**2)) / math.sqrt(2 * math.pi * sigma**2)
