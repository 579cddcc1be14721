"""Tree Transformer: Wang, Lee & Chen (2019), "Tree Transformer: Integrating Tree Structures into Self-Attention",
sections 4-5 and 7.

* :mod:`.attention`: constituent attention (neighbouring attention, hierarchical constraint, constituent prior);
* :mod:`.model`: ``tree_transformer_lm`` (masked LM, task ``sentence_masked_lm`` of :mod:`.task`) and
  ``transformer_constituent`` (the encoder in a translation model);
* :mod:`.induction`, :mod:`.induce`: Algorithm 1 and ``fairseq-syntax-induce`` (unsupervised parsing with F1,
  :mod:`.parseval`; link diagnostics, :mod:`.link_agreement`); :mod:`.masked_lm`: masked-word perplexity;
* :mod:`.analysis`: the constituent prior of every layer (Figure 5), ``fairseq-syntax-plot constituent-prior``.
"""
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
