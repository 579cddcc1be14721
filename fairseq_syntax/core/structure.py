"""Batched tree structure: from padded parent arrays to the tensors every method needs.

A sentence's tree (after BPE) is its preorder node sequence plus a parent array (``trees.preorder``): interior
nodes are label tokens (``(NP``), leaves are subwords, a BPE-split word is a subtree under its POS node,
``parents[k] < k`` (``-1`` for the root). A batch is a LongTensor ``parents`` ``B x T`` of ABSOLUTE positions in
the padded row, ``ROOT = -1`` for roots and ``PAD = -2`` at padding. A row may hold several roots:
``collate_parents`` makes fairseq's EOS a one-node tree of its own.

Everything is vectorised over the batch and position pairs; the only Python loop is ``ceil(log2 T)``
pointer-doubling steps. Results are on the input's device, and nothing reads a value back from it except
data-dependent shapes (:func:`tree_sizes`) and the checks of batches not made by ``collate_parents``. Memory is
O(B T^2), in bool tensors where possible.

``ancestor_or_self`` (dominance) underlies the nine relations of McDonald & Chiang (2021), section 2
(:mod:`fairseq_syntax.methods.syntax_mask.relations`); ``leaf_node_split`` and ``dominance_blocks`` give hierarchical
accumulation's leaves, nodes and subtree rule (Nguyen et al. 2020, sections 4.1-4.2).

Leaves are the positions without children (subwords, the EOS root); nodes are all other non-padding positions."""
from __future__ import annotations

from typing import Sequence

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
    contiguous run of positions and the leaves under a node are consecutive leaves, which the horizontal
    embedding index of hierarchical accumulation (a leaf's rank among the node's leaves) relies on.
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


def validate_parents(parents: torch.Tensor, collated: bool = False) -> torch.LongTensor:
    """Check the ``B x T`` convention and return ``parents`` as a LongTensor: each entry ``PAD``, ``ROOT`` or an
    earlier non-padding position of the row. With ``collated=True`` (a :func:`collate_parents` batch, checked on
    the host) only type and shape are checked, so the device is not waited for."""
    if not isinstance(parents, torch.Tensor) or parents.dim() != 2:
        raise ValueError(f"parents must be a B x T tensor, got {getattr(parents, 'shape', type(parents))}")
    if parents.dtype == torch.bool or parents.is_floating_point() or parents.is_complex():
        raise ValueError(f"parents must hold integers, got {parents.dtype}")
    parents = parents.long()
    if collated:
        return parents
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


def _index_among(selected: torch.BoolTensor) -> torch.LongTensor:
    """``B x T``: ordinal of each selected position among its row's selected positions, -1 elsewhere."""
    return torch.where(selected, selected.long().cumsum(-1) - 1, -1)


def ancestor_or_self(parents: torch.Tensor, collated: bool = False) -> torch.BoolTensor:
    """``B x T x T``: ``dom[b, i, j]`` True when i is j or an ancestor of j; False at padding.

    Pointer doubling: ``up`` holds each position's ``2^s``-th ancestor (roots and padding their own); after step s
    column j marks j's ancestors under ``2^(s+1)`` steps up, so ``ceil(log2 T)`` steps mark them all."""
    parents = validate_parents(parents, collated)
    batch, length = parents.shape
    positions = torch.arange(length, device=parents.device)
    up = torch.where(parents >= 0, parents, positions)
    dom = torch.diag_embed(parents != PAD)
    for step in range((length - 1).bit_length()):
        dom = dom | dom.gather(2, up.unsqueeze(1).expand(batch, length, length))
        if step + 1 < (length - 1).bit_length():
            up = up.gather(1, up)
    return dom


def is_leaf(parents: torch.Tensor, collated: bool = False) -> torch.BoolTensor:
    """``B x T``: True at non-padding positions without children. ``collated``: see :func:`validate_parents`."""
    parents = validate_parents(parents, collated)
    batch, length = parents.shape
    # Column `length` collects the writes of roots and padding; it is dropped.
    has_child = torch.zeros(batch, length + 1, dtype=torch.bool, device=parents.device)
    has_child.scatter_(1, torch.where(parents >= 0, parents, length), True)
    return ~has_child[:, :length] & (parents != PAD)


