"""stanza (Qi et al., 2020) as a parse backend: dependency parses of every UD language, constituency trees where
stanza has a model (German among them), on pre-tokenized sentences.

``--model`` (:func:`load_stanza_pipeline`) is one of

* a model name ``LANG`` or ``LANG_PACKAGE`` (``de``, ``de_hdt``): from stanza's resources folder, downloaded once
  when missing (``download_method=REUSE_RESOURCES``); without the network the one line of
  :mod:`fairseq_syntax.parsing.models`, and a resources folder this run made is removed;
* a local resources folder (holding ``resources.json``): loaded with ``dir=``, nothing downloaded;
* a model file of stanza's dependency parser: loaded with ``depparse_model_path=`` and ``depparse_pretagged`` (a
  model that reads POS tags needs the resources folder with its tagger).

Input is pre-tokenized (``tokenize_pretokenized=True``): no multi-word-token expansion (German ``zum`` stays one
word). Words reach stanza PTB-unescaped.

Dependency parses keep the full distributions (:mod:`fairseq_syntax.parsing.dependency`): the graph parser's
forward pass yields ``log P(head j | dependent i)`` ``[B, L, L]`` and ``log P(label r | i, j)`` ``[B, L, L, R]``
(``L`` = words + 1, position 0 the root, padding columns renormalised away); the 1-best tree is stanza's decoding
(Chu-Liu/Edmonds, one root). Labels are UD v2's."""
from __future__ import annotations

import contextlib
import json
import os
import re
from functools import partial
from typing import Iterable, Iterator

import numpy as np
import torch

from fairseq_syntax.core.stopping import temporary_directory
from fairseq_syntax.core.trees import Tree, ptb_escape_token, ptb_unescape_token
from fairseq_syntax.parsing.dependency import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_LENGTH,
    DependencyParse,
    fallback_parse,
)
from fairseq_syntax.parsing.fallbacks import parse_with_fallbacks
from fairseq_syntax.parsing.models import ModelUnavailable, downloading, is_local, looks_like_path
from fairseq_syntax.parsing.stanza_resources import folder_removed_on_failure, resources_folder

#: a stanza model name: a language code, optionally ``_PACKAGE`` (a treebank or ``default``)
STANZA_NAME = re.compile(r"^(?P<lang>[a-z]{2,3}(?:-[a-z]+)?)(?:_(?P<package>[a-z0-9]+))?$")
PROCESSORS = {"dependency": "tokenize,pos,lemma,depparse", "constituency": "tokenize,pos,constituency"}
PARSER_PROCESSOR = {"dependency": "depparse", "constituency": "constituency"}


def load_stanza_pipeline(model: str, lang: str, kind: str, device: str | None = None):
    """``(pipeline, pretagged)``: a stanza Pipeline that parses pre-tokenized sentences of ``lang`` (``kind``:
    dependency or constituency), from ``model`` as the module docstring says; ``pretagged``: it runs the parser
    alone, on words without tags (a model file that reads none)."""
    from fairseq_syntax.parsing.models import WANTED, load_model

    return load_model(model, WANTED[kind, "stanza"], lambda: _load_stanza_pipeline(model, lang, kind, device))


