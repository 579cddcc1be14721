"""A part-of-speech tagger trained offline: a word + character BiLSTM with a softmax over tags.

Plank, Søgaard & Goldberg (2016, "Multilingual part-of-speech tagging with bidirectional LSTM models with
auxiliary loss", ACL), without the auxiliary loss: a word is its word embedding (lower-cased; forms seen once
become ``<unk>``, and training replaces a word by ``<unk>`` with probability ``word_dropout``) and the final
states of a character BiLSTM over its original form; a BiLSTM over those vectors and a linear layer give its tag
scores:

    e_i = [E_w(lower(w_i)); ->LSTM_c(w_i)_last; <-LSTM_c(w_i)_first]      words (B, T) -> (B, T, d_w + 2 d_c)
    h_i = BiLSTM(e_1 .. e_n)_i                                             (B, T, 2 d_h)
    P(t_i | w) = softmax(W h_i + b)                                        (B, T, |tags|)

SuPar has no tagger and stanza's and flair's trainers expect downloaded embeddings; characters generalise to another
domain's unseen words."""
from __future__ import annotations

import dataclasses
import random
import time
from collections import Counter
from typing import Iterable

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from tqdm import tqdm

from fairseq_syntax.parsing.batching import token_batches
from fairseq_syntax.parsing.evaluation import word_tags
from fairseq_syntax.parsing.resumable import EpochClock, checkpoint_path, restore, rng_states, save_whole
from fairseq_syntax.parsing.text import open_text, ptb_unescape_token

PAD, UNK = "<pad>", "<unk>"


@dataclasses.dataclass
class TaggerSize:
    word_embed: int = 100
    char_embed: int = 50
    char_hidden: int = 100  # per direction
    hidden: int = 200  # per direction
    layers: int = 2
    dropout: float = 0.33
    word_dropout: float = 0.25


@dataclasses.dataclass
class TaggedSentence:
    words: list  # raw tokens, unescaped
    tags: list


def sentences_from_trees(trees: Iterable) -> list[TaggedSentence]:
    """Words (unescaped) and POS tags of bracketed trees (``core.trees.Tree``)."""
    return [TaggedSentence([ptb_unescape_token(leaf) for leaf in tree.leaves()], word_tags(tree)) for tree in trees]


def sentences_from_conllu(path: str) -> list[TaggedSentence]:
    """FORM and XPOS of every word line (multi-word token ranges and empty nodes skipped: UD's words are these)."""
    sentences, words, tags = [], [], []
    with open_text(path) as lines:
        for number, line in enumerate(lines, 1):
            line = line.rstrip("\n")
            if not line:
                if words:
                    sentences.append(TaggedSentence(words, tags))
                words, tags = [], []
                continue
            if line.startswith("#"):
                continue
            columns = line.split("\t")
            if len(columns) != 10:
                raise ValueError(f"{path}, line {number}: {len(columns)} tab-separated columns, CoNLL-U has 10")
            if "-" in columns[0] or "." in columns[0]:
                continue
            words.append(columns[1])
            tags.append(columns[4])
    if words:
        sentences.append(TaggedSentence(words, tags))
    return sentences


class Vocabulary:
    def __init__(self, symbols: Iterable[str]):
        self.symbols = list(symbols)
        self.index = {symbol: position for position, symbol in enumerate(self.symbols)}

    def __len__(self) -> int:
        return len(self.symbols)

    def __call__(self, symbol: str) -> int:
        return self.index.get(symbol, self.index.get(UNK, 0))