def _compact(selected: torch.BoolTensor, width: int) -> tuple[torch.LongTensor, torch.BoolTensor]:
    """Positions of the selected entries of each row, left-aligned: ``B x K`` positions (0 where padded) and
    ``B x K`` mask, K = ``width``, at least the most selected in a row."""
    batch, length = selected.shape
    count = selected.sum(-1)
    positions = torch.arange(length, device=selected.device).expand(batch, length)
    # Column `width` collects the unselected positions; it is dropped.
    compact = torch.zeros(batch, width + 1, dtype=torch.long, device=selected.device)
    compact.scatter_(1, torch.where(selected, _index_among(selected), width), positions)
    kept = torch.arange(width, device=selected.device) < count.unsqueeze(1)
    return compact[:, :width], kept


def batch_maxima(*per_row: torch.Tensor) -> list[int]:
    """The maximum over the batch of each ``B`` tensor, read from the device in one go; 0 for an empty batch."""
    if not per_row[0].numel():
        return [0] * len(per_row)
    return torch.stack(per_row).amax(1).tolist()


def tree_sizes(parents: torch.Tensor, collated: bool = False,
               dominance: torch.BoolTensor | None = None) -> dict[str, int]:
    """``leaves``, ``nodes`` (most in a row) and ``depth`` (most node ancestors of a leaf), read in one go; the side
    input ``src_parents`` computes them on the host (``net_input["src_parents_sizes"]``). ``dominance``:
    ``ancestor_or_self(parents)`` when the caller has it."""
    parents = validate_parents(parents, collated)
    leaves = is_leaf(parents, collated=True)
    nodes = ~leaves & (parents != PAD)
    dominance = ancestor_or_self(parents, collated=True) if dominance is None else dominance
    depth = dominance.sum(1) - 1  # proper ancestors of each position, all of them nodes
    most = batch_maxima(leaves.sum(-1), nodes.sum(-1), torch.where(leaves, depth, 0).amax(-1))
    return dict(zip(("leaves", "nodes", "depth"), most))


def leaf_node_split(
    parents: torch.Tensor, collated: bool = False, widths: tuple[int, int] | None = None
) -> dict[str, torch.Tensor]:
    """Positions of each row's leaves L and nodes N (Nguyen et al. 2020, section 4.1).

    Returns ``leaf_pos`` / ``leaf_mask`` (``B x n``) and ``node_pos`` / ``node_mask`` (``B x m``), in preorder,
    padded with position 0 and mask False. ``widths``: ``(n, m)`` when known (:func:`batch_maxima`), else read
    from the device."""
    parents = validate_parents(parents, collated)
    leaves = is_leaf(parents, collated=True)
    nodes = ~leaves & (parents != PAD)
    leaf_width, node_width = widths if widths is not None else batch_maxima(leaves.sum(-1), nodes.sum(-1))
    leaf_pos, leaf_mask = _compact(leaves, leaf_width)
    node_pos, node_mask = _compact(nodes, node_width)
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
    parents: torch.Tensor, split: dict[str, torch.Tensor], dominance: torch.BoolTensor | None = None
) -> tuple[torch.BoolTensor, torch.BoolTensor]:
    """The subtree rule R of Nguyen et al. (2020), section 4.1, on :func:`leaf_node_split`'s split.

    Returns ``(node_over_node, node_over_leaf)``: ``B x m x m``, True when node t is node i or under it
    (``D_it``), and ``B x m x n``, True when leaf j is under node i (``A_ij``); False at padding. ``dominance``:
    ``ancestor_or_self(parents)`` when the caller has it."""
    dom = ancestor_or_self(parents) if dominance is None else dominance
    node_pos, node_mask = split["node_pos"], split["node_mask"]
    node_over_node = _block(dom, node_pos, node_mask, node_pos, node_mask)
    node_over_leaf = _block(dom, node_pos, node_mask, split["leaf_pos"], split["leaf_mask"])
    return node_over_node, node_over_leaf
