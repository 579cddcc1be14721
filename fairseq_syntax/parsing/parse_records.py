"""What made a parse file, written beside it, so that a parse is made again exactly when what made it changed.

``fairseq-syntax-parse`` writes, with each whole ``OUTPUT``, ``OUTPUT.parse.json`` (``train.arcs.jsonl.gz`` ->
``train.arcs.jsonl.parse.json``)::

    {"kind": "dependency", "backend": "biaffine", "lang": "en", "raw": false,
     "models": {"dependency": {"model": "biaffine-dep-ud-ewt.pt", "sha256": "0123456789abcdef"}},
     "labels": "universal", "input": {"file": "train.en", "sha256": "..."}, "outputs": ["train.arcs.jsonl.gz", ...]}

Models are named as :mod:`fairseq_syntax.parsing.provenance` names them: a file by its name and the first 16 hex
digits of its SHA-256, a folder by the digest of its files, a downloaded model by its name. ``labels``: the label
scheme (:mod:`fairseq_syntax.parsing.labels`).

    python3 -m fairseq_syntax.parsing.parse_records current OUTPUT --input TOKENS ROLE=MODEL [ROLE=MODEL ...]

exits 0 when ``OUTPUT`` is to be kept (same models and input tokens, or no record: kept, and said so), 1 with the
reason when it is missing or its models or tokens changed. File dates never count.

    python3 -m fairseq_syntax.parsing.parse_records labels ARCS

prints the label scheme of an arcs file: its record's, else the one its labels tell."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

from fairseq_syntax.parsing.provenance import DIGEST_LENGTH, file_sha256, model_digest, role_models
from fairseq_syntax.parsing.text import open_output

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


def same_model(recorded: dict, current: dict) -> bool:
    """A file or folder is the same model where its digest is; a name where the name is."""
    if "sha256" in recorded or "sha256" in current:
        return recorded.get("sha256") == current.get("sha256")
    return recorded.get("model") == current.get("model")


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
    with open_output(path) as handle:
        json.dump(record, handle, indent=1)
        handle.write("\n")
    return path


def read_record(output: str) -> dict | None:
    path = record_path(output)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None


def is_current(output: str, input_path: str, models: dict[str, str]) -> tuple[bool, str]:
    """(keep ``output``?, why), as the module docstring says."""
    if not os.path.exists(output) or os.path.getsize(output) == 0:
        return False, "not parsed yet"
    record = read_record(output)
    if record is None:
        return True, (f"no record of the model that made it ({os.path.basename(record_path(output))}): kept as "
                      "made elsewhere (delete it to parse again)")
    changes = []
    for role, model in models.items():
        current, recorded = model_entry(model), record.get("models", {}).get(role)
        if recorded is None:
            changes.append(f"no {role} model recorded, now {current['model']}")
        elif not same_model(recorded, current):
            changes.append(f"{role} model {_named(recorded)} -> {_named(current)}")
    for role in set(record.get("models", {})) - set(models):
        changes.append(f"made with a {role} model ({_named(record['models'][role])}), now none")
    if record.get("input", {}).get("sha256") != file_sha256(input_path):
        changes.append(f"its input tokens changed ({input_path})")
    if changes:
        return False, "; ".join(changes)
    return True, "made by the same models from the same tokens: kept"


def _named(entry: dict) -> str:
    return entry["model"] + (f" (sha256 {entry['sha256']})" if "sha256" in entry else "")


def labels_of(arcs: str) -> str:
    """The label scheme of an arcs file: its record's, else the one its labels tell."""
    from fairseq_syntax.parsing.labels import label_scheme_of_arcs

    record = read_record(arcs)
    if record is not None and record.get("labels"):
        return record["labels"]
    return label_scheme_of_arcs(arcs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    current = commands.add_parser("current", help="exit 0 when OUTPUT is to be kept, 1 (saying why) to parse again")
    current.add_argument("output")
    current.add_argument("--input", required=True, help="the tokens the parse is of")
    current.add_argument("models", nargs="+", metavar="ROLE=MODEL")
    labels = commands.add_parser("labels", help="print the label scheme of an arcs file (stanford or universal)")
    labels.add_argument("arcs")
    args = parser.parse_args(argv)
    try:
        if args.command == "labels":
            print(labels_of(args.arcs))
            return
        keep, why = is_current(args.output, args.input, role_models(parser, args.models))
    except ValueError as error:
        sys.exit(f"error: {error}")
    print(f"{args.output}: {why}", file=sys.stderr)
    sys.exit(0 if keep else 1)


if __name__ == "__main__":
    main()
