"""Raw English text for masked-LM training of a Tree Transformer, and the PTB sample's words for evaluation.

    python3 examples/ptb_induction/make_corpus.py --data DATA --out DIR [--text ptb|mixed]
                                                  [--train-on-eval-text]

Writes ``train.txt``, ``valid.txt``, ``ptb.txt`` (the words of every tree of ``ptb-sample/wsj_0001-0159.mrg.gz``
that count in ``fairseq_syntax.methods.tree_transformer.parseval``'s F1, a line per tree) and
``corpus_stats.json`` (sentences, words and ``<unk>`` words per source). ``--text ptb`` (default): ``ptb-lm/``
(WSJ sections 21-24, Mikolov's preprocessing: ``<unk>`` outside a 10k vocabulary) but every 20th line
(``valid.txt``), plus the PTB sample's words. ``--text mixed``: Multi30k train.en, UD EWT train and SST train
(``--train-on-eval-text``: and the PTB sample's words); valid: their val / dev.

Words only, never trees, normalised as the PTB evaluation sentences (ON-LSTM's preprocessing): punctuation removed
(by POS tag, else tokens without a letter or digit but ``%`` and ``&``, and bracket escapes), lowercased, digit runs
as ``N``; empty sentences dropped and counted."""
import argparse
import gzip
import json
import os
import re
from typing import Iterator, List

from nltk.tokenize import TreebankWordTokenizer

from fairseq_syntax.core.trees import read_ptb, read_trees
from fairseq_syntax.methods.tree_transformer.parseval import WORD_TAGS, gold_sentence

BRACKET_ESCAPES = {"-LRB-", "-RRB-", "-LCB-", "-RCB-", "-LSB-", "-RSB-"}
WORD_SYMBOLS = {"%", "&"}
DIGITS = re.compile(r"[0-9]+")


def normalise(words: List[str]) -> List[str]:
    return [DIGITS.sub("N", word.lower()) for word in words]


def is_word(token: str) -> bool:
    """Whether an untagged token is a word rather than punctuation."""
    return token not in BRACKET_ESCAPES and (any(c.isalnum() for c in token) or token in WORD_SYMBOLS)


def multi30k(path: str) -> Iterator[List[str]]:
    tokenizer = TreebankWordTokenizer()
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            yield [token for token in tokenizer.tokenize(line.strip()) if is_word(token)]


def ud_ewt(path: str) -> Iterator[List[str]]:
    words: List[str] = []
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            line = line.rstrip("\n")
            if not line:
                yield words
                words = []
            elif not line.startswith("#"):
                columns = line.split("\t")
                if len(columns) != 10:
                    raise ValueError(f"{path}:{number}: {len(columns)} columns, CoNLL-U has 10")
                if columns[0].isdigit() and columns[4] in WORD_TAGS:  # not a multiword range or empty node
                    words.append(columns[1])
    if words:
        raise ValueError(f"{path}: the last sentence is not followed by a blank line")


def sst(path: str) -> Iterator[List[str]]:
    for tree in read_trees(path):
        yield [token for token in tree.leaves() if is_word(token)]


UNKNOWN = "<unk>"


def read_ptb_lm(path: str) -> List[List[str]]:
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return [line.split() for line in lines if line.strip()]


def mikolov(words: List[str], vocabulary: set) -> List[str]:
    """One sentence's (punctuation-free) words in Mikolov's PTB preprocessing: lower case, ``N`` for a word with a
    digit, ``<unk>`` for a word outside ``vocabulary``."""
    out = []
    for word in words:
        word = "N" if any(c.isdigit() for c in word) else word.lower()
        out.append(word if word in vocabulary else UNKNOWN)
    return out


def write(sentences, path: str, stats: dict, name: str, convert=normalise) -> None:
    written = empty = words = unknown = 0
    with open(path, "a", encoding="utf-8") as out:
        for sentence in sentences:
            if not sentence:
                empty += 1
                continue
            converted = convert(sentence)
            out.write(" ".join(converted) + "\n")
            written += 1
            words += len(sentence)
            unknown += converted.count(UNKNOWN)
    stats[name] = {"sentences": written, "words": words, "sentences_without_words": empty, "unk": unknown}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="the shared data folder (multi30k/, ud-ewt/, sst/, ptb-sample/)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--text", choices=("ptb", "mixed"), default="ptb",
                        help="ptb: WSJ text (ptb-lm/) and the PTB sample's words in Mikolov's preprocessing; mixed: "
                             "Multi30k, UD EWT and SST text")
    parser.add_argument("--train-on-eval-text", action="store_true",
                        help="with --text mixed: add the words of the PTB sample (not its trees) to train.txt "
                             "(--text ptb always does)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in ("train.txt", "valid.txt", "ptb.txt"):
        open(os.path.join(args.out, name), "w").close()
    data = lambda *parts: os.path.join(args.data, *parts)  # noqa: E731
    stats: dict = {}
    train, valid = os.path.join(args.out, "train.txt"), os.path.join(args.out, "valid.txt")
    gold = [list(gold_sentence(tree).words) for tree in read_ptb(data("ptb-sample", "wsj_0001-0159.mrg.gz"))]
    if not all(gold):
        raise ValueError("a PTB tree has no word that counts; the evaluation needs one line per tree")
    if args.text == "ptb":
        wsj = read_ptb_lm(data("ptb-lm", "ptb.valid.txt.gz")) + read_ptb_lm(data("ptb-lm", "ptb.test.txt.gz"))
        vocabulary = {word for sentence in wsj for word in sentence}
        keep = lambda sentence: sentence  # noqa: E731  (already in Mikolov's preprocessing)
        write((s for i, s in enumerate(wsj) if i % 20), train, stats, "train/ptb-lm", keep)
        write((s for i, s in enumerate(wsj) if i % 20 == 0), valid, stats, "valid/ptb-lm", keep)
        in_vocabulary = lambda sentence: mikolov(sentence, vocabulary)  # noqa: E731
        write(gold, train, stats, "train/ptb-sample", in_vocabulary)
        write(gold, os.path.join(args.out, "ptb.txt"), stats, "eval/ptb-sample", in_vocabulary)
    else:
        write(multi30k(data("multi30k", "train.en.gz")), train, stats, "train/multi30k")
        write(ud_ewt(data("ud-ewt", "en_ewt-ud-train.conllu.gz")), train, stats, "train/ud-ewt")
        write(sst(data("sst", "train.txt.gz")), train, stats, "train/sst")
        write(multi30k(data("multi30k", "val.en.gz")), valid, stats, "valid/multi30k")
        write(ud_ewt(data("ud-ewt", "en_ewt-ud-dev.conllu.gz")), valid, stats, "valid/ud-ewt")
        write(sst(data("sst", "dev.txt.gz")), valid, stats, "valid/sst")
        write(gold, os.path.join(args.out, "ptb.txt"), stats, "eval/ptb-sample")
        if args.train_on_eval_text:
            write(gold, train, stats, "train/ptb-sample")
    with open(os.path.join(args.out, "corpus_stats.json"), "w", encoding="utf-8") as out:
        json.dump(stats, out, indent=2)
    print(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
