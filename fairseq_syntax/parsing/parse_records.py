"""What made a parse file, written beside it: its models, input tokens and, for dependencies, the label scheme
(:func:`labels_of`, which the LDD side data reads).

``fairseq-syntax-parse`` writes, with each whole ``OUTPUT``, ``OUTPUT.parse.json`` (``train.arcs.jsonl.gz`` ->
``train.arcs.jsonl.parse.json``)::

    {"kind": "dependency", "backend": "biaffine", "lang": "en", "raw": false,
     "models": {"dependency": {"model": "biaffine-dep-ud-ewt.pt", "sha256": "0123456789abcdef"}},
     "labels": "universal", "input": {"file": "train.en", "sha256": "..."}, "outputs": ["train.arcs.jsonl.gz", ...]}

Models are named as :mod:`fairseq_syntax.parsing.provenance` names them: a file by its name and the first 16 hex
digits of its SHA-256, a folder by the digest of its files, a downloaded model by its name. ``labels``: the label
scheme (:mod:`fairseq_syntax.parsing.labels`)."""
from __future__ import annotations

import hashlib
import os

from fairseq_syntax.parsing.provenance import DIGEST_LENGTH, file_sha256, model_digest
from fairseq_syntax.parsing.text import read_json, write_json

RECORD_SUFFIX = ".parse.json"


def record_path(output: str) -> str:
    """``train.tree`` -> ``train.tree.parse.json``; ``train.arcs.jsonl.gz`` -> ``train.arcs.jsonl.parse.json``."""
    return output.removesuffix(".gz") + RECORD_SUFFIX


def folder_digest(folder: str) -> str:
    """The digest of a model folder: of each file's path inside it and its bytes, in sorted order."""
    digest = hashlib.sha256()
    for root, directories, files in os.walk(folder):
        directories.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, folder).encode() + b"\0" + file_sha256(path).encode())
    return digest.hexdigest()[:DIGEST_LENGTH]


def model_entry(model: str) -> dict:
    """How a record names a model (module docstring)."""
    if os.path.isfile(model):
        return {"model": os.path.basename(model), "sha256": model_digest(model)}
    if os.path.isdir(model):
        return {"model": os.path.basename(os.path.normpath(model)), "sha256": folder_digest(model)}
    return {"model": model}


def write_record(outputs: list[str], kind: str, backend: str, models: dict[str, str | None], labels: str | None,
                 input_path: str, lang: str, raw: bool) -> str:
    """Writes ``record_path(outputs[0])`` (whole, then renamed); returns its path."""
    record = {"kind": kind, "backend": backend, "lang": lang, "raw": raw,
              "models": {role: model_entry(model) for role, model in models.items() if model is not None},
              "input": {"file": os.path.basename(input_path), "sha256": file_sha256(input_path)},
              "outputs": [os.path.basename(output) for output in outputs]}
    if kind == "dependency":
        record["labels"] = labels
    path = record_path(outputs[0])
    write_json(path, record)
    return path


def read_record(output: str) -> dict | None:
    path = record_path(output)
    return read_json(path) if os.path.exists(path) else None


def labels_of(arcs: str) -> str:
    """The label scheme of an arcs file: its record's, else the one its labels tell."""
    from fairseq_syntax.parsing.labels import label_scheme_of_arcs

    record = read_record(arcs)
    if record is not None and record.get("labels"):
        return record["labels"]
    return label_scheme_of_arcs(arcs)

