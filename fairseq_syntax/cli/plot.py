"""``fairseq-syntax-plot``: figures of what a trained syntax model attends to (PNG), one subcommand per figure.

* ``ldd-attention``: the 16 label-group heads of a ``transformer_ldd`` model's first encoder layer for one source
  sentence of a data directory (Pu & Sima'an 2022, Figures 5-6); see :mod:`fairseq_syntax.analysis.ldd_attention`.
* ``mask-strengths``: a ``transformer_syntax_mask`` model's strengths per layer, head and relation (McDonald &
  Chiang 2021, Figure 3), their min/max/range per head as text (Figure 4), and with ``--tree`` the summed mask of
  each head for that sentence (Figure 2); see :mod:`fairseq_syntax.analysis.mask_strengths`.
* ``cross-attention-share``: the share of the decoder's cross-attention on source nodes vs leaves over a test set
  (Nguyen et al. 2020, Table 4); see :mod:`fairseq_syntax.analysis.cross_attention_share`. Prints a table.
* ``constituent-prior``: a Tree Transformer's constituent prior of every layer for one sentence (Wang, Lee & Chen
  2019, Figure 5); see :mod:`fairseq_syntax.analysis.constituent_prior`.
"""
import argparse
import logging
import sys
from typing import List, Optional

logger = logging.getLogger("fairseq_syntax.plot")


def ldd_attention(args) -> None:
    from fairseq_syntax.analysis.ldd_attention import plot_ldd_attention, sentence_ldd_attention
    from fairseq_syntax.evaluation.model_inputs import load_model

    model, task = load_model(args.path, args.data)
    maps, tokens = sentence_ldd_attention(model, task, args.split, args.index)
    plot_ldd_attention(maps, tokens, args.output, heads=args.heads)
    logger.info(f"wrote {args.output}: LDD-layer attention of {args.split} sentence {args.index}: {' '.join(tokens)}")


def mask_strengths(args) -> None:
    from fairseq_syntax import structure, trees
    from fairseq_syntax.analysis.heatmaps import plot_heatmap_grid
    from fairseq_syntax.analysis.mask_strengths import mask_strengths, sentence_masks, strength_ranges
    from fairseq_syntax.evaluation.model_inputs import load_model

    model, task = load_model(args.checkpoint, args.data)
    strengths = mask_strengths(model)  # L x H x 9
    layers = model.encoder.masked_layers
    plot_heatmap_grid(strengths, [f"layer {layer}" for layer in layers],
                      [f"head {h + 1}" for h in range(strengths.shape[1])], structure.RELATION_NAMES,
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


def constituent_prior(args) -> None:
    from fairseq_syntax.analysis.constituent_prior import plot_constituent_priors, sentence_priors
    from fairseq_syntax.evaluation.model_inputs import load_model

    model, task = load_model(args.checkpoint, args.data)
    words = args.sentence.split()
    plot_constituent_priors(sentence_priors(model, task, words), words, args.output, layers=args.layers)
    logger.info(f"wrote {args.output}")


def cross_attention_share(args) -> None:
    from fairseq_syntax.analysis.cross_attention_share import cross_attention_share as share
    from fairseq_syntax.evaluation.model_inputs import load_model

    model, task = load_model(args.checkpoint, args.data)
    task.requested_side_inputs.add("src_parents")
    task.load_dataset(args.split)
    batches = task.get_batch_iterator(task.dataset(args.split), max_tokens=args.max_tokens).next_epoch_itr(
        shuffle=False)
    result = share(model, batches)
    print(f"{args.split}: {result.target_tokens} target tokens; cross-attention on nodes {100 * result.node_share:.1f}%"
          f", leaves {100 * result.leaf_share:.1f}%, EOS {100 * result.eos_share:.1f}%; nodes are "
          f"{100 * result.node_fraction:.1f}% of the source positions")
    print("per decoder layer, share on nodes: " + " ".join(f"{100 * s:.1f}%" for s in result.layer_node_shares))


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairseq-syntax-plot", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    ldd = commands.add_parser("ldd-attention", help="heads of the LDD layer of a transformer_ldd checkpoint")
    ldd.add_argument("--path", required=True, help="checkpoint (.pt)")
    ldd.add_argument("--data", help="data directory with the ldd side data (default: the one it was trained on)")
    ldd.add_argument("--split", default="test")
    ldd.add_argument("--index", type=int, default=0, help="sentence index in the split (0-based)")
    ldd.add_argument("--heads", type=lambda s: [int(h) - 1 for h in s.split(",")],
                     help="comma-separated heads to draw, 1..16 (default all)")
    ldd.add_argument("--output", required=True, help="PNG file")
    ldd.set_defaults(run=ldd_attention)

    mask = commands.add_parser("mask-strengths", help="strengths of a transformer_syntax_mask checkpoint")
    mask.add_argument("checkpoint")
    mask.add_argument("--data", help="data directory (default: the one it was trained on)")
    mask.add_argument("--tree", help="a bracketed tree (word level) whose summed masks to draw, one panel a head")
    mask.add_argument("--layer", type=int, default=0, help="encoder layer of the summed masks (default 0)")
    mask.add_argument("--output", required=True, help="prefix: writes PREFIX.strengths.png [PREFIX.sentence.png]")
    mask.set_defaults(run=mask_strengths)

    cross = commands.add_parser("cross-attention-share", help="cross-attention on source nodes vs leaves")
    cross.add_argument("checkpoint")
    cross.add_argument("--data", help="a --form preorder data directory (default: the one it was trained on)")
    cross.add_argument("--split", default="test")
    cross.add_argument("--max-tokens", type=int, default=4096)
    cross.set_defaults(run=cross_attention_share)

    prior = commands.add_parser("constituent-prior", help="per-layer constituent priors of a Tree Transformer")
    prior.add_argument("checkpoint")
    prior.add_argument("sentence", help="the words of one sentence, space-separated")
    prior.add_argument("--data", help="data directory (default: the one it was trained on)")
    prior.add_argument("--layers", type=lambda s: [int(x) for x in s.split(",")], help="layers to draw (default all)")
    prior.add_argument("--output", required=True, help="PNG file")
    prior.set_defaults(run=constituent_prior)
    return parser


def main(argv: Optional[List[str]] = None) -> None:
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", level=logging.INFO)
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    args = get_parser().parse_args(argv)
    args.run(args)


def cli_main() -> None:
    main(sys.argv[1:])


if __name__ == "__main__":
    cli_main()
