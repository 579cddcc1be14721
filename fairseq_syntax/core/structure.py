"""Batched tree structure: from padded parent arrays to the tensors every method needs.

A sentence's tree is stored as its preorder node sequence and a parent array (``-1`` for the root,
``parents[k] < k``; see DESIGN.md and ``trees.preorder``). A batch is a LongTensor ``parents`` of shape ``B x T``
whose entries are ABSOLUTE positions in the padded row, ``ROOT = -1`` for roots and ``PAD = -2`` at padding.
A row may hold several roots: fairseq appends EOS to every source, and ``collate_parents`` makes it a one-node
tree of its own.

Everything here is vectorised over the batch and over position pairs; the only Python loops run over tree
depth (one gather of the parent array per level). Results are created on the input's device, so the same code
runs on CPU and CUDA. Memory is O(B T^2), held in bool tensors where possible.

* ``collate_parents``: per-sentence parent arrays -> ``B x T`` (left or right padding, optional EOS root).
* ``padding_mask``, ``depths``, ``is_leaf``, ``num_leaves``, ``leaf_index``, ``leaf_spans``: ``B x T`` / ``B``.
* ``ancestor_or_self``: ``B x T x T`` dominance (i is j or an ancestor of j).
* ``relation_ids``: ``B x T x T`` ids of the nine tree relations of McDonald & Chiang (2021, paper 001,
  Section 2), the masks ``M^m`` of their attention bias.
* For hierarchical accumulation (Nguyen et al., 2020, paper 004, Sections 4.1-4.2): ``leaf_node_split``
  (gather positions of the ``n`` leaves L and the ``m`` nonterminal nodes N), ``dominance_blocks`` (the
  subtree rule R as ``B x m x m`` node-over-node and ``B x m x n`` node-over-leaf masks),
  ``node_leaf_path_length`` (``|P(i, j)|`` of DESIGN.md's "Hierarchical accumulation without the m x n x d
  tensor") and ``hierarchical_embedding_indices`` (``|V_i^j|`` and ``|H_i^j|`` of paper 004, eq. 9).

Leaves are the positions without children (subwords, and the EOS root); nodes are all other non-padding
positions. Whether POS preterminals are nodes is decided when the tree is built, not here.
"""
from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import torch

ROOT = -1
PAD = -2



def collate_parents(
    arrays: Sequence[np.ndarray | torch.Tensor],
    left_pad: bool = False,
    append_eos: bool = True,
    pad_to_length: int | None = None,
) -> torch.LongTensor:
    """Pad per-sentence parent arrays into one ``B x T`` LongTensor of absolute positions.

    ``arrays[b]`` is one sentence's parent array of length ``n_b`` (indices relative to the sentence, ``-1`` for
    the root, each sentence a preorder sequence). With ``append_eos`` position ``n_b`` is an extra one-node tree
    (parent ``ROOT``) for the EOS token fairseq appends to every source. ``T`` is the longest row or
    ``pad_to_length``; the rest is ``PAD``. With ``left_pad`` each row is right-aligned (fairseq's
    ``--left-pad-source``) and its parent indices shifted by the same offset. Returned on the CPU.

    Raises ValueError naming the sentence (its index in ``arrays``) and node for a parent that is not ``-1`` or
    an earlier node, or for a sequence that is not a preorder.
    """
    sentences = [_parent_vector(array, index) for index, array in enumerate(arrays)]
    if not sentences:
        raise ValueError("collate_parents: no sentences to collate")
    lengths = torch.tensor([len(sentence) for sentence in sentences])
    row_lengths = lengths + int(append_eos)
    longest = int(row_lengths.max())
    width = longest if pad_to_length is None else pad_to_length
    if width < longest:
        raise ValueError(f"collate_parents: pad_to_length={pad_to_length} is shorter than the longest row ({longest})")

    values = torch.cat(sentences)
    sentence_of = torch.repeat_interleave(torch.arange(len(sentences)), lengths)
    starts = torch.cumsum(lengths, 0) - lengths
    node = torch.arange(len(values)) - starts[sentence_of]
    bad = (values < ROOT) | (values >= node)
    if bool(bad.any()):
        first = int(bad.nonzero()[0, 0])
        sentence, index, parent = int(sentence_of[first]), int(node[first]), int(values[first])
        raise ValueError(
            f"sentence {sentence} of the batch, node {index}: parent {parent} is neither -1 (root) "
            f"nor an earlier node (0..{index - 1})"
        )

    offsets = width - row_lengths if left_pad else torch.zeros_like(row_lengths)
    shift = offsets[sentence_of]
    parents = torch.full((len(sentences), width), PAD, dtype=torch.long)
    parents[sentence_of, node + shift] = torch.where(values >= 0, values + shift, ROOT)
    if append_eos:
        parents[torch.arange(len(sentences)), lengths + offsets] = ROOT
    _check_preorder(parents, offsets)
    return parents


