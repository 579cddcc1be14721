"""subword-nmt's BPE: its word grouping, shared by the commands that carry a word-level analysis (trees, arcs) onto
BPE'd source tokens, and the BPE a data directory was made with, which ``fairseq-interactive`` applies in process.

subword-nmt marks every non-final piece of a word with ``@@`` (``fa@@ th@@ er``).

The recipes segment with ``subword-nmt apply-bpe -c CODES --vocabulary VOCAB --vocabulary-threshold 1``, which
undoes merges rarer than the threshold (``o@@ n@@ e`` where the codes alone give ``o@@ ne``; fairseq's ``--bpe
subword_nmt`` takes no vocabulary). ``fairseq-syntax-preprocess --bpe-codes CODES [--bpe-vocabulary VOCAB
--bpe-vocabulary-threshold N]`` copies the files into the data directory and records them in ``syntax.json``
(:data:`BPE_META_KEY`: ``{"codes": "bpe.codes", "vocabulary": "bpe.vocab.en", "vocabulary_threshold": 1}``);
:class:`SubwordNmtBpe` applies exactly what ``apply-bpe`` does, word by word."""
import os
import shutil
from typing import Optional

BPE_JOINER = "@@"
BPE_META_KEY = "bpe"  # syntax.json entry (module docstring)
CODES_FILE = "bpe.codes"
#: the files of a data directory that hold its BPE (data_dir.DATA_FILE_PATTERNS lists them)
BPE_FILE_PATTERNS = (CODES_FILE, "bpe.vocab.*")


def group_bpe_words(tokens: list[str]) -> list[list[str]]:
    """Subword tokens -> the pieces of each word (subword-nmt marks non-final pieces with ``@@``)."""
    words, current = [], []
    for token in tokens:
        current.append(token)
        if not token.endswith(BPE_JOINER):
            words.append(current)
            current = []
    if current:  # a dangling joiner: keep the pieces as a word so the leaf comparison reports it
        words.append(current)
    return words


def merge_pieces(pieces: list[str]) -> str:
    """The pieces of one word -> the word, joiners removed."""
    return "".join(p.removesuffix(BPE_JOINER) for p in pieces)


class SubwordNmtBpe:
    """``subword-nmt apply-bpe -c codes [--vocabulary vocabulary --vocabulary-threshold threshold]``, one word at a
    time: :meth:`segment` gives the pieces apply-bpe writes for the word. A file that is not what subword-nmt reads
    raises ``ValueError`` naming it."""

    def __init__(self, codes: str, vocabulary: Optional[str] = None, threshold: Optional[int] = None):
        from subword_nmt.apply_bpe import BPE, read_vocabulary

        self.codes, self.vocabulary, self.threshold = codes, vocabulary, threshold
        words = None
        if vocabulary is not None:
            with open(vocabulary, encoding="utf-8") as lines:
                try:
                    words = read_vocabulary(lines, threshold)
                except ValueError:
                    raise ValueError(f"{vocabulary}: not a subword-nmt vocabulary (one 'WORD COUNT' a line)") from None
        with open(codes, encoding="utf-8") as lines:
            try:
                self._bpe = BPE(lines, -1, BPE_JOINER, words, None)
            except SystemExit:  # subword-nmt names the bad line on stderr and exits
                raise ValueError(f"{codes}: not a subword-nmt BPE codes file (the line named above)") from None
        self._pieces: dict[str, list[str]] = {}

    def segment(self, word: str) -> list[str]:
        """The BPE pieces of ``word`` (one piece when it stays whole)."""
        pieces = self._pieces.get(word)
        if pieces is None:
            pieces = self._pieces[word] = self._bpe.segment_tokens([word])
        return pieces


def record_bpe(destdir: str, source_lang: str, codes: str, vocabulary: Optional[str] = None,
               threshold: Optional[int] = None) -> dict:
    """Copies the BPE files into ``destdir``; returns the ``syntax.json`` entry naming them (module docstring)."""
    shutil.copyfile(codes, os.path.join(destdir, CODES_FILE))
    entry = {"codes": CODES_FILE, "vocabulary": None, "vocabulary_threshold": threshold}
    if vocabulary is not None:
        entry["vocabulary"] = f"bpe.vocab.{source_lang}"
        shutil.copyfile(vocabulary, os.path.join(destdir, entry["vocabulary"]))
    return entry


def data_dir_bpe(data_path: str, meta: dict) -> Optional[SubwordNmtBpe]:
    """The BPE ``syntax.json`` (``meta``) of ``data_path`` records, or None where it records none."""
    entry = meta.get(BPE_META_KEY)
    if entry is None:
        return None
    vocabulary = entry.get("vocabulary")
    return SubwordNmtBpe(os.path.join(data_path, entry["codes"]),
                         None if vocabulary is None else os.path.join(data_path, vocabulary),
                         entry.get("vocabulary_threshold"))
