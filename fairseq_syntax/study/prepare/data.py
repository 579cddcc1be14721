"""The data directories of a study: ``data-bin/NAME`` for every directory a run reads.

Each is binarized by ``fairseq-syntax-preprocess --form`` from the BPE and the parses (a control directory from its
control's structures, with its real-parse directory's dictionary), with the side data its runs read that does not
come with the form (made by its method's :class:`~fairseq_syntax.core.side_data.SideData`), and ``parsers.json``. The
``sequence`` form is made from placeholder trees (each word under ``XX``), so its tokens, dictionaries and
fingerprint equal those of a directory made from the parses. A real-parse directory gains side data a newly added
system reads, every file it had kept."""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from fairseq_syntax.core.side_data import SideData, SideDataJob, SplitFiles
from fairseq_syntax.study.prepare.engine import PrepareError, Step, line_count
from fairseq_syntax.study.prepare.needs import PARSE_FILES, SPLITS, TREES, DataDirectory, registered_side_data
from fairseq_syntax.study.prepare.parses import parser_recipe, write_parsers
from fairseq_syntax.study.prepare.preparation import Preparation
from fairseq_syntax.study.processes import error_line, quiet, run_logged

#: the tree forms' POS-node placeholder (crf-con's): the sequence form's stand-in trees carry it
PLACEHOLDER_TAG = "XX"


def placeholder_trees(tokens: Path, out: Path) -> None:
    """One flat tree a line, each word under an ``XX`` node: the sequence form's stand-in for the parses."""
    with open(tokens, encoding="utf-8") as source, open(out, "w", encoding="utf-8") as trees:
        for line in source:
            trees.write("(S " + " ".join(f"({PLACEHOLDER_TAG} {word})" for word in line.split()) + ")\n")


def structure_file(directory: DataDirectory, split: str, kind: str) -> str:
    """A split's parses of ``kind`` a data directory is made from (path under WORK): the control's structures
    for a control directory, else the parses."""
    folder = f"bpe/{directory.control_name}" if directory.control else "tok"
    return f"{folder}/{split}.{PARSE_FILES[kind]}"


def structure_inputs(prep: Preparation, directory: DataDirectory) -> dict[str, str]:
    """The digests of the parses (or control structures) a data directory is made from."""
    inputs = {}
    for split in SPLITS:
        for kind in directory.reads:
            path = structure_file(directory, split, kind)
            key = f"controls:{directory.control_name}" if directory.control else prep.parses_record(kind)
            inputs[f"input {path}"] = prep.input_digest(key, path)
    return inputs


def side_data_settings(prep: Preparation, side: SideData) -> dict:
    """The settings a side data is made with (:attr:`~fairseq_syntax.core.side_data.SideData.settings`, from the
    training split's parses), asked once."""
    if side.input not in prep.settings_made:
        parses = {kind: str(prep.work / f"tok/train.{PARSE_FILES[kind]}") for kind in side.reads}
        try:
            prep.settings_made[side.input] = dict(side.settings(parses))
        except ValueError as error:
            raise PrepareError(f"{prep.config.path}: side input {side.input}: {error}") from None
    return prep.settings_made[side.input]


def data_step(prep: Preparation, directory: DataDirectory) -> None:
    name, src, tgt = f"data-bin/{directory.name}", prep.src, prep.tgt
    # every side data a method makes, by its suffix: whether it is made here, and its settings where it is
    made_here = {side.suffix: side in directory.side_data for side in registered_side_data().values()}
    recipe = {"form": directory.form, "preterminals": directory.preterminals, **made_here,
              **{f"{side.suffix}_{key}": value for side in directory.side_data
                 for key, value in side_data_settings(prep, side).items()},
              "model.max_source_positions": prep.config.model.max_source_positions,
              "trees": "placeholder" if directory.form == "sequence" else "parses",
              **parser_recipe(prep, directory),
              **{f"input bpe/{out}": prep.input_digest("bpe", f"bpe/{out}")
                 for out in ["codes", f"vocab.{src}"] + [f"{split}.{lang}" for split in SPLITS for lang in (src, tgt)]},
              **structure_inputs(prep, directory)}
    if directory.control:
        base = f"data-bin/{directory.base}"
        recipe.update({"control": directory.control, "control_seed": directory.seed,
                       f"input {base}": prep.input_digest(base, base)})

    def upgrade(made: dict, differences: list[str]) -> bool:
        """A real-parse directory gets the side data its runs now read but it lacks, with its settings and parses;
        every file it had stays as it was (checked before the rename)."""
        added = [side for side in directory.side_data if not made.get(side.suffix)]
        allowed = {"parsers", "parser"} | {key for side in added for key in recipe
                                           if key == side.suffix or key.startswith(f"{side.suffix}_")
                                           or any(key.endswith(f".{PARSE_FILES[kind]}") for kind in side.reads)}
        return (bool(added) and not directory.control
                and {k for k in set(made) | set(recipe) if made.get(k) != recipe.get(k)} <= allowed)

    def build(staging: Path) -> str:
        return build_data_directory(prep, directory, staging / "data-bin" / directory.name, staging / "scratch")

    prep.run(Step(name, recipe, [name], build, upgrade=upgrade, absent=dict.fromkeys(made_here, False)))


