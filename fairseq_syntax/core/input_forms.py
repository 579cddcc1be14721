"""The three source input forms every recipe compares, made from one (BPE-applied) constituency tree.

* ``sequence``: the leaves only (McDonald & Chiang's (2021) *Sequence* baseline; also the LDD input of Pu &
  Sima'an 2022);
* ``linearized``: ``(X`` children ``)`` for every interior node (their *Linearized* baseline);
* ``preorder``: the preorder node sequence without closing brackets, plus its parent array, which the syntax
  models read as the side input ``src_parents`` (their *Mask* input, section 2).

``preterminals`` (``auto``, ``keep``, ``split``, ``drop``) decides which POS nodes stay tree nodes, see
:func:`fairseq_syntax.core.trees.preorder`.
"""
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from fairseq_syntax.core import trees

FORMS = ("sequence", "linearized", "preorder")
PRETERMINALS = trees.PRETERMINAL_MODES


@dataclass
class SourceForm:
    tokens: List[str]
    parents: Optional[np.ndarray]  # int16, one per token, -1 at the root; None for forms without side data


def source_form(tree: trees.Tree, form: str, preterminals: str = "auto") -> SourceForm:
    if form == "sequence":
        return SourceForm(trees.words(tree), None)
    if form == "linearized":
        return SourceForm(trees.linearize(tree, preterminals=preterminals), None)
    if form == "preorder":
        tokens, parents = trees.preorder(tree, preterminals=preterminals)
        return SourceForm(tokens, parents)
    raise ValueError(f"unknown input form {form!r}; choose from {FORMS}")
