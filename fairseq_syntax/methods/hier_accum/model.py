"""``transformer_hier_accum``: Nguyen et al. (2020), section 4.4: fairseq's Transformer with tree-based encoder
self-attention (eqs. 12-20) and decoder cross-attention (eqs. 21-24).

Input: the preorder form (``fairseq-syntax-preprocess --form preorder``), one token per leaf (subword) and per
nonterminal node, and ``src_parents`` ``B x T``. Nguyen et al. drop POS nodes except over BPE-split words
(footnote 2, Appendix 7.4): ``--preterminals split``. fairseq's EOS is a leaf of its own (a second root).

* Encoder: :class:`~fairseq_syntax.methods.hier_accum.attention.HierarchicalSelfAttention` in every layer; leaves
  and nodes share LayerNorms and FFN. Only leaves get positional embeddings, numbered left to right (footnote 4).
  The structure is built once per batch, returned in ``encoder_out["source_structure"]``.
* Decoder: cross-attention is :class:`~fairseq_syntax.methods.hier_accum.attention.HierarchicalCrossAttention`,
  handed the source padding with that structure (:class:`~fairseq_syntax.methods.hier_accum.attention.SourceTree`).
* Ablations (Table 3): ``--no-hier-embed`` (encoder and decoder), ``--no-subtree-mask`` (encoder)."""
from dataclasses import dataclass

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import register_model
from fairseq.models.transformer import TransformerConfig, TransformerDecoderBase
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase

from fairseq_syntax.core import structure as st
from fairseq_syntax.core.classifier import register_classifier
from fairseq_syntax.core.command_help import option
from fairseq_syntax.core.encoder import SyntaxTransformerEncoder, wrapped_layer
from fairseq_syntax.core.model import SyntaxTransformerModel, register_architectures
from fairseq_syntax.methods.hier_accum.accumulation import (
    AVERAGES,
    additive_mask,
    accumulation_structure,
    reorder_structure,
)
from fairseq_syntax.methods.hier_accum.attention import (
    HierarchicalCrossAttention,
    HierarchicalSelfAttention,
    SourceTree,
)


@dataclass
class HierAccumOptions(FairseqDataclass):
    no_hier_embed: bool = option(False, "ablation -HierEmb (Nguyen et al. 2020, Table 3): no hierarchical embeddings")
    no_subtree_mask: bool = option(
        False, "ablation -SubMask (Nguyen et al. 2020, Table 3): every encoder query attends to all leaves and nodes")
    hier_embed_size: int = option(
        100, "|E|, rows of the vertical and of the horizontal embedding table (Nguyen et al. 2020, Appendix 7.4); "
        "larger indices share the last row")
    cumulative_average: ChoiceEnum(AVERAGES) = option(
        "paper", "upward cumulative average over a branch from node i to leaf j: 'paper' divides by its nodes + the "
        "leaf (eq. 6), 'official' by its nodes only, as the authors' public code does")

    def embedding_size(self) -> int:
        return 0 if self.no_hier_embed else self.hier_embed_size


