"""``transformer_dependency_supervised``: dependency-based self-attention (Deguchi et al. 2019; LISA, Strubell et al.
2018) in one encoder layer, trained with ``label_smoothed_cross_entropy_with_dependency`` (:mod:`.criterion`).

fairseq's ``transformer`` whose encoder layer ``--dependency-layer`` (0-based, default 0 as in the authors'
config; the last layer when the encoder has fewer) has ``--dependency-heads`` (default 1) biaffine heads
(:mod:`.attention`). The encoder output carries their attention, ``dependency_attention`` ``[B x T x T]``. No side
input at test time; training reads the 1-best tree from ``src_ldd`` (``supervision_inputs``). The authors'
decoder-side supervision (target parse) is not here: this package is about source syntax."""
from dataclasses import dataclass

from fairseq.dataclass import FairseqDataclass
from fairseq.models import register_model

from fairseq_syntax.core.attention import StructuredSelfAttention
from fairseq_syntax.core.command_help import option
from fairseq_syntax.core.encoder import SyntaxTransformerEncoder
from fairseq_syntax.core.model import SyntaxTransformerModel, register_architectures
from fairseq_syntax.methods.dependency_supervision.attention import (
    DependencyBasedSelfAttention,
)
from fairseq_syntax.methods.ldd import side_input as ldd_side_input  # noqa: F401  (registers the side input src_ldd)


@dataclass
class DependencySupervisionOptions(FairseqDataclass):
    dependency_heads: int = option(
        1, "heads of the supervised layer trained to attend to each token's dependency parent")
    dependency_layer: int = option(
        0, "0-based encoder layer with those heads (the last layer when the encoder has fewer); default 0, the "
        "authors' released config")


class DependencySupervisedEncoder(SyntaxTransformerEncoder):
    side_inputs = ()  # nothing at test time
    supervision_inputs = ("src_ldd",)  # the training targets, batched where the data directory has them

    def __init__(self, cfg, options, dictionary, embed_tokens):
        self.dependency_layer = min(options.dependency_layer, cfg.encoder.layers - 1)
        super().__init__(cfg, options, dictionary, embed_tokens)

    def build_self_attention(self, layer_index, embed_dim, num_heads, dropout):
        if layer_index != self.dependency_layer:
            return StructuredSelfAttention(embed_dim, num_heads, dropout=dropout)
        return DependencyBasedSelfAttention(embed_dim, num_heads, self.options.dependency_heads, dropout=dropout)

    def extra_outputs(self, structure, side_inputs, carries):
        return {"dependency_attention": [carries[self.dependency_layer]]}  # B x T x T, for the criterion


@register_model("transformer_dependency_supervised")
class DependencySupervisedTransformerModel(SyntaxTransformerModel):
    encoder_class = DependencySupervisedEncoder
    options_class = DependencySupervisionOptions


register_architectures("transformer_dependency_supervised")
