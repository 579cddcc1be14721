#!/usr/bin/env python3
"""Fetch a translation recipe's parallel corpus into the folder its study reads (``corpus.raw``), each file checked.

    python3 examples/fetch_corpus.py multi30k --study examples/multi30k/study.toml
    python3 examples/fetch_corpus.py iwslt15-en-vi --study examples/iwslt15_en_vi/study.toml [--url DIR_OR_URL]

``multi30k``: Multi30K Task 1 raw text, en and de (``{train,val,test_2016_flickr}.{en,de}.gz``) from the
``multi30k/dataset`` repository at a fixed commit, each checked against its SHA-256
(``../shared/data/SOURCES.md``). ``iwslt15-en-vi``: the Stanford NMT release
(``{train,tst2012,tst2013}.{en,vi}``); no digests are published, so each pair must have as many lines on both
sides, dev and test McDonald & Chiang's (2021, Table 1) 1,553 and 1,268.

A whole file already there is kept. A fetched file is renamed into place once it passes its check; one that fails
is one line (file, expected, found) and is removed. ``--url``: a mirror or a folder holding the files.
``--out DIR``: instead of the study's ``corpus.raw``."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from fairseq_syntax.evaluation.packed_runs import sha256_of
from fairseq_syntax.study.config import ConfigError, load_study
from fairseq_syntax.study.prepare.engine import line_count


@dataclass(frozen=True)
class Corpus:
    """Where a corpus's files are (``url``: their common address) and how each is checked: its SHA-256
    (``digests``), else both sides' line counts (``pairs``: the file stems, each with the lines it must have, or
    None: as many as its other side)."""
    url: str
    languages: tuple[str, str]
    suffix: str
    pairs: dict[str, int | None]
    digests: dict[str, str] = field(default_factory=dict)

    def files(self) -> list[str]:
        return [f"{stem}.{lang}{self.suffix}" for stem in self.pairs for lang in self.languages]


CORPORA = {
    "multi30k": Corpus(
        url="https://github.com/multi30k/dataset/raw/a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw",
        languages=("en", "de"), suffix=".gz", pairs={"train": 29000, "val": 1014, "test_2016_flickr": 1000},
        digests={
            "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
            "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
            "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
            "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
            "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
            "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
        }),
    "iwslt15-en-vi": Corpus(
        url="https://nlp.stanford.edu/projects/nmt/data/iwslt15.en-vi", languages=("en", "vi"), suffix="",
        pairs={"train": None, "tst2012": 1553, "tst2013": 1268}),
}


class FetchError(Exception):
    """One line: the file and what is wrong with it."""


def problem(corpus: Corpus, folder: Path, name: str, path: Path) -> str | None:
    """Why ``path`` (holding the corpus's file ``name``) is not the file: its digest, else its lines; None if it is."""
    if name in corpus.digests:
        found = sha256_of(path)
        return None if found == corpus.digests[name] else f"SHA-256 {found}, not {corpus.digests[name]}"
    stem = name.split(".")[0]
    lines = line_count(path)
    expected = corpus.pairs[stem]
    if expected is None:  # as many lines as its other side, once that is there
        others = [folder / f"{stem}.{lang}{corpus.suffix}" for lang in corpus.languages]
        others = [other for other in others if other.name != name and other.is_file()]
        expected = line_count(others[0]) if others else lines
    return None if lines == expected else f"{lines} lines, not {expected}"


def fetch(corpus: Corpus, folder: Path, url: str, progress=print) -> list[str]:
    """Every file of ``corpus`` into ``folder`` (module docstring); the names fetched."""
    folder.mkdir(parents=True, exist_ok=True)
    fetched = []
    for name in corpus.files():
        target = folder / name
        if target.is_file() and problem(corpus, folder, name, target) is None:
            continue
        partial = folder / f".{name}.partial"
        source = os.path.join(url, name) if os.path.isdir(url) else f"{url.rstrip('/')}/{name}"
        try:
            if os.path.isdir(url):
                shutil.copyfile(source, partial)
            else:
                with urllib.request.urlopen(source, timeout=60) as response, open(partial, "wb") as out:
                    shutil.copyfileobj(response, out)
            why = problem(corpus, folder, name, partial)
        except (OSError, urllib.error.URLError) as error:
            partial.unlink(missing_ok=True)
            raise FetchError(f"{source}: could not fetch it: {getattr(error, 'reason', error)}") from None
        if why is not None:
            partial.unlink()
            raise FetchError(f"{source}: not the corpus's file {name}: {why}")
        os.replace(partial, target)
        fetched.append(name)
        progress(f"{target}: fetched from {source}")
    return fetched


def study_folder(study: str) -> Path:
    """The ``corpus.raw`` folder of a study file (its ``study.base`` followed)."""
    try:
        config = load_study(study)
    except ConfigError as error:
        raise FetchError(error.problems[0]) from None
    return config.resolve(config.corpus.raw)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 examples/fetch_corpus.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", choices=sorted(CORPORA))
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--study", help="the study file whose corpus.raw folder gets the files")
    where.add_argument("--out", help="the folder that gets the files")
    parser.add_argument("--url", help="fetch from this address or folder instead of the corpus's own")
    args = parser.parse_args(argv)
    corpus = CORPORA[args.corpus]
    try:
        folder = Path(args.out) if args.out else study_folder(args.study)
        fetched = fetch(corpus, folder, args.url or corpus.url)
    except FetchError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    kept = len(corpus.files()) - len(fetched)
    print(f"{folder}: {args.corpus}: {len(fetched)} files fetched, {kept} there already and whole")
    return 0


if __name__ == "__main__":
    sys.exit(main())
