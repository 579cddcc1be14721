"""What a trained parser or tagger scores on held-out data, how fast it parses, and its run record.

``measure_*`` load the saved model as the pipeline does, label the held-out data through the corpus's code path
and time it (sentences per second on this device). ``training_record`` is one row of ``preprocess/RESULTS.md``."""
from __future__ import annotations

import dataclasses
import os
import platform
import shlex
import time

import torch

from fairseq_syntax.parsing.provenance import model_digest
from fairseq_syntax.parsing.text import write_json


@dataclasses.dataclass
class Measured:
    """Scores (metric name -> value in %) of one model on one evaluation set, and its labelling speed there."""

    scores: dict
    sentences: int
    seconds: float

    @property
    def sentences_per_second(self) -> float:
        return self.sentences / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        scores = ", ".join(f"{name} {value:.2f}" for name, value in self.scores.items())
        return f"{scores} on {self.sentences} sentences ({self.sentences_per_second:.1f} sentences/s)"


def cpu_name() -> str:
    """The CPU's model name as Linux reports it (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name() -> str:
    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name()} (torch {torch.__version__})"
    return f"CPU {cpu_name()}, {torch.get_num_threads()} thread(s)"


def measure_dependency(model: str, conllu: str) -> Measured:
    """UAS/LAS (punctuation excluded, MST decoding) of SuPar's parser, timed over the parse of ``conllu``."""
    from fairseq_syntax.parsing.torch_load import load_supar_parser
    from fairseq_syntax.parsing.training import evaluate_dependency

    parser = load_supar_parser(model)
    start = time.perf_counter()
    uas, las = evaluate_dependency(parser, conllu)
    seconds = time.perf_counter() - start
    with open(conllu, encoding="utf-8") as lines:
        sentences = sum(1 for line in lines if line.startswith("1\t"))
    return Measured({"UAS": 100 * uas, "LAS": 100 * las}, sentences, seconds)


def measure_constituency(backend: str, model: str, gold_trees: str) -> Measured:
    """Labeled bracketing F1 (EVALB's conventions, ``evaluation``) of the parser on the gold trees' words, timed."""
    from fairseq_syntax.parsing.constituency import load_parser
    from fairseq_syntax.parsing.training import evaluate_constituency

    parser = load_parser(backend, model)
    start = time.perf_counter()
    score = evaluate_constituency(parser, gold_trees)
    return Measured({"F1": 100 * score.f1}, score.sentences, time.perf_counter() - start)


def measure_tagger(model: str, gold_trees: str) -> Measured:
    """POS accuracy (every word, punctuation included, as taggers are scored) on the gold trees' words, timed."""
    from fairseq_syntax.parsing.tagger import load_tagger, sentences_from_trees
    from fairseq_syntax.parsing.training import read_bracketed

    gold = sentences_from_trees(read_bracketed(gold_trees))
    tagger = load_tagger(model)
    start = time.perf_counter()
    accuracy = tagger.accuracy(gold)
    return Measured({"POS accuracy": 100 * accuracy}, len(gold), time.perf_counter() - start)


REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def repository_relative(argument: str) -> str:
    """A path inside the repository as the recipes write it (relative to its root), so records read the same on
    every machine; anything else unchanged."""
    if os.path.isabs(argument) and os.path.commonpath([argument, REPOSITORY]) == REPOSITORY:
        return os.path.relpath(argument, REPOSITORY)
    return argument


def training_record(parser: str, model: str, data: str, split: str, measured: Measured, state, argv: list) -> dict:
    """One run record; ``state`` is a ``training.TrainingState``. ``sha256`` (of the model file) lets the data
    parsed with the model name this record (``provenance``)."""
    return {
        "parser": parser, "model": os.path.basename(model), "sha256": model_digest(model), "data": data,
        "split": split,
        "scores": measured.scores, "epochs": state.epochs, "best_epoch": state.best_epoch,
        "minutes": state.minutes, "device": device_name(),
        "sentences_per_second": measured.sentences_per_second, "evaluated_sentences": measured.sentences,
        "command": shlex.join(["python3", "preprocess/" + os.path.basename(argv[0]),
                               *map(repository_relative, argv[1:])]),
    }


def write_record(path: str, record: dict) -> None:
    """``record`` as indented JSON, its folder made, the file written whole."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    write_json(path, record)
