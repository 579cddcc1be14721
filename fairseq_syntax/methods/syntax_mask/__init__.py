"""Syntax attention masks: McDonald & Chiang (2021), "Syntax-Based Attention Masking for Neural Machine Translation",
section 2, with their *Sequence* and *Linearized* baselines."""
from fairseq_syntax.core.method import Method, System

METHOD = Method(
    name="syntax_mask",
    title="Syntax attention masks",
    citation="McDonald & Chiang 2021",
    systems=(
        System("sequence", "transformer", "sequence", baseline=True),
        System("linearized", "transformer", "linearized", baseline=True),
        System("mask", "transformer_syntax_mask", "preorder",
               controls=("random", "struct"), side_inputs=("src_parents",)),
    ),
    modules=("model",),
    plot_modules=("analysis",),
    # on CUDA the bias is a one-hot product by default (--mask-bias auto); the gather, the CPU's way, is tested there
    # too
    cuda_variants=(("--mask-bias", "gather"),),
    notes="preorder tree without closing brackets; 9 relation masks, a learnable strength per relation and head",
)
