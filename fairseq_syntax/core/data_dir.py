"""The data directory format: what ``fairseq-syntax-preprocess`` writes beside fairseq's binarized files.

``syntax.json`` records how the source side was made: ``{"form": "preorder", "preterminals": "split", ...}`` (the
input form, :mod:`fairseq_syntax.core.input_forms`), plus one entry per side input whose preprocessing has settings
a later step must reuse (e.g. ``"ldd"``: the label table and floor of the dependency side data). Side data files are
``{split}.{src}-{tgt}.{src}.{suffix}.{bin,idx}`` (:mod:`fairseq_syntax.core.side_inputs`).
"""
import json
import os

META_FILE = "syntax.json"


def first_data_path(data: str) -> str:
    """The first of fairseq's ``--data`` paths (``a:b:c``): the one whose ``syntax.json`` is read."""
    return data.split(os.pathsep)[0]


def read_meta(data_path: str) -> dict:
    """``syntax.json`` of a data directory; a directory without one holds the ``sequence`` form."""
    path = os.path.join(data_path, META_FILE)
    if not os.path.exists(path):
        return {"form": "sequence", "preterminals": "keep"}
    with open(path) as f:
        return json.load(f)
