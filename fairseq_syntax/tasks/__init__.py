"""Registered tasks; fairseq's --user-dir also imports every module here, under these same names."""
from fairseq_syntax.tasks import sentence_masked_lm, syntax_translation, tree_classification  # noqa: F401
