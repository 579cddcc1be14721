"""stanza's resources folder, and its tokenizer for the languages Moses does not tokenize (apart from the parsers, so
the text module needs none of their imports)."""
from __future__ import annotations

import contextlib
import os
import shutil

from fairseq_syntax.parsing.models import downloading


def resources_folder() -> str:
    """Where stanza keeps the models it downloads."""
    from stanza.resources.common import DEFAULT_MODEL_DIR

    return os.environ.get("STANZA_RESOURCES_DIR", DEFAULT_MODEL_DIR)


@contextlib.contextmanager
def folder_removed_on_failure(folder: str):
    """Removes ``folder`` when the block fails and the folder was not there before it (nothing left behind)."""
    existed = os.path.exists(folder)
    try:
        yield
    except BaseException:
        if not existed and os.path.isdir(folder):
            shutil.rmtree(folder, ignore_errors=True)
        raise


def stanza_tokenizer(lang: str):
    """Raw line -> tokens by stanza's tokenizer of ``lang`` (its default package, fetched by name once; one line
    stays one sentence), for the languages Moses does not tokenize (:func:`fairseq_syntax.parsing.text.tokenizer`)."""
    import stanza

    folder = resources_folder()
    with folder_removed_on_failure(folder), downloading(f"{lang} (stanza's tokenizer)"):
        pipeline = stanza.Pipeline(lang=lang, processors="tokenize", tokenize_no_ssplit=True, dir=folder,
                                   download_method=stanza.DownloadMethod.REUSE_RESOURCES, logging_level="WARN",
                                   device="cpu")

    def tokenize(line: str) -> list[str]:
        if not line.strip():
            return []
        return [token.text for sentence in pipeline(line.strip()).sentences for token in sentence.tokens]

    return tokenize
