"""Per-sentence side data stored beside fairseq's binarized source, and how each kind is batched.

A side input is one binarized indexed dataset ``{split}.{src}-{tgt}.{src}.{suffix}.{bin,idx}`` with one item per
source sentence (O(n) per sentence on disk), plus a collate function that turns the items of a batch into the
tensor the model reads under ``net_input[name]``. The batch tensor is aligned with ``src_tokens`` (same padding side
and length ``T``; fairseq's appended EOS included).
"""
from dataclasses import dataclass
from typing import Callable, Dict, List

import torch

from fairseq_syntax import structure

# (items of the batch in batch order, left_pad, T) -> batch tensor
Collate = Callable[[List[torch.Tensor], bool, int], torch.Tensor]


@dataclass(frozen=True)
class SideInput:
    name: str  # key in net_input, read by the encoder
    suffix: str  # file suffix after the language code
    collate: Collate


def _collate_parents(items, left_pad, length):
    return structure.collate_parents(items, left_pad=left_pad, append_eos=True, pad_to_length=length)


SIDE_INPUTS: Dict[str, SideInput] = {}


def register_side_input(side_input: SideInput) -> SideInput:
    if side_input.name in SIDE_INPUTS:
        raise ValueError(f"side input {side_input.name} registered twice")
    SIDE_INPUTS[side_input.name] = side_input
    return side_input


#: preorder parent array of each source sentence (int16, -1 at the root), see fairseq_syntax.trees.preorder
PARENTS = register_side_input(SideInput("src_parents", "parents", _collate_parents))
