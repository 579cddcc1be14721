"""subword-nmt's BPE word grouping, shared by the commands that carry a word-level analysis (trees, arcs) onto
BPE'd source tokens: ``fairseq-syntax-preprocess`` and ``fairseq-syntax-preprocess-dependencies``.

subword-nmt marks every non-final piece of a word with the ``@@`` joiner (``fa@@ th@@ er``); the pieces of a word
are the tokens up to and including the first one without it.
"""
BPE_JOINER = "@@"


def group_bpe_words(tokens: list[str]) -> list[list[str]]:
    """Subword tokens -> the pieces of each word (subword-nmt marks non-final pieces with ``@@``)."""
    words, current = [], []
    for token in tokens:
        current.append(token)
        if not token.endswith(BPE_JOINER):
            words.append(current)
            current = []
    if current:  # a dangling joiner: keep the pieces as a word so the leaf comparison reports it
        words.append(current)
    return words


def merge_pieces(pieces: list[str]) -> str:
    """The pieces of one word -> the word, joiners removed."""
    return "".join(p.removesuffix(BPE_JOINER) for p in pieces)
