"""What a ``transformer_syntax_mask`` model learned (McDonald & Chiang 2021, section 4, Figures 2-4).

* :func:`mask_strengths` (model) -> ``L x H x 9`` learned strengths ``s`` of the masked layers (Figure 3);
* :func:`strength_ranges` (strengths) -> per layer and head the min, max and range of ``s`` over the relations:
  a head whose range is near 0 ignores the tree (Figure 4);
* :func:`sentence_masks` (model, tree, layer, preterminals) -> ``H x n x n`` summed masks ``-exp(s[h, rel_ij])``
  for one sentence's preorder tokens (Figure 2), and the tokens.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np
import torch

from fairseq_syntax import structure, trees
from fairseq_syntax.models.transformer_syntax_mask import SyntaxMaskEncoder


def _encoder(model) -> SyntaxMaskEncoder:
    encoder = getattr(model, "encoder", model)
    if not isinstance(encoder, SyntaxMaskEncoder):
        raise ValueError(f"not a transformer_syntax_mask model: its encoder is {type(encoder).__name__}")
    return encoder


def mask_strengths(model) -> np.ndarray:
    return _encoder(model).mask_strengths().cpu().numpy()


def strength_ranges(strengths: np.ndarray) -> List[dict]:
    rows = []
    for layer, per_head in enumerate(strengths):
        for head, values in enumerate(per_head):
            rows.append({"layer": layer, "head": head, "min": float(values.min()), "max": float(values.max()),
                         "range": float(values.max() - values.min())})
    return rows


def sentence_masks(model, tree: trees.Tree, layer: int = 0, preterminals: str = "keep") -> Tuple[np.ndarray, List[str]]:
    encoder = _encoder(model)
    if layer not in encoder.masked_layers:
        raise ValueError(f"layer {layer} has no masks (masked layers: {encoder.masked_layers})")
    tokens, parents = trees.preorder(tree, preterminals=preterminals)
    relations = structure.relation_ids(structure.collate_parents([parents], append_eos=False))
    with torch.no_grad():
        bias = encoder.layers[layer].self_attn.score_bias({"relations": relations})  # 1 x H x n x n
    return bias[0].cpu().numpy(), tokens
