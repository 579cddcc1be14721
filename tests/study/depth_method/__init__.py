"""docs/adding-a-method.md's example: each source token's dependency depth embedded (``src_depth``: .making makes
it, .side_input batches it, .model uses it). Imports no torch: the study's commands read this description alone."""
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
