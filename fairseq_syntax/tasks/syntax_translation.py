"""Task ``syntax_translation``: fairseq's ``translation`` plus per-sentence source syntax.

Loads what ``fairseq-syntax-preprocess`` wrote: the token stream of the chosen input form (``sequence``,
``linearized`` or ``preorder``) through fairseq's own loader, and every side input found beside it
(``{split}.{src}-{tgt}.{src}.parents`` ...). Which side inputs reach ``net_input`` is decided by the model
(``model.encoder.side_inputs``), so the baselines (fairseq's ``transformer``) run on the same data directories.

``fairseq-interactive`` takes one bracketed tree per line (or raw tokenized text with ``--source-parser``); BPE
(``--bpe subword_nmt --bpe-codes ...``) is applied to the leaves and the tree is turned into the input form the
data directory was made with (``syntax.json``).
"""
import json
import logging
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
from fairseq.data import data_utils, indexed_dataset
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from fairseq_syntax import trees
from fairseq_syntax.data.side_inputs import SIDE_INPUTS
from fairseq_syntax.data.syntax_pair_dataset import SyntaxLanguagePairDataset
from fairseq_syntax.input_forms import source_form
from fairseq_syntax.tasks.cpu_autocast import CpuAutocastConfig, CpuAutocastMixin

logger = logging.getLogger(__name__)

META_FILE = "syntax.json"


@dataclass
class SyntaxTranslationConfig(TranslationConfig, CpuAutocastConfig):
    source_parser: Optional[str] = field(
        default=None,
        metadata={"help": "fairseq-interactive only: parse raw input lines with this constituency parser "
                  "(see fairseq_syntax.parsing.constituency.load_parser), instead of reading one tree per line"},
    )


@register_task("syntax_translation", dataclass=SyntaxTranslationConfig)
class SyntaxTranslationTask(CpuAutocastMixin, TranslationTask):
    cfg: SyntaxTranslationConfig

    def __init__(self, cfg: SyntaxTranslationConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self.requested_side_inputs = set()  # shared with every dataset; set by build_model
        self.meta = read_meta(utils_first_path(cfg.data))
        self._interactive_side: Dict[Tuple[int, ...], Dict[str, torch.Tensor]] = {}
        self._parser = None
        self._interactive_lines = 0  # fairseq-interactive sends lines in chunks; number them across chunks

    # ------------------------------------------------------------------ data
    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        if self.cfg.num_batch_buckets:
            raise ValueError("syntax_translation does not support --num-batch-buckets")
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        pair = self.datasets[split]
        data_path = utils_first_path(self.cfg.data)
        src, tgt = self.cfg.source_lang, self.cfg.target_lang
        side_data = {}
        for name, side in SIDE_INPUTS.items():
            prefix = os.path.join(data_path, f"{split}.{src}-{tgt}.{src}.{side.suffix}")
            if indexed_dataset.dataset_exists(prefix, impl="mmap"):
                side_data[name] = data_utils.load_indexed_dataset(prefix, None, "mmap")
        if side_data:
            logger.info(f"{split}: side inputs {sorted(side_data)}")
        self.datasets[split] = SyntaxLanguagePairDataset(
            pair.src,
            pair.src_sizes,
            pair.src_dict,
            pair.tgt,
            pair.tgt_sizes,
            pair.tgt_dict,
            left_pad_source=pair.left_pad_source,
            left_pad_target=pair.left_pad_target,
            align_dataset=pair.align_dataset,
            eos=pair.eos,
            shuffle=pair.shuffle,
            pad_to_multiple=pair.pad_to_multiple,
            side_data=side_data,
            requested=self.requested_side_inputs,
        )

    def get_batch_iterator(self, dataset, *args, **kwargs):
        # fairseq's batch_by_size drops the last batch when its size is not a multiple of
        # --required-batch-size-multiple (default 8): fairseq-generate then silently skips up to 7 test sentences
        # and training never sees the same few pairs. Batches of any size are fine on CPU and GPU alike.
        if len(args) > 4:  # positional: max_tokens, max_sentences, max_positions, ignore_invalid, multiple, ...
            args = args[:4] + (1,) + args[5:]
        else:
            kwargs["required_batch_size_multiple"] = 1
        return super().get_batch_iterator(dataset, *args, **kwargs)

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        self.requested_side_inputs.update(getattr(model.encoder, "side_inputs", ()))
        return model

    # ----------------------------------------------------------- interactive
    def get_interactive_tokens_and_lengths(self, lines, encode_fn):
        tokens = []
        for line in lines:
            self._interactive_lines += 1
            number = self._interactive_lines
            tree = self._interactive_tree(line, number)
            tree = trees.apply_bpe(tree, lambda word: encode_fn(word).split())
            form = source_form(tree, self.meta["form"], self.meta["preterminals"])
            ids = self.source_dictionary.encode_line(" ".join(form.tokens), add_if_not_exist=False).long()
            key = tuple(ids.tolist())
            side = {"src_parents": torch.from_numpy(form.parents)} if form.parents is not None else {}
            if key in self._interactive_side and not _same_side(self._interactive_side[key], side):
                raise ValueError(f"input line {number}: two different trees give the same source tokens")
            self._interactive_side[key] = side
            tokens.append(ids)
        return tokens, [t.numel() for t in tokens]

    def inference_step(self, generator, models, sample, prefix_tokens=None, constraints=None):
        net_input = sample["net_input"]
        missing = [name for name in self.requested_side_inputs if name not in net_input]
        if missing:
            # fairseq-interactive batches only tokens and lengths: find each row's side data by its tokens
            net_input.update(self._interactive_batch(net_input["src_tokens"], missing))
        return super().inference_step(generator, models, sample, prefix_tokens, constraints)

    def _interactive_tree(self, line: str, number: int) -> trees.Tree:
        line = line.strip()
        if line.startswith("("):
            return trees.parse_tree(line, source="<input>", line=number)
        if self.cfg.source_parser is None:
            raise trees.TreeError(
                "expected a bracketed tree; give --source-parser to parse raw text", "<input>", number
            )
        if self._parser is None:
            from fairseq_syntax.parsing.constituency import load_parser

            self._parser = load_parser(self.cfg.source_parser)
        return self._parser.parse([line.split()])[0]

    def _interactive_batch(self, src_tokens: torch.Tensor, names: List[str]) -> Dict[str, torch.Tensor]:
        pad = self.source_dictionary.pad()
        left_pad = bool(self.cfg.left_pad_source)
        items = {name: [] for name in names}
        for row in src_tokens.tolist():
            side = self._interactive_side[tuple(t for t in row if t != pad)]
            for name in names:
                items[name].append(side[name])
        length = src_tokens.size(1)
        return {
            name: SIDE_INPUTS[name].collate(values, left_pad, length).to(src_tokens.device)
            for name, values in items.items()
        }


def _same_side(a: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def utils_first_path(data: str) -> str:
    return data.split(os.pathsep)[0]


def read_meta(data_path: str) -> dict:
    """The input form a data directory was made with (written by fairseq-syntax-preprocess)."""
    path = os.path.join(data_path, META_FILE)
    if not os.path.exists(path):
        return {"form": "sequence", "preterminals": "keep"}
    with open(path) as f:
        return json.load(f)
