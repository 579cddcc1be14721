"""Constituent attention: Wang, Lee & Chen (2019), sections 4-5.

Every layer ``l`` turns its input ``x`` (``B x T x C``) into link probabilities ``a^l`` between neighbours and a
constituent prior ``C^l`` that scales the self-attention probabilities of all its heads:

* neighbouring attention (eqs. 5-7): ``s_{i,j} = q_i . k_j / (d_model / 2)`` with link query/key projections
  (``link_proj``, ``C -> 2C``, queries first), for ``j = i +- 1``; ``p_{i,i+1}, p_{i,i-1} = softmax(s_{i,i+1},
  s_{i,i-1})`` (a word with one neighbour links to it with probability 1); ``a_hat_i = sqrt(p_{i,i+1} p_{i+1,i})``;
* hierarchical constraint (eq. 8): ``a^l = a^{l-1} + (1 - a^{l-1}) a_hat^l``, ``a^{-1} = 0``;
* constituent prior (eqs. 3-4): ``C_ij = prod_{k=i}^{j-1} a_k``, symmetric, ``C_ii = 1`` (the authors' code: near 0,
  ``diagonal=0``). With ``S_j = sum_{k<j} log a_k``, ``C_ij = exp(-|S_j - S_i|)``: O(T^2);
* attention (eq. 2): ``E = C * softmax(Q K^T / sqrt(d_k))``, the same ``C`` for every head, not renormalised (as in
  the authors' code).

Computed in log space and float32 whatever the model's dtype: ``log p`` is ``-softplus`` of a score difference,
``log a`` is taken of ``max(a, MIN_LINK)``, and links stay float32 across layers (bfloat16's spacing near the
prior's cumulative sums exceeds a link's log near 1). Padding may be on either side: links exist only between real
tokens, and ``C`` is zero wherever padding is involved.

Shapes: ``query``/``key`` ``B x T x C``; ``token_mask`` ``B x T`` (True at real tokens) or None; links
``B x (T-1)`` (entry ``k`` links ``k`` and ``k+1``; 0 at padding); prior ``B x T x T``. The module takes ``x``
``T x B x C``."""
from typing import NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fairseq_syntax.core.attention import Structure, StructuredSelfAttention
from fairseq_syntax.core.fused_linear import FusedPart

#: Floor under a link probability before its log (the authors add 1e-9)
MIN_LINK = 1e-9


class LinkMasks(NamedTuple):
    """What a batch's padding says about its links and pairs, built once per batch (:func:`link_masks`)."""

    no_link: Tensor  # B x (T-1), bool: position k or k+1 is padding, so there is no link k
    no_left: Tensor  # B x (T-1), bool: link k has no link k-1 (word k has no left neighbour)
    no_right: Tensor  # B x (T-1), bool: link k has no link k+1 (word k+1 has no right neighbour)
    pairs: Optional[Tensor]  # B x T x T, float32: 1 where both positions are real tokens, else 0; None: no padding


def link_masks(token_mask: Optional[Tensor], batch: int, length: int, device: torch.device) -> LinkMasks:
    """The :class:`LinkMasks` of ``token_mask`` (``B x T``, True at real tokens; None: no padding)."""
    if token_mask is None:
        no_link = torch.zeros(batch, max(length - 1, 0), dtype=torch.bool, device=device)
        pairs = None
    else:
        no_link = ~(token_mask[:, :-1] & token_mask[:, 1:])
        pairs = (token_mask[:, :, None] & token_mask[:, None, :]).float()
    return LinkMasks(no_link, _shift(no_link, +1, True), _shift(no_link, -1, True), pairs)


def _shift(x: Tensor, step: int, fill) -> Tensor:
    """``x`` (``B x N``) moved ``step`` places along the last dim (+1: ``out[k] = x[k-1]``), ``fill`` at the gap."""
    if not x.size(-1):  # a one-token batch has no links to move
        return x
    return F.pad(x, (1, -1) if step > 0 else (-1, 1), value=fill)


def neighbour_link_probabilities(
    query: Tensor, key: Tensor, token_mask: Optional[Tensor], scale: float, masks: Optional[LinkMasks] = None
) -> Tensor:
    """Eqs. 5-7: ``a_hat`` ``B x (T-1)`` from link queries and keys ``B x T x C``.

    ``scale`` is the paper's ``d`` (``d_model / 2``). Zero at links that touch padding. ``masks``: the batch's
    :func:`link_masks` of ``token_mask``, when the caller has them.
    """
    batch, length, _ = query.shape
    if length < 2:
        return query.new_zeros(batch, 0, dtype=torch.float32)
    masks = masks or link_masks(token_mask, batch, length, query.device)
    # every pair's score in one product; the links read the two diagonals next to the main one
    scores = torch.bmm(query.float() / scale, key.float().transpose(1, 2))  # B x T x T: s_{i,j}
    right = scores.diagonal(1, 1, 2)  # s_{k,k+1}
    left = scores.diagonal(-1, 1, 2)  # s_{k+1,k}
    # -log p_{k,k+1}: word k chooses its right neighbour over its left one (s_{k,k-1} = left[k-1]), if it has one
    minus_log_p_right = F.softplus(_shift(left, +1, 0.0) - right).masked_fill(masks.no_left, 0.0)
    # -log p_{k+1,k}: word k+1 chooses its left neighbour over its right one (s_{k+1,k+2} = right[k+1]), if any
    minus_log_p_left = F.softplus(_shift(right, -1, 0.0) - left).masked_fill(masks.no_right, 0.0)
    a_hat = torch.exp(-0.5 * (minus_log_p_right + minus_log_p_left))
    return a_hat.masked_fill(masks.no_link, 0.0)


