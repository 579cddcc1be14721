"""A fairseq ``LanguagePairDataset`` that also batches per-sentence side data (tree structure, dependencies).

Items gain ``side`` (name -> per-sentence tensor); the collater adds, for each side input the model asked for
(``requested``, filled by the task once the model is built), one batch tensor to ``net_input`` in the same row order
as fairseq's length-sorted ``src_tokens``.
"""
from typing import Dict, MutableSet

from fairseq.data import LanguagePairDataset

from fairseq_syntax.data.side_inputs import SIDE_INPUTS


class SyntaxLanguagePairDataset(LanguagePairDataset):
    def __init__(self, *args, side_data: Dict[str, object], requested: MutableSet[str], **kwargs):
        super().__init__(*args, **kwargs)
        for name, data in side_data.items():
            if len(data) != len(self.src):
                raise ValueError(f"side input {name} has {len(data)} sentences, the source has {len(self.src)}")
        self.side_data = side_data
        self.requested = requested  # shared with the task: the model decides what is batched

    def __getitem__(self, index):
        example = super().__getitem__(index)
        example["side"] = {name: self.side_data[name][index] for name in self.requested if name in self.side_data}
        return example

    def collater(self, samples, pad_to_length=None):
        batch = super().collater(samples, pad_to_length=pad_to_length)
        if not batch:
            return batch
        by_id = {sample["id"]: sample["side"] for sample in samples}
        order = batch["id"].tolist()
        length = batch["net_input"]["src_tokens"].size(1)
        for name in self.requested:
            if name not in self.side_data:
                raise KeyError(
                    f"the model needs side input {name} ({SIDE_INPUTS[name].suffix} files), which this data "
                    "directory lacks: run fairseq-syntax-preprocess with the matching --form"
                )
            items = [by_id[i][name] for i in order]
            batch["net_input"][name] = SIDE_INPUTS[name].collate(items, self.left_pad_source, length)
        return batch
