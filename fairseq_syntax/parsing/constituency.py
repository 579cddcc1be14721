"""Constituency parsing of tokenized sentences into one PTB-bracketed tree per line: the Berkeley Neural Parser
(``benepar``, Kitaev & Klein, 2018; POS tags when its model predicts them), SuPar's CRF parser (``crf-con``, Zhang
et al., 2020; preterminals ``XX``) or stanza's (:mod:`fairseq_syntax.parsing.stanza_backend`), on ``device``
(default CUDA when available); models by path or name (:mod:`fairseq_syntax.parsing.models`).

``parse_sentences``: one result per input sentence, in order; leaves are the input tokens PTB-escaped. A sentence
the parser cannot handle (empty, too long, raising, words changed) gets the flat tree ``(S (XX w1) (XX w2) ...)``
(``(S )`` when empty) and the reason. ``TOP``/``ROOT`` wrappers are removed. ``batch_size`` sentences are read at
a time; the networks run on batches of at most ``batch_tokens`` padded tokens."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import TextIO

import nltk
import torch

from fairseq_syntax.core.source_parsers import ParsedSentence
from fairseq_syntax.core.trees import Tree, to_bracketed, unwrapped
from fairseq_syntax.parsing.batching import DEFAULT_BATCH_TOKENS, token_batches
from fairseq_syntax.parsing.fallbacks import parse_with_fallbacks
from fairseq_syntax.parsing.shards import (
    InputLine,
    Outcome,
    ParseFunction,
    numbered,
)
from fairseq_syntax.parsing.text import ptb_escape_token, ptb_unescape_token

FALLBACK_ROOT = "S"
FALLBACK_PRETERMINAL = "XX"
DEFAULT_MAX_LENGTH = 300  # words; the CRF's inside pass is cubic in length
DEFAULT_BATCH_SIZE = 256  # sentences read and parsed together


def flat_tree(tokens: list[str]) -> str:
    """The fallback ``(S (XX w1) (XX w2) ...)`` with escaped words."""
    leaves = " ".join(f"({FALLBACK_PRETERMINAL} {ptb_escape_token(token)})" for token in tokens)
    return f"({FALLBACK_ROOT} {leaves})"


def tree_from_nltk(node: nltk.Tree | str, preterminal_label: str | None = None) -> Tree:
    """Convert an ``nltk.Tree``; ``preterminal_label`` replaces every POS label when given."""
    if isinstance(node, str):
        return Tree(node)
    children = [tree_from_nltk(child, preterminal_label) for child in node]
    is_preterminal = all(isinstance(child, str) for child in node)
    label = preterminal_label if is_preterminal and preterminal_label is not None else node.label()
    return Tree(label, children)


class ConstituencyParser(ABC):
    """A backend: parses a batch of token lists, or raises."""

    max_length: int

    @abstractmethod
    def parse_batch(self, sentences: list[list[str]]) -> list[Tree]:
        """Trees whose leaves should be the escaped tokens (checked by ``parse_sentences``)."""


class BeneparParser(ConstituencyParser):
    def __init__(self, name_or_path: str, batch_tokens: int = DEFAULT_BATCH_TOKENS,
                 max_length: int = DEFAULT_MAX_LENGTH, device: str | None = None):
        import benepar

        from fairseq_syntax.parsing.models import WANTED, benepar_model_path, load_model

        self.parser = load_model(name_or_path, WANTED["constituency", "benepar"],  # on CUDA when available
                                 lambda: benepar.Parser(benepar_model_path(name_or_path)))
        if device is not None:
            self.parser._parser.to(device)  # benepar runs where its parameters are
        self.batch_tokens, self.max_length = batch_tokens, max_length
        chart_parser = self.parser._parser
        if chart_parser.encoder is not None:  # its position table covers the words plus start and stop
            self.max_length = min(max_length, chart_parser.add_timing.timing_table.shape[0] - 2)

    def parse_batch(self, sentences: list[list[str]]) -> list[Tree]:
        import benepar

        # The network reads unescaped words (benepar trains on ptb_unescape'd PTB leaves); the tree gets escapes.
        inputs = [benepar.InputSentence(words=[ptb_unescape_token(token) for token in tokens],
                                        escaped_words=[ptb_escape_token(token) for token in tokens])
                  for tokens in sentences]
        trees: list[Tree | None] = [None] * len(sentences)
        for batch in token_batches([len(tokens) for tokens in sentences], self.batch_tokens):
            self.parser.batch_size = len(batch)  # benepar's batches are counted in sentences: this one at once
            for index, tree in zip(batch, self.parser.parse_sents([inputs[index] for index in batch])):
                trees[index] = tree_from_nltk(tree)
        return trees


class SuparCrfParser(ConstituencyParser):
    def __init__(self, name_or_path: str, batch_tokens: int = DEFAULT_BATCH_TOKENS,
                 max_length: int = DEFAULT_MAX_LENGTH, device: str | None = None):
        from fairseq_syntax.parsing.models import WANTED
        from fairseq_syntax.parsing.torch_load import load_supar_parser

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.parser = load_supar_parser(name_or_path, self.device, WANTED["constituency", "crf-con"])
        self.batch_tokens, self.max_length = batch_tokens, max_length

    def parse_batch(self, sentences: list[list[str]]) -> list[Tree]:
        from fairseq_syntax.parsing.torch_load import supar_device

        # The PTB the parser learned from has escaped brackets; SuPar also builds an nltk tree from the words.
        escaped = [[ptb_escape_token(token) for token in tokens] for tokens in sentences]
        with supar_device(self.device):
            dataset = self.parser.predict(escaped, lang=None, batch_size=self.batch_tokens, verbose=False)
        return [tree_from_nltk(tree, FALLBACK_PRETERMINAL) for tree in dataset.trees]


class TaggedParser(ConstituencyParser):
    """A parser's trees with every preterminal relabelled by a POS tagger (``tagger.Tagger``): SuPar's CRF parser
    predicts brackets only, and McDonald & Chiang's trees (2021, Fig. 1b) have POS nodes."""

    def __init__(self, parser: ConstituencyParser, tagger):
        self.parser, self.tagger = parser, tagger
        self.max_length = parser.max_length

    def parse_batch(self, sentences: list[list[str]]) -> list[Tree]:
        return [retag(tree, tags)
                for tree, tags in zip(self.parser.parse_batch(sentences), self.tagger.tag(sentences))]


