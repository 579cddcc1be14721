"""The study's BPE: ``bpe/codes`` and ``bpe/vocab.LANG``, joint BPE (``subword-nmt``, ``bpe.merges``) learned on the
training tokens, and ``bpe/SPLIT.LANG``, every split's tokens with it applied."""
from __future__ import annotations

import sys
from pathlib import Path

from fairseq_syntax.study.prepare.engine import PrepareError, Step, line_count
from fairseq_syntax.study.prepare.needs import SPLITS
from fairseq_syntax.study.prepare.preparation import Preparation
from fairseq_syntax.study.processes import run_logged


def bpe_step(prep: Preparation) -> None:
    merges, src, tgt = prep.config.bpe.merges, prep.src, prep.tgt
    outputs = ["bpe/codes", f"bpe/vocab.{src}", f"bpe/vocab.{tgt}"] + \
        [f"bpe/{split}.{lang}" for split in SPLITS for lang in (src, tgt)]
    recipe = {"bpe.merges": merges, **{f"input tok/{split}.{lang}": prep.input_digest("tokens", f"tok/{split}.{lang}")
                                       for split in SPLITS for lang in (src, tgt)}}

    def subword_nmt(arguments: list[str], log: Path, **streams) -> None:
        """``subword-nmt ARGUMENTS`` (its console script's entry point, by this Python)."""
        failed = run_logged([sys.executable, "-c", "from subword_nmt.subword_nmt import main; main()", *arguments],
                            log, prep.held, **streams)
        if failed:
            raise PrepareError(f"subword-nmt {arguments[0]} failed: {failed} (the whole log: {log})")

    def build(staging: Path) -> str:
        bpe, tok = staging / "bpe", prep.work / "tok"
        bpe.mkdir()
        subword_nmt(["learn-joint-bpe-and-vocab", "--input", str(tok / f"train.{src}"), str(tok / f"train.{tgt}"),
                     "-s", str(merges), "-o", str(bpe / "codes"), "--write-vocabulary", str(bpe / f"vocab.{src}"),
                     str(bpe / f"vocab.{tgt}")], staging / "learn.log")
        for split in SPLITS:
            for lang in (src, tgt):
                with open(tok / f"{split}.{lang}", "rb") as source, open(bpe / f"{split}.{lang}", "wb") as out:
                    subword_nmt(["apply-bpe", "-c", str(bpe / "codes"), "--vocabulary", str(bpe / f"vocab.{lang}"),
                                 "--vocabulary-threshold", "1"], staging / "apply.log", stdin=source, stdout=out)
        codes = line_count(bpe / "codes") - 1  # its first line is the version
        return (f"{codes} joint merges (bpe.merges {merges}) learned on the training tokens, applied to "
                f"{', '.join(SPLITS)}")

    prep.run(Step("bpe", recipe, outputs, build))
