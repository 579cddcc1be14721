"""``transformer_ldd``: Pu & Sima'an (2022), labeled dependency distributions in the first encoder layer (section
3.2).

The first encoder self-attention has one head per label group (16, whatever ``--encoder-attention-heads`` says):
``softmax((Q K^T / sqrt(d)) * LDD_h)`` (:mod:`fairseq_syntax.methods.ldd.attention`), ``LDD_h`` as
``--syntax-variant`` (Table 1) makes it; everything else is fairseq's ``transformer``.

Side input: ``src_ldd`` (``B x 34 x S x S`` and ``B x T``, :mod:`fairseq_syntax.methods.ldd.side_input`);
structure: ``ldd`` ``B x 16 x T x T``."""
from dataclasses import dataclass

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import register_model

from fairseq_syntax.core.attention import StructuredSelfAttention
from fairseq_syntax.core.command_help import option
from fairseq_syntax.core.encoder import SyntaxTransformerEncoder
from fairseq_syntax.core.model import SyntaxTransformerModel, register_architectures
from fairseq_syntax.methods.ldd import distributions as dependency
from fairseq_syntax.methods.ldd import side_input as ldd_side_input  # noqa: F401  (registers the side input src_ldd)
from fairseq_syntax.methods.ldd.attention import (
    DependencyAttentionOnly,
    LabeledDependencyAttention,
)

LDD_LAYER = 0  # the paper infuses the distributions into the first encoder layer only


@dataclass
class LDDOptions(FairseqDataclass):
    syntax_variant: ChoiceEnum(dependency.SYNTAX_VARIANTS) = option(
        "ldd", "Table 1 of Pu & Sima'an: ldd (labeled distributions), udd (labels summed), ldp / udp (the parser's "
        "1-best labeled / unlabeled tree), uldd / uudd (uniform), lda (attention weights softmax(LDD): LDD in place "
        "of the scores S of eq. 3), lda_weights (attention weights = LDD)")
    ldd_subword_heads: ChoiceEnum(dependency.SUBWORD_HEAD_RULES) = option(
        "share", "a head word split into BPE pieces: share its probability evenly among them (each token's row sums to "
        "its word's distribution) or copy it to each piece")


class LDDEncoder(SyntaxTransformerEncoder):
    side_inputs = ("src_ldd",)

    def __init__(self, cfg, options, dictionary, embed_tokens):
        super().__init__(cfg, options, dictionary, embed_tokens)
        self.one_best_check = dependency.FirstBatchCheck()  # the 1-best variants' refusal of side data without it

    def build_self_attention(self, layer_index, embed_dim, num_heads, dropout):
        if layer_index != LDD_LAYER:
            return StructuredSelfAttention(embed_dim, num_heads, dropout=dropout)
        if embed_dim % dependency.NUM_GROUPS != 0:
            raise ValueError(
                f"--encoder-embed-dim {embed_dim} is not divisible by the {dependency.NUM_GROUPS} heads of the "
                "LDD layer (one per label group)"
            )
        if self.options.syntax_variant in ("lda", "lda_weights"):
            return DependencyAttentionOnly(embed_dim, dropout=dropout,
                                           normalise=self.options.syntax_variant == "lda")
        return LabeledDependencyAttention(embed_dim, dropout=dropout)

    def build_structure(self, src_tokens, side_inputs):
        word_pairs, token_words = side_inputs["src_ldd"]  # WordPairs (a plain tuple after a device move)
        ldd = dependency.variant_distribution(
            word_pairs,
            token_words,
            self.options.syntax_variant,
            padding_mask=src_tokens.eq(self.padding_idx),
            eos_mask=src_tokens.eq(self.dictionary.eos()),
            subword_heads=self.options.ldd_subword_heads,
            check_one_best=self.one_best_check.due(),
        )
        return {"ldd": ldd}


@register_model("transformer_ldd")
class LDDTransformerModel(SyntaxTransformerModel):
    encoder_class = LDDEncoder
    options_class = LDDOptions


register_architectures("transformer_ldd")
