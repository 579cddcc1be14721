"""Training small parsers offline on local treebanks, so the pipeline needs no downloaded model: SuPar's biaffine
dependency parser (Dozat & Manning, 2017) on CoNLL-U and its CRF constituency parser (Zhang et al., 2020) on the
cleaned PTB sample (``prepare_ptb``), both with a char-LSTM and no pretrained embeddings, and a benepar
``ChartParser`` (Kitaev & Klein, 2018) with a character LSTM and a small partitioned-transformer encoder, trained by
the loop below and saved as one file ``{"config", "state_dict"}`` that ``benepar.Parser(path)`` loads.

SuPar's optimiser settings are spelled out (``SUPAR_OPTIMIZER``, its ``config.ini`` defaults); it reloads its own
checkpoint at the end, hence ``supar_safe_globals``. Sizes are arguments (the command line's defaults are small)."""
from __future__ import annotations

import dataclasses
import datetime
import gzip
import inspect
import math
import os
import random
import shutil
import time
from types import SimpleNamespace
from typing import Optional

import nltk
import torch
from tqdm import tqdm

from fairseq_syntax.core.files import atomic_path
from fairseq_syntax.core.trees import (
    Tree,
    clean_ptb,
    parse_tree,
    read_ptb,
    to_bracketed,
    unwrapped,
)
from fairseq_syntax.parsing.constituency import (
    ConstituencyParser,
    parse_sentences,
    tree_from_nltk,
)
from fairseq_syntax.parsing.evaluation import BracketScore, bracket_score
from fairseq_syntax.parsing.resumable import EpochClock, checkpoint_path, restore, rng_states, save_whole
from fairseq_syntax.parsing.text import open_text, ptb_unescape_token
from fairseq_syntax.parsing.torch_load import load_supar_parser, supar_safe_globals

BENEPAR_LEARNING_RATE = 8e-4  # Adam, as for benepar's non-pretrained (char-LSTM) models
SUPAR_OPTIMIZER = dict(lr=2e-3, mu=0.9, nu=0.9, eps=1e-12, weight_decay=0.0, clip=5.0, decay=0.75, decay_steps=5000)


@dataclasses.dataclass
class SuparSize:
    """Encoder sizes shared by both SuPar parsers; the MLP sizes are the parser-specific ones."""

    n_embed: int = 100
    n_char_embed: int = 50
    n_char_hidden: int = 100
    n_feat_embed: int = 100
    n_lstm_hidden: int = 200
    n_lstm_layers: int = 2
    n_mlp: int = 300  # n_arc_mlp (dependency) / n_span_mlp (constituency)
    n_label_mlp: int = 100  # n_rel_mlp / n_label_mlp

    def encoder_arguments(self) -> dict:
        # with no pretrained embeddings n_pretrained must equal n_embed, or SuPar sizes its LSTM input wrongly
        sizes = dataclasses.asdict(self)
        del sizes["n_mlp"], sizes["n_label_mlp"]
        return dict(sizes, n_pretrained=self.n_embed)


def plain_copy(path: str, work_dir: str) -> str:
    """SuPar opens data files as plain text: a ``.gz`` file is decompressed into ``work_dir``."""
    if not path.endswith(".gz"):
        return path
    os.makedirs(work_dir, exist_ok=True)
    target = os.path.join(work_dir, os.path.basename(path)[: -len(".gz")])
    with gzip.open(path, "rb") as source, open(target, "wb") as out:
        shutil.copyfileobj(source, out)
    return target


@dataclasses.dataclass
class TrainingState:
    """What a parser's training checkpoint says of it, over every sitting: for the run records."""

    epochs: int  # trained so far
    best_epoch: int  # the one saved as the model
    minutes: float  # training and dev scoring, every sitting summed

    @classmethod
    def of(cls, path: str) -> "TrainingState":
        """From ``checkpoint_path(path)`` as SuPar's loop or benepar's loop above left it."""
        last = checkpoint_path(path)
        with supar_safe_globals():
            state = torch.load(last, map_location="cpu", weights_only=False)
        if "checkpoint_state_dict" in state:  # SuPar's: the epoch that comes next
            supar_state = state["checkpoint_state_dict"]
            return cls(supar_state["epoch"] - 1, supar_state["best_e"], supar_state["elapsed"].total_seconds() / 60)
        return cls(state["epoch"], state["best_epoch"], state["seconds"] / 60)


