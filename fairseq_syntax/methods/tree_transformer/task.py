"""``sentence_masked_lm``: fairseq's ``masked_lm`` task (BERT masking, Devlin et al. 2019) with one sentence per
sample, ``<s> w_1 .. w_n </s>``, as Tree Transformer is trained (Wang, Lee & Chen 2019, section 7.2).

Two things differ from ``masked_lm``:

* Each line of the binarized data is one sample (fairseq's ``--sample-break-mode eos`` fails with numpy >= 2). A
  sentence longer than ``--tokens-per-sample`` - 1 is refused by fairseq's size check (or skipped), never cut.
* Fresh masks every epoch (:class:`SharedEpochMaskTokensDataset`): with ``--num-workers`` >= 1 fairseq keeps its
  data-loader workers across epochs and ``set_epoch`` reaches only the main process; here the epoch lives in shared
  memory, read by the workers at every item.

Masking (``--mask-prob 0.15``, 80% ``<mask>`` / 10% random / 10% unchanged), options and the ``masked_lm``
criterion are fairseq's. A sample is a 1-D LongTensor of n + 2 ids; ``net_input.src_tokens`` is (batch, max n +
2), ``target`` the same shape with the masked positions' original ids and padding elsewhere."""
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
    """fairseq's ``MaskTokensDataset`` (mask of sentence ``index`` from ``hash((seed, epoch, index))``) with
    ``epoch`` a property over a ``multiprocessing.RawValue`` shared with data-loader workers. With
    ``--num-workers 0`` the masks are ``masked_lm``'s."""

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
        """As ``MaskTokensDataset.apply_mask`` without its outer ``LRUCacheDataset`` (keyed by index alone, it could
        return the last epoch's mask)."""
        dataset = LRUCacheDataset(dataset)  # the unmasked sentences, the same in every epoch
        return (cls(dataset, *args, **kwargs, return_masked_tokens=False),
                cls(dataset, *args, **kwargs, return_masked_tokens=True))


@dataclass
class SentenceMaskedLMConfig(MaskedLMConfig, CpuAutocastConfig):
    pass


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
        """A checkpoint loaded for this task: its dictionary against this data directory's ``dict.txt``, else one line
        naming both."""
        dict_file = os.path.join(utils.split_paths(self.cfg.data)[0], "dict.txt")
        problem = dictionary_mismatch(path, state, {"source": (dict_file, self.dictionary)},
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
