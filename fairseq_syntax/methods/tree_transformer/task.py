"""``sentence_masked_lm``: fairseq's ``masked_lm`` task (BERT masking, Devlin et al. 2019) with one sentence per
sample, ``<s> w_1 .. w_n </s>``, as Tree Transformer is trained (Wang, Lee & Chen 2019, section 7.2).

Two things differ from ``masked_lm``:

* Sample building: each line of the binarized data is one sample. fairseq's own way to ask for that,
  ``--sample-break-mode eos``, fails with numpy >= 2 (``TokenBlockDataset`` uses the removed ``np.compat.long``).
  A sentence longer than ``--tokens-per-sample`` - 1 is refused by fairseq's size check (or skipped with
  ``--skip-invalid-size-inputs-valid-test``), never cut.
* Fresh masks every epoch, whatever the data loader does (:class:`SharedEpochMaskTokensDataset`). fairseq's
  ``MaskTokensDataset`` draws sentence i's mask from (seed, epoch, i), the epoch set by ``set_epoch``; but with
  ``--num-workers`` >= 1 (fairseq-train's default is 1) fairseq keeps one ``DataLoader`` and its worker processes
  across epochs (``reuse_dataloader``, ``persistent_workers``), and ``set_epoch`` reaches only the main process's
  copy of the dataset: the workers went on drawing epoch 1's masks, so every epoch showed the model the same masked
  words. Here the epoch lives in shared memory, which the workers read at every item.

Masking (``--mask-prob 0.15`` of the tokens, 80% ``<mask>`` / 10% random / 10% unchanged), options and the
``masked_lm`` criterion are fairseq's. Tensors: a sample is a 1-D LongTensor of n + 2 token ids; the batch's
``net_input.src_tokens`` is (batch, max n + 2), its ``target`` the same shape with the masked positions' original
ids and padding elsewhere.
"""
import logging
import multiprocessing
import os
from dataclasses import dataclass

import numpy as np
from fairseq import utils
from fairseq.data import (
    LRUCacheDataset,
    MaskTokensDataset,
    PrependTokenDataset,
    RightPadDataset,
    SortDataset,
    data_utils,
)
from fairseq.data.encoders.utils import get_whole_word_mask
from fairseq.data.shorten_dataset import maybe_shorten_dataset
from fairseq.tasks import register_task
from fairseq.tasks.masked_lm import MaskedLMConfig, MaskedLMTask

from fairseq_syntax.core.checkpoints import TRAINED_DICTIONARIES, dictionary_mismatch
from fairseq_syntax.core.cpu_autocast import CpuAutocastConfig, CpuAutocastMixin

logger = logging.getLogger(__name__)


class SharedEpochMaskTokensDataset(MaskTokensDataset):
    """fairseq's ``MaskTokensDataset`` with its epoch in shared memory.

    ``MaskTokensDataset`` draws the mask of sentence ``index`` from ``hash((seed, epoch, index))``. Its ``epoch`` is
    here a property over a ``multiprocessing.RawValue``: data-loader workers forked (or spawned) from the main
    process share it, so the ``set_epoch`` of the main process reaches a worker that fairseq keeps across epochs.
    The draw itself is fairseq's, unchanged: with ``--num-workers 0`` the masks are those of ``masked_lm``.
    """

    def __init__(self, *args, **kwargs):
        self._shared_epoch = multiprocessing.RawValue("q", 0)  # before the parent's __init__, which sets epoch
        super().__init__(*args, **kwargs)

    @property
    def epoch(self) -> int:
        return self._shared_epoch.value

    @epoch.setter
    def epoch(self, value: int) -> None:
        self._shared_epoch.value = value

    @classmethod
    def apply_mask(cls, dataset, *args, **kwargs):
        """The masked input and the targets, as ``MaskTokensDataset.apply_mask`` but without its outer
        ``LRUCacheDataset``: that cache is keyed by index alone, so it could hand a worker the last epoch's mask of a
        sentence; the masking dataset's own cache is keyed by (seed, epoch, index)."""
        dataset = LRUCacheDataset(dataset)  # the unmasked sentences, the same in every epoch
        return (cls(dataset, *args, **kwargs, return_masked_tokens=False),
                cls(dataset, *args, **kwargs, return_masked_tokens=True))


