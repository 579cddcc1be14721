"""A synthetic parallel corpus with an exact number of source words per sentence, for the speed benchmark.

Each source sentence is a random PTB-style tree over exactly ``n`` words: the root ``S`` splits its span into 2-4
constituents at random cuts, recursively under random phrase labels, every word under a random POS preterminal.
Words are made-up syllable words; every ``SPLIT_EVERY``-th type is BPE-split in two (``ka@@ ro``). The target is a
deterministic function of the source (each word reversed, in reverse order, split where the source word is).

Parser side data for ``fairseq-syntax-preprocess-dependencies`` (``*.arcs.jsonl``,
:mod:`fairseq_syntax.parsing.dependency`): per word a main head (0.9) and two alternatives (0.07, 0.03;
renormalised in short sentences), each with two UD labels (0.8, 0.2); the main heads form a random tree ("best").

Files per prefix ``P``: ``P.en``, ``P.de`` (BPE applied), ``P.tree`` (word level), ``P.arcs.jsonl``; the same seed
gives the same files."""
import json
import random
from dataclasses import dataclass
from typing import List, Sequence

from fairseq_syntax.core.bpe import BPE_JOINER
from fairseq_syntax.core.trees import Tree, to_bracketed
from fairseq_syntax.methods.ldd.distributions import UNIVERSAL_GROUPS

PHRASE_LABELS = ("NP", "VP", "PP", "S", "SBAR", "ADJP", "ADVP")
POS_TAGS = ("DT", "NN", "NNS", "VBZ", "VBD", "IN", "JJ", "RB", "PRP", "CC")
SYLLABLES = ("ka", "ro", "mi", "te", "lu", "sa", "no", "vi", "da", "pe", "zu", "fo", "ri", "gu", "be", "ha")
VOCABULARY_SIZE = 5200  # with the split pieces and the reversed target words: a joint dictionary of about 10k
SPLIT_EVERY = 6  # every 6th word type is BPE-split into two pieces (about 1.17 subwords per word, like BPE 10k)
ARC_PROBABILITIES = (0.9, 0.07, 0.03)
LABEL_PROBABILITIES = (0.8, 0.2)
DEPENDENCY_LABELS = tuple(label for group in UNIVERSAL_GROUPS for label in group if label != "root")


@dataclass(frozen=True)
class Sentence:
    tree: Tree  # word level
    source: List[str]  # BPE'd source tokens
    target: List[str]  # BPE'd target tokens
    arcs: dict  # parser side-data record: {"words": [...], "arcs": [[dependent, head, p, {label: p}], ...]}


def vocabulary(size: int = VOCABULARY_SIZE) -> List[str]:
    """``size`` distinct words of 2-4 syllables, the same list every time."""
    rng = random.Random(0)
    words, seen = [], set()
    while len(words) < size:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def bpe_pieces(word: str, type_index: int) -> List[str]:
    """The BPE segmentation of a word type: two pieces (the first with the joiner) for every SPLIT_EVERY-th type."""
    if type_index % SPLIT_EVERY != 0 or len(word) < 4:
        return [word]
    cut = len(word) // 2
    return [word[:cut] + BPE_JOINER, word[cut:]]


def random_tree(rng: random.Random, words: List[str]) -> Tree:
    """A random constituency tree whose leaves are ``words`` in order (``len(words) >= 1``)."""
    if not words:
        raise ValueError("a tree needs at least one word")

    def preterminal(word: str) -> Tree:
        return Tree(rng.choice(POS_TAGS), [Tree(word)])

    def constituents(span: List[str]) -> List[Tree]:
        if len(span) == 1:
            return [preterminal(span[0])]
        parts = min(len(span), rng.randint(2, 4))
        cuts = sorted(rng.sample(range(1, len(span)), parts - 1))
        bounds = [0] + cuts + [len(span)]
        children = []
        for start, end in zip(bounds, bounds[1:]):
            part = span[start:end]
            children.append(preterminal(part[0]) if len(part) == 1 else Tree(rng.choice(PHRASE_LABELS),
                                                                                constituents(part)))
        return children

    return Tree("S", constituents(words))


def random_arcs(rng: random.Random, words: List[str]) -> dict:
    """Parser side data for ``words``: three candidate heads per word, two labels per head (module docstring)."""
    n = len(words)
    # the main heads form a tree: each word under a word before it in a random order, the first under the root
    order = rng.sample(range(1, n + 1), n)
    root_word = order[0]
    main_heads = {root_word: 0, **{word: rng.choice(order[:k]) for k, word in enumerate(order[1:], 1)}}
    arcs, best = [], []
    for dependent in range(1, n + 1):
        others = [h for h in range(0, n + 1) if h != dependent and (h != 0 or dependent == root_word)]
        main = main_heads[dependent]
        alternatives = [h for h in others if h != main]
        heads = [main] + rng.sample(alternatives, min(len(alternatives), len(ARC_PROBABILITIES) - 1))
        kept = ARC_PROBABILITIES[:len(heads)]  # short sentences have fewer candidate heads: renormalise
        for head, probability in zip(heads, (p / sum(kept) for p in kept)):
            if head == 0:
                labels = {"root": 1.0}
            else:
                labels = dict(zip(rng.sample(DEPENDENCY_LABELS, len(LABEL_PROBABILITIES)), LABEL_PROBABILITIES))
            arcs.append([dependent, head, probability, labels])
            if head == main:  # the most probable head and its most probable label: the "1-best" arc
                best.append([head, max(labels, key=labels.get)])
    return {"words": list(words), "arcs": arcs, "best": best}


def sentence(rng: random.Random, n_words: int, vocab: List[str]) -> Sentence:
    type_indices = [rng.randrange(len(vocab)) for _ in range(n_words)]
    words = [vocab[i] for i in type_indices]
    source = [piece for i in type_indices for piece in bpe_pieces(vocab[i], i)]
    target = [piece for i in reversed(type_indices) for piece in bpe_pieces(vocab[i][::-1], i)]
    return Sentence(random_tree(rng, words), source, target, random_arcs(rng, words))


def write_corpus(prefix: str, lengths: Sequence[int], seed: int) -> None:
    """Writes ``prefix.{en,de,tree,arcs.jsonl}``: one sentence of exactly ``lengths[k]`` words on line k + 1."""
    rng = random.Random(seed)
    vocab = vocabulary()
    with open(prefix + ".en", "w") as en, open(prefix + ".de", "w") as de, open(prefix + ".tree", "w") as tree, \
            open(prefix + ".arcs.jsonl", "w") as arcs:
        for n_words in lengths:
            drawn = sentence(rng, n_words, vocab)
            en.write(" ".join(drawn.source) + "\n")
            de.write(" ".join(drawn.target) + "\n")
            tree.write(to_bracketed(drawn.tree) + "\n")
            arcs.write(json.dumps(drawn.arcs) + "\n")