def _parent_vector(array: np.ndarray | torch.Tensor, index: int) -> torch.Tensor:
    """One sentence's parent array as a 1-D CPU LongTensor; ValueError unless it is a 1-D integer array."""
    vector = torch.as_tensor(np.asarray(array) if not isinstance(array, torch.Tensor) else array)
    if vector.dim() != 1:
        raise ValueError(f"sentence {index} of the batch: parent array must be 1-D, got shape {tuple(vector.shape)}")
    if vector.dtype == torch.bool or vector.is_floating_point() or vector.is_complex():
        raise ValueError(f"sentence {index} of the batch: parent array must hold integers, got {vector.dtype}")
    return vector.to(device="cpu", dtype=torch.long)


def _check_preorder(parents: torch.Tensor, offsets: torch.Tensor) -> None:
    """Raise ValueError unless every row of a collated batch is a preorder sequence of trees.

    A sequence with ``parents[k] < k`` is a preorder exactly when no two edges cross: there are no nodes y < k
    with ``parents[y] < parents[k] < y`` (a root r counts as the edge (-1, r)). Then every subtree is a
    contiguous run of positions, which ``leaf_spans`` relies on.
    """
    valid = parents != PAD
    positions = torch.arange(parents.size(1), device=parents.device)
    crossing = (
        (parents.unsqueeze(2) < parents.unsqueeze(1))  # parents[y] < parents[k]
        & (parents.unsqueeze(1) < positions.view(1, -1, 1))  # parents[k] < y
        & (positions.view(-1, 1) < positions.view(1, -1))  # y < k
        & valid.unsqueeze(2)
        & valid.unsqueeze(1)
    )
    if bool(crossing.any()):
        sentence, outside, node = (int(value) for value in crossing.nonzero()[0])
        offset = int(offsets[sentence])
        parent = int(parents[sentence, node])
        raise ValueError(
            f"sentence {sentence} of the batch is not a preorder: node {node - offset} has parent "
            f"{parent - offset}, but node {outside - offset} between them lies outside that parent's subtree"
        )


def validate_parents(parents: torch.Tensor) -> torch.LongTensor:
    """Check the ``B x T`` batch convention and return ``parents`` as a LongTensor.

    Each entry must be ``PAD``, ``ROOT`` or an earlier non-padding position of the same row; ``parents[k] < k``
    also guarantees that walking up the parents ends.
    """
    if not isinstance(parents, torch.Tensor) or parents.dim() != 2:
        raise ValueError(f"parents must be a B x T tensor, got {getattr(parents, 'shape', type(parents))}")
    if parents.dtype == torch.bool or parents.is_floating_point() or parents.is_complex():
        raise ValueError(f"parents must hold integers, got {parents.dtype}")
    parents = parents.long()
    positions = torch.arange(parents.size(1), device=parents.device)
    is_padding = parents == PAD
    earlier = (parents >= 0) & (parents < positions)
    parent_is_padding = is_padding.gather(1, parents.clamp(min=0)) & (parents >= 0)
    bad = ~(is_padding | (parents == ROOT) | earlier) | parent_is_padding
    if bool(bad.any()):
        row, position = (int(value) for value in bad.nonzero()[0])
        raise ValueError(
            f"parents[{row}, {position}] = {int(parents[row, position])}: expected PAD ({PAD}), ROOT ({ROOT}) "
            "or the position of an earlier, non-padding node"
        )
    return parents


def _ancestor_steps(parents: torch.LongTensor) -> Iterator[torch.LongTensor]:
    """Yield the 0th (self), 1st (parent), 2nd, ... ancestor of every position, ``ROOT`` where it has none.

    ``B x T`` each; padding never has one. Stops after the deepest node's root: max depth + 1 steps.
    """
    positions = torch.arange(parents.size(1), device=parents.device).expand_as(parents)
    current = torch.where(parents == PAD, ROOT, positions)
    while bool((current >= 0).any()):
        yield current
        current = torch.where(current >= 0, parents.gather(1, current.clamp(min=0)), ROOT)


def _index_among(selected: torch.BoolTensor) -> torch.LongTensor:
    """``B x T``: ordinal of each selected position among its row's selected positions, -1 elsewhere."""
    return torch.where(selected, selected.long().cumsum(-1) - 1, -1)


