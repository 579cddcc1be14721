"""A fairseq Transformer encoder layer whose self-attention sees the sentence's syntax.

fairseq's ``TransformerEncoderLayerBase`` (Vaswani et al. 2017, section 3.1), except that the self-attention is
any :class:`~fairseq_syntax.core.attention.StructuredSelfAttention` and receives the per-batch ``structure``.
``x`` ``T x B x C``, ``encoder_padding_mask`` ``B x T`` or None -> ``T x B x C``, weights ``B x H x T x T`` when
``need_weights``, and the attention's ``carry``."""
from typing import Callable, Optional, Tuple

from fairseq.modules.transformer_layer import TransformerEncoderLayerBase
from torch import Tensor, nn

from fairseq_syntax.core.attention import Structure

AttentionBuilder = Callable[[int, int, float], nn.Module]  # (embed_dim, num_heads, dropout) -> attention


class SyntaxEncoderLayer(TransformerEncoderLayerBase):
    def __init__(self, cfg, build_attention: AttentionBuilder):
        # fairseq's __init__ calls build_self_attention, so the builder must be in place before it runs
        self._build_attention = build_attention
        super().__init__(cfg)
        del self._build_attention

    def build_self_attention(self, embed_dim, cfg):
        return self._build_attention(embed_dim, cfg.encoder.attention_heads, cfg.attention_dropout)

    def forward(
        self,
        x: Tensor,
        encoder_padding_mask: Optional[Tensor],
        structure: Structure,
        need_weights: bool = False,
        carry: Optional[Tensor] = None,
    ) -> Tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
        residual = x
        if self.normalize_before:
            x = self.self_attn_layer_norm(x)
        x, weights, carry = self.self_attn(x, encoder_padding_mask, structure, need_weights=need_weights, carry=carry)
        x = self.residual_connection(self.dropout_module(x), residual)
        if not self.normalize_before:
            x = self.self_attn_layer_norm(x)

        residual = x
        if self.normalize_before:
            x = self.final_layer_norm(x)
        x = self.fc2(self.activation_dropout_module(self.activation_fn(self.fc1(x))))
        x = self.residual_connection(self.dropout_module(x), residual)
        if not self.normalize_before:
            x = self.final_layer_norm(x)
        return x, weights, carry