def _train_supar(parser_class, model_arguments: dict, train: str, dev: str, path: str, epochs: int,
                 batch_tokens: int, learning_rate: float, seed: int, verbose: bool, train_arguments: dict,
                 log=print):
    """SuPar's ``Parser.train`` loop, except that every epoch's full state goes to ``checkpoint_path(path)`` and a
    run that finds that file continues from it."""
    from supar.utils import Dataset
    from supar.utils.fn import set_rng_state
    from supar.utils.logging import init_logger, logger
    from supar.utils.metric import Metric
    from torch.optim import Adam
    from torch.optim.lr_scheduler import ExponentialLR

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    last = checkpoint_path(path)
    with supar_safe_globals():
        if os.path.exists(last):
            parser = parser_class.load(last, checkpoint=True)
        else:
            torch.manual_seed(seed)
            parser = parser_class.build(
                path, train=train, build=True, checkpoint=False, encoder="lstm", feat=["char"], embed="", unk="unk",
                min_freq=2, fix_len=20, **dict(SUPAR_OPTIMIZER, lr=learning_rate), **model_arguments,
            )
            parser.checkpoint_state_dict = None
    init_logger(logger, verbose=verbose)  # SuPar's batch progress bar shows at INFO level
    # SuPar's train() adds its keyword defaults (e.g. EVALB's ``delete``, ``equal``) before its loop; so do we
    defaults = {name: parameter.default for name, parameter in inspect.signature(parser_class.train).parameters.items()
                if parameter.default is not inspect.Parameter.empty}
    args = parser.args.update(dict(defaults, train=train, dev=dev, epochs=epochs, batch_size=batch_tokens,
                                   update_steps=1, buckets=32, verbose=verbose, **train_arguments))
    parser.transform.train()
    train_data = Dataset(parser.transform, train, **args).build(batch_tokens, args.buckets, True, False)
    dev_data = Dataset(parser.transform, dev).build(batch_tokens, args.buckets)
    parser.optimizer = Adam(parser.model.parameters(), args.lr, (args.mu, args.nu), args.eps, args.weight_decay)
    parser.scheduler = ExponentialLR(parser.optimizer, args.decay ** (1 / args.decay_steps))
    parser.epoch, parser.best_e, parser.best_metric = 1, 0, Metric()
    parser.patience, parser.elapsed = epochs, datetime.timedelta()  # SuPar's checkpoint carries both
    state = parser.checkpoint_state_dict
    if state:
        parser.optimizer.load_state_dict(state.pop("optimizer_state_dict"))
        parser.scheduler.load_state_dict(state.pop("scheduler_state_dict"))
        set_rng_state(state.pop("rng_state"))
        for name, value in state.items():
            setattr(parser, name, value)
        train_data.loader.batch_sampler.epoch = parser.epoch  # the batches of the epoch that comes next
        log(f"{path}: resuming from {last} at epoch {parser.epoch} (best so far: epoch {parser.best_e}, "
            f"dev {parser.best_metric})")
    clock = EpochClock(parser.epoch, epochs)
    for epoch in range(parser.epoch, epochs + 1):
        started = time.perf_counter()
        parser._train(train_data.loader)
        _, dev_metric = parser._evaluate(dev_data.loader)
        parser.epoch = epoch + 1
        parser.elapsed += datetime.timedelta(seconds=time.perf_counter() - started)  # over every sitting
        improved = dev_metric > parser.best_metric
        if improved:
            parser.best_e, parser.best_metric = epoch, dev_metric
            with atomic_path(path) as temporary:
                parser.save(temporary)
        with atomic_path(last) as temporary:
            parser.save_checkpoint(temporary)
        log(f"epoch {epoch}/{epochs}: dev {dev_metric}{' (saved)' if improved else ''}; {clock.line(epoch)}")
    if not os.path.exists(path):
        raise RuntimeError(f"no epoch scored above 0 on {dev}, so no model was saved to {path}: "
                           f"train longer or with smaller batches")
    return load_supar_parser(path)


def train_supar_dependency(train: str, dev: str, path: str, epochs: int, size: SuparSize = SuparSize(),
                           batch_tokens: int = 5000, learning_rate: float = SUPAR_OPTIMIZER["lr"], seed: int = 1,
                           verbose: bool = True, log=print):
    """Train on CoNLL-U ``train`` (plain text), select on ``dev`` by LAS, save to ``path``; returns the parser."""
    from supar import BiaffineDependencyParser

    model_arguments = dict(size.encoder_arguments(), n_arc_mlp=size.n_mlp, n_rel_mlp=size.n_label_mlp)
    return _train_supar(BiaffineDependencyParser, model_arguments, train, dev, path, epochs, batch_tokens,
                        learning_rate, seed, verbose, dict(punct=False, tree=False, proj=False, partial=False), log)


