"""A trained checkpoint and plain sentences in the form its task feeds the model (for evaluation commands).

``masked_lm`` checkpoints read ``<s> w_1 .. w_n </s>`` (fairseq's masked LM prepends ``<s>``), translation
checkpoints ``w_1 .. w_n </s>``; words outside the dictionary become ``<unk>``. Shapes: one sentence is a 1-D
LongTensor; a batch is ``B x T``, right-padded with the dictionary's pad index.
"""
from __future__ import annotations

import copy
import os
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from fairseq import checkpoint_utils, tasks
from fairseq.data import data_utils
from fairseq.tasks.masked_lm import MaskedLMTask
from torch import Tensor, nn


def load_model(checkpoint: str, data: Optional[str] = None) -> Tuple[nn.Module, object]:
    """(model in eval mode on CPU, task) of a fairseq checkpoint; ``data`` replaces its data dir. The task checks the
    checkpoint (``check_checkpoint``) before a model is built, so another corpus's data directory is one line."""
    import fairseq_syntax
    from fairseq_syntax.core.checkpoints import require_checkpoint_file

    fairseq_syntax.register()  # every task and model registered; torch may load fairseq checkpoints

    require_checkpoint_file(checkpoint)
    state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)  # as trained: a refusal names its data directory
    task_cfg = copy.deepcopy(state["cfg"].task)
    if data:
        task_cfg.data = data
    try:
        task = tasks.setup_task(task_cfg, from_checkpoint=True)
    except FileNotFoundError as error:
        raise FileNotFoundError(f"loading {checkpoint}: {error}; if the data dir it was trained on moved (or was "
                                "given as a relative path), pass it with --data") from error
    check = getattr(task, "check_checkpoint", None)
    if check is not None:
        check(checkpoint, state)
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], task=task, state=state)
    return models[0].eval(), task


def require_files(named: Dict[str, str]) -> None:
    """Stop with one line naming the first of ``named`` (how the command calls it -> path) that is not a file."""
    for name, path in named.items():
        if path is not None and not os.path.isfile(path):
            raise SystemExit(f"error: {name} {path}: " + ("a directory, not a file" if os.path.isdir(path)
                                                           else "no such file"))


def read_sentences(path: str) -> List[List[str]]:
    """One sentence of space-separated words per line; an empty line is an error."""
    sentences = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            words = line.split()
            if not words:
                raise ValueError(f"{path}:{number}: empty line; expected one sentence per line")
            sentences.append(words)
    return sentences


def first_word_position(task) -> int:
    """Position of the first word in the token sequence (1 after the ``<s>`` of a masked LM)."""
    return 1 if isinstance(task, MaskedLMTask) else 0


def encode(task, words: Sequence[str], append_eos: bool = True) -> Tensor:
    """Token ids of one sentence as the task's model reads it (``append_eos=False``: without the final ``</s>``)."""
    dictionary = task.source_dictionary
    ids = dictionary.encode_line(" ".join(words), add_if_not_exist=False, append_eos=append_eos).long()
    if first_word_position(task):
        ids = torch.cat([ids.new_tensor([dictionary.bos()]), ids])
    return ids


def check_fits(model: nn.Module, tokens: Tensor, where: str) -> None:
    """Raise a clear error when a sentence is longer than the model's positions (``where`` names the line)."""
    limit = model.encoder.max_positions()
    if len(tokens) > limit:
        raise ValueError(f"{where}: {len(tokens)} tokens with the special ones; the model takes at most {limit}")


def padded_batches(sequences: Sequence[Tensor], pad: int, batch_size: int) -> Iterator[Tuple[List[int], Tensor]]:
    """(indices, ``B x T`` batch) over ``sequences``, grouped by length so batches carry little padding."""
    order = sorted(range(len(sequences)), key=lambda index: len(sequences[index]))
    for start in range(0, len(order), batch_size):
        indices = order[start: start + batch_size]
        yield indices, data_utils.collate_tokens([sequences[i] for i in indices], pad)
