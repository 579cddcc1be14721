"""Hierarchical accumulation: Nguyen et al. (2020), sections 4.1-4.4.

A sentence is its preorder sequence of ``T`` positions: leaves L (subwords, and fairseq's EOS as a root of its
own) and nonterminal nodes N. A node's value accumulates its subtree (eqs. 5-10, 16):

    n'_i = 1/|L(i)| * sum_{j in L(i)} w_j * (x_j + sum_{t on P(i,j)} (N_t + E_tj)) / (|P(i,j)| + 1)

``L(i)``: the leaves under node i; ``P(i,j)``: the nodes from i down to leaf j (i included); ``x`` / ``N``: leaf /
node values; ``w = L u``: one weight per leaf (eq. 16; ``u_s`` in the encoder, ``u_c`` in the cross-attention, eq.
23); ``E_tj = [e^v_|V_t^j|; e^h_|H_t^j|]`` (eq. 9). ``average="official"`` divides by ``|P(i,j)|``, as the
authors' code does.

The sum is linear in the values, so the ``m x n x d`` tensor S is never formed: :func:`position_accumulation`
runs it on the ``T`` positions with ``B x T x T`` blocks built once per batch, in one batched product over the
un-split values ``B x T x C`` (``c_ij = w_j / (|L(i)| (|P(i,j)| + 1))`` at node row i, leaf column j):

    c = w[None, :] * leaf_coefficients
    M = c + node_over_node_positions * (c @ leaf_under_node) + kept_rows      # kept_rows: 1 at (p, p), p no node
    v' = M @ v  +  histogram(c) @ [E^v | E^h]           # leaf and padding rows: 1 * v_p, the others' terms 0

The embedding term bins ``c_ij`` over the triples (i, t, j), t on P(i, j), by the embedding index of (t, j): a
histogram times the tables, shared by all heads (Section 4.2).

Subtree masking (eq. 11): a node query attends to the nodes and leaves of its own subtree, a leaf query to the
leaves only."""
from collections.abc import Mapping
from typing import Callable, Dict, Iterator, Optional

import torch
from torch import Tensor, nn

from fairseq_syntax.core import structure as st
from fairseq_syntax.core.attention import Structure

AVERAGES = ("paper", "official")
#: (values B x H x T x d, leaf weights B x T, structure, embeddings) -> node values B x H x m x d
NodeAccumulation = Callable[..., Tensor]


