"""``transformer_pascal``: Bugliarello & Okazaki (2020), parent-scaled self-attention in the first encoder layer.

fairseq's ``transformer`` whose first encoder self-attention is :class:`.attention.ParentScaledSelfAttention`
(``--pascal-heads``, ``--pascal-sigma``, ``--pascal-parent-ignoring``; defaults: the authors' En-De setting, 2
heads, sigma 1, parent ignoring 0.4). Side input: ``src_ldd`` (its 1-best tree, :mod:`.parents`); structure:
``parent_density`` ``B x T x T``."""
from dataclasses import dataclass

from fairseq.dataclass import FairseqDataclass
from fairseq.models import register_model

from fairseq_syntax.core.attention import StructuredSelfAttention
from fairseq_syntax.core.command_help import option
from fairseq_syntax.core.encoder import SyntaxTransformerEncoder
from fairseq_syntax.core.model import SyntaxTransformerModel, register_architectures
from fairseq_syntax.methods.ldd import side_input as ldd_side_input  # noqa: F401  (registers the side input src_ldd)
from fairseq_syntax.methods.ldd.distributions import FirstBatchCheck
from fairseq_syntax.methods.pascal.attention import ParentScaledSelfAttention
from fairseq_syntax.methods.pascal.parents import parent_density, parent_positions

PASCAL_LAYER = 0  # the authors' best systems use PASCAL heads in the first encoder layer only


@dataclass
class PascalOptions(FairseqDataclass):
    pascal_heads: int = option(
        2, "heads of the first encoder layer that are parent-scaled (the last ones); the authors use 2 of 8")
    pascal_sigma: float = option(1.0, "standard deviation of the Gaussian over key positions centred on the parent")
    pascal_parent_ignoring: float = option(
        0.4, "probability that a query's row of a PASCAL head ignores its parent in training")


class PascalEncoder(SyntaxTransformerEncoder):
    side_inputs = ("src_ldd",)

    def __init__(self, cfg, options, dictionary, embed_tokens):
        super().__init__(cfg, options, dictionary, embed_tokens)
        self.one_best_check = FirstBatchCheck()  # the refusal of side data without the 1-best tree

    def build_self_attention(self, layer_index, embed_dim, num_heads, dropout):
        if layer_index != PASCAL_LAYER:
            return StructuredSelfAttention(embed_dim, num_heads, dropout=dropout)
        return ParentScaledSelfAttention(embed_dim, num_heads, self.options.pascal_heads,
                                         self.options.pascal_parent_ignoring, dropout=dropout)

    def build_structure(self, src_tokens, side_inputs):
        word_pairs, token_words = side_inputs["src_ldd"]  # WordPairs (a plain tuple after a device move)
        not_dependent = src_tokens.eq(self.padding_idx) | src_tokens.eq(self.dictionary.eos())
        positions = parent_positions(word_pairs, token_words, not_dependent, self.one_best_check.due())
        return {"parent_density": parent_density(positions, self.options.pascal_sigma)}


@register_model("transformer_pascal")
class PascalTransformerModel(SyntaxTransformerModel):
    encoder_class = PascalEncoder
    options_class = PascalOptions


register_architectures("transformer_pascal")