class HierAccumEncoder(SyntaxTransformerEncoder):
    side_inputs = ("src_parents",)
    self_attention_class = HierarchicalSelfAttention

    def __init__(self, cfg, options: HierAccumOptions, dictionary, embed_tokens):
        super().__init__(cfg, options, dictionary, embed_tokens)
        # fairseq would number every position; here only leaves get positions (see forward)
        self.leaf_positions, self.embed_positions = self.embed_positions, None

    def build_self_attention(self, layer_index, embed_dim, num_heads, dropout):
        return self.self_attention_class(embed_dim, num_heads, dropout, self.options.embedding_size())

    def build_structure(self, src_tokens, side_inputs):
        structure = accumulation_structure(
            side_inputs["src_parents"],
            self.options.embedding_size(),
            self.options.cumulative_average,
            subtree_mask=not self.options.no_subtree_mask,
            collated=True,  # src_parents is made by collate_parents, which checked it on the host
            sizes=side_inputs.get("src_parents_sizes"),  # computed there too (none where a caller made the batch)
        )
        # the cross-attention's padding mask as an additive B x 1 x 1 x S mask, once per batch
        structure["padding_bias"] = additive_mask(src_tokens.ne(self.padding_idx)[:, None, None, :])
        return structure

    def input_embeddings(self, src_tokens, side_inputs, token_embeddings):
        """Token embeddings plus positions of the leaves only (paper footnote 4); ``encoder_embedding`` then
        includes them."""
        if self.leaf_positions is None:
            return token_embeddings
        if token_embeddings is None:
            token_embeddings = self.embed_tokens(src_tokens)
        # the positional module numbers non-padding tokens, so nodes are passed as padding (zero embedding);
        # forward_embedding multiplies token embeddings by embed_scale, hence the division
        leaves_only = src_tokens.masked_fill(~st.is_leaf(side_inputs["src_parents"], collated=True), self.padding_idx)
        return token_embeddings + self.leaf_positions(leaves_only) / self.embed_scale

    def extra_outputs(self, structure, side_inputs, carries):
        return {"source_structure": [structure]}  # for the decoder's cross-attention

    def reorder_encoder_out(self, encoder_out, new_order):
        reordered = super().reorder_encoder_out(encoder_out, new_order)
        reordered["source_structure"] = [reorder_structure(s, new_order) for s in encoder_out["source_structure"]]
        return reordered


class HierAccumDecoderLayer(TransformerDecoderLayerBase):
    """fairseq's decoder layer with :class:`HierarchicalCrossAttention` as ``encoder_attn``."""

    cross_attention_class = HierarchicalCrossAttention

    def __init__(self, cfg, options: HierAccumOptions, no_encoder_attn: bool = False):
        self.options = options  # read by build_encoder_attention, which fairseq's __init__ calls
        super().__init__(cfg, no_encoder_attn)

    def build_encoder_attention(self, embed_dim, cfg):
        if cfg.encoder.embed_dim != embed_dim:
            raise ValueError(
                f"transformer_hier_accum needs equal encoder and decoder dimensions, got {cfg.encoder.embed_dim} "
                f"and {embed_dim}"
            )
        if cfg.cross_self_attention:
            raise ValueError("transformer_hier_accum does not support --cross-self-attention")
        return self.cross_attention_class(
            embed_dim, cfg.decoder.attention_heads, cfg.attention_dropout, self.options.embedding_size()
        )


class HierAccumDecoder(TransformerDecoderBase):
    layer_class = HierAccumDecoderLayer

    def __init__(self, cfg, options: HierAccumOptions, dictionary, embed_tokens, no_encoder_attn=False):
        self.options = options  # read by build_decoder_layer, which fairseq's __init__ calls
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn)

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        return wrapped_layer(self.layer_class(cfg, self.options, no_encoder_attn), cfg)

    def extract_features(self, prev_output_tokens, encoder_out, incremental_state=None, **kwargs):
        if encoder_out is not None:
            # fairseq hands encoder_out["encoder_padding_mask"][0] to every layer's encoder_attn as key_padding_mask
            source = SourceTree(encoder_out["encoder_padding_mask"][0], encoder_out["source_structure"][0])
            encoder_out = {**encoder_out, "encoder_padding_mask": [source]}
        return super().extract_features(prev_output_tokens, encoder_out, incremental_state, **kwargs)


@register_model("transformer_hier_accum")
class HierAccumTransformerModel(SyntaxTransformerModel):
    encoder_class = HierAccumEncoder
    decoder_class = HierAccumDecoder
    options_class = HierAccumOptions

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        return cls.decoder_class(
            cfg, cls.options_from_args(args), tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention
        )


register_architectures("transformer_hier_accum")


#: ``transformer_hier_accum_classifier`` (+ ``_tiny``: 2 layers, d 64, 4 heads) for ``--task tree_classification``
HierAccumClassifier = register_classifier("transformer_hier_accum_classifier", HierAccumTransformerModel)
