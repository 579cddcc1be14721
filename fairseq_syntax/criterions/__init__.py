"""Registered criterions (fairseq's --user-dir does not import this folder: fairseq_syntax imports it)."""
from fairseq_syntax.criterions import tree_cross_entropy  # noqa: F401
