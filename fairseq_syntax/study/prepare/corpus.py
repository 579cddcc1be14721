"""The corpus steps of a study's data: the training subset, the tokens and the test reference.

* ``subset`` (``corpus.subset`` > 0): that many training pairs (:func:`subset_lines`), in their order, into
  ``WORK/raw/TRAIN.{SRC,TGT}.gz`` and ``WORK/raw/TRAIN.lines``;
* ``tokens``: ``tok/SPLIT.{SRC,TGT}`` (:mod:`fairseq_syntax.parsing.normalize`); ``corpus.max_train_words`` leaves
  out long training pairs, listed in ``tok/train.removed.tsv``;
* ``reference``: ``WORK/test.TARGET.ref``, the raw test reference, or for ``tokenized`` text without
  ``corpus.reference`` the test target's tokens."""
from __future__ import annotations

import gzip
import random
import shutil
from pathlib import Path

from fairseq_syntax.study.prepare.engine import PrepareError, Step, content_digest, line_count, open_file
from fairseq_syntax.study.prepare.needs import SPLITS
from fairseq_syntax.study.prepare.preparation import Preparation
from fairseq_syntax.study.processes import quiet


def subset_lines(total: int, pairs: int, seed: int) -> list[int]:
    """1-based line numbers of the training subset, ascending: the first ``pairs`` of
    ``random.Random(seed).sample(range(total), total)``, so a smaller subset of one seed lies inside every larger one
    (for Multi30k's 10,000 of 29,000 pairs: the draw of its committed parses)."""
    return sorted(draw_order(total, seed)[:pairs])


def draw_order(total: int, seed: int) -> list[int]:
    """The random order of the 1-based line numbers whose first lines :func:`subset_lines` draws."""
    return [number + 1 for number in random.Random(seed).sample(range(total), total)]


def raw_lines(path: Path) -> list[str]:
    """A raw file's lines (split on ``\\n`` only, a final empty line dropped)."""
    with open_file(path, "rt", encoding="utf-8", newline="\n") as handle:
        lines = handle.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def reference_source(prep: Preparation) -> Path | None:
    given = prep.config.corpus.reference
    if given:
        path = prep.config.resolve(given)
        return path if path.is_file() else None
    return prep.raw_file(prep.stems["test"], prep.tgt)


def file_problems(prep: Preparation) -> list[str]:
    """Every missing raw file, and a ``corpus.reference`` that is not there, one line each."""
    where, problems = prep.config.path, []
    if not prep.raw.is_dir():
        problems.append(f"{where}: corpus.raw: {prep.raw}: no such folder")
    else:
        missing = [f"{stem}.{lang}[.gz]" for stem in prep.stems.values() for lang in (prep.src, prep.tgt)
                   if prep.raw_file(stem, lang) is None]
        if missing:
            keys = ", ".join(f"corpus.{split} = {stem!r}" for split, stem in prep.stems.items())
            problems.append(f"{where}: corpus.raw: {prep.raw} lacks {', '.join(missing)} ({keys}, corpus.source "
                            f"{prep.src!r}, corpus.target {prep.tgt!r})")
    if prep.config.corpus.reference and reference_source(prep) is None:
        problems.append(f"{where}: corpus.reference: {prep.config.resolve(prep.config.corpus.reference)}: "
                        "no such file")
    return problems


