"""What ``fairseq-interactive`` makes of its input lines for ``--task syntax_translation``: the source tokens and
side data the same sentence gets when preprocessed offline (tokenize, PTB-escape, parse, BPE,
``fairseq-syntax-preprocess``).

Per line:

1. **Words.** ``--source-format text``: fairseq's ``--tokenizer`` if given, whitespace split, brackets PTB-escaped.
   ``--source-format tree``: one bracketed tree per line. Never guessed: ``text`` unless the model reads a
   constituency tree and no ``--source-parser`` is given, where it must be said.
2. **Parse.** A model reading a constituency tree gets ``--source-parser``'s, a buffer's lines parsed together
   (:func:`fairseq_syntax.parsing.constituency.parse_sentences` via :mod:`fairseq_syntax.core.source_parsers`); a
   side input with its own converter (``src_ldd``) gets that converter's.
3. **BPE.** The data directory's (:mod:`fairseq_syntax.core.bpe`), word by word; else fairseq's ``--bpe``.
4. **Form.** The tree with BPE'd leaves -> the input form and its side data
   (:func:`~fairseq_syntax.core.input_forms.source_form`).

A line that cannot be converted (empty, malformed tree, only the parser's flat fallback) becomes a
:class:`~fairseq_syntax.core.side_inputs.BadLine` naming its number.

Checked before the first line, each a one-line error: the format and parser options fit the model; the parser fits
syntax.json's ``"parser"`` (backend, model, tagger) and ``"pos_tags"``: another backend, a missing or extra
tagger, or trees that differ in having POS tags stop the run; another model file of the same kind is a warning."""
import logging
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from fairseq_syntax.core import trees
from fairseq_syntax.core.command_help import option
from fairseq_syntax.core.data_dir import META_FILE
from fairseq_syntax.core.input_forms import source_form
from fairseq_syntax.core.side_inputs import SIDE_INPUTS, BadLine
from fairseq_syntax.core.source_parsers import BACKENDS, constituency_parsers

logger = logging.getLogger(__name__)

TEXT, TREE = "text", "tree"
SOURCE_FORMATS = (TEXT, TREE)
PARSER_META_KEY = "parser"  # syntax.json: {"backend": ..., "model": identity, "tagger": identity or None}
POS_TAGS_META_KEY = "pos_tags"  # syntax.json: "tagged", "untagged" or "mixed" (the trees' preterminal labels)
TAGGED, UNTAGGED, MIXED = "tagged", "untagged", "mixed"

#: one converted line: (source tokens, {side input name: item})
Source = Tuple[List[str], Dict[str, torch.Tensor]]


@dataclass
class InteractiveSourceConfig:
    """Options of ``--task syntax_translation`` for ``fairseq-interactive`` (module docstring)."""

    source_format: Optional[str] = option(
        None, "fairseq-interactive only: what an input line is: 'text' (a sentence of tokenized words) or 'tree' (one "
        "bracketed constituency tree). Default: text, unless the model reads a constituency tree and no "
        "--source-parser is given, where it must be said")
    source_parser: Optional[str] = option(
        None, "fairseq-interactive only, for models reading a constituency tree (the linearized and preorder forms): "
        "parse each input sentence with this constituency parser (a local model file or a name benepar or SuPar "
        "downloads), the one that parsed the data directory's trees")
    source_parser_backend: Optional[str] = option(
        None, f"with --source-parser: its backend, one of {', '.join(BACKENDS)}. Default: the one the data directory's "
        "syntax.json records, else the one the model file tells")
    source_tagger: Optional[str] = option(
        None, "with --source-parser: the POS tagger (preprocess/train_parser.py tagger) whose tags label the parser's "
        "preterminals, as when the data directory's trees were made (crf-con predicts none)")


def word_pieces(words: Sequence[str], segment: Callable[[str], List[str]]) -> List[str]:
    return [piece for word in words for piece in segment(word)]


