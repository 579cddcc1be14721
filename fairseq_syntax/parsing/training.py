"""Training small parsers offline on local treebanks, so the pipeline needs no downloaded model.

* ``train_supar_dependency``: SuPar's biaffine dependency parser (Dozat & Manning, 2017) on CoNLL-U (UD EWT),
  with a char-LSTM and no pretrained embeddings (``embed=''``). Scored by UAS/LAS (``evaluate_dependency``).
* ``prepare_ptb``: the PTB sample cleaned (``trees.clean_ptb``: no ``-NONE-`` elements, function tags or
  indices), split in order into train / dev / held-out test, one ``(TOP ...)`` tree per line.
* ``train_supar_constituency``: SuPar's CRF constituency parser (Zhang et al., 2020) on those files.
* ``train_benepar``: a benepar ``ChartParser`` (Kitaev & Klein, 2018) with a character LSTM and a small
  partitioned-transformer encoder, trained by the loop below (benepar ships the model, not its training script)
  and saved as one file ``{"config", "state_dict"}`` that ``benepar.Parser(path)`` loads.
* ``evaluate_constituency``: labeled bracketing F1 (``evaluation``) of a parser through the same code path that
  parses the corpus (``constituency.parse_sentences``).

SuPar needs its optimiser settings spelled out (``SUPAR_OPTIMIZER``, its defaults from ``config.ini``), and it
reloads its own checkpoint at the end of training, hence ``supar_safe_globals`` around ``train``. Model sizes are
arguments: the defaults of the command line (``preprocess/train_parser.py``) are small models for a CPU.
"""
from __future__ import annotations

import dataclasses
import gzip
import math
import os
import random
import shutil
from typing import Optional

import nltk
import torch

from fairseq_syntax.core.trees import (
    Tree,
    clean_ptb,
    parse_tree,
    read_ptb,
    to_bracketed,
)
from fairseq_syntax.parsing.constituency import (
    ConstituencyParser,
    parse_sentences,
    tree_from_nltk,
    unwrap,
)
from fairseq_syntax.parsing.evaluation import BracketScore, bracket_score
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
        # With no pretrained embeddings, n_pretrained must equal n_embed, or SuPar sizes its LSTM input for
        # embeddings that are never added.
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


def _train_supar(parser_class, model_arguments: dict, train: str, dev: str, path: str, epochs: int,
                 batch_tokens: int, learning_rate: float, seed: int, verbose: bool, train_arguments: dict):
    torch.manual_seed(seed)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with supar_safe_globals():
        parser = parser_class.build(
            path, train=train, build=True, checkpoint=False, encoder="lstm", feat=["char"], embed="", unk="unk",
            min_freq=2, fix_len=20, **dict(SUPAR_OPTIMIZER, lr=learning_rate), **model_arguments,
        )
        # SuPar scores a "test" set after every epoch; the dev set stands in (the held-out set stays unseen).
        try:
            parser.train(train=train, dev=dev, test=dev, epochs=epochs, batch_size=batch_tokens, patience=epochs,
                         verbose=verbose, **train_arguments)
        except ValueError as error:
            if os.path.exists(path):
                raise
            # SuPar saves only an epoch whose dev score beats 0, then reloads the file (as a URL when missing).
            raise RuntimeError(f"no epoch scored above 0 on {dev}, so SuPar saved no model to {path}: "
                               f"train longer or with smaller batches") from error
    return load_supar_parser(path)


def train_supar_dependency(train: str, dev: str, path: str, epochs: int, size: SuparSize = SuparSize(),
                           batch_tokens: int = 5000, learning_rate: float = SUPAR_OPTIMIZER["lr"], seed: int = 1,
                           verbose: bool = True):
    """Train on CoNLL-U ``train`` (plain text), select on ``dev`` by LAS, save to ``path``; returns the parser."""
    from supar import BiaffineDependencyParser

    model_arguments = dict(size.encoder_arguments(), n_arc_mlp=size.n_mlp, n_rel_mlp=size.n_label_mlp)
    return _train_supar(BiaffineDependencyParser, model_arguments, train, dev, path, epochs, batch_tokens,
                        learning_rate, seed, verbose, dict(punct=False, tree=False, proj=False, partial=False))


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
                             verbose: bool = True):
    """Train on ``(TOP ...)`` trees (``prepare_ptb``), select on ``dev`` by labeled F1, save to ``path``."""
    from supar import CRFConstituencyParser

    model_arguments = dict(size.encoder_arguments(), n_span_mlp=size.n_mlp, n_label_mlp=size.n_label_mlp)
    return _train_supar(CRFConstituencyParser, model_arguments, train, dev, path, epochs, batch_tokens,
                        learning_rate, seed, verbose, dict(mbr=True))


def evaluate_constituency(parser: ConstituencyParser, gold_path: str) -> BracketScore:
    """Parse the words of the gold trees (unescaped, as raw tokens arrive) and score the trees against them."""
    gold = read_bracketed(gold_path)
    sentences = [[ptb_unescape_token(word) for word in tree.leaves()] for tree in gold]
    predicted = [parse_tree(parsed.tree) for parsed in parse_sentences(parser, sentences)]
    return bracket_score(gold, predicted)


# ---------------------------------------------------------------------------------------------------- benepar


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


@dataclasses.dataclass
class TreebankSentence:
    """benepar's training input: ``words`` as raw text (unescaped) and the gold ``tree`` (TOP-rooted nltk tree).
    The character LSTM reads only the words (no ``space_after``, which pretrained-subword models need)."""

    tree: nltk.Tree
    words: list = dataclasses.field(init=False)

    def __post_init__(self):
        self.words = [ptb_unescape_token(leaf) for leaf in self.tree.leaves()]

    def pos(self):
        return self.tree.pos()


def _nltk_tree(tree: Tree) -> nltk.Tree:
    return nltk.Tree.fromstring(f"(TOP {to_bracketed(tree)})")


def _benepar_score(chart_parser, gold: list[Tree]) -> BracketScore:
    """Bracket scores of the model being trained, parsing the gold trees' words."""
    import benepar

    inputs = [benepar.InputSentence(words=[ptb_unescape_token(leaf) for leaf in tree.leaves()],
                                    escaped_words=tree.leaves())
              for tree in gold]
    predicted = [unwrap(tree_from_nltk(tree)) for tree in chart_parser.parse(inputs, subbatch_max_tokens=2000)]
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
    examples = [TreebankSentence(tree) for tree in train_trees]
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
    for epoch in range(1, epochs + 1):
        random.shuffle(examples)
        chart_parser.train()
        total_loss = 0.0
        for start in range(0, len(examples), batch_size):
            optimizer.zero_grad()
            for _, subbatch in chart_parser.encode_and_collate_subbatches(examples[start:start + batch_size], 2000):
                loss = chart_parser.compute_loss(subbatch)
                loss.backward()
                total_loss += loss.item()
            torch.nn.utils.clip_grad_norm_(chart_parser.parameters(), clip)
            optimizer.step()
            scheduler.step()
        score = _benepar_score(chart_parser, dev_gold)
        improved = best is None or score.f1 > best.f1
        if improved:
            best = score
            torch.save({"config": chart_parser.config, "state_dict": chart_parser.state_dict()}, path)
        log(f"epoch {epoch}/{epochs}: loss {total_loss / math.ceil(len(examples) / batch_size):.3f}; "
            f"dev {score}{' (saved)' if improved else ''}")
    return best