def accumulation_structure(
    parents: Tensor, embedding_size: int = 0, average: str = "paper", subtree_mask: Optional[bool] = None,
    collated: bool = False, sizes: Optional[Dict[str, int]] = None,
) -> Structure:
    """Per-batch tensors of hierarchical accumulation from ``parents`` ``B x T``, shared by all layers.

    Returns a dict (``n`` / ``m`` = most leaves / nodes in a row; float tensors are float32):

    * ``leaf_pos`` ``B x n``, ``node_pos`` ``B x m``: positions of the leaves and nodes (0 where padded);
    * ``is_node`` ``B x T`` bool and ``node_ordinal`` ``B x T``: nonterminal positions and their index in ``node_pos``;
    * ``node_over_leaf`` ``B x m x n`` (``A``) and ``node_over_node`` ``B x m x m`` (``D``, diagonal included): 1 when
      the leaf / node is in the subtree of the row's node;
    * ``inverse_branch_size`` ``B x m x n``: ``1 / (|L(i)| (|P(i,j)| + 1))`` for leaf j under node i (``|P(i,j)|``
      with ``average="official"``), else 0;
    * with ``embedding_size`` > 0 (``|E|``; larger indices use the last row): ``embedding_source`` ``B x K`` (entry
      ``i * n + j`` of the row's ``m x n`` coefficients) and ``embedding_bins`` ``B x 2K`` (bins
      ``i * 2|E| + vertical index - 1`` and ``i * 2|E| + |E| + horizontal index - 1`` of the ``m x 2|E|`` histogram)
      for each triple (i, t, j). ``K = n d (d + 1) / 2`` candidates per row, d the batch's deepest leaf's node
      ancestors; a candidate beyond a leaf's depth goes to bin ``m * 2|E|``, dropped. The fixed count keeps the layout
      batch-major for :func:`reorder_structure`;
    * the same on the ``T`` positions for :func:`position_accumulation` (``B x T x T`` float32): ``leaf_coefficients``
      (``inverse_branch_size`` at node row i, leaf column j), ``leaf_under_node`` (1 at leaf row j, node column t over
      j), ``node_over_node_positions`` (1 at node row i, node column t, i over or at t), ``kept_rows`` (1 on the
      diagonal at leaves and padding); with embeddings ``position_embedding_source`` ``B x K`` (``p_i * T + p_j``) and
      ``position_embedding_bins`` ``B x 2 x K`` (``p_i * |E| + index - 1`` in each table's ``T x |E|`` histogram); a
      candidate that is no triple reads entry ``(0, 0)``, always 0, into bin 0;
    * with ``subtree_mask`` not None, ``attention_mask`` bool (True: may attend): ``B x 1 x T x T`` under eq. 11 when
      True, ``B x 1 x 1 x T`` (every non-padding key) when False; a padding query attends to itself. ``attention_bias``:
      the same as a float32 additive mask (0 / -inf).

    ``sizes``: the batch's ``n``, ``m``, ``d`` (:func:`fairseq_syntax.core.structure.tree_sizes`, computed on the
    host at collation), else read from the device. ``collated``: see
    :func:`fairseq_syntax.core.structure.validate_parents`."""
    if average not in AVERAGES:
        raise ValueError(f"average must be one of {AVERAGES}, got {average!r}")
    if embedding_size < 0:
        raise ValueError(f"embedding_size must be >= 0, got {embedding_size}")
    parents = st.validate_parents(parents, collated)
    is_leaf = st.is_leaf(parents, collated=True)
    is_padding = parents == st.PAD
    is_node = ~is_leaf & ~is_padding
    dominance = st.ancestor_or_self(parents, collated=True)
    sizes = sizes or st.tree_sizes(parents, collated=True, dominance=dominance)
    split = st.leaf_node_split(parents, collated=True, widths=(sizes["leaves"], sizes["nodes"]))
    node_over_node, node_over_leaf = st.dominance_blocks(parents, split, dominance)
    # |P(i, j)| = depth(j) - depth(i) for leaf j under node i
    node_depth = node_over_node.sum(1) - 1  # B x m: proper node ancestors of each node
    leaf_depth = node_over_leaf.sum(1)  # B x n: node ancestors of each leaf
    path_length = (leaf_depth.unsqueeze(1) - node_depth.unsqueeze(2)) * node_over_leaf
    branch = path_length + 1 if average == "paper" else path_length
    leaves_under = node_over_leaf.sum(-1, keepdim=True)
    out = {
        "leaf_pos": split["leaf_pos"],
        "node_pos": split["node_pos"],
        "is_node": is_node,
        "node_ordinal": (is_node.cumsum(-1) - 1).clamp(min=0),
        "node_over_leaf": node_over_leaf.float(),
        "node_over_node": node_over_node.float(),
        "inverse_branch_size": node_over_leaf / (leaves_under * branch).clamp(min=1),
    }
    if embedding_size > 0:
        out.update(_embedding_bins(node_over_leaf, node_depth, leaf_depth, embedding_size, sizes["depth"]))
    out.update(_position_blocks(out, dominance, is_leaf, is_node, average, embedding_size))
    if subtree_mask is not None:
        if subtree_mask:
            allowed = (dominance & is_node.unsqueeze(2)) | (is_leaf.unsqueeze(2) & is_leaf.unsqueeze(1))
            out["attention_mask"] = (allowed | torch.diag_embed(is_padding)).unsqueeze(1)
        else:
            out["attention_mask"] = ~is_padding[:, None, None, :]
        out["attention_bias"] = additive_mask(out["attention_mask"])
    return out


