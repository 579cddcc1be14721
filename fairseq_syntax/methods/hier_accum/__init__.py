"""Hierarchical accumulation: Nguyen, Joty, Hoi & Socher (2020), "Tree-Structured Attention with Hierarchical
Accumulation", sections 4.1-4.4 and 5."""
from fairseq_syntax.core.method import Method, System

METHOD = Method(
    name="hier_accum",
    title="Hierarchical accumulation",
    citation="Nguyen et al. 2020",
    systems=(
        System("hier_accum", "transformer_hier_accum", "preorder", "split", controls=("random", "struct"),
               side_inputs=("src_parents",)),
        System("transformer_classifier", "transformer_classifier", "sequence", task="classification",
               baseline=True),
        System("hier_accum_classifier", "transformer_hier_accum_classifier", "preorder", "drop",
               task="classification", side_inputs=("src_parents",)),
    ),
    modules=("model",),
    plot_modules=("analysis",),
    cuda_variants=(("--no-hier-embed",), ("--no-subtree-mask",)),
    notes="node values accumulated from their subtrees, subtree-masked self-attention, tree-aware cross-attention "
          "(translation and SST classification)",
)