class InteractiveSource:
    """Input lines -> per line a :data:`Source` or a :class:`BadLine` (module docstring). ``side_inputs``: what the
    models read; ``segment``: word -> BPE pieces. Raises ``ValueError`` (one line) when the options do not fit the
    model or the data directory."""

    def __init__(self, cfg, meta: dict, data_path: str, side_inputs: Sequence[str],
                 segment: Callable[[str], List[str]]):
        self.meta, self.side_inputs, self.segment = meta, tuple(side_inputs), segment
        hooks = [SIDE_INPUTS[name] for name in self.side_inputs if SIDE_INPUTS[name].interactive]
        reads_tree = not hooks and meta["form"] != "sequence"
        self.format = _source_format(cfg, meta, reads_tree)
        self.parse = (_load_parser(cfg, meta, os.path.join(data_path, META_FILE))
                      if reads_tree and self.format == TEXT else None)
        self.convert = hooks[0].interactive(cfg, meta, data_path) if hooks else None
        self.reads_tree = reads_tree

    def __call__(self, lines: Sequence[str], numbers: Sequence[int],
                 tokenize: Callable[[str], str]) -> List[Union[Source, BadLine]]:
        read = {number: self._read(line, number, tokenize) for line, number in zip(lines, numbers)}
        good = [number for number in numbers if not isinstance(read[number], BadLine)]
        if self.convert is not None:  # the side input's own conversion of the words
            converted = self.convert([read[number][0] for number in good], good, self.segment) if good else []
            read.update(zip(good, converted))
        elif self.parse is not None:
            parses = self.parse([read[number][0] for number in good]) if good else []
            for number, parsed in zip(good, parses):
                read[number] = self._tree_source(_parsed_tree(parsed, number, read[number][0]), number)
        else:
            for number in good:
                words, tree = read[number]
                read[number] = (self._tree_source(tree, number) if self.reads_tree
                                else (word_pieces(words, self.segment), {}))
        return [read[number] for number in numbers]

    def _read(self, line: str, number: int,
              tokenize: Callable[[str], str]) -> Union[Tuple[List[str], Optional[trees.Tree]], BadLine]:
        """(words, tree or None), or a BadLine."""
        if self.format == TEXT:
            words = [trees.ptb_escape_token(word) for word in tokenize(line).split()]
            return (words, None) if words else BadLine(f"<input>:{number}: empty line; expected a sentence of "
                                                       "tokenized words")
        if not line.strip():
            return BadLine(f"<input>:{number}: empty line; expected a bracketed tree")
        if not line.lstrip().startswith("("):
            return BadLine(f"<input>:{number}: expected a bracketed tree (--source-format tree); for sentences give "
                           "--source-format text" + ("" if self.parse is None and not self.reads_tree else
                                                     " and --source-parser"))
        try:
            tree = trees.parse_tree(line.strip(), source="<input>", line=number)
        except trees.TreeError as error:
            return BadLine(str(error))
        return trees.words(tree), tree

    def _tree_source(self, tree: Union[trees.Tree, BadLine], number: int) -> Union[Source, BadLine]:
        if isinstance(tree, BadLine):
            return tree
        try:
            form = source_form(trees.apply_bpe(tree, self.segment), self.meta["form"], self.meta["preterminals"])
        except trees.TreeError as error:
            return BadLine(f"<input>:{number}: {error.problem}")
        side = {}
        for name in self.side_inputs:
            item = SIDE_INPUTS[name].from_form(form) if SIDE_INPUTS[name].from_form else None
            if item is not None:
                side[name] = torch.from_numpy(item)
        return form.tokens, side


def _parsed_tree(parsed, number: int, words: List[str]) -> Union[trees.Tree, BadLine]:
    """The parser's tree of a line, read as fairseq-syntax-preprocess reads it; a BadLine for the flat fallback."""
    if parsed.fallback is not None:
        return BadLine(f"<input>:{number}: the constituency parser gave no parse of {' '.join(words)[:80]!r}: "
                       f"{parsed.fallback}")
    try:
        return trees.parse_tree(parsed.tree, source="<input>", line=number)
    except trees.TreeError as error:
        return BadLine(str(error))


