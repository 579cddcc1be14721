"""The parent each source token is trained to attend to: Deguchi, Tamura & Ninomiya (2019), section 3.2, as their
code maps words to BPE pieces (github.com/de9uch1/dbsa, ``scripts/bpe_dependency.py``):

* a piece that is not its word's last depends on the next piece;
* a word's last piece depends on the **first** piece of the word's 1-best head word;
* the root word's last piece depends on itself.

EOS and padding have no parent (``IGNORE``). The 1-best tree is read from ``src_ldd`` (channels
``BEST_OFFSET + group``, :mod:`fairseq_syntax.methods.ldd.distributions`).

Shapes: ``word_pairs`` ``B x C x S x S``, ``token_words`` ``B x T``, ``not_dependent`` ``B x T`` -> ``B x T``
token positions (int64), ``IGNORE`` where there is no target."""
import torch
from torch import Tensor

from fairseq_syntax.methods.ldd.distributions import one_best_head_words

IGNORE = -100  # torch's cross-entropy ignore_index


def parent_targets(word_pairs: Tensor, token_words: Tensor, not_dependent: Tensor,
                   check_one_best: bool = True) -> Tensor:
    """The target positions (module docstring); ``check_one_best``: refuse side data without the 1-best tree
    (:func:`~fairseq_syntax.methods.ldd.distributions.one_best_head_words`)."""
    bsz, length = token_words.shape
    positions = torch.arange(length, device=token_words.device).expand(bsz, length)
    words = token_words.masked_fill(not_dependent, 0)  # EOS and padding out of the way (they get IGNORE below)
    last_piece = torch.full((bsz, word_pairs.size(-1)), -1, dtype=torch.long, device=token_words.device)
    last_piece.scatter_reduce_(1, words, positions.masked_fill(not_dependent, -1), reduce="amax")
    first_piece = torch.full((bsz, word_pairs.size(-1)), length, dtype=torch.long, device=token_words.device)
    first_piece.scatter_reduce_(1, words, positions.masked_fill(not_dependent, length), reduce="amin")
    heads = one_best_head_words(word_pairs, token_words, not_dependent, "the dependency loss",
                                check_one_best).masked_fill(not_dependent, 0)
    # the root word is its own head (one_best_head_words), and its last piece attends to itself
    head_target = torch.where(heads == words, positions, first_piece.gather(1, heads))
    is_last = last_piece.gather(1, words) == positions
    targets = torch.where(is_last, head_target, positions + 1)
    return targets.masked_fill(not_dependent, IGNORE)
