"""Base class of the encoder-decoder syntax models: fairseq's ``transformer`` (Vaswani et al. 2017) with a syntax
encoder.

A subclass names its encoder class and options dataclass; the rest is fairseq's ``TransformerModel``. Side inputs
pass through ``forward`` (and fairseq's generation) to the encoder.

Shapes: ``src_tokens`` ``B x S``, ``prev_output_tokens`` ``B x T`` (+ side inputs) -> logits ``B x T x V`` and the
extra dict (``attn``: cross-attention ``B x T x S``, ``inner_states``)."""
import dataclasses
from typing import Optional, Type

from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.models import register_model_architecture
from fairseq.models.transformer import TransformerConfig, TransformerModel
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    tiny_architecture,
)
from fairseq.utils import safe_getattr

from fairseq_syntax.core.encoder import SyntaxTransformerEncoder


def options_from_args(options_class: Optional[type], args):
    """The ``options_class`` dataclass filled from ``args`` (its defaults where a checkpoint predates an option)."""
    if options_class is None:
        return None
    defaults = options_class()
    return options_class(
        **{f.name: getattr(args, f.name, getattr(defaults, f.name)) for f in dataclasses.fields(defaults)}
    )


class SyntaxTransformerModel(TransformerModel):
    encoder_class: Type[SyntaxTransformerEncoder] = SyntaxTransformerEncoder
    options_class: Optional[type] = None  # a dataclass; its fields become command-line options

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        if cls.options_class is not None:
            gen_parser_from_dataclass(parser, cls.options_class(), delete_default=False, with_prefix="")

    @classmethod
    def options_from_args(cls, args):
        return options_from_args(cls.options_class, args)

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        return cls.encoder_class(cfg, cls.options_from_args(args), src_dict, embed_tokens)

    @classmethod
    def build_model(cls, args, task):
        """fairseq's, refused under a task that does not give the encoder its side inputs (fairseq's own
        ``--task translation``): the model would stop at its first batch with a traceback."""
        model = super().build_model(args, task)
        reads = tuple(model.encoder.side_inputs) + tuple(getattr(model.encoder, "supervision_inputs", ()))
        if reads and not hasattr(task, "batched_side_inputs"):  # what syntax_translation batches side inputs with
            task_name = (getattr(args, "task", None) if isinstance(getattr(args, "task", None), str) else None) \
                or getattr(getattr(task, "cfg", None), "_name", None) or type(task).__name__
            raise SystemExit(f"error: --arch {getattr(args, 'arch', cls.__name__)} reads side data {list(reads)}, "
                             f"which --task {task_name} does not give it: use --task syntax_translation (and a data "
                             "directory made by fairseq-syntax-preprocess)")
        return model

    @property
    def side_inputs(self) -> tuple:
        return self.encoder.side_inputs

    def forward(
        self,
        src_tokens,
        src_lengths,
        prev_output_tokens,
        return_all_hiddens: bool = True,
        features_only: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
        **side_inputs,
    ):
        encoder_out = self.encoder(
            src_tokens, src_lengths=src_lengths, return_all_hiddens=return_all_hiddens, **side_inputs
        )
        x, extra = self.decoder(
            prev_output_tokens,
            encoder_out=encoder_out,
            features_only=features_only,
            alignment_layer=alignment_layer,
            alignment_heads=alignment_heads,
            src_lengths=src_lengths,
            return_all_hiddens=return_all_hiddens,
        )
        extra["encoder_out"] = encoder_out  # for criteria that read the encoder's extra outputs (a dependency loss)
        return x, extra


def encoder_sizes(args, layers: int, embed_dim: int, ffn_embed_dim: int, heads: int) -> None:
    """The encoder sizes of an architecture, where the command line gives none."""
    for name, size in (("layers", layers), ("embed_dim", embed_dim), ("ffn_embed_dim", ffn_embed_dim),
                       ("attention_heads", heads)):
        setattr(args, f"encoder_{name}", safe_getattr(args, f"encoder_{name}", size))


def register_architectures(model_name: str, base=base_architecture, tiny=tiny_architecture) -> None:
    """Register ``model_name`` (fairseq's base sizes) and ``model_name_tiny`` (fairseq's tiny sizes: the tests')."""
    register_model_architecture(model_name, model_name)(base)
    register_model_architecture(model_name, f"{model_name}_tiny")(tiny)
