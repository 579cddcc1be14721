"""Parent-scaled self-attention (PASCAL): Bugliarello & Okazaki (2020), "Enhancing Machine Translation with
Dependency-Aware Self-Attention", ACL, section 3."""
from fairseq_syntax.core.method import Method, System

METHOD = Method(
    name="pascal",
    title="Parent-scaled self-attention (PASCAL)",
    citation="Bugliarello & Okazaki 2020",
    systems=(System("pascal", "transformer_pascal", "sequence", side_inputs=("src_ldd",)),),
    modules=("model",),
    notes="first-layer heads whose scores are scaled by a Gaussian centred on each token's dependency parent (the "
          "parser's 1-best tree, from the LDD side data); --pascal-heads, --pascal-sigma, --pascal-parent-ignoring",
)
