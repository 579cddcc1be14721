"""Dependency parsing with SuPar's biaffine parser (Dozat & Manning, 2017), keeping the full distributions.

The labeled dependency distributions (LDD) of Pu & Sima'an (2022) come from the parser's scores.
``model(words, feats)`` gives ``s_arc [B, L, L]`` (dependent, head) and ``s_rel [B, L, L, R]``,
``L = 1 + longest sentence``, position 0 the root. For a sentence of n words:

    P(head j | dependent i) = softmax_j s_arc[i, j]      arc_probs   [n, n+1]    (row i-1 = word i, column 0 = root)
    P(label r | i, j)       = softmax_r s_rel[i, j, r]   label_probs [n, n+1, R]

``j = i`` is left out of the arc softmax, SuPar's ``<bos>`` label out of the label softmax. The 1-best tree is the
parser's decoder's (``model.decode``: argmax, MST when that is not a tree; Eisner with ``proj``), as
``parser.predict`` gives it. Results come back in input order. Words reach the network PTB-unescaped (``-LRB-`` ->
``(``); the output keeps them as given.

Side-data format (``*.arcs.jsonl``, one JSON object per input line)::

    {"words": ["A", "dog", "runs"],
     "arcs": [[1, 2, 0.98, {"det": 0.99}], [2, 3, 0.95, {"nsubj": 0.97, "obj": 0.02}], [3, 0, 0.99, {"root": 1.0}]],
     "best": [[2, "det"], [3, "nsubj"], [0, "root"]]}

``best``: the 1-best labeled tree (head, label per word), read by Pu & Sima'an's UDP and LDP; a per-word argmax of
``arcs`` need not be a tree. ``arcs``:
``[dependent, head, P(head | dependent), {label: P(label | dependent, head)}]``, 1-based, head 0 the root, kept
where ``P(head | dependent) >= arc_floor`` and labels where ``P(label | dependent, head) >= label_floor``, 4
significant digits; so each sum is at most 1, and the dropped part is reported as retained mass. A sentence the
parser cannot handle (empty, over ``max_length`` words, an error) gets the flat structure (every word on the root,
``dep``, probability 1) and ``"fallback"``: the reason. ``read_arc_distributions`` reads and checks the format.

The 1-best tree is also written as CoNLL-U (``# sent_id`` = input line; HEAD and DEPREL, other columns ``_``;
fallbacks carry a ``# fallback`` comment)."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from functools import partial
from typing import Container, Iterable, Iterator

import torch

from fairseq_syntax.core.text_lines import TextLineError, iter_lines_or_errors
from fairseq_syntax.parsing.fallbacks import parse_with_fallbacks
from fairseq_syntax.parsing.shards import (
    BLOCKS,
    LINES,
    InputLine,
    Outcome,
    ParseFunction,
    ParseJob,
    numbered,
)
from fairseq_syntax.parsing.text import ptb_unescape_token

DEFAULT_MAX_LENGTH = 300
DEFAULT_BATCH_SIZE = 1000  # sentences read and bucketed by length together (the chunks of a sharded run)
DEFAULT_BATCH_TOKENS = 5000  # words per network batch
DEFAULT_ARC_FLOOR = 1e-3
# at 1e-2 the side data is half the size of 1e-3 and keeps ~99% of the labeled mass (Multi30k)
DEFAULT_LABEL_FLOOR = 1e-2
FALLBACK_LABEL = "dep"  # UD's and Stanford's "unspecified dependency"
SIGNIFICANT_DIGITS = 4
ROUNDING_SLACK = 1e-3  # rounding to 4 digits moves a sum of probabilities by at most 5e-4


@dataclass
class DependencyParse:
    """One sentence: the full distributions (shapes in the module docstring) and the 1-best tree."""

    words: list[str]
    arc_probs: torch.Tensor  # [n, n+1]
    label_probs: torch.Tensor  # [n, n+1, R]
    heads: list[int]
    labels: list[str]
    fallback: str | None = None


def fallback_parse(words: list[str], reason: str, label_count: int) -> DependencyParse:
    """Every word on the root; no label distribution (``dep`` need not be one of the parser's labels)."""
    n = len(words)
    arc_probs = torch.zeros(n, n + 1)
    arc_probs[:, 0] = 1.0
    label_probs = torch.zeros(n, n + 1, label_count)
    return DependencyParse(words, arc_probs, label_probs, [0] * n, [FALLBACK_LABEL] * n, reason)


class DependencyParser:
    """A SuPar biaffine dependency parser (model name or local file) run on pre-tokenized sentences."""

    def __init__(self, name_or_path: str, batch_tokens: int = DEFAULT_BATCH_TOKENS, buckets: int = 8,
                 max_length: int = DEFAULT_MAX_LENGTH, proj: bool = False, device: str | None = None):
        from fairseq_syntax.parsing.models import WANTED
        from fairseq_syntax.parsing.torch_load import load_supar_parser

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.parser = load_supar_parser(name_or_path, self.device, WANTED["dependency", "biaffine"])
        self.batch_tokens, self.buckets, self.max_length, self.proj = batch_tokens, buckets, max_length, proj
        relations = self.parser.transform.DEPREL
        self.label_names: list[str] = list(relations.vocab.itos)
        self.special_labels = torch.tensor([label in relations.specials for label in self.label_names])

    def parse(self, sentences: Iterable[list[str]], chunk_size: int = DEFAULT_BATCH_SIZE) -> Iterator[DependencyParse]:
        """One ``DependencyParse`` per sentence, in input order; ``chunk_size`` sentences are bucketed together."""
        return parse_with_fallbacks(self._parse_chunk, sentences, self.max_length,
                                    partial(fallback_parse, label_count=len(self.label_names)), chunk_size)

    def _parse_chunk(self, sentences: list[list[str]]) -> list[DependencyParse]:
        from supar.utils import Dataset

        from fairseq_syntax.parsing.torch_load import supar_device

        transform = self.parser.transform
        transform.eval()  # as parser.predict does: the dataset then holds no gold heads/labels
        results: list[DependencyParse | None] = [None] * len(sentences)
        with supar_device(self.device):
            # The network reads raw words (UD writes brackets as such); the output keeps the words as given.
            dataset = Dataset(transform, [[ptb_unescape_token(word) for word in words] for words in sentences])
            dataset.build(self.batch_tokens, self.buckets)
            for indices in dataset.loader.batch_sampler:  # bucketed, out of input order
                batch = dataset.loader.collate_fn([dataset[index] for index in indices])
                for index, parse in zip(indices, self._parse_batch(batch, [sentences[index] for index in indices])):
                    results[index] = parse
        return results

    @torch.no_grad()
    def _parse_batch(self, batch, sentences: list[list[str]]) -> list[DependencyParse]:
        model = self.parser.model
        model.eval()
        words, _texts, *feats = batch
        mask = words.ne(self.parser.args.pad_index)
        if words.dim() == 3:  # subword-level input (BERT encoders)
            mask = mask.any(-1)
        mask[:, 0] = False  # the root is no dependent
        s_arc, s_rel = model(words, feats)  # [B, L, L], [B, L, L, R]
        arc_preds, rel_preds = model.decode(s_arc, s_rel, mask, True, self.proj)  # [B, L], [B, L]

        length = s_arc.shape[1]
        self_loops = torch.eye(length, dtype=torch.bool, device=s_arc.device)
        arc_probs = s_arc.masked_fill(self_loops, -math.inf).softmax(-1)  # padded heads already hold SuPar's MIN
        special = self.special_labels.to(s_rel.device)
        label_probs = s_rel.masked_fill(special, -math.inf).softmax(-1)

        parses = []
        for row, words_of_sentence in enumerate(sentences):
            n = len(words_of_sentence)
            parses.append(DependencyParse(
                words_of_sentence, arc_probs[row, 1:n + 1, :n + 1].float().cpu(),
                label_probs[row, 1:n + 1, :n + 1].float().cpu(), arc_preds[row, 1:n + 1].tolist(),
                [self.label_names[label] for label in rel_preds[row, 1:n + 1].tolist()]))
        return parses


@dataclass
class RetainedMass:
    """How much probability the floors keep, summed over the words the parser parsed (fallbacks left out)."""

    dependents: int = 0
    arc_mass: float = 0.0  # sum over dependents of the kept P(head | dependent)
    labeled_mass: float = 0.0  # ... of the kept P(head | dependent) * P(label | dependent, head)
    arcs: int = 0
    labels: int = 0

    def __str__(self) -> str:
        if not self.dependents:
            return "no words parsed"
        words = self.dependents
        return (f"kept {100 * self.arc_mass / words:.2f}% of the arc probability mass and "
                f"{100 * self.labeled_mass / words:.2f}% of the labeled-arc mass; {self.arcs / words:.2f} heads "
                f"per word, {self.labels / max(self.arcs, 1):.2f} labels per arc")


def _rounded(probability: float) -> float:
    return float(f"{probability:.{SIGNIFICANT_DIGITS}g}")


def sparse_record(parse: DependencyParse, label_names: list[str], arc_floor: float, label_floor: float,
                  mass: RetainedMass) -> dict:
    """The JSON object of one sentence (module docstring); adds what it keeps to ``mass`` (parsed words only)."""
    if parse.fallback is not None:
        arcs = [[dependent, 0, 1.0, {FALLBACK_LABEL: 1.0}] for dependent in range(1, len(parse.words) + 1)]
        best = [[0, FALLBACK_LABEL] for _ in parse.words]
        return {"words": parse.words, "arcs": arcs, "best": best, "fallback": parse.fallback}
    mass.dependents += len(parse.words)
    arcs = []
    arc_probs, label_probs = parse.arc_probs.tolist(), parse.label_probs
    for dependent, head in (parse.arc_probs >= arc_floor).nonzero().tolist():
        p_arc = arc_probs[dependent][head]
        kept_labels = (label_probs[dependent, head] >= label_floor).nonzero().flatten().tolist()
        label_row = label_probs[dependent, head].tolist()
        labels = {label_names[label]: _rounded(label_row[label]) for label in kept_labels}
        arcs.append([dependent + 1, head, _rounded(p_arc), labels])
        mass.arc_mass += p_arc
        mass.labeled_mass += p_arc * sum(label_row[label] for label in kept_labels)
        mass.arcs += 1
        mass.labels += len(kept_labels)
    best = [[head, label] for head, label in zip(parse.heads, parse.labels)]
    return {"words": parse.words, "arcs": arcs, "best": best}


def conllu_block(parse: DependencyParse, sent_id: int) -> str:
    """The 1-best tree as one CoNLL-U sentence, ending with its blank line."""
    lines = [f"# sent_id = {sent_id}", f"# text = {' '.join(parse.words)}"]
    if parse.fallback is not None:
        lines.append(f"# fallback = {' '.join(parse.fallback.split())}")
    for index, (word, head, label) in enumerate(zip(parse.words, parse.heads, parse.labels), 1):
        lines.append(f"{index}\t{word}\t_\t_\t_\t_\t{head}\t{label}\t_\t_")
    return "\n".join(lines) + "\n\n"


def conllu_of_record(record: dict, sent_id: int) -> str:
    """A side-data record's 1-best tree as the CoNLL-U block :func:`conllu_block` writes for its parse."""
    heads, labels = [head for head, _ in record["best"]], [label for _, label in record["best"]]
    return conllu_block(DependencyParse(record["words"], None, None, heads, labels, record.get("fallback")), sent_id)


def arcs_writer(parser: DependencyParser, arc_floor: float = DEFAULT_ARC_FLOOR,
                label_floor: float = DEFAULT_LABEL_FLOOR, batch_size: int = DEFAULT_BATCH_SIZE) -> ParseFunction:
    """A job's parse function (:mod:`fairseq_syntax.parsing.shards`) writing the side data and, with a second output,
    the CoNLL-U file; its stats are the :class:`RetainedMass`. An unreadable line is a fallback with its reason."""
    def parse(lines: Iterable[InputLine], outputs, progress) -> Outcome:
        arcs_out, conllu_out = outputs if len(outputs) == 2 else (outputs[0], None)  # the CoNLL-U file is optional
        fallbacks, mass = [], RetainedMass()
        for line, parse in numbered(lines, partial(parser.parse, chunk_size=batch_size)):
            parse.fallback = line.problem or parse.fallback
            record = sparse_record(parse, parser.label_names, arc_floor, label_floor, mass)
            arcs_out.write(json.dumps(record, ensure_ascii=False) + "\n")
            if conllu_out is not None:
                conllu_out.write(conllu_block(parse, line.number))
            if parse.fallback is not None:
                fallbacks.append((line.number, parse.fallback))
            progress(1)
        return Outcome(fallbacks, asdict(mass))

    return parse


def arcs_job(input_path: str, arcs_path: str, conllu_path: str | None, tokenize_lang: str | None, batch_size: int,
             settings: dict, load) -> ParseJob:
    """The side data (one JSON line per input line) and, unless ``conllu_path`` is None, the CoNLL-U file (one block
    per input line)."""
    outputs = [(arcs_path, LINES)] + ([(conllu_path, BLOCKS)] if conllu_path is not None else [])
    return ParseJob(input_path, tokenize_lang, outputs, batch_size, settings, load)


def _is_index(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true is no word index


def _is_probability(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 1


def _cycle(heads: list[int]) -> list[int]:
    """Words (1-based) of a cycle of a head list (``heads[k - 1]`` the head of word k, 0 the root), or [] when
    every word's chain of heads reaches the root."""
    reaches_root = [True] + [False] * len(heads)
    for start in range(1, len(heads) + 1):
        chain, word = [], start
        while not reaches_root[word]:
            if word in chain:
                return chain[chain.index(word):]
            chain.append(word)
            word = heads[word - 1]
        for word in chain:
            reaches_root[word] = True
    return []


def _check_record(record, source: str, line: int) -> None:
    def fail(problem: str):
        raise ValueError(f"{source}:{line}: {problem}")

    if not (isinstance(record, dict) and all(isinstance(record.get(key), list) for key in ("words", "arcs"))):
        fail('expected an object with the lists "words" and "arcs"')
    n = len(record["words"])
    if not all(isinstance(word, str) and word for word in record["words"]):
        fail('"words" must be non-empty strings')
    head_mass = [0.0] * (n + 1)
    for arc in record["arcs"]:
        if not (isinstance(arc, list) and len(arc) == 4 and isinstance(arc[3], dict)):
            fail(f"arc {arc!r} is not [dependent, head, probability, {{label: probability}}]")
        dependent, head, probability, labels = arc
        if not (_is_index(dependent) and 1 <= dependent <= n):
            fail(f"arc {arc!r}: dependent must be a word index 1..{n}")
        if not (_is_index(head) and 0 <= head <= n and head != dependent):
            fail(f"arc {arc!r}: head must be 0 (root) or another word index 1..{n}")
        if not _is_probability(probability):
            fail(f"arc {arc!r}: probability must be a number in (0, 1]")
        if not all(_is_probability(p) for p in labels.values()):
            fail(f"arc {arc!r}: label probabilities must be numbers in (0, 1]")
        if sum(labels.values()) > 1 + ROUNDING_SLACK:
            fail(f"arc {arc!r}: label probabilities sum to {sum(labels.values()):.6f} > 1")
        head_mass[dependent] += probability
    for dependent, total in enumerate(head_mass):
        if total > 1 + ROUNDING_SLACK:
            fail(f"word {dependent}: head probabilities sum to {total:.6f} > 1")
    best = record.get("best")
    if best is not None:
        if not (isinstance(best, list) and len(best) == n):
            fail(f'"best" must list [head, label] for each of the {n} words')
        for dependent, arc in enumerate(best, 1):
            if not (isinstance(arc, list) and len(arc) == 2 and _is_index(arc[0]) and 0 <= arc[0] <= n
                    and arc[0] != dependent and isinstance(arc[1], str) and arc[1]):
                fail(f'"best" of word {dependent}: {arc!r} is not [head (0 = root, or another word 1..{n}), label]')
        cycle = _cycle([head for head, _ in best])
        if cycle:
            fail(f'"best" is not a tree: words {cycle} head each other in a cycle that never reaches the root (0)')


def read_arc_distributions(path: str, skip: Container[int] = ()) -> Iterator[dict | None]:
    """The checked records of a side-data file (plain or .gz); a malformed line raises naming file and line. The
    1-based lines in ``skip`` (those ``--skip-invalid`` dropped) are not read and give None, keeping the
    alignment."""
    for number, line in enumerate(iter_lines_or_errors(path), 1):  # streamed: a corpus's file need not fit memory
        if number in skip:
            yield None
            continue
        if isinstance(line, TextLineError):  # bad UTF-8 or a stray \r: FILE:LINE
            raise line
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: not a JSON object: {error}") from None
        _check_record(record, str(path), number)
        yield record
