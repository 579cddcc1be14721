"""A study's data, made once: everything under ``WORK`` that the grid's runs read, only what the grid needs and never
twice.

:func:`prepare` runs these steps, each only where a run of the grid needs it (a study whose systems read the
sequence form parses no trees; with ``only``, a run of those named: ``run`` makes no data for finished runs):

1. ``subset`` (``corpus.subset`` > 0): that many training pairs drawn without replacement,
   the first of one random order of all the line numbers (:func:`subset_lines`), kept in their order, into
   ``WORK/raw/TRAIN.{SRC,TGT}.gz`` and ``WORK/raw/TRAIN.lines``;
2. ``tokens``: ``tok/SPLIT.{SRC,TGT}`` (:mod:`fairseq_syntax.parsing.normalize`: sacremoses for raw text, Moses'
   entities unescaped for ``tokenized`` text, the source's brackets PTB-escaped; ``corpus.max_train_words`` leaves
   out long training pairs, counted and listed in ``tok/train.removed.tsv``);
3. the parses of the source side: ``parses:archive`` (a parse archive, :mod:`fairseq_syntax.parsing.archive`), or
   ``parses:constituency`` and ``parses:dependency`` (the parsers the file names, run by ``fairseq-syntax-parse``;
   a study never trains a parser): ``tok/SPLIT.tree``, ``tok/SPLIT.arcs.jsonl.gz`` and ``tok/SPLIT.conllu``;
4. ``bpe``: joint BPE (``subword-nmt``, ``bpe.merges``) learned on the training tokens, applied to every split;
5. ``data-bin/NAME`` for every real-parse data directory a run reads (``fairseq-syntax-preprocess --form``), with
   the side data its runs read that does not come with the form, each made by the function its method declares
   (:class:`~fairseq_syntax.core.side_data.SideData`: the study names no method or side input), and
   ``parsers.json`` (:mod:`fairseq_syntax.parsing.provenance`). The ``sequence`` form reads no structure, so it is
   made from placeholder trees (each word under an ``XX`` node): its tokens, dictionaries and fingerprint are those
   of a directory made from the parses, and a study that adds a tree system later finds it unchanged;
6. ``controls:CONTROL-sK`` and ``data-bin/FORM.CONTROL[-sK]``: the control structures of every control kind and
   control seed the grid reads (``fairseq-syntax-control``), binarized with the real directory's dictionary;
7. ``reference``: the test reference as the runs score against it, in ``WORK/test.TARGET.ref``: the raw one, or
   for a corpus of ``tokenized`` text the test target's tokens (:meth:`Preparation.reference_step`).

Made once. Each step's record in ``WORK/prepared.json`` holds its *recipe* (the settings it was made with, by their
keys in the study file, and the SHA-256 of each input's content) and what it made (each file's content digest and
size; a data directory's fingerprint, :func:`~fairseq_syntax.study.grid.data_fingerprint`, and its files' sizes). A
step whose recipe is recorded and whose outputs are there with those sizes is skipped (never re-run because a file
is newer); one whose outputs are there from another recipe stops :func:`prepare` with one line naming the output and
what differs: nothing is overwritten. Every step builds into ``WORK/.staging/`` and renames its outputs into place
after recording them, so a killed prepare leaves nothing half-made under the final names (a recorded output that is
missing is made again). ``WORK/prepare.lock`` (``flock``) makes a second prepare wait for the first, then find
everything made.

An output there without a record (made by something else than a study's preparation) stops :func:`prepare` with
one line naming it: nothing is overwritten. Parses made elsewhere come in as a parse archive (``parses.archive``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import gzip
import hashlib
import json
import logging
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from fairseq_syntax.core.control_kinds import CONTROL_INPUTS, control_data_name
from fairseq_syntax.core.method import System, data_dir_name
from fairseq_syntax.core.side_data import FORM_SIDE_INPUTS, SideData, SideDataJob, SplitFiles
from fairseq_syntax.study.config import StudyConfig
from fairseq_syntax.study.grid import data_directories, data_fingerprint, study_runs
from fairseq_syntax.study.runner import REPO_ROOT, StudyError

MANIFEST = "prepared.json"
LOCK = "prepare.lock"
_HELD_LOCKS: tuple[int, ...] = ()  # the lock's descriptor while a prepare holds it, inherited by each step's process
STAGING = ".staging"
FORMAT = 1
SPLITS = ("train", "valid", "test")
#: the tree forms' POS-node placeholder (crf-con's): the sequence form's stand-in trees carry it
PLACEHOLDER_TAG = "XX"
#: parses made by a parser: where each kind goes in tok/ (besides its fallback listing, FILE.skipped)
TREES, ARCS, CONLLU = "tree", "arcs.jsonl.gz", "conllu"
#: the file of each parse kind a side data may read (core.side_data.PARSE_KINDS)
PARSE_FILES = {"trees": TREES, "arcs": ARCS}
RECORD = ".parse.json"  # fairseq-syntax-parse's record beside each parse (fairseq_syntax.parsing.parse_records)


class PrepareError(StudyError):
    """A problem that stops the data preparation, one line each."""


# -- what the grid reads --------------------------------------------------------------------------------------------

def registered_side_data() -> dict[str, SideData]:
    """The side inputs the methods make (:func:`fairseq_syntax.methods.side_data`), by name."""
    from fairseq_syntax.methods import side_data

    return side_data()


@dataclass(frozen=True)
class DataDirectory:
    """One data directory the grid reads: its name, input form and POS-node convention, the side data made into it
    (the methods' :class:`~fairseq_syntax.core.side_data.SideData`, registry order), and the control (with its
    seed) it is made from ('' for the parses)."""
    name: str
    form: str
    preterminals: str
    side_data: tuple[SideData, ...] = ()
    control: str = ""
    seed: int = 1

    @property
    def reads(self) -> tuple[str, ...]:
        """The parse kinds it is made from: the trees of a tree form, and those its side data reads."""
        kinds = {"trees"} if self.form != "sequence" else set()
        kinds |= {kind for side in self.side_data for kind in side.reads}
        return tuple(kind for kind in PARSE_FILES if kind in kinds)

    @property
    def base(self) -> str:
        """The real-parse directory of the same form, whose dictionary a control directory is made with."""
        return self.name if not self.control else self.name.rsplit(".", 1)[0]

    @property
    def control_name(self) -> str:
        """``CONTROL`` or ``CONTROL-sK``: the folder of its control structures under ``bpe/``."""
        return control_data_name("", self.control, self.seed)[1:]


@dataclass
class Needs:
    """What the grid reads: its data directories (first-use order), and which parses they need."""
    directories: list[DataDirectory] = field(default_factory=list)

    @property
    def trees(self) -> bool:
        return any("trees" in d.reads for d in self.directories)

    @property
    def arcs(self) -> bool:
        return any("arcs" in d.reads for d in self.directories)

    def readers(self, kind: str) -> str:
        """What reads the parses of ``kind``, for a message: tree input forms and side inputs by name."""
        sides = list(dict.fromkeys(side.input for d in self.directories for side in d.side_data if kind in side.reads))
        forms = kind == "trees" and any(d.form != "sequence" for d in self.directories)
        return " and ".join((["tree input forms"] if forms else []) + ([f"side data {', '.join(sides)}"] if sides
                                                                          else []))

    @property
    def controls(self) -> list[tuple[str, int]]:
        return list(dict.fromkeys((d.control, d.seed) for d in self.directories if d.control))


def system_side_data(config: StudyConfig, system: System, made: dict[str, SideData]) -> tuple[SideData, ...]:
    """The side data a system reads that is made into its data directory (the rest comes with its input form);
    a side input that neither its form nor a method makes, or one not made for its form, stops the study."""
    found = []
    for name in system.side_inputs:
        if name in FORM_SIDE_INPUTS.get(system.form, ()):
            continue
        if name not in made:
            raise PrepareError(f"{config.path}: systems: {system.name} reads side input {name}, which neither its "
                               f"input form {system.form} nor a method of the registry makes")
        if system.form not in made[name].forms:
            raise PrepareError(f"{config.path}: systems: {system.name} reads side input {name} on the {system.form} "
                               f"form, which its method makes for the {', '.join(made[name].forms)} form only")
        found.append(made[name])
    return tuple(found)


def grid_needs(config: StudyConfig, only: Collection[str] | None = None) -> Needs:
    """The data directories of :func:`~fairseq_syntax.study.grid.study_runs`, each real-parse directory a control
    directory's dictionary comes from before it, and the side data made into each (what any run of the grid reads
    from it that does not come with its form, registry order). A control directory is made from the control's
    structures: each run on it must read something the control changes (the trees of a tree form, or side data made
    from the parses it changes), and its side data must be made from what the control changes only. With ``only``
    (run names), the directories those runs read and their controls' bases: each made as the whole grid would make
    it."""
    runs = study_runs(config)
    made = registered_side_data()
    default_preterminals = config["parses"]["preterminals"]
    found: dict[str, DataDirectory] = {}
    sides: dict[str, set[str]] = {}
    for run in runs:
        system = run.system
        preterminals = default_preterminals if system.preterminals == "auto" else system.preterminals
        base = data_dir_name(system.form, system.preterminals)
        reads = system_side_data(config, system, made)
        if system.control:
            changes = CONTROL_INPUTS[system.control]
            unchanged = [side.input for side in reads if not set(side.reads) <= set(changes)]
            if unchanged or not (reads or (system.form != "sequence" and "trees" in changes)):
                what = f"side data {', '.join(unchanged)} made from parses" if unchanged else "no structure"
                raise PrepareError(f"{config.path}: systems: {system.name} reads {what} that the {system.control!r} "
                                   f"control does not change (it changes the {' and '.join(changes)})")
            found.setdefault(base, DataDirectory(base, system.form, preterminals))
            found.setdefault(run.data, DataDirectory(run.data, system.form, preterminals, control=system.control,
                                                     seed=system.control_seed))
            sides.setdefault(run.data, set()).update(side.input for side in reads)
        else:
            found.setdefault(base, DataDirectory(base, system.form, preterminals))
            sides.setdefault(base, set()).update(side.input for side in reads)
    found = {name: dataclasses.replace(d, side_data=tuple(side for side in made.values()
                                                           if side.input in sides.get(name, ())))
             for name, d in found.items()}
    # the bases first, in first-use order, then the controls: a control directory's dictionary is its base's
    ordered = [d for d in found.values() if not d.control] + [d for d in found.values() if d.control]
    if only is not None:
        read = {run.data for run in runs if run.name in only}
        read |= {d.base for d in ordered if d.name in read}
        ordered = [d for d in ordered if d.name in read]
    return Needs(ordered)


# -- digests and the record -----------------------------------------------------------------------------------------

def content_digest(path: Path) -> str:
    """SHA-256 of a file's content (a gzipped file's uncompressed bytes: gzip headers differ between two writes)."""
    digest = hashlib.sha256()
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def describe(path: Path) -> dict:
    """What a step's record says of one output: a file's content digest and size, a directory's data fingerprint
    and its files' sizes."""
    if path.is_dir():
        return {"fingerprint": data_fingerprint(path),
                "files": {item.name: item.stat().st_size for item in sorted(path.iterdir()) if item.is_file()}}
    return {"sha256": content_digest(path), "bytes": path.stat().st_size}