class BiLSTMTagger(nn.Module):
    """See the module docstring; ``forward`` takes word ids (B, T) and character ids (B, T, C), 0 = padding, and
    returns tag scores (B, T, |tags|)."""

    def __init__(self, n_words: int, n_chars: int, n_tags: int, size: TaggerSize):
        super().__init__()
        self.size = size
        self.word_embed = nn.Embedding(n_words, size.word_embed, padding_idx=0)
        self.char_embed = nn.Embedding(n_chars, size.char_embed, padding_idx=0)
        self.char_lstm = nn.LSTM(size.char_embed, size.char_hidden, batch_first=True, bidirectional=True)
        self.lstm = nn.LSTM(size.word_embed + 2 * size.char_hidden, size.hidden, num_layers=size.layers,
                            batch_first=True, bidirectional=True, dropout=size.dropout)
        self.dropout = nn.Dropout(size.dropout)
        self.output = nn.Linear(2 * size.hidden, n_tags)

    def forward(self, words: torch.Tensor, chars: torch.Tensor) -> torch.Tensor:
        batch, length, width = chars.shape
        mask = words.ne(0)
        flat = chars[mask]  # (words in the batch, C)
        char_lengths = flat.ne(0).sum(-1).clamp(min=1).cpu()
        packed = pack_padded_sequence(self.char_embed(flat), char_lengths, batch_first=True, enforce_sorted=False)
        _, (final, _) = self.char_lstm(packed)  # final: (2, words, d_c), forward then backward
        char_vectors = words.new_zeros(batch, length, 2 * self.size.char_hidden, dtype=final.dtype)
        char_vectors[mask] = torch.cat([final[0], final[1]], -1)
        embedded = self.dropout(torch.cat([self.word_embed(words), char_vectors], -1))
        packed = pack_padded_sequence(embedded, mask.sum(-1).cpu(), batch_first=True, enforce_sorted=False)
        hidden, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=length)
        return self.output(self.dropout(hidden))


