"""Registered models; fairseq's --user-dir also imports every module here, under these same names."""
from fairseq_syntax.models import transformer_ldd, transformer_syntax_mask, tree_transformer  # noqa: F401
