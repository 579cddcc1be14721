"""Labeled dependency distributions: Pu & Sima'an (2022), "Passing Parser Uncertainty to the Transformer: Labeled
Dependency Distributions for Neural Machine Translation", sections 3.1-3.2, Table 1 and Appendix A."""
from fairseq_syntax.core.method import Method, System
from fairseq_syntax.core.side_data import SideData
from fairseq_syntax.methods.ldd import making

LDD = ("src_ldd",)  # the side input of side_input.py, read by every system

METHOD = Method(
    name="ldd",
    title="Labeled dependency distributions",
    citation="Pu & Sima'an 2022",
    systems=(
        System("ldd", "transformer_ldd", "sequence", side_inputs=LDD),
        System("udp", "transformer_ldd", "sequence", model_args=("--syntax-variant", "udp"), ablation=True,
               controls=("random",), side_inputs=LDD),
        System("ldp", "transformer_ldd", "sequence", model_args=("--syntax-variant", "ldp"), ablation=True,
               side_inputs=LDD),
        # Table 1's LDA (the distributions replace the scores: softmax(LDD)) and the LDD-as-weights reading
        System("lda", "transformer_ldd", "sequence", model_args=("--syntax-variant", "lda"), ablation=True,
               side_inputs=LDD),
        System("lda_weights", "transformer_ldd", "sequence", model_args=("--syntax-variant", "lda_weights"),
               ablation=True, side_inputs=LDD),
    ),
    modules=("model", "side_input"),
    plot_modules=("analysis",),
    # made from the dependency parses; PASCAL and DBSA read it too
    side_data=(SideData("src_ldd", "ldd", ("arcs",), making.make, making.settings),),
    notes="the parser's arc x label probabilities in 16 label groups, one per head of the first encoder layer; "
          "--syntax-variant ldd, udd, ldp, udp, uldd, uudd, lda, lda_weights",
)
