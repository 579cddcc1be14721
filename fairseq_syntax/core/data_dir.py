"""The data directory format: what ``fairseq-syntax-preprocess`` writes beside fairseq's binarized files.

``syntax.json`` records how the source side was made: ``{"form": "preorder", "preterminals": "split", ...}``
(:mod:`fairseq_syntax.core.input_forms`), the BPE (``"bpe"``, :mod:`fairseq_syntax.core.bpe`), the parser and
whether the trees carry POS tags (``"parser"``, ``"pos_tags"``, :mod:`fairseq_syntax.core.interactive_source`),
and per side input the settings a later step must reuse (``"ldd"``). Side data files:
``{split}.{src}-{tgt}.{src}.{suffix}.{bin,idx}`` (:mod:`fairseq_syntax.core.side_inputs`).

Side data is tied to its tokens:
``"side_data": {suffix: {split: {"tokens": "sha256:...", "files": "sha256:..."}}}`` (:func:`with_side_data`,
:func:`files_fingerprint`), checked on loading (:func:`fairseq_syntax.core.side_inputs.load_side_data`).
``{split}.skipped.tsv`` lists the lines ``--skip-invalid`` left out (``LINE<TAB>reason<TAB>message``)."""
import fnmatch
import hashlib
import json
import os

from fairseq_syntax.core.bpe import BPE_FILE_PATTERNS
from fairseq_syntax.core.files import write_atomically
from fairseq_syntax.core.text_lines import read_lines

META_FILE = "syntax.json"


def first_data_path(data: str) -> str:
    """The first of fairseq's ``--data`` paths (``a:b:c``): the one whose ``syntax.json`` is read."""
    return data.split(os.pathsep)[0]


def read_meta(data_path: str) -> dict:
    """``syntax.json`` of a data directory; a directory without one holds the ``sequence`` form."""
    path = os.path.join(data_path, META_FILE)
    if not os.path.exists(path):
        return {"form": "sequence", "preterminals": "keep"}
    with open(path) as f:
        return json.load(f)


def write_meta(data_path: str, meta: dict) -> None:
    """Writes ``syntax.json`` whole or not at all: a run killed while writing leaves the one there was."""
    path = os.path.join(data_path, META_FILE)
    write_atomically(path, json.dumps(meta, indent=1))


#: ``syntax.json`` entry ``{suffix: {split: fingerprint}}``: the source tokens each split's side data was made for
SIDE_DATA_KEY = "side_data"
SKIPPED_SUFFIX = ".skipped.tsv"
#: the files of a data directory, fairseq's and the plugin's: what fairseq-syntax-preprocess will not write among
#: (nor mix an earlier run's side data with), and what its --overwrite removes
DATA_FILE_PATTERNS = ("dict.*.txt", "*.bin", "*.idx", META_FILE, "preprocess.log", "*" + SKIPPED_SUFFIX, "*.partial",
                      *BPE_FILE_PATTERNS)


def source_prefix(data_path: str, split: str, src: str, tgt: str) -> str:
    """``DATA/{split}.{src}-{tgt}.{src}``: the binarized source tokens of a split (and the stem of its side data)."""
    return os.path.join(data_path, f"{split}.{src}-{tgt}.{src}")


