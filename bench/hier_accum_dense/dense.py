"""Hierarchical accumulation the naive way: Nguyen et al. (2020), "Tree-structured attention with hierarchical
accumulation" (ICLR 2020), eqs. 5-10, on the dense tensors ``S`` and ``E`` as the authors' public code builds
them.

The baseline the package's :func:`~fairseq_syntax.methods.hier_accum.accumulation.position_accumulation` is
measured against (same values: ``tests/recipes/test_hier_accum_dense.py``). Registers
``transformer_hier_accum_dense`` (and ``_tiny``): ``transformer_hier_accum`` with :func:`dense_node_accumulation`
as its attention modules' ``node_accumulation`` (``bench/run.py --archs transformer_hier_accum:dense``). ``n`` /
``m`` most leaves / nodes in a row, ``H`` heads, ``d`` head dimension:

    S = F(L, N, R)     B x H x (m+1) x n x d   row 0 the leaves; row i+1 node i's value at every leaf column under
                                                it, 0 elsewhere (eq. 5)
    E                  B x 1 x (m+1) x n x d   [e^v_|V_i^j|; e^h_|H_i^j|] where leaf j is under node i (eq. 9),
                                                shared by the heads; row 0 is 0
    U(S + E)           B x H x m x n x d       sum of row 0 and the node rows on the branch from node i down to
                                                leaf j, divided by the branch size (eq. 6)
    N' = V(U, w)       B x H x m x d           sum_j w_j U_ij / |L(i)| over the leaves j under node i (eqs. 7, 10)

Nodes are in preorder, so branch sums are suffix sums along the node axis. O(B H m n d) time and memory per call."""
from typing import Optional

import torch
from fairseq.models import register_model
from torch import Tensor

from fairseq_syntax.core.attention import Structure
from fairseq_syntax.core.model import register_architectures
from fairseq_syntax.methods.hier_accum.accumulation import HierarchicalEmbeddings
from fairseq_syntax.methods.hier_accum.attention import (
    HierarchicalCrossAttention,
    HierarchicalSelfAttention,
)
from fairseq_syntax.methods.hier_accum.model import (
    HierAccumDecoder,
    HierAccumDecoderLayer,
    HierAccumEncoder,
    HierAccumTransformerModel,
)

ARCH = "transformer_hier_accum_dense"


def dense_node_accumulation(
    values: Tensor, leaf_weights: Tensor, structure: Structure, embeddings: Optional[HierarchicalEmbeddings] = None
) -> Tensor:
    """``N' = V(U(S + E), w)`` (eq. 10) for the ``m`` nodes of ``structure``: ``B x H x m x d``.

    ``values`` ``B x H x T x d``; ``leaf_weights`` ``B x T`` is ``w`` (read at the leaves). The branch-size divisor
    of eq. 6 ("paper" or "official") and ``1 / |L(i)|`` of eq. 7 come from ``structure["inverse_branch_size"]``.
    """
    batch, heads, _, dim = values.shape
    dtype = values.dtype
    under = structure["node_over_leaf"].to(dtype)  # B x m x n: leaf j under node i

    def rows(positions: Tensor) -> Tensor:
        return values.gather(2, positions[:, None, :, None].expand(batch, heads, positions.size(1), dim))

    leaves, nodes = rows(structure["leaf_pos"]), rows(structure["node_pos"])  # B x H x n x d, B x H x m x d
    node_rows = nodes.unsqueeze(3) * under[:, None, :, :, None]  # rows 1..m of S
    if embeddings is not None:
        node_rows = node_rows + dense_embeddings(structure, embeddings, dtype).unsqueeze(1)
    # eq. 6: the leaf (row 0 of S + E) plus the node rows from i down to the leaf, a suffix sum over the node axis
    branch_sums = leaves.unsqueeze(2) + node_rows.flip(2).cumsum(2).flip(2)
    # eqs. 6-7: c_ij = w_j / (|L(i)| x branch size), 0 where leaf j is not under node i
    leaf_w = leaf_weights.gather(1, structure["leaf_pos"]).to(dtype)  # B x n
    coefficients = leaf_w.unsqueeze(1) * structure["inverse_branch_size"].to(dtype)  # B x m x n
    return torch.einsum("bmn,bhmnd->bhmd", coefficients, branch_sums)


def dense_embeddings(structure: Structure, embeddings: HierarchicalEmbeddings, dtype: torch.dtype) -> Tensor:
    """Rows 1..m of ``E`` (eq. 9), ``B x m x n x d``: ``[E^v[|V_i^j|]; E^h[|H_i^j|]]`` where leaf j is under node i
    (indices capped), else 0. ``|V_i^j|``: nodes from i down to j; ``|H_i^j|``: j's rank among i's leaves, from 1."""
    under = structure["node_over_leaf"]  # B x m x n, float 0 / 1
    node_depth = structure["node_over_node"].sum(1) - 1  # B x m
    leaf_depth = under.sum(1)  # B x n
    vertical = (leaf_depth.unsqueeze(1) - node_depth.unsqueeze(2)).long()
    horizontal = under.cumsum(-1).long()  # the leaves under a node are contiguous
    size = embeddings.size
    table = torch.cat([embeddings.vertical[(vertical.clamp(1, size) - 1)],
                       embeddings.horizontal[(horizontal.clamp(1, size) - 1)]], dim=-1)
    return table.to(dtype) * under.to(dtype).unsqueeze(-1)


# --- the model


class DenseHierarchicalSelfAttention(HierarchicalSelfAttention):
    node_accumulation = staticmethod(dense_node_accumulation)


class DenseHierarchicalCrossAttention(HierarchicalCrossAttention):
    node_accumulation = staticmethod(dense_node_accumulation)


class DenseHierAccumEncoder(HierAccumEncoder):
    self_attention_class = DenseHierarchicalSelfAttention


class DenseHierAccumDecoderLayer(HierAccumDecoderLayer):
    cross_attention_class = DenseHierarchicalCrossAttention


class DenseHierAccumDecoder(HierAccumDecoder):
    layer_class = DenseHierAccumDecoderLayer


@register_model(ARCH)
class DenseHierAccumTransformerModel(HierAccumTransformerModel):
    """``transformer_hier_accum`` with the naive dense accumulation in every encoder layer and cross-attention."""

    encoder_class = DenseHierAccumEncoder
    decoder_class = DenseHierAccumDecoder


register_architectures(ARCH)
