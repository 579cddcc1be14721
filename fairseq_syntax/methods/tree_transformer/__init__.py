"""Tree Transformer: Wang, Lee & Chen (2019), "Tree Transformer: Integrating Tree Structures into Self-Attention",
sections 4-5 and 7."""
from fairseq_syntax.core.method import Method, System

METHOD = Method(
    name="tree_transformer",
    title="Tree Transformer (constituent attention)",
    citation="Wang, Lee & Chen 2019",
    systems=(
        System("constituent", "transformer_constituent", "sequence"),
        System("tree_transformer_lm", "tree_transformer_lm", "sequence", task="masked_lm"),
    ),
    modules=("model", "task"),
    plot_modules=("analysis",),
    cuda_variants=(("--constituent-diagonal", "zero"),),
    notes="trees are induced, no parser: constituent priors from neighbour links, Algorithm 1 parses with F1",
)
