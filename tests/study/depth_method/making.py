"""How ``src_depth`` is made: each BPE token gets the depth of its word in the parser's 1-best dependency tree."""
from fairseq_syntax.core.side_data import SideDataJob, write_token_items


def word_depths(heads: list[int]) -> list[int]:
    """The depth of each word (1-based heads, 0 the root): 1 for a word on the root, its head's + 1 otherwise."""
    depths = [0] * len(heads)

    def depth(word: int) -> int:  # word: 1-based
        if not depths[word - 1]:
            head = heads[word - 1]
            depths[word - 1] = 1 if head == 0 else depth(head) + 1
        return depths[word - 1]

    return [depth(word) for word in range(1, len(heads) + 1)]


def settings(parses) -> dict:
    """The deepest word of the training parses (what a depth embedding's table must hold). ``plan`` asks for it
    too, so it reads the JSON lines itself (the parse reader loads torch)."""
    import gzip
    import json

    with gzip.open(parses["arcs"], "rt", encoding="utf-8") as records:
        return {"deepest": max(max(word_depths([head for head, _ in json.loads(record)["best"]]))
                               for record in records)}


def make(job: SideDataJob) -> None:
    import numpy as np

    from fairseq_syntax.core.bpe import group_bpe_words
    from fairseq_syntax.parsing.dependency import read_arc_distributions

    for split in job.splits:
        with open(split.source, encoding="utf-8") as lines:
            items = (np.repeat(word_depths([head for head, _ in record["best"]]),
                               [len(pieces) for pieces in group_bpe_words(line.split())])
                     for record, line in zip(read_arc_distributions(split.parses["arcs"]), lines))
            write_token_items(job, split, "depth", items, np.int16)
