"""Registered models; fairseq's --user-dir also imports every module here, under these same names."""
from fairseq_syntax.models import (  # noqa: F401
    transformer_hier_accum,
    transformer_ldd,
    transformer_syntax_mask,
    tree_classifier,
    tree_transformer,
)