def hierarchical_links(a_hat: Tensor, previous: Optional[Tensor]) -> Tensor:
    """Eq. 8: ``a^l = a^{l-1} + (1 - a^{l-1}) a_hat^l``; ``previous=None`` is layer 0 (``a^{-1} = 0``)."""
    if previous is None:
        return a_hat
    return previous + (1.0 - previous) * a_hat


def constituent_prior(links: Tensor, token_mask: Optional[Tensor] = None, diagonal: float = 1.0,
                      masks: Optional[LinkMasks] = None) -> Tensor:
    """Eqs. 3-4: ``C`` ``B x T x T`` from link probabilities ``B x (T-1)``; zero in rows/columns of padding.

    ``diagonal`` is ``C_ii``: 1 in the paper (an empty product), 0 in the authors' code (about 3e-5 there).
    ``masks``: the batch's :func:`link_masks` of ``token_mask``, when the caller has them.
    """
    batch, num_links = links.shape
    length = num_links + 1
    masks = masks or link_masks(token_mask, batch, length, links.device)
    log_links = torch.log(links.float().clamp_min(MIN_LINK))
    log_links = log_links.masked_fill(masks.no_link, 0.0)  # a link into padding must not make the cumulative sum huge
    prefix = F.pad(log_links.cumsum(dim=1), (1, 0))  # S_j = sum_{k<j} log a_k, B x T
    prior = torch.exp(-(prefix[:, :, None] - prefix[:, None, :]).abs())
    if diagonal != 1.0:
        prior = prior - (1.0 - diagonal) * torch.eye(length, device=prior.device, dtype=prior.dtype)
    if masks.pairs is not None:
        prior = prior * masks.pairs
    return prior


class ConstituentAttention(StructuredSelfAttention):
    """Self-attention under a constituent prior (Tree Transformer, eq. 2), one per encoder layer. The layers pass
    their links on as ``carry``: this layer takes ``a^{l-1}`` (None in the first) and returns ``a^l``
    ``B x (T-1)``."""

    fused = False

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 diagonal: float = 1.0):
        super().__init__(embed_dim, num_heads, dropout=dropout, bias=bias)
        self.diagonal = diagonal  # C_ii (see constituent_prior)
        # the link queries and keys (eq. 5) in one projection, queries first
        self.link_proj = nn.Linear(embed_dim, 2 * embed_dim, bias=bias)
        self.link_scale = embed_dim / 2  # the paper's d = d_model / 2 (256 at d_model 512, as in the authors' code)

    link_query = FusedPart("link_proj", 0, 2)  # the link-query map of eq. 5: the first half of link_proj (views)
    link_key = FusedPart("link_proj", 1, 2)  # the link-key map of eq. 5: the second half

    def links_and_prior(
        self, x: Tensor, key_padding_mask: Optional[Tensor], previous: Optional[Tensor],
        masks: Optional[LinkMasks] = None,
    ) -> Tuple[Tensor, Tensor]:
        """Link probabilities ``a^l`` ``B x (T-1)`` and prior ``C^l`` ``B x T x T`` for ``x`` ``T x B x C``;
        ``masks``: the batch's :func:`link_masks` (``structure["link_masks"]``), else made from the padding."""
        length, batch, _ = x.shape
        if masks is None:
            token_mask = None if key_padding_mask is None else ~key_padding_mask
            masks = link_masks(token_mask, batch, length, x.device)
        link_query, link_key = self.link_proj(x.transpose(0, 1)).chunk(2, dim=-1)  # B x T x C each
        a_hat = neighbour_link_probabilities(link_query, link_key, None, self.link_scale, masks)
        links = hierarchical_links(a_hat, previous)
        return links, constituent_prior(links, None, self.diagonal, masks)

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Optional[Tensor] = None,
        structure: Optional[Structure] = None,
        need_weights: bool = False,
        carry: Optional[Tensor] = None,
    ) -> Tuple[Tensor, Optional[Tensor], Tensor]:
        links, prior = self.links_and_prior(x, key_padding_mask, carry, (structure or {}).get("link_masks"))
        out, weights, _ = super().forward(x, key_padding_mask, {**(structure or {}), "constituent_prior": prior},
                                          need_weights)
        return out, weights, links

    def attention_weights(
        self, q: Tensor, k: Tensor, key_padding_mask: Optional[Tensor], structure: Structure
    ) -> Tensor:
        probabilities = super().attention_weights(q, k, key_padding_mask, structure)
        return probabilities * structure["constituent_prior"][:, None].to(probabilities.dtype)