class Tagger:
    """A trained ``BiLSTMTagger`` with its vocabularies; ``tag`` labels tokenized sentences."""

    def __init__(self, model: BiLSTMTagger, words: Vocabulary, chars: Vocabulary, tags: Vocabulary,
                 batch_size: int = 64, batch_tokens: int | None = None):
        self.model, self.words, self.chars, self.tags, self.batch_size = model, words, chars, tags, batch_size
        self.batch_tokens = batch_tokens  # when given, batches of this padded size (batching) replace batch_size

    @classmethod
    def build(cls, sentences: list[TaggedSentence], size: TaggerSize) -> "Tagger":
        counts = Counter(word.lower() for sentence in sentences for word in sentence.words)
        words = Vocabulary([PAD, UNK, *sorted(word for word, count in counts.items() if count >= 2)])
        chars = Vocabulary([PAD, UNK, *sorted({char for s in sentences for word in s.words for char in word})])
        tags = Vocabulary(sorted({tag for sentence in sentences for tag in sentence.tags}))
        return cls(BiLSTMTagger(len(words), len(chars), len(tags), size), words, chars, tags)

    def tensors(self, sentences: list[list[str]], word_dropout: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
        length = max(1, max(len(words) for words in sentences))
        width = max(1, max((len(word) for words in sentences for word in words), default=1))
        word_ids = torch.zeros(len(sentences), length, dtype=torch.long)
        char_ids = torch.zeros(len(sentences), length, width, dtype=torch.long)
        unk = self.words(UNK)
        for row, words in enumerate(sentences):
            for column, word in enumerate(words):
                dropped = word_dropout and random.random() < word_dropout
                word_ids[row, column] = unk if dropped else self.words(word.lower())
                char_ids[row, column, :len(word)] = torch.tensor([self.chars(char) for char in word])
        device = next(self.model.parameters()).device
        return word_ids.to(device), char_ids.to(device)

    @torch.no_grad()
    def tag(self, sentences: list[list[str]]) -> list[list[str]]:
        """Tags of each sentence's tokens (raw, unescaped); an empty sentence gets no tags."""
        self.model.eval()
        result: list[list[str]] = [[] for _ in sentences]
        indices = [index for index, words in enumerate(sentences) if words]
        if self.batch_tokens is None:
            order = sorted(indices, key=lambda i: len(sentences[i]))
            batches = [order[start:start + self.batch_size] for start in range(0, len(order), self.batch_size)]
        else:
            lengths = [len(sentences[index]) for index in indices]
            batches = [[indices[k] for k in batch] for batch in token_batches(lengths, self.batch_tokens)]
        for batch in batches:
            scores = self.model(*self.tensors([sentences[index] for index in batch]))
            for row, index in enumerate(batch):
                best = scores[row, :len(sentences[index])].argmax(-1).tolist()
                result[index] = [self.tags.symbols[tag] for tag in best]
        return result

    def accuracy(self, sentences: list[TaggedSentence]) -> float:
        predicted = self.tag([sentence.words for sentence in sentences])
        pairs = [(p, g) for tags, sentence in zip(predicted, sentences) for p, g in zip(tags, sentence.tags)]
        return sum(p == g for p, g in pairs) / max(1, len(pairs))

    def state(self) -> dict:
        return {"size": dataclasses.asdict(self.model.size), "words": self.words.symbols,
                "chars": self.chars.symbols, "tags": self.tags.symbols, "state_dict": self.model.state_dict()}

    @classmethod
    def from_state(cls, state: dict, device: str = "cpu") -> "Tagger":
        words, chars, tags = (Vocabulary(state[name]) for name in ("words", "chars", "tags"))
        model = BiLSTMTagger(len(words), len(chars), len(tags), TaggerSize(**state["size"]))
        model.load_state_dict(state["state_dict"])
        return cls(model.to(device), words, chars, tags)


def load_tagger(path: str, device: str | None = None, batch_tokens: int | None = None) -> Tagger:
    """The tagger saved at ``path``, on ``device`` (default: cuda when available), in batches of ``batch_tokens``
    padded tokens (else 64 sentences); a file that is no tagger or does not load is one line
    (``models.load_model``). Read weights-only."""
    from fairseq_syntax.parsing.models import TAGGER, check_model_argument, load_model

    check_model_argument(path, "tagger")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    tagger = load_model(path, TAGGER, lambda: Tagger.from_state(torch.load(path, map_location=device,
                                                                           weights_only=True), device))
    tagger.batch_tokens = batch_tokens
    return tagger


def train_tagger(train: list[TaggedSentence], dev: list[TaggedSentence], path: str, epochs: int,
                 size: TaggerSize = TaggerSize(), batch_size: int = 32, learning_rate: float = 2e-3,
                 clip: float = 5.0, seed: int = 1, log=print) -> float:
    """Adam with the learning rate decayed by 0.75 every 5000 steps (SuPar's schedule), the best dev accuracy's
    epoch saved to ``path``; resumes from ``checkpoint_path(path)``. Returns the best dev accuracy."""
    import os

    random.seed(seed)
    torch.manual_seed(seed)
    tagger = Tagger.build(train, size)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    last = checkpoint_path(path)
    state = torch.load(last, map_location=device, weights_only=False) if os.path.exists(last) else None
    if state is not None:
        tagger = Tagger.from_state(state["tagger"], device)
    tagger.model.to(device)
    optimizer = torch.optim.Adam(tagger.model.parameters(), learning_rate, betas=(0.9, 0.9))
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, 0.75 ** (1 / 5000))
    first_epoch, best, best_epoch, seconds = 1, -1.0, 0, 0.0
    if state is not None:
        restore(state, optimizer, scheduler)
        first_epoch, best, best_epoch = state["epoch"] + 1, state["best"], state["best_epoch"]
        seconds = state["seconds"]
        log(f"{path}: resuming from {last} at epoch {first_epoch} (best so far: epoch {best_epoch}, "
            f"dev accuracy {100 * best:.2f})")
    loss_function = nn.CrossEntropyLoss(ignore_index=-100)
    clock = EpochClock(first_epoch, epochs)
    for epoch in range(first_epoch, epochs + 1):
        started = time.perf_counter()
        tagger.model.train()
        order = list(range(len(train)))
        random.shuffle(order)
        total = 0.0
        batches = range(0, len(order), batch_size)
        for start in tqdm(batches, desc=f"epoch {epoch}", leave=False, unit="batch"):
            batch = [train[index] for index in order[start:start + batch_size]]
            words, chars = tagger.tensors([sentence.words for sentence in batch], size.word_dropout)
            gold = torch.full(words.shape, -100, dtype=torch.long)
            for row, sentence in enumerate(batch):
                gold[row, :len(sentence.tags)] = torch.tensor([tagger.tags(tag) for tag in sentence.tags])
            loss = loss_function(tagger.model(words, chars).flatten(0, 1), gold.to(words.device).flatten())
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(tagger.model.parameters(), clip)
            optimizer.step()
            scheduler.step()
            total += loss.item()
        accuracy = tagger.accuracy(dev)
        seconds += time.perf_counter() - started
        improved = accuracy > best
        if improved:
            best, best_epoch = accuracy, epoch
            save_whole(tagger.state(), path)
        save_whole({"tagger": tagger.state(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                    **rng_states(), "epoch": epoch, "best": best, "best_epoch": best_epoch, "seconds": seconds}, last)
        log(f"epoch {epoch}/{epochs}: loss {total / len(batches):.4f}; dev accuracy {100 * accuracy:.2f}"
            f"{' (saved)' if improved else ''}; {clock.line(epoch)}")
    return best