def damaged(path: Path, recorded: dict) -> str | None:
    """Why an output is not the one recorded (missing, a file missing or of another size), or None."""
    if not path.exists():
        return "missing"
    if "files" in recorded:
        if not path.is_dir():
            return "not a directory"
        for name, size in recorded["files"].items():
            item = path / name
            if not item.is_file():
                return f"{name} missing"
            if item.stat().st_size != size:
                return f"{name} has {item.stat().st_size} bytes, {size} when made"
        return None
    if not path.is_file():
        return "not a file"
    return None if path.stat().st_size == recorded["bytes"] else \
        f"{path.stat().st_size} bytes, {recorded['bytes']} when made"


def recipe_differences(made: dict, wanted: dict) -> list[str]:
    """How a recorded recipe differs from the one the file gives now, one phrase per key."""
    differences = []
    for key in sorted(set(made) | set(wanted), key=lambda k: (k.startswith("input "), k)):
        if made.get(key) != wanted.get(key):
            if key.startswith("input "):
                state = "absent then" if key not in made else "not read now" if key not in wanted else "other content"
                differences.append(f"{key[6:]}: {state}")
            else:
                differences.append(f"{key}: {_shown(made.get(key))} when made, {_shown(wanted.get(key))} now")
    return differences


def _shown(value) -> str:
    text = "absent" if value is None else json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) \
        else str(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass
class Step:
    """One step: its record's key, recipe, outputs (paths under WORK) and the function that builds them under a
    staging folder (the same relative paths) and returns its counts for the progress line. ``optional`` outputs
    (fallback listings) are moved and recorded where the build made them."""
    key: str
    recipe: dict
    outputs: list[str]
    build: Callable[[Path], str]
    optional: list[str] = field(default_factory=list)
    keep_staging: bool = False  # a parse: its staging keeps the finished shards of a killed run
    #: may a recorded output (its recipe, the differences) be rebuilt for these changes?
    upgrade: Callable[[dict, list[str]], bool] | None = None
    #: what a recipe entry a record lacks stood for when it was made (a side data of a method added since: not made)
    absent: dict = field(default_factory=dict)


# -- the preparation -------------------------------------------------------------------------------------------------

class Unmade(Exception):
    """A dry run (:meth:`Preparation.dry_run`) has come to a step it would make."""


class Preparation:
    """The steps of one :func:`prepare` call over ``WORK`` (the module docstring). A step's code outside its
    ``build`` only reads: :meth:`dry_run` runs the steps making nothing."""

    dry = False  # a dry run: stop at the first step to make (Unmade)

    def __init__(self, config: StudyConfig, progress: Callable[[str], None], only: Collection[str] | None = None):
        self.config = config
        self.progress = progress
        self.only = only
        self.work = config.folder("work").resolve()
        corpus = config["corpus"]
        self.src, self.tgt = corpus["source"], corpus["target"]
        self.stems = {"train": corpus["train"], "valid": corpus["valid"], "test": corpus["test"]}
        self.raw = config.resolve(corpus["raw"])
        self.needs = grid_needs(config, only)
        self.manifest_path = self.work / MANIFEST
        self.manifest: dict = {"format": FORMAT, "steps": {}}
        self.parses_key = ""  # the record of the parses: parses:archive, or "" (one per parser kind)
        self.settings_made: dict[str, dict] = {}  # each side data's settings (side_data_settings), once asked

    # -- checks before anything runs --------------------------------------------------------------------------------

    def raw_file(self, stem: str, lang: str) -> Path | None:
        for name in (f"{stem}.{lang}", f"{stem}.{lang}.gz"):
            if (self.raw / name).is_file():
                return self.raw / name
        return None

    def reference_source(self) -> Path | None:
        given = self.config["corpus"]["reference"]
        if given:
            path = self.config.resolve(given)
            return path if path.is_file() else None
        return self.raw_file(self.stems["test"], self.tgt)

    def check(self) -> None:
        """Every missing file and parser (:meth:`problems`), all named at once; then each parser given by a
        pretrained name is downloaded, before anything is made (or it cannot be)."""
        problems = self.problems() or [problem for kind in self.named_parsers()
                                       if (problem := self.fetch_problem(kind))]
        if problems:
            raise PrepareError("\n".join(problems))

    def named_parsers(self) -> list[str]:
        """The kinds of parser the grid needs that the file gives by a pretrained name."""
        parses = self.config["parses"]
        return [] if parses["archive"] else [
            kind for kind, needed in (("constituency", self.needs.trees), ("dependency", self.needs.arcs))
            if needed and parses[kind] and not _looks_like_path(parses[kind]) and self.model_path(parses[kind]) is None]

    def problems(self) -> list[str]:
        """Every missing file and parser, one line each (:mod:`fairseq_syntax.study.checks` adds what else ``run``
        checks before it trains)."""
        where = self.config.path
        problems = []
        if not self.raw.is_dir():
            problems.append(f"{where}: corpus.raw: {self.raw}: no such folder")
        else:
            missing = [f"{stem}.{lang}[.gz]" for split, stem in self.stems.items() for lang in (self.src, self.tgt)
                       if self.raw_file(stem, lang) is None]
            if missing:
                keys = {split: f"corpus.{split} = {stem!r}" for split, stem in self.stems.items()}
                problems.append(f"{where}: corpus.raw: {self.raw} lacks {', '.join(missing)} "
                                f"({', '.join(keys.values())}, corpus.source {self.src!r}, corpus.target "
                                f"{self.tgt!r})")
        if self.config["corpus"]["reference"] and self.reference_source() is None:
            problems.append(f"{where}: corpus.reference: {self.config.resolve(self.config['corpus']['reference'])}: "
                            "no such file")
        parses = self.config["parses"]
        if parses["archive"]:
            archive = self.config.resolve(parses["archive"])
            if not (archive / "MANIFEST.json").is_file():
                problems.append(f"{where}: parses.archive: {archive}: no parse archive there (no MANIFEST.json)")
            elif self.needs.trees and TREES not in _archive_kinds(archive):
                problems.append(f"{where}: parses.archive: {archive} holds dependency parses only (packed with "
                                f"--arcs-only), and the grid's systems read {self.needs.readers('trees')}: give "
                                "parses.constituency too, or an archive with trees")
        else:
            for kind, needed, readers in (("constituency", self.needs.trees, self.needs.readers("trees")),
                                          ("dependency", self.needs.arcs, self.needs.readers("arcs"))):
                if not needed:
                    continue
                if not parses[kind]:
                    problems.append(f"{where}: parses.{kind}: the grid's systems read {readers}: give a parser "
                                    "(a pretrained name or a path) or parses.archive")
                elif self.model_path(parses[kind]) is None and _looks_like_path(parses[kind]):
                    problems.append(f"{where}: parses.{kind}: {self.config.resolve(parses[kind])}: no such file "
                                    "(a study never trains a parser)")
            if self.needs.trees and parses["tagger"] and self.model_path(parses["tagger"]) is None:
                problems.append(f"{where}: parses.tagger: {self.config.resolve(parses['tagger'])}: no such file")
        return problems

    def fetch_problem(self, kind: str) -> str | None:
        """Why the parser ``parses.KIND`` names cannot be had (``fairseq-syntax-parse fetch``: its library's download
        failed), or None once it is there (downloaded now, or before)."""
        program = parse_program()
        if program is None:  # this checkout's older parse scripts download when they parse
            return None
        parses = self.config["parses"]
        done = subprocess.run([*program, "fetch", "--kind", kind, "--backend", parses[f"{kind}_backend"], "--model",
                               parses[kind], "--lang", self.src], capture_output=True, text=True, cwd=REPO_ROOT,
                              env=_environment())
        if done.returncode == 0:
            return None
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()] or ["no output"]
        return f"{self.config.path}: parses.{kind}: {lines[-1].removeprefix('error: ')}"

    def model_path(self, value: str) -> Path | None:
        path = self.config.resolve(value)
        return path if path.is_file() or path.is_dir() else None

    # -- the record ---------------------------------------------------------------------------------------------------

    def read_manifest(self) -> None:
        if not self.manifest_path.is_file():
            return
        try:
            manifest = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise PrepareError(f"{self.manifest_path}:{error.lineno}: not valid JSON ({error.msg}): the record of "
                               "what was prepared is damaged; remove WORK to prepare afresh") from None
        if manifest.get("format") != FORMAT:
            raise PrepareError(f"{self.manifest_path}: format {manifest.get('format')!r}, this code reads {FORMAT}")
        self.manifest = manifest

    def write_manifest(self) -> None:
        temporary = self.manifest_path.with_name(MANIFEST + ".partial")
        temporary.write_text(json.dumps(self.manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(temporary, self.manifest_path)

    def output(self, key: str, path: str) -> dict:
        """The record of an output of an earlier step (made or found in this call)."""
        return self.manifest["steps"][key]["outputs"][path]

    def input_digest(self, key: str, path: str) -> str:
        return self.output(key, path).get("sha256") or self.output(key, path)["fingerprint"]

    # -- running one step -----------------------------------------------------------------------------------------

    def run(self, step: Step) -> None:
        entry = self.manifest["steps"].get(step.key)
        present = [out for out in step.outputs if (self.work / out).exists()]
        made_with = None if entry is None else {**step.absent, **entry["recipe"]}
        if entry is not None:
            differences = recipe_differences(made_with, step.recipe)
            if not differences:
                broken = {out: why for out, rec in entry["outputs"].items()
                          if (why := damaged(self.work / out, rec)) is not None}
                if not broken:
                    self.progress(f"{step.key}: made already, kept ({entry.get('summary', '')})")
                    return
                self.progress(f"{step.key}: made again ({', '.join(f'{o}: {w}' for o, w in broken.items())})")
            elif present and not (step.upgrade is not None and step.upgrade(made_with, differences)):
                raise PrepareError(f"{self.work / present[0]}: made from other inputs or settings than "
                                   f"{self.config.path} gives ({'; '.join(differences)}): not overwritten; give "
                                   "study.work another folder, or remove it to make it again")
        elif present:
            raise PrepareError(f"{self.work / present[0]}: there without a record in {self.manifest_path} of what "
                               "made it (not made by a study's preparation): not overwritten; give study.work another "
                               "folder, or remove it to make it again")
        if self.dry:
            raise Unmade(step.key)
        staging = self.work / STAGING / step.key.replace("/", "_").replace(":", "_")
        recipe_file = staging / "recipe.json"
        recipe_text = json.dumps(step.recipe, sort_keys=True)
        if staging.exists() and not (step.keep_staging and recipe_file.is_file()
                                     and recipe_file.read_text(encoding="utf-8") == recipe_text):
            shutil.rmtree(staging)
        staging.mkdir(parents=True, exist_ok=True)
        recipe_file.write_text(recipe_text, encoding="utf-8")
        summary = step.build(staging)
        made = [out for out in step.outputs + step.optional if (staging / out).exists()]
        lost = [out for out in step.outputs if out not in made]
        if lost:
            raise PrepareError(f"{step.key}: the step made no {', '.join(lost)} (internal error)")
        if entry is not None and made_with != step.recipe and present:  # an upgrade: same files, more of them
            for out in present:
                self.check_superset(self.work / out, staging / out)
        self.manifest["steps"][step.key] = {
            "recipe": step.recipe, "outputs": {out: describe(staging / out) for out in made}, "summary": summary}
        self.write_manifest()  # recorded first: a kill before the renames leaves a recorded output missing
        for out in made:
            self.place(staging / out, self.work / out)
        shutil.rmtree(staging)
        self.progress(f"{step.key}: {summary}")

    def place(self, built: Path, target: Path) -> None:
        """Rename a built output into place (a damaged or upgraded one of ours aside first, then removed)."""
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir() and not target.is_symlink():
            aside = target.with_name(f".{target.name}.replaced")
            shutil.rmtree(aside, ignore_errors=True)
            os.rename(target, aside)
            os.rename(built, target)
            shutil.rmtree(aside)
        else:
            os.replace(built, target)

    def check_superset(self, old: Path, new: Path) -> None:
        """An upgraded data directory (side data added) keeps every binarized file and dictionary it had."""
        for item in sorted(old.iterdir()):
            if item.suffix in (".bin", ".idx") or item.name.startswith("dict."):
                if not (new / item.name).is_file() or content_digest(item) != content_digest(new / item.name):
                    raise PrepareError(f"{old}: adding its side data would change {item.name}: not overwritten; "
                                       "remove the directory to make it again")

    # -- the steps ------------------------------------------------------------------------------------------------

    def subset_step(self) -> dict[str, Path]:
        """The raw training files the tokens are made from: the corpus's, or the subset drawn from them."""
        corpus = self.config["corpus"]
        sources = {split: {lang: self.raw_file(stem, lang) for lang in (self.src, self.tgt)}
                   for split, stem in self.stems.items()}
        if not corpus["subset"]:
            return sources
        stem, pairs, seed = self.stems["train"], corpus["subset"], corpus["subset_seed"]
        outputs = [f"raw/{stem}.{self.src}.gz", f"raw/{stem}.{self.tgt}.gz", f"raw/{stem}.lines"]
        recipe = {"corpus.subset": pairs, "corpus.subset_seed": seed, "corpus.source": self.src,
                  "corpus.target": self.tgt,
                  **{f"input corpus.raw/{path.name}": content_digest(path) for path in sources["train"].values()}}

        def build(staging: Path) -> str:
            sides = {lang: _raw_lines(path) for lang, path in sources["train"].items()}
            if len(sides[self.src]) != len(sides[self.tgt]):
                raise PrepareError(f"{sources['train'][self.src]} has {len(sides[self.src])} lines, "
                                   f"{sources['train'][self.tgt]} {len(sides[self.tgt])}")
            total = len(sides[self.src])
            if not 0 < pairs <= total:
                raise PrepareError(f"{self.config.path}: corpus.subset: {pairs} pairs, but the training split has "
                                   f"{total}")
            lines = subset_lines(total, pairs, seed)
            (staging / "raw").mkdir()
            for lang, side in sides.items():
                _write_gzip(staging / f"raw/{stem}.{lang}.gz", "".join(side[n - 1] + "\n" for n in lines))
            (staging / f"raw/{stem}.lines").write_text("".join(f"{n}\n" for n in lines), encoding="utf-8")
            return f"{pairs} of {total} training pairs drawn (seed {seed}) into raw/{stem}.{{{self.src},{self.tgt}}}.gz"

        self.run(Step("subset", recipe, outputs, build))
        return {**sources, "train": {lang: self.work / f"raw/{stem}.{lang}.gz" for lang in (self.src, self.tgt)}}

    def tokens_step(self, sources: dict[str, dict[str, Path]]) -> None:
        corpus = self.config["corpus"]
        max_words = corpus["max_train_words"]
        outputs = [f"tok/{split}.{lang}" for split in SPLITS for lang in (self.src, self.tgt)]
        optional = ["tok/train.removed.tsv"] if max_words else []
        recipe = {"corpus.text": corpus["text"], "corpus.source": self.src, "corpus.target": self.tgt,
                  "corpus.max_train_words": max_words}
        for split, paths in sources.items():
            for lang, path in paths.items():
                key = "subset" if split == "train" and corpus["subset"] else None
                recipe[f"input {split}.{lang}"] = self.input_digest(key, f"raw/{path.name}") if key \
                    else content_digest(path)

        def build(staging: Path) -> str:
            from fairseq_syntax.parsing.normalize import normalize

            counts = {}
            for split in SPLITS:
                listing = staging / "tok/train.removed.tsv" if split == "train" and max_words else None
                with _quiet(staging / f"normalize.{split}.log"):
                    normalize(corpus["text"], self.src, self.tgt, str(sources[split][self.src]),
                              str(sources[split][self.tgt]), str(staging / "tok" / split),
                              max_words if split == "train" else 0, None if listing is None else str(listing))
                counts[split] = _line_count(staging / f"tok/{split}.{self.src}")
            text = ", ".join(f"{split} {count}" for split, count in counts.items())
            how = "tokenized with sacremoses" if corpus["text"] == "raw" else "Moses' entities unescaped"
            summary = f"pairs: {text} ({how}, source brackets PTB-escaped)"
            if max_words:
                removed = _line_count(staging / "tok/train.removed.tsv") - 1
                summary += (f"; corpus.max_train_words {max_words} left out {removed} training pairs, listed in "
                            "tok/train.removed.tsv")
            return summary

        self.run(Step("tokens", recipe, outputs, build, optional=optional))

    def token_inputs(self) -> dict[str, str]:
        return {f"input tok/{split}.{self.src}": self.input_digest("tokens", f"tok/{split}.{self.src}")
                for split in SPLITS}

    def parses_step(self) -> str:
        """The parses the grid needs; returns the record key that holds them (for the later steps' inputs)."""
        parses = self.config["parses"]
        if parses["archive"]:
            return self.archive_step()
        if self.needs.trees:
            self.parser_step("constituency")
        if self.needs.arcs:
            self.parser_step("dependency")
        return ""

    def archive_step(self) -> str:
        from fairseq_syntax.parsing import archive

        store = self.config.resolve(self.config["parses"]["archive"])
        kinds = _archive_kinds(store)  # an archive packed with --arcs-only holds no trees
        outputs = [f"tok/{split}.{kind}" for split in SPLITS for kind in kinds] + ["tok/parses.json"]
        optional = [f"tok/{split}.{kind}.skipped" for split in SPLITS for kind in kinds if kind != CONLLU]
        recipe = {"parses.archive": "sha256:" + archive.sha256((store / archive.MANIFEST).read_bytes()),
                  "corpus.source": self.src, **self.token_inputs()}

        def build(staging: Path) -> str:
            tok = staging / "tok"
            tok.mkdir()
            for split in SPLITS:
                (tok / f"{split}.{self.src}").symlink_to(self.work / f"tok/{split}.{self.src}")
            try:
                done = archive.unpack(str(store), str(tok), self.src, list(SPLITS))
            except archive.ArchiveError as error:
                raise PrepareError(f"{self.config.path}: parses.archive: {error}") from None
            for split in SPLITS:
                (tok / f"{split}.{self.src}").unlink()
            lines = ", ".join(f"{d.split} {d.lines}" for d in done)
            return (f"parses from {store.name}: lines {lines} (found by their tokens); "
                    f"{sum(d.fallbacks for d in done)} fallback lines, listed in tok/*.skipped")

        self.run(Step("parses:archive", recipe, outputs, build, optional=optional))
        return "parses:archive"

    def model_identity(self, value: str) -> dict:
        """A parser as a recipe holds it, as a parse record names it (:func:`~fairseq_syntax.parsing.parse_records.
        model_entry`): a file or folder by name and digest, a pretrained name as given."""
        from fairseq_syntax.parsing.parse_records import model_entry

        return model_entry(str(self.model_path(value) or value))

    def dependency_labels(self) -> str:
        """The label scheme of the dependency parses (``parsers.json`` records it): their record's, else the labels'
        own."""
        from fairseq_syntax.parsing.parse_records import labels_of

        try:
            return labels_of(str(self.work / f"tok/train.{ARCS}"))
        except ValueError as error:
            raise PrepareError(f"{self.work / f'tok/train.{ARCS}'}: {error}") from None

    def parser_step(self, kind: str) -> None:
        parses = self.config["parses"]
        if kind == "constituency":
            outputs = [f"tok/{split}.{TREES}" for split in SPLITS]
            optional = [f"tok/{split}.{TREES}{suffix}" for split in SPLITS for suffix in (".skipped", RECORD)]
            recipe = {"parses.constituency": self.model_identity(parses["constituency"]),
                      "parses.constituency_backend": parses["constituency_backend"],
                      "parses.tagger": self.model_identity(parses["tagger"]) if parses["tagger"] else ""}
        else:
            outputs = [f"tok/{split}.{kind_}" for split in SPLITS for kind_ in (ARCS, CONLLU)]
            optional = [f"tok/{split}.{ARCS}.skipped" for split in SPLITS] + \
                [f"tok/{split}.{ARCS.removesuffix('.gz')}{RECORD}" for split in SPLITS]
            recipe = {"parses.dependency": self.model_identity(parses["dependency"]),
                      "parses.dependency_backend": parses["dependency_backend"]}
        recipe.update({"corpus.source": self.src, **self.token_inputs()})

        def build(staging: Path) -> str:
            (staging / "tok").mkdir(exist_ok=True)
            counts, fallbacks = [], 0
            for split in SPLITS:
                tokens = self.work / f"tok/{split}.{self.src}"
                if kind == "constituency":
                    output = staging / f"tok/{split}.{TREES}"
                    if not output.is_file():  # a killed run's finished splits are kept in the staging folder
                        self.parse(kind, tokens, output, None, staging / f"parse.{split}.log")
                else:
                    output = staging / f"tok/{split}.{ARCS}"
                    if not output.is_file() or not (staging / f"tok/{split}.{CONLLU}").is_file():
                        self.parse(kind, tokens, output, staging / f"tok/{split}.{CONLLU}",
                                   staging / f"parse.{split}.log")
                counts.append(f"{split} {_line_count(output)}")
                skipped = Path(f"{output}.skipped")
                fallbacks += _line_count(skipped) if skipped.is_file() else 0
            return (f"lines parsed by {parses[kind]}: {', '.join(counts)}; {fallbacks} fallback lines (flat "
                    "structures), listed in tok/*.skipped")

        self.run(Step(f"parses:{kind}", recipe, outputs, build, optional=optional, keep_staging=True))

    def parse(self, kind: str, tokens: Path, output: Path, conllu: Path | None, log: Path) -> None:
        """One split parsed by the file's parser: ``fairseq-syntax-parse`` where installed, else this checkout's
        parse commands."""
        parses = self.config["parses"]
        model = str(self.model_path(parses[kind]) or parses[kind])
        workers = str(parses["workers"])
        backend = parses["constituency_backend"] if kind == "constituency" else parses["dependency_backend"]
        tagger = ["--tagger", str(self.model_path(parses["tagger"]))] if kind == "constituency" and parses["tagger"] \
            else []
        outputs = ["--output", str(output)] if conllu is None else ["--output", str(output), "--conllu", str(conllu)]
        program = parse_program()
        if program is None:  # this checkout's older scripts: their own options, no --lang
            script = "parse_constituency.py" if kind == "constituency" else "parse_dependency.py"
            program = [sys.executable, str(Path(REPO_ROOT) / "preprocess" / script)]
            options = (["--backend", backend] if kind == "constituency" else []) + \
                ["--model", model, *tagger, "--input", str(tokens)] + \
                (["--output", str(output)] if conllu is None else ["--arcs", str(output), "--conllu", str(conllu)]) + \
                ["--workers", workers]
        else:
            options = [kind, "--backend", backend, "--model", model, *tagger, "--lang", self.src, "--input",
                       str(tokens), *outputs, "--workers", workers, "--num-shards", workers]
        with open(log, "w", encoding="utf-8") as out:
            status = subprocess.run([*program, *options], stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT,
                                    env=_environment(), pass_fds=_HELD_LOCKS).returncode
        if status != 0:
            raise PrepareError(f"{self.config.path}: parses.{kind}: parsing {tokens.name} with {parses[kind]} failed: "
                               f"{_error_line(log)} (the whole log: {log})")

    def bpe_step(self) -> None:
        merges = self.config["bpe"]["merges"]
        outputs = ["bpe/codes", f"bpe/vocab.{self.src}", f"bpe/vocab.{self.tgt}"] + \
            [f"bpe/{split}.{lang}" for split in SPLITS for lang in (self.src, self.tgt)]
        recipe = {"bpe.merges": merges,
                  **{f"input tok/{split}.{lang}": self.input_digest("tokens", f"tok/{split}.{lang}")
                     for split in SPLITS for lang in (self.src, self.tgt)}}

        def build(staging: Path) -> str:
            bpe, tok = staging / "bpe", self.work / "tok"
            bpe.mkdir()
            _subword_nmt(["learn-joint-bpe-and-vocab", "--input", str(tok / f"train.{self.src}"),
                          str(tok / f"train.{self.tgt}"), "-s", str(merges), "-o", str(bpe / "codes"),
                          "--write-vocabulary", str(bpe / f"vocab.{self.src}"), str(bpe / f"vocab.{self.tgt}")],
                         staging / "learn.log")
            for split in SPLITS:
                for lang in (self.src, self.tgt):
                    with open(tok / f"{split}.{lang}", "rb") as source, open(bpe / f"{split}.{lang}", "wb") as out:
                        _subword_nmt(["apply-bpe", "-c", str(bpe / "codes"), "--vocabulary",
                                      str(bpe / f"vocab.{lang}"), "--vocabulary-threshold", "1"],
                                     staging / "apply.log", stdin=source, stdout=out)
            codes = _line_count(bpe / "codes") - 1  # its first line is the version
            return (f"{codes} joint merges (bpe.merges {merges}) learned on the training tokens, applied to "
                    f"{', '.join(SPLITS)}")

        self.run(Step("bpe", recipe, outputs, build))

    def parser_recipe(self, directory: DataDirectory) -> dict:
        """What a data directory records of its parsers (syntax.json's ``parser``, ``parsers.json``)."""
        parses, reads = self.config["parses"], directory.reads
        if not reads:
            return {"parsers": {}}
        if parses["archive"]:
            return {"parsers": {"archive": self.input_digest(self.parses_key, "tok/parses.json"),
                                "roles": _archive_roles(reads)}}
        parser = {}
        if "trees" in reads:
            parser.update({"backend": parses["constituency_backend"],
                           "model": self.model_identity(parses["constituency"]),
                           "tagger": self.model_identity(parses["tagger"]) if parses["tagger"] else None})
        if "arcs" in reads:
            parser["dependency"] = self.model_identity(parses["dependency"])
        return {"parser": parser}

    def structure_inputs(self, directory: DataDirectory) -> dict[str, str]:
        """The digests of the parses (or control structures) a data directory is made from."""
        inputs = {}
        for split in SPLITS:
            for kind in directory.reads:
                path = self.structure_file(directory, split, kind)
                key = f"controls:{directory.control_name}" if directory.control else self.parses_record(kind)
                inputs[f"input {path}"] = self.input_digest(key, path)
        return inputs

    def structure_file(self, directory: DataDirectory, split: str, kind: str) -> str:
        """A split's parses of ``kind`` a data directory is made from (path under WORK): the control's structures
        for a control directory, else the parses."""
        folder = f"bpe/{directory.control_name}" if directory.control else "tok"
        return f"{folder}/{split}.{PARSE_FILES[kind]}"

    def side_data_settings(self, side: SideData) -> dict:
        """The settings a side data is made with (:attr:`~fairseq_syntax.core.side_data.SideData.settings`, from the
        training split's parses), asked once."""
        if side.input not in self.settings_made:
            parses = {kind: str(self.work / f"tok/train.{PARSE_FILES[kind]}") for kind in side.reads}
            try:
                self.settings_made[side.input] = dict(side.settings(parses))
            except ValueError as error:
                raise PrepareError(f"{self.config.path}: side input {side.input}: {error}") from None
        return self.settings_made[side.input]

    def data_step(self, directory: DataDirectory) -> None:
        name = f"data-bin/{directory.name}"
        # every side data a method makes, by its suffix: whether it is made here, and its settings where it is
        made_here = {side.suffix: side in directory.side_data for side in registered_side_data().values()}
        recipe = {"form": directory.form, "preterminals": directory.preterminals, **made_here,
                  **{f"{side.suffix}_{key}": value for side in directory.side_data
                     for key, value in self.side_data_settings(side).items()},
                  "model.max_source_positions": self.config["model"]["max_source_positions"],
                  "trees": "placeholder" if directory.form == "sequence" else "parses",
                  **self.parser_recipe(directory),
                  **{f"input bpe/{out}": self.input_digest("bpe", f"bpe/{out}")
                     for out in ["codes", f"vocab.{self.src}"] +
                     [f"{split}.{lang}" for split in SPLITS for lang in (self.src, self.tgt)]},
                  **self.structure_inputs(directory)}
        if directory.control:
            recipe.update({"control": directory.control, "control_seed": directory.seed,
                           f"input data-bin/{directory.base}":
                               self.input_digest(f"data-bin/{directory.base}", f"data-bin/{directory.base}")})

        def upgrade(made: dict, differences: list[str]) -> bool:
            """A real-parse directory made without some of the side data its runs read now gets it (a study that
            adds a system reading it), with its settings and the parses it is made from: every file it had stays as
            it was (checked before the rename)."""
            added = [side for side in directory.side_data if not made.get(side.suffix)]
            allowed = {"parsers", "parser"} | {key for side in added for key in recipe
                                               if key == side.suffix or key.startswith(f"{side.suffix}_")
                                               or any(key.endswith(f".{PARSE_FILES[kind]}") for kind in side.reads)}
            return (bool(added) and not directory.control
                    and {k for k in set(made) | set(recipe) if made.get(k) != recipe.get(k)} <= allowed)

        def build(staging: Path) -> str:
            return self.build_data_directory(directory, staging / "data-bin" / directory.name, staging / "scratch")

        self.run(Step(name, recipe, [name], build, upgrade=upgrade, absent=dict.fromkeys(made_here, False)))

    def build_data_directory(self, directory: DataDirectory, destination: Path, scratch: Path) -> str:
        scratch.mkdir(parents=True)
        destination.parent.mkdir(parents=True)
        prefixes = []
        for split in SPLITS:
            for lang in (self.src, self.tgt):
                (scratch / f"{split}.{lang}").symlink_to(self.work / f"bpe/{split}.{lang}")
            if directory.form == "sequence":
                placeholder_trees(self.work / f"tok/{split}.{self.src}", scratch / f"{split}.{TREES}")
            else:
                (scratch / f"{split}.{TREES}").symlink_to(self.work / self.structure_file(directory, split, "trees"))
            prefixes += [f"--{split}pref", str(scratch / split)]
        arguments = ["--source-lang", self.src, "--target-lang", self.tgt, *prefixes, "--trees-suffix", TREES,
                     "--form", directory.form, "--preterminals", directory.preterminals, "--max-source-positions",
                     str(self.config["model"]["max_source_positions"]), "--destdir", str(destination),
                     "--joined-dictionary", "--bpe-codes", str(self.work / "bpe/codes"), "--bpe-vocabulary",
                     str(self.work / f"bpe/vocab.{self.src}"), "--bpe-vocabulary-threshold", "1"]
        parses = self.config["parses"]
        if directory.form != "sequence" and not parses["archive"]:
            arguments += ["--parser-backend", parses["constituency_backend"], "--parser-model",
                          str(self.model_path(parses["constituency"]) or parses["constituency"])]
            if parses["tagger"]:
                arguments += ["--parser-tagger", str(self.model_path(parses["tagger"]))]
        if directory.control:
            base = self.work / "data-bin" / directory.base / f"dict.{self.src}.txt"
            dictionary = base
            if directory.form != "sequence":
                from fairseq_syntax.parsing.controls import control_dictionary

                dictionary = scratch / f"dict.{directory.form}.txt"
                control_dictionary(str(base), str(dictionary))
            arguments += ["--srcdict", str(dictionary)]
        # fairseq-syntax-preprocess is a command of the layer above this one: run as the recipes run it
        log = scratch / "preprocess.log"
        with open(log, "w", encoding="utf-8") as out:
            status = subprocess.run([sys.executable, "-m", "fairseq_syntax.cli.preprocess", *arguments], stdout=out,
                                    stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=_environment(),
                                    pass_fds=_HELD_LOCKS).returncode
        if status != 0:
            raise PrepareError(f"fairseq-syntax-preprocess ({destination.name}): {_error_line(log)} (the whole log: "
                               f"{log})")
        for side in directory.side_data:
            self.make_side_data(side, directory, destination, scratch)
        self.write_parsers(directory, destination)
        if directory.control:
            from fairseq_syntax.parsing.controls import record_control

            record_control(str(destination), directory.control, directory.seed)
        meta = json.loads((destination / "syntax.json").read_text(encoding="utf-8"))
        pairs = " / ".join(f"{split} {_line_count(scratch / f'{split}.{self.src}')}" for split in SPLITS)
        skipped = sum(sum(entry["skipped"].values()) for entry in meta.get("splits", {}).values())
        side = [key for key in meta.get("side_data", {})]
        return (f"{directory.form} form (--preterminals {directory.preterminals}), pairs {pairs}, {skipped} skipped"
                + (f", side data {', '.join(side)}" if side else "")
                + (f", control {directory.control} seed {directory.seed}" if directory.control else ""))

    def make_side_data(self, side: SideData, directory: DataDirectory, destination: Path, scratch: Path) -> None:
        """One side data made into the data directory ``destination`` by its method's maker, from each split's BPE,
        words and the parses (or control structures) it reads; its output goes to a log in ``scratch``, and its
        failure stops the preparation in one line."""
        splits = tuple(SplitFiles(split, str(self.work / f"bpe/{split}.{self.src}"),
                                  str(self.work / f"bpe/{split}.{self.tgt}"), str(self.work / f"tok/{split}.{self.src}"),
                                  {kind: str(self.work / self.structure_file(directory, split, kind))
                                   for kind in side.reads}) for split in SPLITS)
        folder = scratch / side.suffix
        folder.mkdir()
        job = SideDataJob(str(destination), self.src, self.tgt, splits, self.side_data_settings(side), str(folder))
        _call(side.make, job, f"side input {side.input} ({destination.name})", scratch / f"side-data.{side.suffix}.log")

    def write_parsers(self, directory: DataDirectory, destination: Path) -> None:
        """``parsers.json``: the parsers of what the directory reads (none for a sequence directory without side
        data made from parses)."""
        from fairseq_syntax.parsing import archive
        from fairseq_syntax.parsing.provenance import describe_parsers, read_parser_records

        out = destination / "parsers.json"
        parses = self.config["parses"]
        if parses["archive"]:
            record = str(self.work / "tok/parses.json")
            roles = _archive_roles(directory.reads)
            try:
                if not directory.reads:
                    out.write_text("{}\n", encoding="utf-8")
                elif isinstance(roles, list):
                    archive.write_provenance(record, str(out), roles)
                else:
                    archive.write_provenance(record, str(out), [], without=[] if roles == "all" else ["dependency"])
            except archive.ArchiveError as error:
                raise PrepareError(f"{self.config.path}: parses.archive: {error}") from None
            return
        models = {}
        if "trees" in directory.reads:
            models = {"constituency": parses["constituency"]} | ({"tagger": parses["tagger"]} if parses["tagger"]
                                                                  else {})
        if "arcs" in directory.reads:
            models["dependency"] = parses["dependency"]
        models = {role: str(self.model_path(model) or model) for role, model in models.items()}
        described = describe_parsers(models, read_parser_records(str(Path(REPO_ROOT) / "preprocess" / "runs")))
        if "dependency" in described:
            described["dependency"]["labels"] = self.dependency_labels()
        out.write_text(json.dumps(described, indent=1) + "\n", encoding="utf-8")

    def controls_step(self, control: str, seed: int) -> None:
        """The control structures of one control and seed, from the parses: ``bpe/NAME/SPLIT.*``."""
        from fairseq_syntax.parsing.controls import control_arcs_file, control_tree_file

        name = control_data_name("", control, seed)[1:]
        reads = {kind for d in self.needs.directories if d.control == control and d.seed == seed for kind in d.reads}
        make_trees, make_arcs = "trees" in reads, "arcs" in reads
        outputs, recipe = [], {"control": control, "control_seed": seed}
        for split in SPLITS:
            if make_trees:
                outputs.append(f"bpe/{name}/{split}.{TREES}")
                recipe[f"input tok/{split}.{TREES}"] = self.input_digest(self.trees_key, f"tok/{split}.{TREES}")
            if make_arcs:
                outputs += [f"bpe/{name}/{split}.{ARCS}", f"bpe/{name}/{split}.{CONLLU}"]
                recipe[f"input tok/{split}.{ARCS}"] = self.input_digest(self.arcs_key, f"tok/{split}.{ARCS}")

        def build(staging: Path) -> str:
            folder = staging / "bpe" / name
            folder.mkdir(parents=True)
            lines = {}
            with _quiet(staging / "control.log"):
                for split in SPLITS:
                    tok = self.work / "tok"
                    if make_trees:
                        lines[split] = control_tree_file(str(tok / f"{split}.{TREES}"), str(folder / f"{split}.{TREES}"),
                                                         control, seed)
                    if make_arcs:
                        lines[split] = control_arcs_file(str(tok / f"{split}.{ARCS}"), str(folder / f"{split}.{ARCS}"),
                                                         str(folder / f"{split}.{CONLLU}"), control, seed)
            kinds = " and ".join(k for k, wanted in (("trees", make_trees), ("dependency trees", make_arcs)) if wanted)
            return f"{control} {kinds} (seed {seed}) for lines " + ", ".join(f"{s} {n}" for s, n in lines.items())

        self.run(Step(f"controls:{name}", recipe, outputs, build))

    def reference_step(self) -> None:
        """The test reference the runs are scored against: the raw one (``corpus.reference``, else the test split's
        target file); for a corpus of ``tokenized`` text without ``corpus.reference``, its tokens as the tokens step
        made them (Moses' entities unescaped, nothing re-tokenized): such a corpus is scored on its tokens."""
        target = f"test.{self.tgt}.ref"
        if self.config["corpus"]["text"] == "tokenized" and not self.config["corpus"]["reference"]:
            source = self.work / f"tok/test.{self.tgt}"
            recipe = {"corpus.reference": f"tok/test.{self.tgt} (corpus.text tokenized)",
                      f"input tok/test.{self.tgt}": self.input_digest("tokens", f"tok/test.{self.tgt}")}
            what = f"the test reference's tokens tok/test.{self.tgt}"
        else:
            source = self.reference_source()
            recipe = {"corpus.reference": self.config["corpus"]["reference"] or f"corpus.raw/{source.name}",
                      f"input {source.name}": content_digest(source)}
            what = f"the raw test reference {source.name}"

        def build(staging: Path) -> str:
            opener = gzip.open if source.name.endswith(".gz") else open
            with opener(source, "rb") as handle, open(staging / target, "wb") as out:
                shutil.copyfileobj(handle, out)
            return f"{what}, {_line_count(staging / target)} lines"

        self.run(Step("reference", recipe, [target], build))

    # -- all of it -----------------------------------------------------------------------------------------------

    @property
    def trees_key(self) -> str:
        return self.parses_key or "parses:constituency"

    @property
    def arcs_key(self) -> str:
        return self.parses_key or "parses:dependency"

    def parses_record(self, kind: str) -> str:
        """The record that holds the parses of ``kind`` (:data:`PARSE_FILES`)."""
        return self.trees_key if kind == "trees" else self.arcs_key

    def prepare(self) -> list[str]:
        self.check()
        self.work.mkdir(parents=True, exist_ok=True)
        # opened without truncating: a prepare that finds everything made changes no file's time
        with open(os.open(self.work / LOCK, os.O_RDWR | os.O_CREAT, 0o644)) as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self.progress(f"waiting for another preparation of {self.work} ({LOCK}) to end")
                fcntl.flock(lock, fcntl.LOCK_EX)
            global _HELD_LOCKS
            # every step's process holds the lock too: a prepare killed mid-step leaves its child writing into the
            # staging folder, and the next prepare must wait for that child before it clears the folder
            _HELD_LOCKS = (lock.fileno(),)
            try:
                self.read_manifest()
                self.steps()
            finally:
                _HELD_LOCKS = ()
                fcntl.flock(lock, fcntl.LOCK_UN)
        names = data_directories(self.config)
        if self.only is not None:
            made = {d.name for d in self.needs.directories}
            names = [name for name in names if name in made]
        later = len(data_directories(self.config)) - len(names)
        self.progress(f"prepared: {len(names)} data directories in {self.work / 'data-bin'}: {', '.join(names)}"
                      + (f" ({later} more when their runs are run)" if later else ""))
        return names

    def steps(self) -> None:
        sources = self.subset_step()
        self.tokens_step(sources)
        if self.needs.trees or self.needs.arcs:
            self.parses_key = self.parses_step()
        self.bpe_step()
        for control, seed in self.needs.controls:
            self.controls_step(control, seed)
        for directory in self.needs.directories:
            self.data_step(directory)
        self.reference_step()
        if not self.dry:
            shutil.rmtree(self.work / STAGING, ignore_errors=True)

    def dry_run(self) -> None:
        """What :func:`prepare` would refuse in ``WORK`` as it is, making nothing: each step's recipe against its
        record, up to the first step it would make (everything after it is made from that step's outputs); one
        line of :class:`PrepareError` (an output made from other inputs or settings, or there without a record)."""
        if not self.work.is_dir():
            return
        self.read_manifest()
        self.dry, self.progress = True, lambda line: None
        try:
            self.steps()
        except Unmade:
            pass


def prepare(config: StudyConfig, progress: Callable[[str], None] = print,
            only: Collection[str] | None = None) -> list[str]:
    """Make (or find made) under ``study.work`` everything the study's runs read (the module docstring), or with
    ``only`` what those runs read (``run`` passes the runs it is about to run: a study's finished runs need no data
    on a fresh machine); return the names of the data directories under ``WORK/data-bin``, in the grid's first-use
    order (real-parse directories before the control directories made with their dictionaries). A problem stops it
    with :class:`PrepareError`, one line each."""
    return Preparation(config, progress, only).prepare()


# -- helpers ---------------------------------------------------------------------------------------------------------

def subset_lines(total: int, pairs: int, seed: int) -> list[int]:
    """1-based line numbers of the training subset, ascending: the first ``pairs`` of one random order of all
    ``total`` lines (``random.Random(seed).sample(range(total), total)``), so that a smaller subset of one seed lies
    inside every larger one. For Multi30k's 10,000 of 29,000 pairs this is the draw of its committed parses
    (``sample(range(total), pairs)`` fills its first ``pairs`` places the same way whenever it draws from a pool)."""
    return sorted(draw_order(total, seed)[:pairs])


def draw_order(total: int, seed: int) -> list[int]:
    """The random order of the 1-based line numbers whose first lines :func:`subset_lines` draws."""
    return [number + 1 for number in random.Random(seed).sample(range(total), total)]


def _raw_lines(path: Path) -> list[str]:
    """A raw file's lines (split on ``\\n`` only, a final empty line dropped)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="\n") as handle:
        lines = handle.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _write_gzip(path: Path, text: str) -> None:
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
        out.write(text.encode("utf-8"))


def _line_count(path: Path) -> int:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        return sum(1 for _ in handle)


def _last_line(path: Path) -> str:
    lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


def _archive_roles(reads: tuple[str, ...]) -> list[str] | str:
    """The parser roles of a parse archive a data directory made from the parses of ``reads`` records:
    ``["dependency"]`` for the dependency parses alone, else ``all but dependency`` or ``all``."""
    if "trees" not in reads:
        return ["dependency"]
    return "all" if "arcs" in reads else "all but dependency"


def _looks_like_path(value: str) -> bool:
    return "/" in value or value.endswith((".pt", ".pth", ".zip", ".gz")) or value.startswith((".", "~"))


def placeholder_trees(tokens: Path, out: Path) -> None:
    """One flat tree a line, each word under an ``XX`` node: the sequence form's stand-in for the parses, which it
    does not read (fairseq-syntax-preprocess checks the leaves against the words)."""
    with open(tokens, encoding="utf-8") as source, open(out, "w", encoding="utf-8") as trees:
        for line in source:
            trees.write("(S " + " ".join(f"({PLACEHOLDER_TAG} {word})" for word in line.split()) + ")\n")


def parse_program() -> list[str] | None:
    """How the parsers are run: the installed ``fairseq-syntax-parse``, else ``python3 -m fairseq_syntax.cli.parse``,
    else None: this checkout's ``preprocess/parse_*.py``."""
    installed = shutil.which("fairseq-syntax-parse") or (
        str(Path(sys.executable).with_name("fairseq-syntax-parse"))
        if Path(sys.executable).with_name("fairseq-syntax-parse").is_file() else None)
    if installed:
        return [installed]
    import importlib.util

    if importlib.util.find_spec("fairseq_syntax.cli.parse") is not None:
        return [sys.executable, "-m", "fairseq_syntax.cli.parse"]
    return None


def _archive_kinds(store: Path) -> list[str]:
    """The parse files a parse archive holds for every split (TREES, ARCS, CONLLU; ARCS and CONLLU only for an
    archive packed with ``--arcs-only``), in that order."""
    splits = json.loads((store / "MANIFEST.json").read_text(encoding="utf-8")).get("splits", {})
    held = set.intersection(*(set(entry.get("files", {})) for entry in splits.values())) if splits else set()
    return [kind for kind in (TREES, ARCS, CONLLU) if kind in held]


def _subword_nmt(arguments: list[str], log: Path, stdin=None, stdout=None) -> None:
    """``subword-nmt ARGUMENTS`` (its console script's entry point, by this Python)."""
    with open(log, "a", encoding="utf-8") as err:
        status = subprocess.run([sys.executable, "-c", "from subword_nmt.subword_nmt import main; main()",
                                 *arguments], stdin=stdin, stdout=stdout or err, stderr=err,
                                pass_fds=_HELD_LOCKS).returncode
    if status != 0:
        raise PrepareError(f"subword-nmt {arguments[0]} failed: {_last_line(log)} (the whole log: {log})")


def _call(function: Callable, argument, what: str, log: Path) -> None:
    """``function(argument)`` in this process (a side data's maker), its console output into ``log``; its exit with
    an error, or a ValueError, becomes one line."""
    try:
        with _quiet(log):
            function(argument)
    except ValueError as error:
        raise PrepareError(f"{what}: {str(error).splitlines()[0]}") from None
    except SystemExit as error:
        if error.code not in (None, 0):
            message = error.code if isinstance(error.code, str) else _last_line(log)
            raise PrepareError(f"{what}: {str(message).removeprefix('error: ').splitlines()[0]}") from None


def _environment() -> dict[str, str]:
    """A child command's environment: this checkout's package first, whatever an older install left."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _error_line(log: Path) -> str:
    """A failed command's message: its last ``error:`` line, else its last line."""
    lines = [line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    return (errors[-1].removeprefix("error: ") if errors else lines[-1]) if lines else "no output"


@contextlib.contextmanager
def _quiet(log: Path):
    """The console output of a step's library calls (progress bars, fairseq's log lines) into ``log``: the study's
    progress is one line a step."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        root = logging.getLogger()
        saved = list(root.handlers)
        handler = logging.StreamHandler(out)
        root.handlers = [handler]
        try:
            yield
        finally:
            root.handlers = saved
            handler.close()


__all__ = ["DataDirectory", "Needs", "PrepareError", "grid_needs", "prepare", "subset_lines"]
