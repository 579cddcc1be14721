"""``sentence_masked_lm``: fairseq's ``masked_lm`` task (BERT masking, Devlin et al. 2019) with one sentence per
sample, ``<s> w_1 .. w_n </s>``, as Tree Transformer is trained (Wang, Lee & Chen 2019, section 7.2).

Only the sample building differs from ``masked_lm``: each line of the binarized data is one sample. fairseq's own
way to ask for that, ``--sample-break-mode eos``, fails with numpy >= 2 (``TokenBlockDataset`` uses the removed
``np.compat.long``). Masking (``--mask-prob 0.15`` of the tokens, 80% ``<mask>`` / 10% random / 10% unchanged),
options and the ``masked_lm`` criterion are fairseq's. A sentence longer than ``--tokens-per-sample`` - 1 is
refused by fairseq's size check (or skipped with ``--skip-invalid-size-inputs-valid-test``), never cut.
"""
import os
from dataclasses import dataclass

from fairseq import utils
from fairseq.data import PrependTokenDataset, data_utils
from fairseq.data.shorten_dataset import maybe_shorten_dataset
from fairseq.tasks import register_task
from fairseq.tasks.masked_lm import MaskedLMConfig, MaskedLMTask

from fairseq_syntax.core.cpu_autocast import CpuAutocastConfig, CpuAutocastMixin


@dataclass
class SentenceMaskedLMConfig(MaskedLMConfig, CpuAutocastConfig):
    pass


@register_task("sentence_masked_lm", dataclass=SentenceMaskedLMConfig)
class SentenceMaskedLMTask(CpuAutocastMixin, MaskedLMTask):
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