def _source_format(cfg, meta: dict, reads_tree: bool) -> str:
    given = cfg.source_format
    if given is not None and given not in SOURCE_FORMATS:
        raise ValueError(f"--source-format {given}: choose from {', '.join(SOURCE_FORMATS)}")
    parser_options = [f"--{name.replace('_', '-')}" for name in ("source_parser", "source_parser_backend",
                                                                  "source_tagger") if getattr(cfg, name)]
    if not reads_tree:
        if parser_options:
            raise ValueError(f"the model reads no constituency tree (the {meta['form']} form"
                             f"{'' if meta['form'] == 'sequence' else ' and a side input with a parser of its own'}): "
                             f"leave out {' and '.join(parser_options)}")
        return given or TEXT
    if cfg.source_parser is None:
        if parser_options:
            raise ValueError(f"{' and '.join(parser_options)} without --source-parser: give the parser too")
        if given is None:
            raise ValueError(f"the model reads the {meta['form']} form of a constituency tree: give --source-parser "
                             "MODEL (the parser of the data directory's trees) to parse sentences of tokenized words, "
                             "or --source-format tree to give one bracketed tree per line")
        if given == TEXT:
            raise ValueError(f"--source-format text: the model reads the {meta['form']} form of a constituency "
                             "tree; give --source-parser MODEL to parse the sentences")
        return TREE
    if given == TREE:
        raise ValueError("--source-format tree reads one bracketed tree per line: leave out --source-parser, or give "
                         "--source-format text to parse sentences")
    return TEXT


def _name(identity) -> str:
    """A model as syntax.json records it (a file's name and digest, or a name to download), for messages."""
    return identity["name"] if isinstance(identity, dict) else str(identity)


def _load_parser(cfg, meta: dict, meta_path: str):
    """The parse function of ``--source-parser``, once it is known to fit the data directory (module docstring)."""
    parsers = constituency_parsers()
    recorded = meta.get(PARSER_META_KEY)
    backend = cfg.source_parser_backend or (recorded or {}).get("backend") or parsers.backend_of(cfg.source_parser)
    if backend is None:
        raise ValueError(f"cannot tell the backend of {cfg.source_parser}, and {meta_path} records none: give "
                         f"--source-parser-backend ({', '.join(BACKENDS)})")
    if backend not in BACKENDS:
        raise ValueError(f"--source-parser-backend {backend}: choose from {', '.join(BACKENDS)}")
    tagger = cfg.source_tagger
    if recorded is not None:
        if backend != recorded["backend"]:
            raise ValueError(f"{meta_path} records trees of a {recorded['backend']} parser "
                             f"({_name(recorded['model'])}), --source-parser-backend is {backend}: parse with the "
                             "parser the model was trained on")
        if recorded.get("tagger") and tagger is None:
            raise ValueError(f"{meta_path} records trees tagged by the POS tagger {_name(recorded['tagger'])}: "
                             "give it as --source-tagger")
        if not recorded.get("tagger") and tagger is not None:
            raise ValueError(f"{meta_path} records trees of a {backend} parser without a POS tagger: leave out "
                             "--source-tagger")
        for role, path in (("model", cfg.source_parser), ("tagger", tagger)):
            if path is not None and os.path.isfile(path) and isinstance(recorded.get(role), dict):
                given = parsers.identity(path)
                if given["sha256"] != recorded[role]["sha256"]:
                    logger.warning(f"{path} (sha256 {given['sha256']}) is not the {role} {meta_path} records "
                                   f"({recorded[role]['name']}, sha256 {recorded[role]['sha256']}): the trees may "
                                   "differ from those the model was trained on")
    writes_tags = backend == "benepar" or tagger is not None
    data_tags = meta.get(POS_TAGS_META_KEY)
    if meta.get("preterminals") != "drop" and data_tags in (TAGGED, UNTAGGED) and writes_tags != (data_tags == TAGGED):
        raise ValueError(
            f"{meta_path}: the data directory's trees carry POS tags, but crf-con without --source-tagger writes "
            "every POS node as XX, which the model reads as <unk>: give the POS tagger that tagged them as "
            "--source-tagger" if data_tags == TAGGED else
            f"{meta_path}: the data directory's trees have no POS tags (XX, crf-con without a tagger), but this "
            f"parser writes them ({'benepar' if tagger is None else 'the --source-tagger'}): parse as they were "
            "parsed")
    return parsers.load(backend, cfg.source_parser, tagger)