def _load_stanza_pipeline(model: str, lang: str, kind: str, device: str | None):
    import stanza

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    common = dict(lang=lang, tokenize_pretokenized=True, logging_level="WARN", device=device)
    if is_local(model) and os.path.isdir(model):
        if not os.path.isfile(os.path.join(model, "resources.json")):
            raise ModelUnavailable(f"{model}: not a stanza resources folder (it has no resources.json)")
        try:
            with contextlib.redirect_stderr(open(os.devnull, "w")):
                return stanza.Pipeline(processors=PROCESSORS[kind], dir=model, download_method=None, **common), False
        except Exception as error:  # noqa: BLE001 (stanza's missing-model errors are of many kinds)
            raise ModelUnavailable(f"{model}: no stanza {kind} model of language {lang} there "
                                   f"({' '.join(str(error).split())[:200]})") from None
    if is_local(model):
        if kind != "dependency":
            raise ModelUnavailable(f"{model}: a stanza model file loads for dependency parsing only; for "
                                   "constituency trees give a stanza resources folder or a model name")
        return _pipeline_of_model_file(model, common), True
    if looks_like_path(model):
        raise ModelUnavailable(f"{model}: no such model file or folder")
    match = STANZA_NAME.match(model)
    if not match:
        raise ModelUnavailable(f"could not download {model}: not a stanza model name (LANG or LANG_PACKAGE, e.g. "
                               "de or de_hdt) and no such file or folder")
    if match["lang"] != lang:
        raise ModelUnavailable(f"stanza model {model} is of language {match['lang']}, but --lang is {lang}")
    package = match["package"] or "default"
    folder = resources_folder()
    with folder_removed_on_failure(folder), downloading(model):
        pipeline = stanza.Pipeline(processors=PROCESSORS[kind], package=package, dir=folder,
                                   download_method=stanza.DownloadMethod.REUSE_RESOURCES, **common)
    return pipeline, False


def _pipeline_of_model_file(path: str, common: dict):
    """A Pipeline of stanza's dependency parser alone from its model file, via a one-language resources.json in a
    temporary folder (:func:`~fairseq_syntax.core.stopping.temporary_directory`)."""
    import stanza

    with temporary_directory("stanza-resources") as folder:
        with open(os.path.join(folder, "resources.json"), "w", encoding="utf-8") as handle:
            json.dump({common["lang"]: {"lang_name": common["lang"]}}, handle)
        pipeline = stanza.Pipeline(processors="depparse", depparse_model_path=path, depparse_pretagged=True,
                                   dir=folder, download_method=None, **common)
    args = pipeline.processors["depparse"].trainer.args
    tags = [name for name in ("upos", "xpos", "ufeats") if args.get(f"use_{name}", False)]
    if tags:
        raise ModelUnavailable(f"{path}: this stanza parser reads {', '.join(tags)} tags, which a model file alone "
                               "does not give: give the stanza resources folder that holds it and its tagger")
    return pipeline


def _document(sentences: list[list[str]]):
    """A stanza Document of pre-tokenized words with placeholder tags (for a parser that reads none)."""
    from stanza.models.common.doc import Document

    return Document([[{"id": index, "text": word, "upos": "_", "xpos": "_", "feats": "_", "lemma": word}
                      for index, word in enumerate(words, 1)] for words in sentences])


class StanzaPipeline:
    """A loaded pipeline and how to give it sentences: the pre-tokenized words through stanza's tagger (or, for a
    parser model file, with placeholder tags), up to (not through) the parser."""

    def __init__(self, model: str, lang: str, kind: str, device: str | None = None):
        self.pipeline, self.pretagged = load_stanza_pipeline(model, lang, kind, device)
        self.kind = kind

    def tagged(self, sentences: list[list[str]]):
        words = [[ptb_unescape_token(word) for word in sentence] for sentence in sentences]
        if self.pretagged:
            return _document(words)
        before = [name for name in self.pipeline.processors if name != PARSER_PROCESSOR[self.kind]]
        return self.pipeline(words, processors=",".join(before))

    def parsed(self, sentences: list[list[str]]):
        return self.pipeline.processors[PARSER_PROCESSOR[self.kind]].process(self.tagged(sentences))