def additive_mask(allowed: Tensor) -> Tensor:
    """A boolean attention mask (True: may attend) as a float32 bias (0 or -inf), once per batch."""
    return torch.zeros(allowed.shape, device=allowed.device).masked_fill(~allowed, float("-inf"))


def _embedding_bins(
    node_over_leaf: Tensor, node_depth: Tensor, leaf_depth: Tensor, embedding_size: int, deepest: int
) -> Dict[str, Tensor]:
    """``embedding_source`` and ``embedding_bins`` of :func:`accumulation_structure`.

    For leaf j with node ancestors ``a_0`` (root) ... ``a_{d-1}`` (parent), the triples are the ``d (d + 1) / 2``
    pairs ``i = a_k``, ``t = a_r``, ``k <= r``; ``|V_t^j| = d - r`` and ``|H_t^j|`` is j's rank among t's leaves
    (1 for the leftmost), both capped at ``embedding_size``. Every leaf gets the batch's ``deepest`` pairs;
    ``r >= d`` goes to the dropped bin."""
    batch, nodes, leaves = node_over_leaf.shape
    device = node_over_leaf.device
    levels = deepest
    # ancestors[b, j, r]: the node at depth r above leaf j (0 beyond its depth); column `levels` collects the
    # (node, leaf) pairs that are no ancestor, and is dropped
    ancestors = torch.zeros(batch, leaves, levels + 1, dtype=torch.long, device=device)
    level = torch.where(node_over_leaf.transpose(1, 2), node_depth.unsqueeze(1), levels)  # B x n x m
    ancestors.scatter_(2, level, torch.arange(nodes, device=device).expand(batch, leaves, nodes))
    k, r = torch.triu_indices(levels, levels, device=device)  # every pair k <= r < levels
    i, t = ancestors.index_select(2, k), ancestors.index_select(2, r)  # B x n x P
    leaf_depth = leaf_depth.unsqueeze(-1)  # B x n x 1
    j = torch.arange(leaves, device=device).view(1, leaves, 1)
    first_leaf = torch.where(node_over_leaf, torch.arange(leaves, device=device), leaves).amin(-1)  # B x m
    vertical = (leaf_depth - r).clamp(max=embedding_size)
    horizontal = (j - first_leaf.gather(1, t.flatten(1)).view_as(t) + 1).clamp(max=embedding_size)
    is_triple = r < leaf_depth
    dropped = nodes * 2 * embedding_size
    vertical_bin = torch.where(is_triple, i * (2 * embedding_size) + vertical - 1, dropped)
    horizontal_bin = torch.where(is_triple, i * (2 * embedding_size) + embedding_size + horizontal - 1, dropped)
    return {"embedding_source": (i * leaves + j).flatten(1),
            "embedding_bins": torch.cat([vertical_bin.flatten(1), horizontal_bin.flatten(1)], dim=1)}


