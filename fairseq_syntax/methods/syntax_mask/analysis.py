"""What a ``transformer_syntax_mask`` model learned (McDonald & Chiang 2021, section 4, Figures 2-4).

* :func:`mask_strengths` (model) -> ``L x H x 9`` learned strengths ``s`` of the masked layers (Figure 3);
* :func:`strength_ranges` (strengths) -> per layer and head the min, max and range of ``s`` over the relations:
  a head whose range is near 0 ignores the tree (Figure 4);
* :func:`sentence_masks` (model, tree, layer, preterminals) -> ``H x n x n`` summed masks ``-exp(s[h, rel_ij])``
  for one sentence's preorder tokens (Figure 2), and the tokens.
"""
import logging
from typing import List, Tuple

import numpy as np
import torch

from fairseq_syntax.core import structure, trees
from fairseq_syntax.core.method import PlotCommand
from fairseq_syntax.methods.syntax_mask.model import SyntaxMaskEncoder
from fairseq_syntax.methods.syntax_mask.relations import RELATION_NAMES, relation_ids

logger = logging.getLogger(__name__)


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


def sentence_masks(model, tree: trees.Tree, layer: int = 0, preterminals: str = "auto") -> Tuple[np.ndarray, List[str]]:
    encoder = _encoder(model)
    if layer not in encoder.masked_layers:
        raise ValueError(f"layer {layer} has no masks (masked layers: {encoder.masked_layers})")
    tokens, parents = trees.preorder(tree, preterminals=preterminals)
    relations = relation_ids(structure.collate_parents([parents], append_eos=False))
    with torch.no_grad():
        bias = encoder.layers[layer].self_attn.score_bias({"relations": relations})  # 1 x H x n x n
    return bias[0].cpu().numpy(), tokens


def _add_plot_arguments(parser) -> None:
    parser.add_argument("checkpoint")
    parser.add_argument("--data", help="data directory (default: the one it was trained on)")
    parser.add_argument("--tree", help="a bracketed tree (word level) whose summed masks to draw, one panel a head")
    parser.add_argument("--layer", type=int, default=0, help="encoder layer of the summed masks (default 0)")
    parser.add_argument("--output", required=True, help="prefix: writes PREFIX.strengths.png [PREFIX.sentence.png]")


def _plot(args) -> None:
    from fairseq_syntax.core.heatmaps import plot_heatmap_grid
    from fairseq_syntax.core.model_inputs import load_model

    model, task = load_model(args.checkpoint, args.data)
    strengths = mask_strengths(model)  # L x H x 9
    layers = model.encoder.masked_layers
    plot_heatmap_grid(strengths, [f"layer {layer}" for layer in layers],
                      [f"head {h + 1}" for h in range(strengths.shape[1])], RELATION_NAMES,
                      f"{args.output}.strengths.png", cmap="coolwarm")
    print("layer head      min      max    range")
    for row in strength_ranges(strengths):
        print(f"{layers[row['layer']]:5d} {row['head'] + 1:4d} {row['min']:8.3f} {row['max']:8.3f} {row['range']:8.3f}")
    if args.tree:
        preterminals = getattr(task, "meta", {}).get("preterminals", "keep")
        masks, tokens = sentence_masks(model, trees.parse_tree(args.tree, source="--tree"), args.layer, preterminals)
        plot_heatmap_grid(masks, [f"head {h + 1}" for h in range(masks.shape[0])], tokens, tokens,
                          f"{args.output}.sentence.png")
    logger.info(f"wrote {args.output}.strengths.png" + (f" and {args.output}.sentence.png" if args.tree else ""))


#: ``fairseq-syntax-plot mask-strengths``: McDonald & Chiang (2021), Figures 2-4
PLOT = PlotCommand("mask-strengths", "strengths of a transformer_syntax_mask checkpoint", _add_plot_arguments, _plot)
