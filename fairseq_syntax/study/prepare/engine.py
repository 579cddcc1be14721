"""The build engine of a study's data: what a step makes, from what, and whether it is made already.

A :class:`Step` has a key, a *recipe* (its settings by key and the SHA-256 of each input, ``"input PATH"``), outputs
(paths under ``WORK``) and a build function. ``WORK/prepared.json`` records per step its recipe and what it made (a
file's content digest and size; a data directory's fingerprint and its files' sizes). :meth:`Build.run` skips a step
whose recipe is recorded and outputs are there with those sizes (never by file times), remakes a recorded output that
is missing or of another size, and stops in one line at an output of another recipe or without a record: nothing is
overwritten. Steps build into ``WORK/.staging/KEY/``, renamed into place after they are recorded.
``WORK/prepare.lock`` makes a second build wait for the first."""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fairseq_syntax.core.files import held_lock, write_atomically
from fairseq_syntax.study.grid import data_fingerprint
from fairseq_syntax.study.records import StudyError

MANIFEST = "prepared.json"
LOCK = "prepare.lock"
STAGING = ".staging"
FORMAT = 1


class PrepareError(StudyError):
    """A problem that stops the data preparation, one line each."""


class Unmade(Exception):
    """A dry run (:meth:`Build.run` with ``dry``) has come to a step it would make."""


def open_file(path: Path, mode: str = "rb", **options):
    """A file's content, a gzipped one's uncompressed."""
    return (gzip.open if path.name.endswith(".gz") else open)(path, mode, **options)


def line_count(path: Path) -> int:
    with open_file(path) as handle:
        return sum(1 for _ in handle)


def content_digest(path: Path) -> str:
    """SHA-256 of a file's content (a gzipped file's uncompressed bytes: gzip headers differ between two writes)."""
    digest = hashlib.sha256()
    with open_file(path) as handle:
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
    staging folder and returns its counts for the progress line. ``optional`` outputs are moved and recorded where
    made."""
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


class Build:
    """The steps run over ``work``, recorded in ``work/prepared.json``; ``config_path`` is named in refusals."""

    dry = False  # a dry run: stop at the first step to make (Unmade)

    def __init__(self, work: Path, config_path, progress: Callable[[str], None]):
        self.work, self.config_path, self.progress = work, config_path, progress
        self.manifest_path = work / MANIFEST
        self.manifest: dict = {"format": FORMAT, "steps": {}}
        self.held: tuple[int, ...] = ()  # the lock while held, passed on to each step's process

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """``WORK/prepare.lock`` held, by each step's process too: the next build waits for a killed build's child
        before it clears the staging folder."""
        self.work.mkdir(parents=True, exist_ok=True)
        with held_lock(self.work / LOCK, waiting=lambda: self.progress(
                f"waiting for another preparation of {self.work} ({LOCK}) to end")) as descriptor:
            self.held = (descriptor,)
            try:
                yield
            finally:
                self.held = ()

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

    def input_digest(self, key: str, path: str) -> str:
        """The digest an earlier step (made or found in this call) recorded of its output ``path``."""
        output = self.manifest["steps"][key]["outputs"][path]
        return output.get("sha256") or output["fingerprint"]

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
                                   f"{self.config_path} gives ({'; '.join(differences)}): not overwritten; give "
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
                check_superset(self.work / out, staging / out)
        self.manifest["steps"][step.key] = {
            "recipe": step.recipe, "outputs": {out: describe(staging / out) for out in made}, "summary": summary}
        # recorded first: a kill before the renames leaves a recorded output missing
        write_atomically(self.manifest_path, json.dumps(self.manifest, indent=1, ensure_ascii=False) + "\n")
        for out in made:
            place(staging / out, self.work / out)
        shutil.rmtree(staging)
        self.progress(f"{step.key}: {summary}")


def place(built: Path, target: Path) -> None:
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


def check_superset(old: Path, new: Path) -> None:
    """An upgraded data directory (side data added) keeps every binarized file and dictionary it had."""
    for item in sorted(old.iterdir()):
        if item.suffix in (".bin", ".idx") or item.name.startswith("dict."):
            if not (new / item.name).is_file() or content_digest(item) != content_digest(new / item.name):
                raise PrepareError(f"{old}: adding its side data would change {item.name}: not overwritten; "
                                   "remove the directory to make it again")