def _position_blocks(
    out: Structure, dominance: Tensor, is_leaf: Tensor, is_node: Tensor, average: str, embedding_size: int
) -> Dict[str, Tensor]:
    """The position blocks of :func:`accumulation_structure` from the dominance ``B x T x T``, the leaf and node
    masks ``B x T`` and the blocks already in ``out``."""
    batch, length = is_node.shape
    node_over_position = dominance & is_node.unsqueeze(2)  # B x T x T: node i (row) over or at position j
    under = node_over_position & is_leaf.unsqueeze(1)  # node i over leaf j
    depth = dominance.sum(1) - 1  # proper ancestors, all of them nodes: |P(i, j)| = depth(j) - depth(i)
    path_length = (depth.unsqueeze(1) - depth.unsqueeze(2)) * under
    branch = path_length + 1 if average == "paper" else path_length
    # the integers and the division of inverse_branch_size, so the same float32 values at other places
    blocks = {
        "leaf_coefficients": under / (under.sum(-1, keepdim=True) * branch).clamp(min=1),
        # contiguous: a layer's matrix product then copies nothing, forward or backward
        "leaf_under_node": under.transpose(1, 2).float().contiguous(),
        "node_over_node_positions": (node_over_position & is_node.unsqueeze(1)).float(),
        "kept_rows": torch.diag_embed((~is_node).float()),
    }
    if embedding_size > 0:
        leaves, nodes = out["leaf_pos"].size(1), out["node_pos"].size(1)
        source, bins = out["embedding_source"], out["embedding_bins"]  # B x K, B x 2K (vertical, horizontal)
        candidates = source.size(1)
        none = bins[:, :candidates] == nodes * 2 * embedding_size  # candidate triples that are none
        node, leaf = source.div(leaves, rounding_mode="floor"), source.remainder(leaves)
        source = out["node_pos"].gather(1, node) * length + out["leaf_pos"].gather(1, leaf)
        # a triple that is none reads c[0, 0] = 0 into bin 0: nothing to drop
        blocks["position_embedding_source"] = source.masked_fill(none, 0)
        row = out["node_pos"].gather(1, bins.div(2 * embedding_size, rounding_mode="floor").clamp(max=nodes - 1))
        binned = row * embedding_size + bins.remainder(embedding_size)  # p_i * |E| + index - 1, in either table
        blocks["position_embedding_bins"] = binned.masked_fill(none.repeat(1, 2), 0).view(batch, 2, candidates)
    return blocks


class ReorderedStructure(Mapping):
    """The structure of a reordered batch: row ``r`` of each tensor is row ``order[r]`` of ``base``'s, selected when
    first read (after beam search's first step the decoder reads only ``padding_bias``)."""

    def __init__(self, base: Structure, order: Tensor):
        self.base, self.order = base, order
        self.selected: Structure = {}

    def __getitem__(self, name: str) -> Tensor:
        if name not in self.selected:
            self.selected[name] = self.base[name].index_select(0, self.order)
        return self.selected[name]

    def __contains__(self, name: object) -> bool:
        return name in self.base  # without selecting it

    def __iter__(self) -> Iterator[str]:
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)


def reorder_structure(structure: Structure, new_order: Tensor) -> Structure:
    """The structure of the batch whose row ``r`` is row ``new_order[r]`` of ``structure``'s (fairseq's
    ``reorder_encoder_out``); orders compose, and a tensor is selected only when read."""
    if isinstance(structure, ReorderedStructure):
        return ReorderedStructure(structure.base, structure.order.index_select(0, new_order))
    return ReorderedStructure(structure, new_order)