def padding_mask(parents: torch.Tensor) -> torch.BoolTensor:
    """``B x T``: True at padding."""
    return validate_parents(parents) == PAD


def depths(parents: torch.Tensor) -> torch.LongTensor:
    """``B x T``: number of ancestors (0 for a root), 0 at padding."""
    parents = validate_parents(parents)
    count = torch.zeros_like(parents)
    for ancestor in _ancestor_steps(parents):
        count += ancestor >= 0
    return (count - 1).clamp(min=0)


def ancestor_or_self(parents: torch.Tensor) -> torch.BoolTensor:
    """``B x T x T``: ``dom[b, i, j]`` is True when i is j or an ancestor of j; False where i or j is padding."""
    parents = validate_parents(parents)
    batch, length = parents.shape
    # Row `length` collects the writes of positions that have run out of ancestors; it is dropped at the end.
    dom = torch.zeros(batch, length + 1, length, dtype=torch.bool, device=parents.device)
    for ancestor in _ancestor_steps(parents):
        alive = ancestor >= 0
        dom.scatter_(1, torch.where(alive, ancestor, length).unsqueeze(1), alive.unsqueeze(1))
    return dom[:, :length].contiguous()


def is_leaf(parents: torch.Tensor) -> torch.BoolTensor:
    """``B x T``: True at non-padding positions without children."""
    parents = validate_parents(parents)
    batch, length = parents.shape
    # Column `length` collects the writes of roots and padding; it is dropped.
    has_child = torch.zeros(batch, length + 1, dtype=torch.bool, device=parents.device)
    has_child.scatter_(1, torch.where(parents >= 0, parents, length), True)
    return ~has_child[:, :length] & (parents != PAD)


def num_leaves(parents: torch.Tensor) -> torch.LongTensor:
    """``B``: number of leaves per row (the EOS root counts as one)."""
    return is_leaf(parents).sum(-1)


def leaf_index(parents: torch.Tensor) -> torch.LongTensor:
    """``B x T``: ordinal of each leaf among its row's leaves, left to right; -1 at nodes and padding."""
    return _index_among(is_leaf(parents))


def leaf_spans(parents: torch.Tensor) -> tuple[torch.LongTensor, torch.LongTensor]:
    """``(first, last)``, ``B x T`` each: leaf ordinals of the leftmost and rightmost leaf under each position.

    Inclusive; a leaf spans itself; -1 at padding. In a preorder (which ``collate_parents`` checks) the leaves
    under a node are exactly the ordinals ``first..last``.
    """
    parents = validate_parents(parents)
    covered = ancestor_or_self(parents) & is_leaf(parents).unsqueeze(1)
    ordinal = leaf_index(parents).unsqueeze(1)
    first = torch.where(covered, ordinal, parents.size(1)).amin(-1)
    last = torch.where(covered, ordinal, -1).amax(-1)
    return first.masked_fill(parents == PAD, -1), last


def _compact(selected: torch.BoolTensor) -> tuple[torch.LongTensor, torch.BoolTensor]:
    """Positions of the selected entries of each row, left-aligned: ``B x K`` positions (0 where padded) and
    ``B x K`` mask, K = the most selected in a row."""
    batch, length = selected.shape
    count = selected.sum(-1)
    width = int(count.max()) if batch else 0
    positions = torch.arange(length, device=selected.device).expand(batch, length)
    # Column `width` collects the unselected positions; it is dropped.
    compact = torch.zeros(batch, width + 1, dtype=torch.long, device=selected.device)
    compact.scatter_(1, torch.where(selected, _index_among(selected), width), positions)
    kept = torch.arange(width, device=selected.device) < count.unsqueeze(1)
    return compact[:, :width], kept


def leaf_node_split(parents: torch.Tensor) -> dict[str, torch.Tensor]:
    """Gather positions that split each row into its leaves L and nonterminal nodes N (paper 004, Section 4.1).

    Returns ``leaf_pos`` / ``leaf_mask`` (``B x n``, n = most leaves in a row) and ``node_pos`` / ``node_mask``
    (``B x m``, m = most nodes in a row): positions in left-to-right (preorder) order, padded with position 0
    and mask False. ``x.gather(1, leaf_pos)`` picks the leaves of a ``B x T`` tensor.
    """
    parents = validate_parents(parents)
    leaves = is_leaf(parents)
    leaf_pos, leaf_mask = _compact(leaves)
    node_pos, node_mask = _compact(~leaves & (parents != PAD))
    return {"leaf_pos": leaf_pos, "leaf_mask": leaf_mask, "node_pos": node_pos, "node_mask": node_mask}


