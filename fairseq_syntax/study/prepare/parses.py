"""The parses of a study's source side, and what a data directory records of its parsers.

``parses:archive`` unpacks a parse archive (:mod:`fairseq_syntax.parsing.archive`); ``parses:constituency`` and
``parses:dependency`` run the file's parsers (``fairseq-syntax-parse``) over ``tok/SPLIT.SRC`` into
``tok/SPLIT.tree``, ``tok/SPLIT.arcs.jsonl.gz`` and ``tok/SPLIT.conllu``, fallback lines listed in ``FILE.skipped``.
A data directory's ``parsers.json`` (:mod:`fairseq_syntax.parsing.provenance`) names the parsers of what it reads."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from fairseq_syntax.study.prepare.engine import PrepareError, Step, line_count
from fairseq_syntax.study.prepare.needs import ARCS, CONLLU, SPLITS, TREES, DataDirectory
from fairseq_syntax.study.prepare.preparation import Preparation
from fairseq_syntax.study.processes import REPO_ROOT, environment, run_logged

RECORD = ".parse.json"  # fairseq-syntax-parse's record beside each parse (fairseq_syntax.parsing.parse_records)
KINDS = {"constituency": "trees", "dependency": "arcs"}  # a parser's kind: the parses it makes


def parse_program() -> list[str]:
    """How the parsers are run: the installed ``fairseq-syntax-parse``, else ``python3 -m fairseq_syntax.cli.parse``."""
    beside = Path(sys.executable).with_name("fairseq-syntax-parse")
    installed = shutil.which("fairseq-syntax-parse") or (str(beside) if beside.is_file() else None)
    return [installed] if installed else [sys.executable, "-m", "fairseq_syntax.cli.parse"]


def looks_like_path(value: str) -> bool:
    return "/" in value or value.endswith((".pt", ".pth", ".zip", ".gz")) or value.startswith((".", "~"))


def archive_kinds(store: Path) -> list[str]:
    """The parse files a parse archive holds for every split, in order (TREES, ARCS, CONLLU; no TREES when packed
    with ``--arcs-only``)."""
    splits = json.loads((store / "MANIFEST.json").read_text(encoding="utf-8")).get("splits", {})
    held = set.intersection(*(set(entry.get("files", {})) for entry in splits.values())) if splits else set()
    return [kind for kind in (TREES, ARCS, CONLLU) if kind in held]


def archive_roles(reads: tuple[str, ...]) -> list[str] | str:
    """The parser roles a data directory made from the archive's parses of ``reads`` records: ``["dependency"]`` for
    dependency parses alone, else ``all but dependency`` or ``all``."""
    if "trees" not in reads:
        return ["dependency"]
    return "all" if "arcs" in reads else "all but dependency"


def parser_problems(prep: Preparation) -> list[str]:
    """Every missing parse archive or parser file, and a parser the grid needs that the file does not give."""
    where, parses, needs = prep.config.path, prep.config.parses, prep.needs
    problems = []
    if parses.archive:
        archive = prep.config.resolve(parses.archive)
        if not (archive / "MANIFEST.json").is_file():
            problems.append(f"{where}: parses.archive: {archive}: no parse archive there (no MANIFEST.json)")
        elif needs.trees and TREES not in archive_kinds(archive):
            problems.append(f"{where}: parses.archive: {archive} holds dependency parses only (packed with "
                            f"--arcs-only), and the grid's systems read {needs.readers('trees')}: give "
                            "parses.constituency too, or an archive with trees")
        return problems
    for kind in needed_parsers(prep):
        if not parses[kind]:
            problems.append(f"{where}: parses.{kind}: the grid's systems read {needs.readers(KINDS[kind])}: give a "
                            "parser (a pretrained name or a path) or parses.archive")
        elif prep.model_path(parses[kind]) is None and looks_like_path(parses[kind]):
            problems.append(f"{where}: parses.{kind}: {prep.config.resolve(parses[kind])}: no such file "
                            "(a study never trains a parser)")
    if needs.trees and parses.tagger and prep.model_path(parses.tagger) is None:
        problems.append(f"{where}: parses.tagger: {prep.config.resolve(parses.tagger)}: no such file")
    return problems


def needed_parsers(prep: Preparation) -> list[str]:
    """The kinds of parser the grid needs run (none with a parse archive)."""
    if prep.config.parses.archive:
        return []
    return [kind for kind in KINDS if getattr(prep.needs, KINDS[kind])]


def fetch_problems(prep: Preparation) -> list[str]:
    """Why a parser named by a pretrained name cannot be had (``fairseq-syntax-parse fetch`` failed); each is
    downloaded now."""
    parses, problems = prep.config.parses, []
    for kind in needed_parsers(prep):
        if not parses[kind] or looks_like_path(parses[kind]) or prep.model_path(parses[kind]) is not None:
            continue
        done = subprocess.run([*parse_program(), "fetch", "--kind", kind, "--backend", parses[f"{kind}_backend"],
                               "--model", parses[kind], "--lang", prep.src], capture_output=True, text=True,
                              cwd=REPO_ROOT, env=environment())
        if done.returncode != 0:
            lines = [line.strip() for line in done.stderr.splitlines() if line.strip()] or ["no output"]
            problems.append(f"{prep.config.path}: parses.{kind}: {lines[-1].removeprefix('error: ')}")
    return problems


def parses_step(prep: Preparation) -> str:
    """The parses the grid needs; returns the record key that holds them ('' for one per parser kind)."""
    if prep.config.parses.archive:
        return archive_step(prep)
    for kind in needed_parsers(prep):
        parser_step(prep, kind)
    return ""


def token_inputs(prep: Preparation) -> dict[str, str]:
    return {f"input tok/{split}.{prep.src}": prep.input_digest("tokens", f"tok/{split}.{prep.src}")
            for split in SPLITS}


def archive_step(prep: Preparation) -> str:
    from fairseq_syntax.parsing import archive

    store = prep.config.resolve(prep.config.parses.archive)
    kinds = archive_kinds(store)  # an archive packed with --arcs-only holds no trees
    outputs = [f"tok/{split}.{kind}" for split in SPLITS for kind in kinds] + ["tok/parses.json"]
    optional = [f"tok/{split}.{kind}.skipped" for split in SPLITS for kind in kinds if kind != CONLLU]
    recipe = {"parses.archive": "sha256:" + archive.sha256((store / archive.MANIFEST).read_bytes()),
              "corpus.source": prep.src, **token_inputs(prep)}

    def build(staging: Path) -> str:
        tok = staging / "tok"
        tok.mkdir()
        for split in SPLITS:
            (tok / f"{split}.{prep.src}").symlink_to(prep.work / f"tok/{split}.{prep.src}")
        try:
            done = archive.unpack(str(store), str(tok), prep.src, list(SPLITS))
        except archive.ArchiveError as error:
            raise PrepareError(f"{prep.config.path}: parses.archive: {error}") from None
        for split in SPLITS:
            (tok / f"{split}.{prep.src}").unlink()
        lines = ", ".join(f"{d.split} {d.lines}" for d in done)
        return (f"parses from {store.name}: lines {lines} (found by their tokens); "
                f"{sum(d.fallbacks for d in done)} fallback lines, listed in tok/*.skipped")

    prep.run(Step("parses:archive", recipe, outputs, build, optional=optional))
    return "parses:archive"


def model_identity(prep: Preparation, value: str) -> dict:
    """A parser as a recipe holds it, as a parse record names it: a file or folder by name and digest, a pretrained
    name as given."""
    from fairseq_syntax.parsing.parse_records import model_entry

    return model_entry(str(prep.model_path(value) or value))


def parser_step(prep: Preparation, kind: str) -> None:
    parses = prep.config.parses
    if kind == "constituency":
        files = [TREES]
        optional = [f"tok/{split}.{TREES}{suffix}" for split in SPLITS for suffix in (".skipped", RECORD)]
        extra = {"parses.tagger": model_identity(prep, parses.tagger) if parses.tagger else ""}
    else:
        files = [ARCS, CONLLU]
        optional = [f"tok/{split}.{ARCS}.skipped" for split in SPLITS] + \
            [f"tok/{split}.{ARCS.removesuffix('.gz')}{RECORD}" for split in SPLITS]
        extra = {}
    outputs = [f"tok/{split}.{name}" for split in SPLITS for name in files]
    recipe = {f"parses.{kind}": model_identity(prep, parses[kind]),
              f"parses.{kind}_backend": parses[f"{kind}_backend"], **extra, "corpus.source": prep.src,
              **token_inputs(prep)}

    def build(staging: Path) -> str:
        (staging / "tok").mkdir(exist_ok=True)
        counts, fallbacks = [], 0
        for split in SPLITS:
            made = [staging / f"tok/{split}.{name}" for name in files]
            if not all(path.is_file() for path in made):  # a killed run's finished splits are kept
                parse(prep, kind, prep.work / f"tok/{split}.{prep.src}", made, staging / f"parse.{split}.log")
            counts.append(f"{split} {line_count(made[0])}")
            skipped = Path(f"{made[0]}.skipped")
            fallbacks += line_count(skipped) if skipped.is_file() else 0
        return (f"lines parsed by {parses[kind]}: {', '.join(counts)}; {fallbacks} fallback lines (flat "
                "structures), listed in tok/*.skipped")

    prep.run(Step(f"parses:{kind}", recipe, outputs, build, optional=optional, keep_staging=True))


def parse(prep: Preparation, kind: str, tokens: Path, made: list[Path], log: Path) -> None:
    """One split parsed by the file's parser (``fairseq-syntax-parse``) into ``made`` (the output, and for a
    dependency parser the CoNLL-U)."""
    parses = prep.config.parses
    model = str(prep.model_path(parses[kind]) or parses[kind])
    workers = str(parses.workers)
    tagger = ["--tagger", str(prep.model_path(parses.tagger))] if kind == "constituency" and parses.tagger \
        else []
    outputs = ["--output", str(made[0])] + (["--conllu", str(made[1])] if len(made) > 1 else [])
    failed = run_logged([*parse_program(), kind, "--backend", parses[f"{kind}_backend"], "--model", model, *tagger,
                         "--lang", prep.src, "--input", str(tokens), *outputs, "--workers", workers,
                         "--num-shards", workers], log, prep.held)
    if failed:
        raise PrepareError(f"{prep.config.path}: parses.{kind}: parsing {tokens.name} with {parses[kind]} failed: "
                           f"{failed} (the whole log: {log})")


def parser_recipe(prep: Preparation, directory: DataDirectory) -> dict:
    """What a data directory records of its parsers (syntax.json's ``parser``, ``parsers.json``)."""
    parses, reads = prep.config.parses, directory.reads
    if not reads:
        return {"parsers": {}}
    if parses.archive:
        return {"parsers": {"archive": prep.input_digest(prep.parses_key, "tok/parses.json"),
                            "roles": archive_roles(reads)}}
    parser = {}
    if "trees" in reads:
        parser.update({"backend": parses.constituency_backend,
                       "model": model_identity(prep, parses.constituency),
                       "tagger": model_identity(prep, parses.tagger) if parses.tagger else None})
    if "arcs" in reads:
        parser["dependency"] = model_identity(prep, parses.dependency)
    return {"parser": parser}


def write_parsers(prep: Preparation, directory: DataDirectory, destination: Path) -> None:
    """``parsers.json``: the parsers of what the directory reads (none for a sequence directory without side data
    from parses)."""
    from fairseq_syntax.parsing import archive
    from fairseq_syntax.parsing.parse_records import labels_of
    from fairseq_syntax.parsing.provenance import describe_parsers, read_parser_records

    out = destination / "parsers.json"
    parses = prep.config.parses
    if parses.archive:
        roles = archive_roles(directory.reads)
        try:
            if not directory.reads:
                out.write_text("{}\n", encoding="utf-8")
            elif isinstance(roles, list):
                archive.write_provenance(str(prep.work / "tok/parses.json"), str(out), roles)
            else:
                archive.write_provenance(str(prep.work / "tok/parses.json"), str(out), [],
                                         without=[] if roles == "all" else ["dependency"])
        except archive.ArchiveError as error:
            raise PrepareError(f"{prep.config.path}: parses.archive: {error}") from None
        return
    models = {}
    if "trees" in directory.reads:
        models = {"constituency": parses.constituency} | ({"tagger": parses.tagger} if parses.tagger else {})
    if "arcs" in directory.reads:
        models["dependency"] = parses.dependency
    models = {role: str(prep.model_path(model) or model) for role, model in models.items()}
    described = describe_parsers(models, read_parser_records(str(Path(REPO_ROOT) / "preprocess" / "runs")))
    if "dependency" in described:  # the label scheme of the dependency parses: their record's, else the labels' own
        try:
            described["dependency"]["labels"] = labels_of(str(prep.work / f"tok/train.{ARCS}"))
        except ValueError as error:
            raise PrepareError(f"{prep.work / f'tok/train.{ARCS}'}: {error}") from None
    out.write_text(json.dumps(described, indent=1) + "\n", encoding="utf-8")