def build_data_directory(prep: Preparation, directory: DataDirectory, destination: Path, scratch: Path) -> str:
    src, tgt, parses = prep.src, prep.tgt, prep.config.parses
    scratch.mkdir(parents=True)
    destination.parent.mkdir(parents=True)
    prefixes = []
    for split in SPLITS:
        for lang in (src, tgt):
            (scratch / f"{split}.{lang}").symlink_to(prep.work / f"bpe/{split}.{lang}")
        if directory.form == "sequence":
            placeholder_trees(prep.work / f"tok/{split}.{src}", scratch / f"{split}.{TREES}")
        else:
            (scratch / f"{split}.{TREES}").symlink_to(prep.work / structure_file(directory, split, "trees"))
        prefixes += [f"--{split}pref", str(scratch / split)]
    arguments = ["--source-lang", src, "--target-lang", tgt, *prefixes, "--trees-suffix", TREES,
                 "--form", directory.form, "--preterminals", directory.preterminals, "--max-source-positions",
                 str(prep.config.model.max_source_positions), "--destdir", str(destination),
                 "--joined-dictionary", "--bpe-codes", str(prep.work / "bpe/codes"), "--bpe-vocabulary",
                 str(prep.work / f"bpe/vocab.{src}"), "--bpe-vocabulary-threshold", "1"]
    if directory.form != "sequence" and not parses.archive:
        arguments += ["--parser-backend", parses.constituency_backend, "--parser-model",
                      str(prep.model_path(parses.constituency) or parses.constituency)]
        if parses.tagger:
            arguments += ["--parser-tagger", str(prep.model_path(parses.tagger))]
    if directory.control:
        dictionary = prep.work / "data-bin" / directory.base / f"dict.{src}.txt"
        if directory.form != "sequence":
            from fairseq_syntax.parsing.controls import control_dictionary

            control_dictionary(str(dictionary), str(scratch / f"dict.{directory.form}.txt"))
            dictionary = scratch / f"dict.{directory.form}.txt"
        arguments += ["--srcdict", str(dictionary)]
    # fairseq-syntax-preprocess is a command of the layer above this one: run as the recipes run it
    log = scratch / "preprocess.log"
    failed = run_logged([sys.executable, "-m", "fairseq_syntax.cli.preprocess", *arguments], log, prep.held)
    if failed:
        raise PrepareError(f"fairseq-syntax-preprocess ({destination.name}): {failed} (the whole log: {log})")
    for side in directory.side_data:
        make_side_data(prep, side, directory, destination, scratch)
    write_parsers(prep, directory, destination)
    if directory.control:
        from fairseq_syntax.parsing.controls import record_control

        record_control(str(destination), directory.control, directory.seed)
    meta = json.loads((destination / "syntax.json").read_text(encoding="utf-8"))
    pairs = " / ".join(f"{split} {line_count(scratch / f'{split}.{src}')}" for split in SPLITS)
    skipped = sum(sum(entry["skipped"].values()) for entry in meta.get("splits", {}).values())
    side = list(meta.get("side_data", {}))
    return (f"{directory.form} form (--preterminals {directory.preterminals}), pairs {pairs}, {skipped} skipped"
            + (f", side data {', '.join(side)}" if side else "")
            + (f", control {directory.control} seed {directory.seed}" if directory.control else ""))


def make_side_data(prep: Preparation, side: SideData, directory: DataDirectory, destination: Path,
                   scratch: Path) -> None:
    """One side data made into ``destination`` by its method's maker from each split's BPE, words and parses (or
    control structures); output to a log in ``scratch``, a failure stops the preparation in one line."""
    work, src, tgt = prep.work, prep.src, prep.tgt
    splits = tuple(SplitFiles(split, str(work / f"bpe/{split}.{src}"), str(work / f"bpe/{split}.{tgt}"),
                              str(work / f"tok/{split}.{src}"),
                              {kind: str(work / structure_file(directory, split, kind)) for kind in side.reads})
                   for split in SPLITS)
    folder = scratch / side.suffix
    folder.mkdir()
    job = SideDataJob(str(destination), src, tgt, splits, side_data_settings(prep, side), str(folder))
    call(side.make, job, f"side input {side.input} ({destination.name})", scratch / f"side-data.{side.suffix}.log")


def call(function: Callable, argument, what: str, log: Path) -> None:
    """``function(argument)`` in this process (a side data's maker), its console output into ``log``; its exit with
    an error, or a ValueError, becomes one line."""
    try:
        with quiet(log):
            function(argument)
    except ValueError as error:
        raise PrepareError(f"{what}: {str(error).splitlines()[0]}") from None
    except SystemExit as error:
        if error.code not in (None, 0):
            message = error.code if isinstance(error.code, str) else error_line(log)
            raise PrepareError(f"{what}: {str(message).removeprefix('error: ').splitlines()[0]}") from None
