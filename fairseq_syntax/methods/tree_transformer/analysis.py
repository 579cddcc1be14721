"""Heatmaps of the constituent prior of every layer (Wang, Lee & Chen 2019, Figure 5).

``C^l_ij`` (eqs. 3-4) is the probability that words ``i`` and ``j`` are in one constituent at layer ``l``; blocks
on the diagonal that grow from layer to layer are the induced constituents."""
import logging
from typing import Optional, Sequence

import numpy as np

from fairseq_syntax.core.heatmaps import chosen, plot_heatmap_grid
from fairseq_syntax.core.method import PlotCommand
from fairseq_syntax.core.model_inputs import encode, first_word_position
from fairseq_syntax.methods.tree_transformer.attention import constituent_prior
from fairseq_syntax.methods.tree_transformer.model import tree_encoder

logger = logging.getLogger(__name__)


def sentence_priors(model, task, words: Sequence[str]) -> np.ndarray:
    """``L x n x n`` constituent priors of a Tree Transformer checkpoint over the ``n`` words of one sentence, with
    the model's own ``C_ii`` (0 for a model trained with ``--constituent-diagonal zero``)."""
    if not words:
        raise ValueError("the sentence has no words")
    tokens = encode(task, words)
    encoder = tree_encoder(model)
    links = encoder.link_probabilities(tokens[None])[:, 0]  # L x (T-1)
    offset = first_word_position(task)
    word_links = links[:, offset: offset + len(words) - 1]
    return constituent_prior(word_links, diagonal=encoder.layers[0].self_attn.diagonal).cpu().numpy()


def plot_constituent_priors(
    priors: np.ndarray, words: Sequence[str], path: str, layers: Optional[Sequence[int]] = None, columns: int = 4
) -> None:
    """Write a PNG of ``priors`` (``L x n x n``), one heatmap per layer in ``layers`` (default: all)."""
    priors = np.asarray(priors)
    layers = chosen(len(priors), layers, "layers")
    plot_heatmap_grid(priors[layers], [f"layer {layer}" for layer in layers], words, words, path, 0.0, 1.0, columns)


def _add_plot_arguments(parser) -> None:
    parser.add_argument("checkpoint")
    parser.add_argument("sentence", help="the words of one sentence, space-separated")
    parser.add_argument("--data", help="data directory (default: the one it was trained on)")
    parser.add_argument("--layers", type=lambda s: [int(x) for x in s.split(",")],
                        help="layers to draw (default all)")
    parser.add_argument("--output", required=True, help="PNG file")


def _plot(args) -> None:
    from fairseq_syntax.core.model_inputs import load_model

    model, task = load_model(args.checkpoint, args.data)
    words = args.sentence.split()
    plot_constituent_priors(sentence_priors(model, task, words), words, args.output, layers=args.layers)
    logger.info(f"wrote {args.output}")


#: ``fairseq-syntax-plot constituent-prior``: Wang, Lee & Chen (2019), Figure 5
PLOT = PlotCommand("constituent-prior", "per-layer constituent priors of a Tree Transformer",
                   _add_plot_arguments, _plot)
