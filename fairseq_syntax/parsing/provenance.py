"""Which parsers made a corpus's source-side syntax, so that every result trained on it can say so.

A study's data preparation writes ``DATA/parsers.json`` beside each input form; a run keeps a copy with its
checkpoints and its record takes it (``fairseq-syntax-score --parsers``). Data made from control structures has a
``"control"`` entry there too.

It maps each role (``constituency``, ``tagger``, ``dependency``) to ``{"model": file name, "sha256": its first 16
hex digits}``, plus ``scores``, ``epochs`` and ``data`` of the parser run record (``preprocess/runs``) with the same
digest (:func:`describe_parsers`); a model that is no file is recorded by name."""
from __future__ import annotations

import argparse
import hashlib
import os

from fairseq_syntax.core.control_kinds import CONTROL_KEY, describe
from fairseq_syntax.parsing.text import read_json

DIGEST_LENGTH = 16


def file_sha256(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def model_digest(path: str) -> str:
    """The first 16 hex digits of the file's SHA-256: enough to tell two trainings of one model apart."""
    return file_sha256(path)[:DIGEST_LENGTH]


def read_parser_records(folder: str) -> list[dict]:
    """The parser run records (``*.json``) in ``folder``; an unreadable one is an error naming it."""
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    return [read_json(os.path.join(folder, name)) for name in names if name.endswith(".json")]


def describe_parsers(models: dict[str, str], records: list[dict]) -> dict[str, dict]:
    """ROLE -> MODEL path or name, described as the module docstring says."""
    described = {}
    for role, model in models.items():
        if not os.path.isfile(model):
            described[role] = {"model": model}
            continue
        entry = {"model": os.path.basename(model), "sha256": model_digest(model)}
        record = next((r for r in records if r.get("sha256") == entry["sha256"]), None)
        if record is not None:
            entry.update({key: record[key] for key in ("scores", "epochs", "data") if key in record})
        described[role] = entry
    return described


def summary(parsers: dict[str, dict]) -> str:
    """One line for a results table: ``constituency crf-con-ptb-sample.pt (F1 87.12, 60 epochs); ...``, ending
    in ``control random (seed 1)`` for data made from control structures (:mod:`fairseq_syntax.parsing.controls`)."""
    parts = []
    for role, entry in parsers.items():
        if role == CONTROL_KEY:
            continue
        facts = [f"{metric} {value:.2f}" for metric, value in entry.get("scores", {}).items()]
        if "epochs" in entry:
            facts.append(f"{entry['epochs']} epochs")
        if not facts and "sha256" in entry:
            facts.append(f"sha256 {entry['sha256']}, no parser record")
        parts.append(f"{role} {entry['model']}" + (f" ({', '.join(facts)})" if facts else ""))
    if CONTROL_KEY in parsers:
        parts.append(describe(parsers[CONTROL_KEY]))
    return "; ".join(parts)


def role_models(parser: argparse.ArgumentParser, arguments: list[str]) -> dict[str, str]:
    """``ROLE=MODEL`` command-line arguments as ``{role: model}``; a malformed one is the parser's error."""
    models = {}
    for argument in arguments:
        role, separator, model = argument.partition("=")
        if not separator or not role or not model:
            parser.error(f"'{argument}': give ROLE=MODEL, e.g. dependency=models/biaffine-dep-ud-ewt.pt")
        models[role] = model
    return models

