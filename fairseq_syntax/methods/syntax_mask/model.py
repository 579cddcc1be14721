"""``transformer_syntax_mask``: McDonald & Chiang (2021), syntax-based attention masking (section 2).

The source is the preorder linearisation of its constituency tree (no closing brackets, BPE on the leaves); every
chosen encoder layer adds ``-exp(s[h, rel_ij])`` to its attention scores, ``rel_ij`` the tree relation of query
``i`` to key ``j`` and ``s`` a learnable ``H x 9`` strength table initialised to zero, so at step 0 the model is
exactly fairseq's ``transformer`` on the same tokens.

Side input: ``src_parents`` ``B x T`` (see :mod:`fairseq_syntax.core.structure`); structure: ``relations``
``B x T x T``.
"""
from dataclasses import dataclass

import torch
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import register_model
from torch import nn

from fairseq_syntax.core.attention import StructuredSelfAttention
from fairseq_syntax.core.command_help import option
from fairseq_syntax.core.encoder import SyntaxTransformerEncoder
from fairseq_syntax.core.model import SyntaxTransformerModel, register_architectures
from fairseq_syntax.methods.syntax_mask.attention import RelationMaskAttention
from fairseq_syntax.methods.syntax_mask.relations import (
    NUM_RELATIONS,
    RELATION_NAMES,
    relation_ids,
)


@dataclass
class SyntaxMaskOptions(FairseqDataclass):
    mask_layers: str = option("all", "encoder layers (0-based, comma-separated) that get masks, or 'all'")
    mask_relations: str = option("all", "relations with a learnable strength, comma-separated from "
                                 + ",".join(RELATION_NAMES) + ", or 'all'; the others keep strength 0")
    share_mask_strengths: bool = option(False, "one strength table shared by all masked layers")
    freeze_mask_strengths: bool = option(False, "keep all strengths at 0 (the plain transformer on preorder input)")
    mask_bias: ChoiceEnum(["auto", "gather", "one_hot"]) = option(
        "auto", "how the bias -exp(s[h, rel_ij]) is computed: a table lookup per pair, or one-hot relations times the "
        "table (the same values; see fairseq_syntax.methods.syntax_mask.attention); auto: one_hot on CUDA, gather "
        "elsewhere")


def uses_one_hot(mask_bias: str, device: torch.device) -> bool:
    """Whether ``--mask-bias`` computes the bias as a one-hot product on ``device``: ``auto`` does on CUDA (the
    gather's backward took 95% of a step at 64 words on an H100, ``bench/cuda/README.md``), not elsewhere."""
    return mask_bias == "one_hot" or (mask_bias == "auto" and device.type == "cuda")


def parse_layers(spec: str, num_layers: int) -> list:
    if spec == "all":
        return list(range(num_layers))
    layers = [int(x) for x in spec.split(",") if x.strip()]
    bad = [x for x in layers if not 0 <= x < num_layers]
    if bad:
        raise ValueError(f"--mask-layers {spec}: layers {bad} do not exist (the encoder has {num_layers})")
    return layers


def parse_relations(spec: str) -> list:
    if spec == "all":
        return list(range(NUM_RELATIONS))
    names = [x.strip() for x in spec.split(",") if x.strip()]
    unknown = [n for n in names if n not in RELATION_NAMES]
    if unknown:
        raise ValueError(f"--mask-relations: unknown relations {unknown}; choose from {RELATION_NAMES}")
    return [RELATION_NAMES.index(n) for n in names]


class SyntaxMaskEncoder(SyntaxTransformerEncoder):
    side_inputs = ("src_parents",)

    def __init__(self, cfg, options: SyntaxMaskOptions, dictionary, embed_tokens):
        self.masked_layers = parse_layers(options.mask_layers, cfg.encoder.layers)
        self.relations = parse_relations(options.mask_relations)
        super().__init__(cfg, options, dictionary, embed_tokens)

    def build_self_attention(self, layer_index, embed_dim, num_heads, dropout):
        if layer_index not in self.masked_layers:
            return StructuredSelfAttention(embed_dim, num_heads, dropout=dropout)
        return RelationMaskAttention(
            embed_dim, num_heads, self._strengths(num_heads), relations=self.relations, dropout=dropout
        )

    def _strengths(self, num_heads: int) -> nn.Parameter:
        if self.options.share_mask_strengths and getattr(self, "_shared_strengths", None) is not None:
            return self._shared_strengths
        strengths = nn.Parameter(
            torch.zeros(num_heads, NUM_RELATIONS), requires_grad=not self.options.freeze_mask_strengths
        )
        if self.options.share_mask_strengths:
            self._shared_strengths = strengths
        return strengths

    def build_structure(self, src_tokens, side_inputs):
        # src_parents is made by collate_parents (the side input's collater), which checked it on the host
        relations = relation_ids(side_inputs["src_parents"], collated=True)
        if uses_one_hot(self.options.mask_bias, relations.device):  # once per batch, shared by the masked layers
            # a comparison, not F.one_hot, which on a CPU reads the ids' minimum and maximum back to check them
            one_hot = relations.unsqueeze(-1) == torch.arange(NUM_RELATIONS + 1, device=relations.device)
            return {"relations": relations, "relation_one_hot": one_hot}
        return {"relations": relations}

    def mask_strengths(self) -> torch.Tensor:
        """``L x H x 9`` strengths of the masked layers, in layer order (for analysis and plots)."""
        return torch.stack([self.layers[i].self_attn.strengths.detach() for i in self.masked_layers])


@register_model("transformer_syntax_mask")
class SyntaxMaskTransformerModel(SyntaxTransformerModel):
    encoder_class = SyntaxMaskEncoder
    options_class = SyntaxMaskOptions


register_architectures("transformer_syntax_mask")
