"""``src_depth``: one int16 a source token (its word's depth), batched as ``B x T`` aligned with ``src_tokens``
(0 at padding and at fairseq's EOS)."""
import numpy as np
import torch

from fairseq_syntax.core.side_inputs import SideInput, register_side_input


def collate(items, left_pad: bool, length: int) -> torch.Tensor:
    batch = torch.zeros(len(items), length, dtype=torch.long)
    for row, item in enumerate(items):
        start = length - len(item) - 1 if left_pad else 0  # the EOS follows the tokens
        batch[row, start:start + len(item)] = item.long()
    return batch


DEPTH = register_side_input(SideInput("src_depth", "depth", np.int16, collate, "a study (depth_method.making)"))