def retag(tree: Tree, tags: list[str]) -> Tree:
    """``tree`` with the preterminal above its i-th word labelled ``tags[i]``."""
    remaining = iter(tags)

    def visit(node: Tree) -> Tree:
        if node.is_leaf:
            return node
        if node.is_preterminal:
            return Tree(next(remaining), list(node.children))
        return Tree(node.label, [visit(child) for child in node.children])

    return visit(tree)


def backend_of_model(name_or_path: str) -> str | None:
    """The backend of a model, or None: a SuPar file names its parser in its pickle, a benepar model is a directory
    or a file of ``config`` and ``state_dict``, a name tells by its prefix. Nothing is unpickled."""
    import os
    import zipfile

    if os.path.isdir(name_or_path):
        return "benepar"
    if not os.path.isfile(name_or_path):
        name = os.path.basename(name_or_path)
        return "benepar" if name.startswith("benepar") else "crf-con" if name.startswith("crf-con") else None
    if not zipfile.is_zipfile(name_or_path):
        return None
    with zipfile.ZipFile(name_or_path) as archive:
        pickle = next((archive.read(item) for item in archive.namelist() if item.endswith("/data.pkl")), b"")
    if b"supar" in pickle:
        return "crf-con" if b"crf-constituency" in pickle else None
    return "benepar" if b"config" in pickle and b"state_dict" in pickle else None


def fairseq_interactive_parser(backend: str, model: str, tagger: str | None) -> Callable[[list[list[str]]], list]:
    """What ``fairseq-interactive --source-parser`` parses a buffer with: :func:`parse_sentences` with
    ``preprocess/parse_constituency.py``'s defaults."""
    parser = load_parser(backend, model, tagger=tagger)

    def parse(sentences: list[list[str]]) -> list[ParsedSentence]:
        return list(parse_sentences(parser, sentences, batch_size=max(1, len(sentences))))

    return parse


def load_parser(backend: str, model: str, max_length: int = DEFAULT_MAX_LENGTH, tagger: str | None = None,
                device: str | None = None, batch_tokens: int = DEFAULT_BATCH_TOKENS, lang: str = "en"
                ) -> ConstituencyParser:
    """``backend``: ``benepar``, ``crf-con`` or ``stanza``; ``model``: name or path; ``tagger``: a POS tagger file
    whose tags replace the parser's; ``batch_tokens``: network batches in padded tokens; ``lang``: a stanza
    model's language."""
    if backend == "benepar":
        parser = BeneparParser(model, batch_tokens, max_length, device)
    elif backend == "crf-con":
        parser = SuparCrfParser(model, batch_tokens, max_length, device)
    elif backend == "stanza":
        from fairseq_syntax.parsing.stanza_backend import StanzaConstituencyParser

        parser = StanzaConstituencyParser(model, lang, max_length, device)
    else:
        raise ValueError(f"unknown constituency backend {backend!r}: expected 'benepar', 'crf-con' or 'stanza'")
    if tagger is None:
        return parser
    from fairseq_syntax.parsing.tagger import load_tagger

    return TaggedParser(parser, load_tagger(tagger, device, batch_tokens))


def _checked(tree: Tree, tokens: list[str]) -> ParsedSentence:
    tree = unwrapped(tree)
    expected = [ptb_escape_token(token) for token in tokens]
    if tree.leaves() != expected:
        return _fallback(tokens, f"parser changed the words to {' '.join(tree.leaves())!r}")
    return ParsedSentence(to_bracketed(tree), None)


def _parse_checked(parser: ConstituencyParser, sentences: list[list[str]]) -> list[ParsedSentence]:
    return [_checked(tree, tokens) for tree, tokens in zip(parser.parse_batch(sentences), sentences)]


def _fallback(tokens: list[str], reason: str) -> ParsedSentence:
    return ParsedSentence(flat_tree(tokens), reason)


def parse_sentences(parser: ConstituencyParser, sentences: Iterable[list[str]], batch_size: int = DEFAULT_BATCH_SIZE
                    ) -> Iterator[ParsedSentence]:
    """One ``ParsedSentence`` per input sentence, in order (see the module docstring)."""
    return parse_with_fallbacks(partial(_parse_checked, parser), sentences, parser.max_length, _fallback, batch_size)


def tree_writer(parser: ConstituencyParser, batch_size: int = DEFAULT_BATCH_SIZE) -> ParseFunction:
    """A job's parse function (:mod:`fairseq_syntax.parsing.shards`): one tree per line; the fallbacks (input line,
    reason), unreadable lines included."""
    def parse(lines: Iterable[InputLine], outputs: list[TextIO], progress: Callable[[int], None]) -> Outcome:
        fallbacks = []
        for line, parsed in numbered(lines, partial(parse_sentences, parser, batch_size=batch_size)):
            outputs[0].write(parsed.tree + "\n")
            reason = line.problem or parsed.fallback
            if reason is not None:
                fallbacks.append((line.number, reason))
            progress(1)
        return Outcome(fallbacks)

    return parse