def files_fingerprint(prefix: str) -> str:
    """``sha256:HEX`` of ``PREFIX.idx`` then ``PREFIX.bin`` (the .idx alone holds only lengths). About 600 MB/s on
    one core."""
    digest = hashlib.sha256()
    for extension in (".idx", ".bin"):
        with open(prefix + extension, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return "sha256:" + digest.hexdigest()


def with_side_data(meta: dict, suffix: str, split: str, tokens_prefix: str) -> dict:
    """``meta`` recording that ``split``'s ``suffix`` side data (``tokens_prefix.suffix.{bin,idx}``) was made for the
    source tokens ``tokens_prefix.{bin,idx}``: the fingerprints of both, so that neither can be swapped unseen."""
    record = {"tokens": files_fingerprint(tokens_prefix), "files": files_fingerprint(f"{tokens_prefix}.{suffix}")}
    side_data = dict(meta.get(SIDE_DATA_KEY, {}))
    side_data[suffix] = {**side_data.get(suffix, {}), split: record}
    return {**meta, SIDE_DATA_KEY: side_data}


def data_files(data_path: str) -> list[str]:
    """Names of the files in ``data_path`` that belong to a data directory (:data:`DATA_FILE_PATTERNS`)."""
    return sorted(name for name in os.listdir(data_path) if os.path.isfile(os.path.join(data_path, name))
                  and any(fnmatch.fnmatchcase(name, pattern) for pattern in DATA_FILE_PATTERNS))


def add_split_arguments(parser) -> None:
    """fairseq-preprocess's ``-s``/``-t`` and split prefixes, which :func:`split_prefixes` reads."""
    parser.add_argument("-s", "--source-lang", required=True)
    parser.add_argument("-t", "--target-lang", required=True)
    parser.add_argument("--trainpref")
    parser.add_argument("--validpref", help="comma-separated prefixes for several validation sets")
    parser.add_argument("--testpref", help="comma-separated prefixes for several test sets")


def split_prefixes(args) -> list[tuple[str, str]]:
    """(split, prefix) of fairseq-preprocess's ``--trainpref``, ``--validpref`` and ``--testpref`` (the second of
    comma-separated valid prefixes is ``valid1``, ...); SystemExit where none is given."""
    splits = [("train", args.trainpref)] if args.trainpref else []
    for kind in ("valid", "test"):
        prefixes = getattr(args, f"{kind}pref")
        splits += [(kind if k == 0 else f"{kind}{k}", prefix) for k, prefix in
                   enumerate(prefixes.split(",") if prefixes else [])]
    if not splits:
        raise SystemExit("error: give at least one of --trainpref, --validpref, --testpref")
    return splits


def skipped_listing(data_path: str, split: str) -> str:
    return os.path.join(data_path, split + SKIPPED_SUFFIX)


def read_skipped_lines(path: str) -> list[int]:
    """The 1-based line numbers of a ``{split}.skipped.tsv`` (``LINE<TAB>reason<TAB>message``): the pairs
    fairseq-syntax-preprocess left out. A malformed line raises ``ValueError`` naming file and line."""
    numbers = []
    for number, line in enumerate(read_lines(path), 1):
        field = line.split("\t", 1)[0]
        if not field.isdigit():
            raise ValueError(f"{path}:{number}: expected LINE<TAB>reason<TAB>message, got {line[:80]!r}")
        numbers.append(int(field))
    return numbers


#: the tasks of the plugin that read a data directory, and what their directories hold
TRANSLATION_TASK, CLASSIFICATION_TASK = "syntax_translation", "tree_classification"
CLASSIFICATION_FILES = ("labels.txt", "dict.txt")  # plus {split}.tree (fairseq_syntax.core.classification_task)
DATA_DIR_CONTENTS = {
    TRANSLATION_TASK: "made by fairseq-syntax-preprocess",
    CLASSIFICATION_TASK: f"{', '.join(CLASSIFICATION_FILES)} and {{split}}.tree",
}


def data_dir_task(data_path: str) -> str | None:
    """The task a data directory is made for: ``tree_classification`` (``labels.txt`` and ``dict.txt``),
    ``syntax_translation`` (fairseq's ``dict.LANG.txt`` of a language pair, or ``syntax.json``), or None."""
    names = os.listdir(data_path)
    if all(name in names for name in CLASSIFICATION_FILES):
        return CLASSIFICATION_TASK
    if META_FILE in names or any(name.startswith("dict.") and name.count(".") == 2 for name in names):
        return TRANSLATION_TASK
    return None


def require_language_pair(data_path: str, source_lang: str | None, target_lang: str | None) -> None:
    """Stop with one line where fairseq's translation task would fail with a traceback on a half-made data directory:
    no binarized split to tell the language pair from, or a dictionary missing."""
    names = os.listdir(data_path)
    if source_lang is None or target_lang is None:  # fairseq infers them from a file {split}.SRC-TGT.LANG...
        pairs = [name.split(".")[1] for name in names if name.count(".") >= 2 and name.split(".")[1].count("-") == 1]
        if not pairs:
            raise SystemExit(f"error: {data_path} holds no binarized split ({{split}}.SRC-TGT.SRC.{{bin,idx}}) to tell "
                             "the language pair from: a data directory made halfway (a preprocessing run that was "
                             "stopped?): make it again with fairseq-syntax-preprocess")
        source_lang, target_lang = pairs[0].split("-")
    for lang in (source_lang, target_lang):
        if f"dict.{lang}.txt" not in names:
            raise SystemExit(f"error: {os.path.join(data_path, f'dict.{lang}.txt')}: no such file: {data_path} is a "
                             "data directory made halfway, or for other languages (-s/-t): make it again with "
                             "fairseq-syntax-preprocess")


def require_meta(data_path: str) -> None:
    """Stop with one line when a translation data directory has no ``syntax.json`` (written last: the run stopped, or
    the file was lost)."""
    if not os.path.exists(os.path.join(data_path, META_FILE)):
        raise SystemExit(f"error: {os.path.join(data_path, META_FILE)}: no such file: {data_path} is a data directory "
                         f"made halfway (fairseq-syntax-preprocess writes {META_FILE} last: a run that was stopped, or "
                         "the file was removed), so nothing records its input form and side data: make it again with "
                         "fairseq-syntax-preprocess")


def require_data_dir_of(task: str, data_path: str) -> None:
    """Stop with one line when ``data_path`` is missing or made for the other task of the plugin."""
    if not os.path.isdir(data_path):
        raise SystemExit(f"error: {data_path}: no such data directory")
    made_for = data_dir_task(data_path)
    if made_for is not None and made_for != task:
        raise SystemExit(f"error: {data_path} is a {made_for} data directory ({DATA_DIR_CONTENTS[made_for]}), not "
                         f"one for --task {task} ({DATA_DIR_CONTENTS[task]}): give --task {made_for}, or a data "
                         "directory of the task")
