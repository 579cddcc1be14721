"""Attention maps of the LDD layer (Pu & Sima'an 2022, Figures 5-6): what each of the 16 label-group heads of the
first encoder layer attends to (query i, key j), for one source sentence of a data directory."""
import logging
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
from fairseq import utils

from fairseq_syntax.core.heatmaps import chosen, plot_heatmap_grid
from fairseq_syntax.core.method import PlotCommand
from fairseq_syntax.methods.ldd.distributions import GROUP_NAMES, NUM_GROUPS
from fairseq_syntax.methods.ldd.model import LDD_LAYER, LDDEncoder

logger = logging.getLogger(__name__)


def sentence_ldd_attention(model, task, split: str, index: int) -> Tuple[np.ndarray, List[str]]:
    """(``16 x n x n`` LDD-layer weights, the n source tokens ending in ``</s>``) of sentence ``index``
    (0-based, the line number minus one) of ``split``."""
    if not isinstance(model.encoder, LDDEncoder):
        raise ValueError(f"{type(model).__name__} is not a transformer_ldd model")
    if split not in task.datasets:
        task.load_dataset(split)
    dataset = task.dataset(split).batching(model.encoder.side_inputs)  # the view the task batches for the model
    if not 0 <= index < len(dataset):
        raise ValueError(f"{split} has {len(dataset)} sentences; there is no sentence {index}")
    sample = dataset.collater([dataset[index]])
    device = next(model.parameters()).device
    net_input = utils.apply_to_sample(lambda tensor: tensor.to(device), sample["net_input"])  # src_ldd is a tuple
    with torch.no_grad():
        out = model.encoder(**{name: value for name, value in net_input.items() if name != "prev_output_tokens"},
                            return_attention=True)
    maps = out["encoder_attention"][LDD_LAYER][0]
    tokens = sample["net_input"]["src_tokens"][0]
    keep = tokens.ne(task.source_dictionary.pad()).to(maps.device)  # --required-seq-len-multiple pads even one
    maps = maps[:, keep][:, :, keep]
    words = [task.source_dictionary[t] for t in tokens[keep.cpu()].tolist()]
    return maps.float().cpu().numpy(), words


def plot_ldd_attention(
    maps: np.ndarray, tokens: Sequence[str], path: str, heads: Optional[Sequence[int]] = None, columns: int = 4
) -> None:
    """Write a PNG of ``maps`` (``16 x n x n``, rows = queries), one heatmap per head in ``heads`` (default all),
    titled with its label group."""
    maps = np.asarray(maps)
    n = len(tokens)
    if maps.shape != (NUM_GROUPS, n, n):
        raise ValueError(f"maps must be {NUM_GROUPS} x {n} x {n} for {n} tokens, got shape {maps.shape}")
    heads = chosen(NUM_GROUPS, heads, "heads")
    titles = [f"head {head + 1}: {GROUP_NAMES[head]}" for head in heads]
    plot_heatmap_grid(maps[heads], titles, tokens, tokens, path, 0.0, 1.0, columns)


def _add_plot_arguments(parser) -> None:
    parser.add_argument("--path", required=True, help="checkpoint (.pt)")
    parser.add_argument("--data", help="data directory with the ldd side data (default: the one it was trained on)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--index", type=int, default=0, help="sentence index in the split (0-based)")
    parser.add_argument("--heads", type=lambda s: [int(h) - 1 for h in s.split(",")],
                        help="comma-separated heads to draw, 1..16 (default all)")
    parser.add_argument("--output", required=True, help="PNG file")


def _plot(args) -> None:
    from fairseq_syntax.core.model_inputs import load_model

    model, task = load_model(args.path, args.data)
    maps, tokens = sentence_ldd_attention(model, task, args.split, args.index)
    plot_ldd_attention(maps, tokens, args.output, heads=args.heads)
    logger.info(f"wrote {args.output}: LDD-layer attention of {args.split} sentence {args.index}: {' '.join(tokens)}")


#: ``fairseq-syntax-plot ldd-attention``: Pu & Sima'an (2022), Figures 5-6
PLOT = PlotCommand("ldd-attention", "heads of the LDD layer of a transformer_ldd checkpoint",
                   _add_plot_arguments, _plot)
