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


#: the tasks of the plugin that read a data directory, and what their directories hold
TRANSLATION_TASK, CLASSIFICATION_TASK = "syntax_translation", "tree_classification"
CLASSIFICATION_FILES = ("labels.txt", "dict.txt")  # plus {split}.tree (fairseq_syntax.core.classification_task)
DATA_DIR_CONTENTS = {
    TRANSLATION_TASK: "made by fairseq-syntax-preprocess",
    CLASSIFICATION_TASK: f"{', '.join(CLASSIFICATION_FILES)} and {{split}}.tree",
}


def data_dir_task(data_path: str) -> str | None:
    """The task a data directory is made for: ``tree_classification`` (``labels.txt`` and ``dict.txt``),
    ``syntax_translation`` (fairseq's ``dict.LANG.txt`` of a language pair, or ``syntax.json``), or None."""
    names = os.listdir(data_path)
    if all(name in names for name in CLASSIFICATION_FILES):
        return CLASSIFICATION_TASK
    if META_FILE in names or any(name.startswith("dict.") and name.count(".") == 2 for name in names):
        return TRANSLATION_TASK
    return None


def require_data_dir_of(task: str, data_path: str) -> None:
    """Stop with one line when ``data_path`` is missing or made for the other task of the plugin."""
    if not os.path.isdir(data_path):
        raise SystemExit(f"error: {data_path}: no such data directory")
    made_for = data_dir_task(data_path)
    if made_for is not None and made_for != task:
        raise SystemExit(f"error: {data_path} is a {made_for} data directory ({DATA_DIR_CONTENTS[made_for]}), not "
                         f"one for --task {task} ({DATA_DIR_CONTENTS[task]}): give --task {made_for}, or a data "
                         "directory of the task")
