"""How much of the decoder's cross-attention goes to source phrases (nodes) and to tokens (leaves): Nguyen et al.
(2020), Section 5.3 and Table 4.

:func:`cross_attention_share` (model, batches) -> :class:`CrossAttentionShare`: with teacher forcing on the
reference, per target token, decoder layer and head, the attention mass on source nodes, leaves and EOS (summing
to 1), averaged over tokens, heads and layers (and per layer). Batches of a ``--form preorder`` data directory
with ``src_parents`` (``task.dataset(split).batching(["src_parents"])``); any model whose decoder layers have
``encoder_attn`` works. ``node_fraction`` is Table 4's "Leaves/Nodes" row: the nodes' share of source positions,
EOS left out."""
from dataclasses import dataclass
from typing import Dict, Iterable, List

import torch
from torch import Tensor

from fairseq_syntax.core import structure as st
from fairseq_syntax.core.method import PlotCommand


@dataclass
class CrossAttentionShare:
    target_tokens: int
    node_share: float
    leaf_share: float
    eos_share: float
    node_fraction: float
    layer_node_shares: List[float]


def cross_attention_share(model, batches: Iterable[Dict]) -> CrossAttentionShare:
    """Mean cross-attention mass on nodes / leaves / EOS per target token, over all layers and heads."""
    layers = model.decoder.layers
    captured: List[Tensor] = []

    def capture(module, inputs, output):
        weights = output[1]  # B x Tq x S (mean over heads), or H x B x Tq x S with need_head_weights
        captured.append(weights.mean(0) if weights.dim() == 4 else weights)

    saved_need_attn = [layer.need_attn for layer in layers]
    hooks = [layer.encoder_attn.register_forward_hook(capture) for layer in layers]
    was_training = model.training
    model.eval()
    mass = torch.zeros(3, len(layers), dtype=torch.float64)  # nodes, leaves, EOS
    tokens = nodes = leaves = 0
    try:
        for layer in layers:
            layer.need_attn = True  # in eval mode, every layer then returns its cross-attention weights
        for sample in batches:
            net_input = sample["net_input"]
            if "src_parents" not in net_input:
                raise ValueError("cross_attention_share needs src_parents in the batches (a --form preorder data dir)")
            parents = net_input["src_parents"]
            is_node = ~st.is_leaf(parents) & parents.ne(st.PAD)
            is_eos = net_input["src_tokens"].eq(model.encoder.dictionary.eos())
            is_leaf = ~is_node & ~is_eos & parents.ne(st.PAD)
            side_inputs = {name: net_input[name] for name in getattr(model, "side_inputs", ())}
            captured.clear()
            with torch.no_grad():
                model(net_input["src_tokens"], net_input["src_lengths"], net_input["prev_output_tokens"],
                      **side_inputs)
            if len(captured) != len(layers):
                raise RuntimeError(f"captured {len(captured)} cross-attention maps for {len(layers)} decoder layers")
            real = sample["target"].ne(model.decoder.padding_idx)  # B x Tq
            for index, weights in enumerate(captured):
                for kind, selected in enumerate((is_node, is_leaf, is_eos)):
                    mass[kind, index] += (weights.double() * selected.unsqueeze(1)).sum(-1)[real].sum()
            tokens += int(real.sum())
            nodes += int(is_node.sum())
            leaves += int(is_leaf.sum())
    finally:
        for hook in hooks:
            hook.remove()
        for layer, need_attn in zip(layers, saved_need_attn):
            layer.need_attn = need_attn
        model.train(was_training)
    if tokens == 0:
        raise ValueError("no target tokens in the batches")
    share = mass / tokens  # 3 x layers
    return CrossAttentionShare(tokens, *(float(value) for value in share.mean(1)), nodes / max(nodes + leaves, 1),
                               [float(value) for value in share[0]])


def _add_plot_arguments(parser) -> None:
    parser.add_argument("checkpoint")
    parser.add_argument("--data", help="a --form preorder data directory (default: the one it was trained on)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--max-tokens", type=int, default=4096)


def _plot(args) -> None:
    from fairseq_syntax.core.model_inputs import load_model

    model, task = load_model(args.checkpoint, args.data)
    task.load_dataset(args.split)
    dataset = task.dataset(args.split).batching(["src_parents"])  # also for a model that does not read it
    batches = task.get_batch_iterator(dataset, max_tokens=args.max_tokens).next_epoch_itr(
        shuffle=False)
    result = cross_attention_share(model, batches)
    print(f"{args.split}: {result.target_tokens} target tokens; cross-attention on nodes {100 * result.node_share:.1f}%"
          f", leaves {100 * result.leaf_share:.1f}%, EOS {100 * result.eos_share:.1f}%; nodes are "
          f"{100 * result.node_fraction:.1f}% of the source positions")
    print("per decoder layer, share on nodes: " + " ".join(f"{100 * s:.1f}%" for s in result.layer_node_shares))


#: ``fairseq-syntax-plot cross-attention-share``: Nguyen et al. (2020), Table 4 (a table, printed)
PLOT = PlotCommand("cross-attention-share", "cross-attention on source nodes vs leaves", _add_plot_arguments, _plot)