@dataclass
class SentenceMaskedLMConfig(MaskedLMConfig, CpuAutocastConfig):
    pass


#: the state dict key whose rows are one a dictionary entry (a RoBERTa-style encoder's token embeddings)
EMBEDDINGS = {"source": "encoder.sentence_encoder.embed_tokens.weight"}


@register_task("sentence_masked_lm", dataclass=SentenceMaskedLMConfig)
class SentenceMaskedLMTask(CpuAutocastMixin, MaskedLMTask):
    def __init__(self, cfg, dictionary=None):
        super().__init__(cfg, dictionary)
        # saved in every checkpoint: the dictionary (with <mask>) the model is trained with, for check_checkpoint
        self.state.merge_state_dict({TRAINED_DICTIONARIES: {"source": list(self.dictionary.symbols)}})

    def load_state_dict(self, state_dict):
        """A checkpoint's task state; its recorded dictionary was compared by :meth:`check_checkpoint`, this task's
        own stays."""
        super().load_state_dict({key: value for key, value in state_dict.items() if key != TRAINED_DICTIONARIES})

    def check_checkpoint(self, path: str, state: dict) -> None:
        """A checkpoint loaded for this task (resumed training; the evaluation commands' ``--data``,
        :func:`fairseq_syntax.core.model_inputs.load_model`): its dictionary against this data directory's
        ``dict.txt``, else one line naming both (a checkpoint saved before the record: by its embedding rows)."""
        dict_file = os.path.join(utils.split_paths(self.cfg.data)[0], "dict.txt")
        problem = dictionary_mismatch(path, state, {"source": (dict_file, self.dictionary)}, EMBEDDINGS,
                                      "its dictionary (fairseq-preprocess --only-source --srcdict with that "
                                      "directory's dict.txt)")
        if problem is not None:
            raise SystemExit(problem)

    def _load_dataset_split(self, split, epoch, combine):
        paths = utils.split_paths(self.cfg.data)
        split_path = os.path.join(paths[(epoch - 1) % len(paths)], split)
        dataset = data_utils.load_indexed_dataset(split_path, self.source_dictionary, combine=combine)
        if dataset is None:
            raise FileNotFoundError(f"dataset not found: {split} ({split_path})")
        dataset = maybe_shorten_dataset(
            dataset, split, self.cfg.shorten_data_split_list, self.cfg.shorten_method,
            self.cfg.tokens_per_sample, self.cfg.seed,
        )
        return PrependTokenDataset(dataset, self.source_dictionary.bos())  # lines already end with </s>

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        """``MaskedLMTask.load_dataset`` (its ``_regular_dataset`` layout) with :class:`SharedEpochMaskTokensDataset`
        as the masking."""
        if self.cfg.d2v2_multi:
            raise ValueError("sentence_masked_lm does not build data2vec 2.0 batches (--d2v2-multi): use masked_lm")
        dataset = self._load_dataset_split(split, epoch, combine)
        whole_words = get_whole_word_mask(self.args, self.source_dictionary) if self.cfg.mask_whole_words else None
        src_dataset, tgt_dataset = SharedEpochMaskTokensDataset.apply_mask(
            dataset, self.source_dictionary, pad_idx=self.source_dictionary.pad(), mask_idx=self.mask_idx,
            seed=self.cfg.seed, mask_prob=self.cfg.mask_prob, leave_unmasked_prob=self.cfg.leave_unmasked_prob,
            random_token_prob=self.cfg.random_token_prob,
            freq_weighted_replacement=self.cfg.freq_weighted_replacement, mask_whole_words=whole_words,
            mask_multiple_length=self.cfg.mask_multiple_length, mask_stdev=self.cfg.mask_stdev,
            skip_masking=self.cfg.skip_masking,
        )
        with data_utils.numpy_seed(self.cfg.seed):
            shuffle = np.random.permutation(len(src_dataset))
        self.datasets[split] = SortDataset(
            self._regular_dataset(src_dataset, RightPadDataset(tgt_dataset, pad_idx=self.source_dictionary.pad())),
            sort_order=[shuffle, src_dataset.sizes],
        )
        logger.info(f"{split}: masks drawn from (seed {self.cfg.seed}, epoch, sentence) with the epoch in shared "
                    "memory: fresh every epoch, with or without data-loader workers")
