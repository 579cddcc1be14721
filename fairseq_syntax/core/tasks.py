"""Registers the shared tasks (``syntax_translation``, ``tree_classification``) and the criterion
``tree_cross_entropy``. Imported by the plugin after the methods (see :mod:`fairseq_syntax.plugin`)."""
from fairseq_syntax.core import (  # noqa: F401
    classification_task,
    translation_task,
    tree_cross_entropy,
)
