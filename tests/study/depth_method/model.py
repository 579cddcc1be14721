"""``transformer_depth``: fairseq's Transformer whose source embeddings add a learned embedding of each token's
dependency depth (``src_depth``, at most ``MAX_DEPTH``)."""
from fairseq.models import register_model
from torch import nn

from fairseq_syntax.core.encoder import SyntaxTransformerEncoder
from fairseq_syntax.core.model import SyntaxTransformerModel, register_architectures

from . import side_input  # noqa: F401  (registers src_depth)

MAX_DEPTH = 32


class DepthEncoder(SyntaxTransformerEncoder):
    side_inputs = ("src_depth",)

    def __init__(self, cfg, options, dictionary, embed_tokens):
        super().__init__(cfg, options, dictionary, embed_tokens)
        self.embed_depth = nn.Embedding(MAX_DEPTH + 1, embed_tokens.embedding_dim, padding_idx=0)

    def input_embeddings(self, src_tokens, side_inputs, token_embeddings):
        tokens = self.embed_tokens(src_tokens) if token_embeddings is None else token_embeddings
        return tokens + self.embed_depth(side_inputs["src_depth"].clamp(max=MAX_DEPTH))


@register_model("transformer_depth")
class DepthTransformerModel(SyntaxTransformerModel):
    encoder_class = DepthEncoder


register_architectures("transformer_depth")
