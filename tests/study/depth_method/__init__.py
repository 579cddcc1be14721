"""A method added from outside the package, as docs/adding-a-method.md shows: each source token's depth in the
parser's 1-best dependency tree (the root word 1, its dependents 2, ...), embedded and added to the token's
embedding. tests/study/test_new_method.py installs this folder as a package with an entry point and runs a study on it.

* :mod:`.making`: how ``src_depth`` is made from a split's dependency parses and BPE (the study calls it);
* :mod:`.side_input`: ``src_depth`` on disk and in a batch;
* :mod:`.model`: ``transformer_depth`` (+ ``_tiny``).

This file imports no model (nor torch): the study's commands read the description alone.
"""
from fairseq_syntax.core.method import Method, System
from fairseq_syntax.core.side_data import SideData

from . import making

METHOD = Method(
    name="depth",
    title="Dependency depth embeddings",
    citation="a test's example",
    systems=(System("depth", "transformer_depth", "sequence", controls=("random",), side_inputs=("src_depth",)),),
    modules=("model",),
    side_data=(SideData("src_depth", "depth", ("arcs",), making.make, making.settings),),
)