def evaluate_dependency(parser, conllu: str) -> tuple[float, float]:
    """(UAS, LAS) in [0, 1] with the parser's own decoding (MST, ``tree=True``), punctuation excluded as
    SuPar does by default."""
    _, metric = parser.evaluate(conllu, tree=True, proj=False, punct=False, verbose=False)
    return metric.uas, metric.las


def prepare_ptb(mrg_path: str, out_dir: str, heldout_fraction: float = 0.1, dev_fraction: float = 0.1) -> dict:
    """Clean the treebank and write ``train.pid``, ``dev.pid``, ``test.pid`` (in file order: test is the last
    ``heldout_fraction`` of the trees, dev the last ``dev_fraction`` of the rest). Returns {split: path}."""
    trees = [clean_ptb(tree) for tree in read_ptb(mrg_path)]
    n_test = max(1, round(len(trees) * heldout_fraction))
    rest = trees[:-n_test]
    n_dev = max(1, round(len(rest) * dev_fraction))
    splits = {"train": rest[:-n_dev], "dev": rest[-n_dev:], "test": trees[-n_test:]}
    if not splits["train"]:
        raise ValueError(f"{mrg_path}: {len(trees)} trees leave none for training")
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for split, split_trees in splits.items():
        paths[split] = os.path.join(out_dir, f"{split}.pid")
        with open(paths[split], "w", encoding="utf-8") as out:
            out.writelines(f"(TOP {to_bracketed(tree)})\n" for tree in split_trees)
    return paths


def read_bracketed(path: str) -> list[Tree]:
    """One tree per line, wrappers removed."""
    with open_text(path) as lines:
        return [parse_tree(line, path, number) for number, line in enumerate(lines, 1)]


def train_supar_constituency(train: str, dev: str, path: str, epochs: int, size: SuparSize = SuparSize(),
                             batch_tokens: int = 5000, learning_rate: float = SUPAR_OPTIMIZER["lr"], seed: int = 1,
                             verbose: bool = True, log=print):
    """Train on ``(TOP ...)`` trees (``prepare_ptb``), select on ``dev`` by labeled F1, save to ``path``."""
    from supar import CRFConstituencyParser

    model_arguments = dict(size.encoder_arguments(), n_span_mlp=size.n_mlp, n_label_mlp=size.n_label_mlp)
    return _train_supar(CRFConstituencyParser, model_arguments, train, dev, path, epochs, batch_tokens,
                        learning_rate, seed, verbose, dict(mbr=True), log)


def evaluate_constituency(parser: ConstituencyParser, gold_path: str) -> BracketScore:
    """Parse the words of the gold trees (unescaped, as raw tokens arrive) and score the trees against them."""
    gold = read_bracketed(gold_path)
    sentences = [[ptb_unescape_token(word) for word in tree.leaves()] for tree in gold]
    return bracket_score(gold, [parse_tree(parsed.tree) for parsed in parse_sentences(parser, sentences)])


# --- benepar


@dataclasses.dataclass
class BeneparSize:
    d_model: int = 256
    num_layers: int = 2
    num_heads: int = 4
    d_kv: int = 32
    d_ff: int = 512
    d_char_emb: int = 32
    d_label_hidden: int = 128
    d_tag_hidden: int = 128


def _benepar_hparams(size: BeneparSize, force_root_constituent: bool):
    from benepar import nkutil

    return nkutil.HParams(
        **dataclasses.asdict(size),
        use_chars_lstm=True, use_pretrained=False, pretrained_model="", use_encoder=True,
        encoder_max_len=512, predict_tags=True, tag_loss_scale=5.0, force_root_constituent=force_root_constituent,
        char_lstm_input_dropout=0.2, morpho_emb_dropout=0.2, attention_dropout=0.2, relu_dropout=0.1,
        residual_dropout=0.2,
    )


def _nltk_tree(tree: Tree) -> nltk.Tree:
    return nltk.Tree.fromstring(f"(TOP {to_bracketed(tree)})")


