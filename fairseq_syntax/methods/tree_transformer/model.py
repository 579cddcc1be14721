"""Tree Transformer (Wang, Lee & Chen 2019): an encoder whose every layer uses constituent attention.

* ``TreeTransformerEncoder``: :class:`~fairseq_syntax.methods.tree_transformer.attention.ConstituentAttention` in
  every layer, no side inputs (``src_tokens`` ``B x T`` -> ``encoder_out`` ``[T x B x C]``); its output also holds
  ``link_probabilities``, one ``B x (T-1)`` tensor per layer (``a^l``, eq. 8, the input of Algorithm 1).
* ``tree_transformer_lm``: masked LM (the paper's training), fairseq's ``roberta`` with this encoder. Archs
  ``tree_transformer_lm`` (L=10, d_model 512, 8 heads, FFN 2048, dropout 0.1) and ``_tiny``; otherwise
  ``roberta_prenorm``, so ``--arch roberta_prenorm`` with the same sizes is the plain baseline.
* ``transformer_constituent``: the same encoder in fairseq's ``transformer`` for translation (and ``_tiny``)."""
from dataclasses import dataclass
from typing import Dict, List, Optional

import torch
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.models import register_model
from fairseq.models.roberta.model import (
    RobertaEncoder,
    RobertaModel,
    roberta_prenorm_architecture,
)
from fairseq.models.transformer import TransformerConfig
from fairseq.utils import safe_getattr, safe_hasattr
from torch import Tensor, nn

from fairseq_syntax.core.attention import Structure
from fairseq_syntax.core.command_help import option
from fairseq_syntax.core.encoder import SyntaxTransformerEncoder
from fairseq_syntax.core.model import (
    SyntaxTransformerModel,
    encoder_sizes,
    options_from_args,
    register_architectures,
)
from fairseq_syntax.methods.tree_transformer.attention import ConstituentAttention, link_masks


@dataclass
class ConstituentOptions(FairseqDataclass):
    constituent_diagonal: ChoiceEnum(["one", "zero"]) = option(
        "one", "C_ii of the constituent prior: one (the paper, eq. 3: a word may attend to itself) or zero (the "
        "authors' code, where C_ii is about 3e-5: a word attends only to the others)")


class TreeTransformerEncoder(SyntaxTransformerEncoder):
    def build_self_attention(self, layer_index: int, embed_dim: int, num_heads: int, dropout: float) -> nn.Module:
        diagonal = 1.0 if self.options is None or self.options.constituent_diagonal == "one" else 0.0
        return ConstituentAttention(embed_dim, num_heads, dropout=dropout, diagonal=diagonal)

    def build_structure(self, src_tokens: Tensor, side_inputs: Dict[str, Tensor]) -> Structure:
        """What the padding says about links and pairs (:func:`link_masks`), once per batch for every layer."""
        batch, length = src_tokens.shape
        return {"link_masks": link_masks(src_tokens.ne(self.padding_idx), batch, length, src_tokens.device)}

    def extra_outputs(self, structure: Structure, side_inputs: Dict[str, Tensor],
                      carries: List[Optional[Tensor]]) -> Dict[str, List[Tensor]]:
        return {"link_probabilities": carries}  # each layer's attention passes its links a^l on to the next

    @torch.no_grad()
    def link_probabilities(self, src_tokens: Tensor) -> Tensor:
        """``L x B x (T-1)`` link probabilities of every layer for a batch of (padded) token ids ``B x T``, without
        gradients (call ``eval()`` first for the deterministic values)."""
        return torch.stack(self.forward(src_tokens)["link_probabilities"])


def tree_encoder(model: nn.Module) -> TreeTransformerEncoder:
    """The Tree Transformer encoder of a ``tree_transformer_lm`` or ``transformer_constituent`` model."""
    encoder = getattr(model, "encoder", None)
    encoder = getattr(encoder, "sentence_encoder", encoder)  # the roberta wrapper keeps it one level down
    if not isinstance(encoder, TreeTransformerEncoder):
        raise ValueError(
            f"{type(model).__name__} has no Tree Transformer encoder: use a checkpoint of --arch "
            "tree_transformer_lm* or transformer_constituent*"
        )
    return encoder


# --- masked language model


class TreeTransformerLMEncoder(RobertaEncoder):
    """RoBERTa's embeddings + LM head around a :class:`TreeTransformerEncoder`."""

    def build_encoder(self, args, dictionary, embed_tokens):
        return TreeTransformerEncoder(TransformerConfig.from_namespace(args),
                                      options_from_args(ConstituentOptions, args), dictionary, embed_tokens)


@register_model("tree_transformer_lm")
class TreeTransformerLMModel(RobertaModel):
    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        gen_parser_from_dataclass(parser, ConstituentOptions(), delete_default=False, with_prefix="")

    @classmethod
    def build_model(cls, args, task):
        from omegaconf import OmegaConf

        if OmegaConf.is_config(args):
            OmegaConf.set_struct(args, False)
        tree_transformer_lm_architecture(args)
        if not safe_hasattr(args, "max_positions"):
            args.max_positions = safe_getattr(args, "tokens_per_sample", task.max_positions())
        encoder = TreeTransformerLMEncoder(args, task.source_dictionary)
        if OmegaConf.is_config(args):
            OmegaConf.set_struct(args, True)
        return cls(args, encoder)


def tree_transformer_lm_architecture(args):
    encoder_sizes(args, layers=10, embed_dim=512, ffn_embed_dim=2048, heads=8)
    roberta_prenorm_architecture(args)


def tree_transformer_lm_tiny_architecture(args):
    encoder_sizes(args, layers=3, embed_dim=32, ffn_embed_dim=64, heads=2)
    tree_transformer_lm_architecture(args)


register_architectures("tree_transformer_lm", tree_transformer_lm_architecture, tree_transformer_lm_tiny_architecture)


# --- translation


@register_model("transformer_constituent")
class ConstituentTransformerModel(SyntaxTransformerModel):
    encoder_class = TreeTransformerEncoder
    options_class = ConstituentOptions


register_architectures("transformer_constituent")
