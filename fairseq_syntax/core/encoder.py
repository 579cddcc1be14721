"""The encoder every syntax model shares: fairseq's Transformer encoder (Vaswani et al. 2017, section 3.1) with
syntax-aware self-attention.

Everything but the attention is fairseq's ``TransformerEncoderBase``; a method chooses each layer's attention
module (:meth:`build_self_attention`) and builds the per-batch ``structure`` they read from the side inputs
(:meth:`build_structure`, e.g. ``src_parents`` ``B x T`` -> ``relations`` ``B x T x T``).

Shapes: ``src_tokens`` ``B x T`` (+ ``side_inputs``) -> ``encoder_out`` ``[T x B x C]``, ``encoder_padding_mask``
``[B x T]``, ``encoder_embedding`` ``[B x T x C]``, with ``return_attention`` ``encoder_attention``
(``B x H x T x T`` per layer), plus :meth:`extra_outputs`."""
from typing import Dict, List, Optional

import torch
from fairseq.distributed import fsdp_wrap
from fairseq.models.transformer import TransformerEncoderBase
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from torch import Tensor, nn

from fairseq_syntax.core.attention import Structure, StructuredSelfAttention
from fairseq_syntax.core.encoder_layer import SyntaxEncoderLayer


def wrapped_layer(layer: nn.Module, cfg) -> nn.Module:
    """``layer`` wrapped as fairseq's Transformer wraps each of its layers: --checkpoint-activations, then FSDP."""
    if cfg.checkpoint_activations:
        layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
    return fsdp_wrap(layer, min_num_params=0 if cfg.checkpoint_activations else cfg.min_params_to_wrap)


class SyntaxTransformerEncoder(TransformerEncoderBase):
    """Subclasses override :meth:`build_self_attention` and :meth:`build_structure`.

    ``side_inputs`` names the ``net_input`` entries (beyond tokens and lengths) the encoder reads; the task collates
    exactly those.
    """

    side_inputs: tuple = ()
    #: side data only a training loss reads (the task batches it where the data directory has it)
    supervision_inputs: tuple = ()

    def __init__(self, cfg, options, dictionary, embed_tokens):
        self.options = options  # method-specific options, read while the layers are built
        self._layers_built = 0
        super().__init__(cfg, dictionary, embed_tokens)

    def build_encoder_layer(self, cfg):
        layer_index = self._layers_built
        self._layers_built += 1
        return wrapped_layer(SyntaxEncoderLayer(
            cfg, lambda dim, heads, dropout: self.build_self_attention(layer_index, dim, heads, dropout)), cfg)

    def build_self_attention(self, layer_index: int, embed_dim: int, num_heads: int, dropout: float) -> nn.Module:
        return StructuredSelfAttention(embed_dim, num_heads, dropout=dropout)

    def build_structure(self, src_tokens: Tensor, side_inputs: Dict[str, Tensor]) -> Structure:
        return {}

    def input_embeddings(
        self, src_tokens: Tensor, side_inputs: Dict[str, Tensor], token_embeddings: Optional[Tensor]
    ) -> Optional[Tensor]:
        """Token embeddings ``B x T x C`` (before fairseq's scaling and positions), or None for the plain lookup."""
        return token_embeddings

    def extra_outputs(
        self, structure: Structure, side_inputs: Dict[str, Tensor], carries: List[Optional[Tensor]]
    ) -> Dict[str, List[Tensor]]:
        """Entries added to the encoder output (e.g. for the decoder), from the batch's structure and what each
        layer's attention passed on (``carries``, one per layer); reorder them in ``reorder_encoder_out``."""
        return {}

    def forward(
        self,
        src_tokens: Tensor,
        src_lengths: Optional[Tensor] = None,
        return_all_hiddens: bool = False,
        token_embeddings: Optional[Tensor] = None,
        return_attention: bool = False,
        **side_inputs: Tensor,
    ) -> Dict[str, List[Tensor]]:
        missing = [name for name in self.side_inputs if name not in side_inputs]
        if missing:
            raise ValueError(
                f"{type(self).__name__} needs the side inputs {missing}: train and decode with "
                "--task syntax_translation on data made by fairseq-syntax-preprocess with the matching --form"
            )
        structure = self.build_structure(src_tokens, side_inputs)
        # every layer gets the padding mask (all False without padding): asking whether there is any would wait for the
        # GPU
        padding_mask = src_tokens.eq(self.padding_idx)

        token_embeddings = self.input_embeddings(src_tokens, side_inputs, token_embeddings)
        x, encoder_embedding = self.forward_embedding(src_tokens, token_embeddings)
        x = x * (1 - padding_mask.unsqueeze(-1).type_as(x))
        x = x.transpose(0, 1)  # B x T x C -> T x B x C

        encoder_states, attention, carries = [], [], []
        carry = None
        if return_all_hiddens:
            encoder_states.append(x)
        for layer in self.layers:
            x, weights, carry = layer(x, padding_mask, structure, need_weights=return_attention, carry=carry)
            carries.append(carry)
            if return_all_hiddens:
                encoder_states.append(x)
            if return_attention:
                attention.append(weights)
        if self.layer_norm is not None:
            x = self.layer_norm(x)

        out = {
            "encoder_out": [x],  # T x B x C
            "encoder_padding_mask": [padding_mask],  # B x T
            "encoder_embedding": [encoder_embedding],  # B x T x C
            "encoder_states": encoder_states,  # List[T x B x C]
            "fc_results": [],
            "src_tokens": [],
            "src_lengths": [src_tokens.ne(self.padding_idx).sum(dim=1, dtype=torch.int32).reshape(-1, 1)],
        }
        if return_attention:
            out["encoder_attention"] = attention  # List[B x H x T x T], one per layer
        out.update(self.extra_outputs(structure, side_inputs, carries))
        return out