def subset_step(prep: Preparation) -> dict[str, dict[str, Path]]:
    """The raw files the tokens are made from: the corpus's, or for training the subset drawn from them."""
    corpus, src, tgt = prep.config.corpus, prep.src, prep.tgt
    sources = {split: {lang: prep.raw_file(stem, lang) for lang in (src, tgt)} for split, stem in prep.stems.items()}
    if not corpus.subset:
        return sources
    stem, pairs, seed = prep.stems["train"], corpus.subset, corpus.subset_seed
    outputs = [f"raw/{stem}.{src}.gz", f"raw/{stem}.{tgt}.gz", f"raw/{stem}.lines"]
    recipe = {"corpus.subset": pairs, "corpus.subset_seed": seed, "corpus.source": src, "corpus.target": tgt,
              **{f"input corpus.raw/{path.name}": content_digest(path) for path in sources["train"].values()}}

    def build(staging: Path) -> str:
        sides = {lang: raw_lines(path) for lang, path in sources["train"].items()}
        if len(sides[src]) != len(sides[tgt]):
            raise PrepareError(f"{sources['train'][src]} has {len(sides[src])} lines, "
                               f"{sources['train'][tgt]} {len(sides[tgt])}")
        total = len(sides[src])
        if not 0 < pairs <= total:
            raise PrepareError(f"{prep.config.path}: corpus.subset: {pairs} pairs, but the training split has {total}")
        lines = subset_lines(total, pairs, seed)
        (staging / "raw").mkdir()
        for lang, side in sides.items():
            with open(staging / f"raw/{stem}.{lang}.gz", "wb") as raw, \
                    gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
                out.write("".join(side[n - 1] + "\n" for n in lines).encode("utf-8"))
        (staging / f"raw/{stem}.lines").write_text("".join(f"{n}\n" for n in lines), encoding="utf-8")
        return f"{pairs} of {total} training pairs drawn (seed {seed}) into raw/{stem}.{{{src},{tgt}}}.gz"

    prep.run(Step("subset", recipe, outputs, build))
    return {**sources, "train": {lang: prep.work / f"raw/{stem}.{lang}.gz" for lang in (src, tgt)}}


def tokens_step(prep: Preparation, sources: dict[str, dict[str, Path]]) -> None:
    corpus, src, tgt = prep.config.corpus, prep.src, prep.tgt
    max_words = corpus.max_train_words
    outputs = [f"tok/{split}.{lang}" for split in SPLITS for lang in (src, tgt)]
    optional = ["tok/train.removed.tsv"] if max_words else []
    recipe = {"corpus.text": corpus.text, "corpus.source": src, "corpus.target": tgt,
              "corpus.max_train_words": max_words}
    for split, paths in sources.items():
        for lang, path in paths.items():
            subset = split == "train" and corpus.subset
            recipe[f"input {split}.{lang}"] = prep.input_digest("subset", f"raw/{path.name}") if subset \
                else content_digest(path)

    def build(staging: Path) -> str:
        from fairseq_syntax.parsing.normalize import normalize

        counts = {}
        for split in SPLITS:
            listing = staging / "tok/train.removed.tsv" if split == "train" and max_words else None
            with quiet(staging / f"normalize.{split}.log"):
                normalize(corpus.text, src, tgt, str(sources[split][src]), str(sources[split][tgt]),
                          str(staging / "tok" / split), max_words if split == "train" else 0,
                          None if listing is None else str(listing))
            counts[split] = line_count(staging / f"tok/{split}.{src}")
        text = ", ".join(f"{split} {count}" for split, count in counts.items())
        how = "tokenized with sacremoses" if corpus.text == "raw" else "Moses' entities unescaped"
        summary = f"pairs: {text} ({how}, source brackets PTB-escaped)"
        if max_words:
            removed = line_count(staging / "tok/train.removed.tsv") - 1
            summary += (f"; corpus.max_train_words {max_words} left out {removed} training pairs, listed in "
                        "tok/train.removed.tsv")
        return summary

    prep.run(Step("tokens", recipe, outputs, build, optional=optional))


def reference_step(prep: Preparation) -> None:
    """The test reference the runs are scored against: the raw one (``corpus.reference``, else the test target file);
    for ``tokenized`` text without ``corpus.reference``, its tokens as the tokens step made them."""
    target, tokens = f"test.{prep.tgt}.ref", f"tok/test.{prep.tgt}"
    if prep.config.corpus.text == "tokenized" and not prep.config.corpus.reference:
        source = prep.work / tokens
        recipe = {"corpus.reference": f"{tokens} (corpus.text tokenized)",
                  f"input {tokens}": prep.input_digest("tokens", tokens)}
        what = f"the test reference's tokens {tokens}"
    else:
        source = reference_source(prep)
        recipe = {"corpus.reference": prep.config.corpus.reference or f"corpus.raw/{source.name}",
                  f"input {source.name}": content_digest(source)}
        what = f"the raw test reference {source.name}"

    def build(staging: Path) -> str:
        with open_file(source) as handle, open(staging / target, "wb") as out:
            shutil.copyfileobj(handle, out)
        return f"{what}, {line_count(staging / target)} lines"

    prep.run(Step("reference", recipe, [target], build))