def _benepar_score(chart_parser, gold: list[Tree]) -> BracketScore:
    """Bracket scores of the model being trained, parsing the gold trees' words."""
    import benepar

    inputs = [benepar.InputSentence(words=[ptb_unescape_token(leaf) for leaf in tree.leaves()],
                                    escaped_words=tree.leaves())
              for tree in gold]
    predicted = [unwrapped(tree_from_nltk(tree)) for tree in chart_parser.parse(inputs, subbatch_max_tokens=2000)]
    return bracket_score(gold, predicted)


def train_benepar(train: str, dev: str, path: str, epochs: int, size: BeneparSize = BeneparSize(),
                  batch_size: int = 32, learning_rate: float = BENEPAR_LEARNING_RATE, warmup_steps: int = 160,
                  clip: float = 5.0, seed: int = 1, log=print) -> Optional[BracketScore]:
    """Train on ``(TOP ...)`` tree files, keep the epoch with the best dev F1 in ``path``; returns its dev score."""
    from benepar import char_lstm, decode_chart
    from benepar.parse_chart import ChartParser

    random.seed(seed)
    torch.manual_seed(seed)
    train_trees = [_nltk_tree(tree) for tree in read_bracketed(train)]
    dev_gold = read_bracketed(dev)
    # benepar's training input: the words unescaped, the gold TOP-rooted nltk tree and its (word, tag) pairs
    examples = [SimpleNamespace(words=[ptb_unescape_token(leaf) for leaf in tree.leaves()], tree=tree, pos=tree.pos)
                for tree in train_trees]
    tag_vocab = {"UNK": 0, **{tag: index for index, tag in enumerate(
        sorted({tag for tree in train_trees for _, tag in tree.pos()}), start=1)}}
    chart_parser = ChartParser(
        tag_vocab=tag_vocab,
        label_vocab=decode_chart.ChartDecoder.build_vocab(train_trees),
        char_vocab=char_lstm.RetokenizerForCharLSTM.build_vocab([example.words for example in examples]),
        hparams=_benepar_hparams(size, decode_chart.ChartDecoder.infer_force_root_constituent(train_trees)),
    )
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    chart_parser.to(device)
    optimizer = torch.optim.Adam(chart_parser.parameters(), lr=learning_rate, betas=(0.9, 0.98))
    # Linear warm-up, as benepar's own training does.
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup_steps))
    best: Optional[BracketScore] = None
    first_epoch, best_epoch, seconds = 1, 0, 0.0
    last = checkpoint_path(path)
    if os.path.exists(last):
        state = torch.load(last, map_location=device, weights_only=False)
        chart_parser.load_state_dict(state["state_dict"])
        restore(state, optimizer, scheduler)
        examples = [examples[index] for index in state["order"]]  # the shuffled order the next epoch starts from
        first_epoch, seconds = state["epoch"] + 1, state["seconds"]
        best, best_epoch = BracketScore(**state["best"]), state["best_epoch"]
        log(f"{path}: resuming from {last} at epoch {first_epoch} (best so far: dev {best})")
    order = {id(example): index for index, example in enumerate(examples)}
    clock = EpochClock(first_epoch, epochs)
    for epoch in range(first_epoch, epochs + 1):
        started = time.perf_counter()
        random.shuffle(examples)
        chart_parser.train()
        total_loss = 0.0
        for start in tqdm(range(0, len(examples), batch_size), desc=f"epoch {epoch}", leave=False, unit="batch"):
            optimizer.zero_grad()
            for _, subbatch in chart_parser.encode_and_collate_subbatches(examples[start:start + batch_size], 2000):
                loss = chart_parser.compute_loss(subbatch)
                loss.backward()
                total_loss += loss.item()
            torch.nn.utils.clip_grad_norm_(chart_parser.parameters(), clip)
            optimizer.step()
            scheduler.step()
        score = _benepar_score(chart_parser, dev_gold)
        seconds += time.perf_counter() - started
        improved = best is None or score.f1 > best.f1
        if improved:
            best, best_epoch = score, epoch
            save_whole({"config": chart_parser.config, "state_dict": chart_parser.state_dict()}, path)
        save_whole({"state_dict": chart_parser.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), **rng_states(),
                    "order": [order[id(example)] for example in examples], "epoch": epoch, "seconds": seconds,
                    "best": dataclasses.asdict(best), "best_epoch": best_epoch}, last)
        log(f"epoch {epoch}/{epochs}: loss {total_loss / math.ceil(len(examples) / batch_size):.3f}; "
            f"dev {score}{' (saved)' if improved else ''}; {clock.line(epoch)}")
    return best
