"""Masked-word perplexity of a masked language model: Wang, Lee & Chen (2019), section 7.5 and footnote 3.

Every word of every sentence is masked once, alone: ``n`` inputs of one ``<mask>`` per sentence of ``n`` words;
``perplexity = exp(-sum log p(word) / n_masked)``. ``<unk>`` words are not scored (their number is reported). Any
fairseq ``masked_lm`` model whose forward takes ``masked_tokens`` (``roberta*``, ``tree_transformer_lm*``).

Shapes: a sentence is a 1-D LongTensor ``<s> w_1 .. w_n </s>``; the model sees ``n x (n+2)`` rows."""
import argparse
import math
from dataclasses import asdict, dataclass
from typing import Iterable

import torch
from fairseq.tasks.masked_lm import MaskedLMTask
from torch import Tensor, nn

from fairseq_syntax.core.model_inputs import (
    check_fits,
    encode,
    first_word_position,
    load_model,
    read_sentences,
    require_files,
)
from fairseq_syntax.parsing.text import write_json


@dataclass
class MaskedWordPerplexity:
    perplexity: float
    scored_words: int
    unknown_words: int  # words not scored because the dictionary maps them to <unk>
    sentences: int
    negative_log_likelihood: float  # summed over scored words, natural log


@torch.no_grad()
def masked_word_log_probs(model: nn.Module, tokens: Tensor, positions: Tensor, mask_index: int) -> Tensor:
    """``log p(tokens[k])`` for each ``k`` in ``positions``, each predicted with only position ``k`` masked."""
    rows = tokens.unsqueeze(0).repeat(len(positions), 1)
    masked = torch.zeros_like(rows, dtype=torch.bool)
    masked[torch.arange(len(positions)), positions] = True
    targets = rows[masked]
    rows = rows.masked_fill(masked, mask_index)
    logits = model(rows, masked_tokens=masked)[0]  # one row of logits per masked position, in row order
    return torch.log_softmax(logits.float(), dim=-1).gather(1, targets[:, None]).squeeze(1)


def masked_word_perplexity(model: nn.Module, task, sentences: Iterable[list]) -> MaskedWordPerplexity:
    """Section 7.5 perplexity over ``sentences`` (lists of words) for a ``masked_lm`` model and its task."""
    if not isinstance(task, MaskedLMTask):
        raise ValueError(f"masked-word perplexity needs a masked_lm checkpoint, got task {type(task).__name__}")
    unk = task.source_dictionary.unk()
    offset = first_word_position(task)
    nll, scored, unknown, count = 0.0, 0, 0, 0
    for words in sentences:
        count += 1
        tokens = encode(task, words)
        check_fits(model, tokens, f"sentence {count}")
        word_ids = tokens[offset: offset + len(words)]
        known = torch.nonzero(word_ids.ne(unk)).squeeze(1)
        unknown += len(words) - len(known)
        if len(known):
            nll -= float(masked_word_log_probs(model, tokens, known + offset, task.mask_idx).sum())
            scored += len(known)
    if not scored:
        raise ValueError(f"no word of the {count} sentences is in the model's dictionary: nothing to score")
    return MaskedWordPerplexity(math.exp(nll / scored), scored, unknown, count, nll)


def cli_main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a fairseq masked_lm checkpoint (tree_transformer_lm*, roberta*)")
    parser.add_argument("--input", required=True, help="sentences, one per line, words separated by spaces")
    parser.add_argument("--data", help="data dir with the model's dict.txt, if it moved since training")
    parser.add_argument("--json", dest="json_out", help="also write the result to this JSON file")
    args = parser.parse_args(argv)
    require_files({"the checkpoint": args.checkpoint, "--input": args.input})
    torch.set_num_threads(1)
    try:
        model, task = load_model(args.checkpoint, args.data)
        result = masked_word_perplexity(model, task, read_sentences(args.input))
    except ValueError as error:  # an empty line, a sentence too long, another task's checkpoint: one line
        raise SystemExit(f"error: {error}") from None
    print(f"masked-word perplexity {result.perplexity:.2f} over {result.scored_words} words of "
          f"{result.sentences} sentences ({result.unknown_words} <unk> words not scored)")
    if args.json_out:
        write_json(args.json_out, {"checkpoint": args.checkpoint, "input": args.input, **asdict(result)}, indent=2)


if __name__ == "__main__":
    cli_main()
