"""Sentence classifiers for ``--task tree_classification``: any encoder of this package, or fairseq's plain
Transformer encoder (the baseline), plus a linear classifier.

The encoder comes from an encoder-decoder model class (its ``add_args``, ``build_embedding``, ``build_encoder``)::

    register_classifier("transformer_syntax_mask_classifier", SyntaxMaskTransformerModel)

registers ``NAME`` (fairseq's base sizes) and ``NAME_tiny`` (2 layers, d = 64, 4 heads, FFN 512: Nguyen et al.
2020, section 5.2 and Appendix 7.4).

Forward: ``src_tokens`` ``B x T`` (+ side inputs) -> ``(sentence_logits B x C, token_logits B x T x C)``; the
sentence is read at its first token (``--classifier-pooling first``: the root of a right-padded preorder sequence)
or as the mean (``mean``); every token is classified too, for the node labels."""
from typing import Tuple, Type

from fairseq.models import FairseqEncoderModel, register_model
from fairseq.models.transformer.transformer_legacy import (
    TransformerModel,
    base_architecture,
)
from torch import Tensor, nn

from fairseq_syntax.core.model import encoder_sizes, register_architectures

POOLINGS = ("first", "mean")


class TreeClassifierModel(FairseqEncoderModel):
    encoder_model: Type[TransformerModel] = TransformerModel

    def __init__(self, encoder, embed_dim: int, num_classes: int, pooling: str, dropout: float):
        super().__init__(encoder)
        if pooling not in POOLINGS:
            raise ValueError(f"--classifier-pooling must be one of {POOLINGS}, got {pooling!r}")
        self.pooling = pooling
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(embed_dim, num_classes)

    @classmethod
    def add_args(cls, parser):
        cls.encoder_model.add_args(parser)
        parser.add_argument("--classifier-pooling", choices=POOLINGS, default="first",
                            help="sentence state: the first token (the root node of a preorder input) or the mean")
        parser.add_argument("--classifier-dropout", type=float, default=0.0, help="dropout before the classifier")

    @classmethod
    def build_model(cls, args, task):
        dictionary = task.source_dictionary
        embed_tokens = cls.encoder_model.build_embedding(
            args, dictionary, args.encoder_embed_dim, getattr(args, "encoder_embed_path", None)
        )
        encoder = cls.encoder_model.build_encoder(args, dictionary, embed_tokens)
        return cls(encoder, args.encoder_embed_dim, len(task.label_names), args.classifier_pooling,
                   args.classifier_dropout)

    @property
    def side_inputs(self) -> tuple:
        return getattr(self.encoder, "side_inputs", ())

    def forward(self, src_tokens: Tensor, src_lengths: Tensor, **side_inputs: Tensor) -> Tuple[Tensor, Tensor]:
        encoder_out = self.encoder(src_tokens, src_lengths=src_lengths, **side_inputs)
        states = self.dropout(encoder_out["encoder_out"][0].transpose(0, 1))  # B x T x C
        if self.pooling == "first":
            sentence = states[:, 0]
        else:
            keep = (~encoder_out["encoder_padding_mask"][0]).unsqueeze(-1).type_as(states)
            sentence = (states * keep).sum(1) / keep.sum(1)
        return self.classifier(sentence), self.classifier(states)

    def max_positions(self):
        return self.encoder.max_positions()


def tiny_classifier_architecture(args):
    encoder_sizes(args, layers=2, embed_dim=64, ffn_embed_dim=512, heads=4)
    base_architecture(args)


def register_classifier(name: str, encoder_model: Type[TransformerModel]) -> Type[TreeClassifierModel]:
    """Register ``name`` (a classifier over ``encoder_model``'s encoder) with architectures ``name`` and
    ``name_tiny``; returns the model class."""
    classifier = type(f"{encoder_model.__name__}Classifier", (TreeClassifierModel,), {"encoder_model": encoder_model})
    register_model(name)(classifier)
    register_architectures(name, base_architecture, tiny_classifier_architecture)
    return classifier


#: the baseline: fairseq's Transformer encoder on any input form
TransformerClassifier = register_classifier("transformer_classifier", TransformerModel)