def _block(
    matrix: torch.Tensor,
    row_pos: torch.LongTensor,
    row_mask: torch.BoolTensor,
    column_pos: torch.LongTensor,
    column_mask: torch.BoolTensor,
) -> torch.Tensor:
    """``B x R x C`` sub-matrix of a ``B x T x T`` matrix at the given positions; zero / False where masked."""
    batch, length, _ = matrix.shape
    rows = matrix.gather(1, row_pos.unsqueeze(2).expand(batch, row_pos.size(1), length))
    block = rows.gather(2, column_pos.unsqueeze(1).expand(batch, row_pos.size(1), column_pos.size(1)))
    keep = row_mask.unsqueeze(2) & column_mask.unsqueeze(1)
    return block & keep if block.dtype == torch.bool else block * keep


def dominance_blocks(
    parents: torch.Tensor, split: dict[str, torch.Tensor]
) -> tuple[torch.BoolTensor, torch.BoolTensor]:
    """The subtree rule R of paper 004 (Section 4.1) on the split of ``leaf_node_split``.

    Returns ``(node_over_node, node_over_leaf)``: ``B x m x m``, True when node t is node i or in its subtree
    (DESIGN.md's ``D_it``), and ``B x m x n``, True when leaf j is under node i (``A_ij``). False at padding.
    """
    dom = ancestor_or_self(parents)
    node_pos, node_mask = split["node_pos"], split["node_mask"]
    node_over_node = _block(dom, node_pos, node_mask, node_pos, node_mask)
    node_over_leaf = _block(dom, node_pos, node_mask, split["leaf_pos"], split["leaf_mask"])
    return node_over_node, node_over_leaf


def _path_length(dom: torch.BoolTensor, split: dict[str, torch.Tensor]) -> torch.LongTensor:
    """``B x m x n`` path lengths from the ``B x T x T`` dominance matrix (see ``node_leaf_path_length``)."""
    depth = dom.sum(1) - 1  # ancestors-or-self of each column, minus itself
    node_pos, node_mask = split["node_pos"], split["node_mask"]
    leaf_pos, leaf_mask = split["leaf_pos"], split["leaf_mask"]
    under = _block(dom, node_pos, node_mask, leaf_pos, leaf_mask)
    difference = depth.gather(1, leaf_pos).unsqueeze(1) - depth.gather(1, node_pos).unsqueeze(2)
    return difference * under


def node_leaf_path_length(parents: torch.Tensor, split: dict[str, torch.Tensor]) -> torch.LongTensor:
    """``B x m x n``: ``|P(i, j)|``, the number of nodes on the path from node i down to leaf j, counting i and
    not the leaf (so 1 when j is a child of i); 0 when leaf j is not under node i or either is padding.

    The weight ``c_ij = w_j / (|leaves(i)| * (|P(i, j)| + 1))`` of DESIGN.md's "Hierarchical accumulation without
    the m x n x d tensor" (paper 004, eqs. 6-7) uses it.
    """
    return _path_length(ancestor_or_self(parents), split)


def hierarchical_embedding_indices(
    parents: torch.Tensor,
    split: dict[str, torch.Tensor],
    max_vertical: int = 50,
    max_horizontal: int = 100,
) -> tuple[torch.LongTensor, torch.LongTensor]:
    """Indices of the hierarchical embeddings ``[e^v_|V_i^j|; e^h_|H_i^j|]`` of paper 004, eq. 9.

    Returns ``(vertical, horizontal)``, ``B x m x n`` each, for node i (row) and leaf j (column):
    ``|V_i^j|``, the nodes t in the subtree of i with leaf j under t (j's ancestors up to and including i), and
    ``|H_i^j|``, the leaves of i's subtree from its leftmost leaf up to and including j. Both are 0 where leaf j
    is not under node i ("no embedding") and at padding, and are capped at ``max_vertical`` /
    ``max_horizontal`` as the official implementation does, so the tables need ``max + 1`` rows.
    """
    if max_vertical < 1 or max_horizontal < 1:
        raise ValueError(f"max_vertical and max_horizontal must be >= 1, got {max_vertical}, {max_horizontal}")
    vertical = _path_length(ancestor_or_self(parents), split)
    under = (vertical > 0).long()
    horizontal = under.cumsum(-1) * under
    return vertical.clamp(max=max_vertical), horizontal.clamp(max=max_horizontal)