class StanzaDependencyParser:
    """stanza's dependency parser with :class:`fairseq_syntax.parsing.dependency.DependencyParser`'s interface:
    ``parse`` yields a :class:`DependencyParse` (the full distributions and the 1-best tree) per sentence."""

    def __init__(self, model: str, lang: str, max_length: int = DEFAULT_MAX_LENGTH, device: str | None = None):
        from stanza.models.common.vocab import VOCAB_PREFIX_SIZE

        self.stanza = StanzaPipeline(model, lang, "dependency", device)
        self.processor = self.stanza.pipeline.processors["depparse"]
        self.trainer = self.processor.trainer
        if self.trainer.args.get("reversed", False) or not hasattr(self.trainer.model, "decode_graph_predictions"):
            raise ModelUnavailable(f"{model}: a stanza parser that is not the graph parser reading left to right "
                                   "gives no arc distributions")
        relations = self.trainer.vocab["deprel"]
        self.label_names = [relations.id2unit(index) for index in range(VOCAB_PREFIX_SIZE, len(relations))]
        self.max_length = max_length

    def parse(self, sentences: Iterable[list[str]], chunk_size: int = DEFAULT_BATCH_SIZE
              ) -> Iterator[DependencyParse]:
        return parse_with_fallbacks(self._parse_chunk, sentences, self.max_length,
                                    partial(fallback_parse, label_count=len(self.label_names)), chunk_size)

    @torch.no_grad()
    def _parse_chunk(self, sentences: list[list[str]]) -> list[DependencyParse]:
        """As stanza's DepparseProcessor.process, keeping what its forward pass computes for each sentence."""
        from stanza.models.common.utils import unsort
        from stanza.models.depparse.data import DataLoader
        from stanza.models.depparse.trainer import unpack_batch

        document = self.stanza.tagged(sentences)
        config = self.processor.config
        batches = DataLoader(document, config["batch_size"], config, self.processor.pretrain,
                             vocab=self.processor.vocab, evaluation=True, sort_during_eval=True)
        model = self.trainer.model
        predictions, scores = [], []
        for batch in batches:
            captured = []
            forward = model.forward

            def capture(*args, **kwargs):
                loss, preds = forward(*args, **kwargs)
                captured.append(preds)
                return loss, preds

            model.forward = capture  # an instance attribute: nn.Module.__call__ finds it first
            try:
                predictions += self.trainer.predict(batch, resolve_head_constraints=config.get(
                    "resolve_head_constraints", True))
            finally:
                del model.forward
            _, in_batch_order, _, lengths, _, _ = unpack_batch(batch, "cpu")
            arcs, _, labels = captured[0]  # log P(head | dependent) [B, L, L]; log P(label | ...) [B, L, L, R]
            rows = [(arcs[row, :length, :length], labels[row, :length, :length]) for row, length in
                    enumerate(lengths)]
            scores += unsort(rows, in_batch_order)
        if batches.data_orig_idx is not None:
            predictions = unsort(predictions, batches.data_orig_idx)
            scores = unsort(scores, batches.data_orig_idx)
        return [self._parse_of(words, predicted, arc_log_probs, label_log_probs)
                for words, predicted, (arc_log_probs, label_log_probs) in zip(sentences, predictions, scores)]

    def _parse_of(self, words: list[str], predicted, arc_log_probs: np.ndarray, label_log_probs: np.ndarray
                  ) -> DependencyParse:
        n = len(words)
        arc_probs = torch.from_numpy(np.exp(arc_log_probs[1:n + 1, :n + 1].astype(np.float64)))
        arc_probs = (arc_probs / arc_probs.sum(-1, keepdim=True)).float()  # padding columns had a share
        label_probs = torch.from_numpy(np.exp(label_log_probs[1:n + 1, :n + 1].astype(np.float64))).float()
        heads = [int(head) for head, _ in predicted]
        labels = [str(label) for _, label in predicted]
        return DependencyParse(words, arc_probs, label_probs, heads, labels)


def tree_of_stanza(node) -> Tree:
    """A stanza constituency tree as ours, its leaves PTB-escaped (stanza keeps brackets as words)."""
    if not node.children:
        return Tree(ptb_escape_token(node.label))
    return Tree(node.label, [tree_of_stanza(child) for child in node.children])


class StanzaConstituencyParser:
    """stanza's constituency parser (its POS tagger's tags on the preterminals), with the interface of
    :class:`fairseq_syntax.parsing.constituency.ConstituencyParser` (that module loads this one)."""

    def __init__(self, model: str, lang: str, max_length: int = DEFAULT_MAX_LENGTH, device: str | None = None):
        self.stanza = StanzaPipeline(model, lang, "constituency", device)
        self.max_length = max_length

    def parse_batch(self, sentences: list[list[str]]) -> list[Tree]:
        document = self.stanza.parsed(sentences)
        return [tree_of_stanza(sentence.constituency) for sentence in document.sentences]