class HierarchicalEmbeddings(nn.Module):
    """Vertical and horizontal tables ``E^v, E^h`` (``|E| x d/2`` each, eq. 9), shared by heads, stored as one
    parameter ``tables`` ``2 x |E| x d/2`` (vertical first); :attr:`vertical` and :attr:`horizontal` are views."""

    def __init__(self, size: int, dim: int):
        super().__init__()
        if size < 1 or dim % 2 != 0:
            raise ValueError(f"hierarchical embeddings need size >= 1 and an even dimension, got {size}, {dim}")
        self.size = size
        self.tables = nn.Parameter(torch.empty(2, size, dim // 2))
        nn.init.normal_(self.tables[0], std=dim**-0.5)  # table by table, as the two parameters were drawn
        nn.init.normal_(self.tables[1], std=dim**-0.5)

    @property
    def vertical(self) -> Tensor:
        """``E^v`` ``|E| x d/2``: row ``k - 1`` embeds a branch of ``k`` nodes from t down to the leaf."""
        return self.tables[0]

    @property
    def horizontal(self) -> Tensor:
        """``E^h`` ``|E| x d/2``: row ``k - 1`` embeds the ``k``-th leaf of a subtree, from its left."""
        return self.tables[1]


def hierarchical_accumulation(
    values: Tensor,
    leaf_weights: Tensor,
    structure: Structure,
    embeddings: Optional[HierarchicalEmbeddings] = None,
    node_accumulation: Optional[NodeAccumulation] = None,
) -> Tensor:
    """Replace the node rows of ``values`` (``B x H x T x d``) by ``V(U(S + E), w)`` (eq. 10).

    ``leaf_weights`` ``B x T``: ``w``, read at the leaves. Leaf and padding rows are returned unchanged.
    ``node_accumulation``: default :func:`position_accumulation`; another gives the node rows ``B x H x m x d``
    (the benchmark passes the dense one of ``bench/hier_accum_dense``)."""
    batch, heads, length, dim = values.shape
    if structure["node_pos"].size(1) == 0:
        return values
    if node_accumulation is None:
        return position_accumulation(values, leaf_weights, structure, embeddings)
    accumulated = node_accumulation(values, leaf_weights, structure, embeddings)  # B x H x m x d
    placed = accumulated.gather(2, structure["node_ordinal"][:, None, :, None].expand(batch, heads, length, dim))
    return torch.where(structure["is_node"][:, None, :, None], placed, values)


def position_accumulation(
    values: Tensor, leaf_weights: Tensor, structure: Structure, embeddings: Optional[HierarchicalEmbeddings] = None
) -> Tensor:
    """:func:`hierarchical_accumulation` on the ``T`` positions: ``values`` ``B x H x T x d`` with node rows
    accumulated, leaf and padding rows unchanged, from the position blocks of :func:`accumulation_structure`."""
    batch, heads, length, dim = values.shape
    dtype = values.dtype
    c = as_dtype(structure["leaf_coefficients"], dtype) * as_dtype(leaf_weights, dtype).unsqueeze(1)  # B x T x T
    branch_sums = torch.bmm(c, as_dtype(structure["leaf_under_node"], dtype))  # sum_j c_ij A_tj at node column t
    node_over_node = as_dtype(structure["node_over_node_positions"], dtype)
    mixing = c + node_over_node * branch_sums + as_dtype(structure["kept_rows"], dtype)
    # the heads side by side (B x T x H d): one product for all of them; a view of the projection's T x B x C output
    by_position = values.transpose(1, 2).reshape(batch, length, heads * dim)
    accumulated = torch.bmm(mixing, by_position).view(batch, length, heads, dim)
    if embeddings is not None:  # the same term for every head; zero at the leaf and padding rows
        accumulated = accumulated + _position_embedding_term(c, structure, embeddings).view(batch, length, 1, dim)
    return accumulated.transpose(1, 2)


def _position_embedding_term(c: Tensor, structure: Structure, embeddings: HierarchicalEmbeddings) -> Tensor:
    """:class:`HierarchicalEmbeddings` of the position coefficients ``c`` ``B x T x T``: ``B T x d``. The histogram
    is ``2 x B T x |E|``, a block per table, multiplied by ``embeddings.tables`` in one batched product."""
    batch, length, _ = c.shape
    size = embeddings.size
    summed = torch.promote_types(c.dtype, torch.float32)
    values = as_dtype(c, summed).reshape(batch, length * length).gather(1, structure["position_embedding_source"])
    bins = structure["position_embedding_bins"].transpose(0, 1)  # 2 x B x K
    histogram = values.new_zeros(2, batch, length * size).scatter_add(2, bins, values.expand(2, -1, -1))
    histogram = as_dtype(histogram, c.dtype).view(2, batch * length, size)
    # [histogram_v E^v | histogram_h E^h]: both tables in one product, 2 x BT x d/2, then side by side per row
    return torch.bmm(histogram, embeddings.tables).transpose(0, 1).reshape(batch * length, -1)


def as_dtype(tensor: Tensor, dtype: torch.dtype) -> Tensor:
    """``tensor`` in ``dtype``, dispatching no operator when it already is."""
    return tensor if tensor.dtype == dtype else tensor.to(dtype)
