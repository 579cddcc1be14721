"""A fairseq ``LanguagePairDataset`` that also batches per-sentence side data (tree structure, dependencies).

Items gain ``side`` (name -> per-sentence tensor); the collater adds to ``net_input`` one batch tensor per side
input of the view (:meth:`SyntaxLanguagePairDataset.batching`; the dataset itself batches none), rows in
``src_tokens``' order (:func:`~fairseq_syntax.core.side_inputs.collate_side_inputs`)."""
import copy
from typing import Dict, Sequence

from fairseq.data import LanguagePairDataset

from fairseq_syntax.core.side_inputs import SIDE_INPUTS, collate_side_inputs


class SyntaxLanguagePairDataset(LanguagePairDataset):
    def __init__(self, *args, side_data: Dict[str, object], where: str = "data", **kwargs):
        super().__init__(*args, **kwargs)
        for name, data in side_data.items():
            if len(data) != len(self.src):
                raise ValueError(f"{where}: side input {name} has {len(data)} sentences, the source {len(self.src)}")
        self.side_data = side_data
        self.where = where
        self.side_inputs: tuple = ()

    def batching(self, side_inputs: Sequence[str]) -> "SyntaxLanguagePairDataset":
        """A view of this dataset whose batches hold ``side_inputs`` (checked to exist in the data directory)."""
        missing = [name for name in side_inputs if name not in self.side_data]
        if missing:
            made_by = "; ".join(f"{name}: {SIDE_INPUTS[name].made_by}" for name in missing)
            raise KeyError(f"{self.where}: the model reads side inputs {missing}, which this data directory lacks "
                           f"(made by {made_by})")
        view = copy.copy(self)
        view.side_inputs = tuple(side_inputs)
        return view

    def __getitem__(self, index):
        example = super().__getitem__(index)
        example["side"] = {name: self.side_data[name][index] for name in self.side_inputs}
        return example

    def collater(self, samples, pad_to_length=None):
        batch = super().collater(samples, pad_to_length=pad_to_length)
        if not batch or not self.side_inputs:
            return batch
        by_id = {sample["id"]: sample["side"] for sample in samples}
        items = [by_id[i] for i in batch["id"].tolist()]
        length = batch["net_input"]["src_tokens"].size(1)
        side = collate_side_inputs(self.side_inputs, items, self.left_pad_source, length, self.where)
        batch["net_input"].update(side)
        return batch
