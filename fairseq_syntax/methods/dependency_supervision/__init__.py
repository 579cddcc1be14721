"""Dependency-supervised self-attention: Deguchi, Tamura & Ninomiya (2019), "Dependency-Based Self-Attention for
Transformer NMT", RANLP (after LISA, Strubell et al. 2018)."""
from fairseq_syntax.core.method import Method, System

METHOD = Method(
    name="dependency_supervision",
    title="Dependency-supervised self-attention",
    citation="Deguchi et al. 2019",
    # the recipes' --criterion is replaced by the one that adds the dependency loss (the last --criterion wins)
    # its control (dbsa_random) learns to attend to the parents of the random projective trees UDP's control reads
    systems=(System("dbsa", "transformer_dependency_supervised", "sequence",
                    model_args=("--criterion", "label_smoothed_cross_entropy_with_dependency"), controls=("random",),
                    side_inputs=("src_ldd",)),),  # the parents its loss learns, from the LDD side data
    modules=("criterion", "model"),
    notes="one encoder head trained (criterion label_smoothed_cross_entropy_with_dependency, --dependency-weight) to "
          "attend to each token's parent; no parser at test time; --dependency-heads, --dependency-layer",
)
