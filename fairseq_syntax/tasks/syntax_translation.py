"""Task ``syntax_translation``: fairseq's ``translation`` plus per-sentence source syntax.

Loads what ``fairseq-syntax-preprocess`` wrote: the token stream of the chosen input form (``sequence``,
``linearized`` or ``preorder``) through fairseq's own loader, and every side input found beside it
(``{split}.{src}-{tgt}.{src}.parents`` ...). Which side inputs reach ``net_input`` is decided by the model
(``model.encoder.side_inputs``), so the baselines (fairseq's ``transformer``) run on the same data directories.

``fairseq-interactive`` takes one bracketed tree per line (or raw tokenized text with ``--source-parser``); BPE
(``--bpe subword_nmt --bpe-codes ...``) is applied to the leaves and the tree is turned into the input form the
data directory was made with (``syntax.json``).

For a model that reads labeled dependency distributions (``src_ldd``: ``transformer_ldd``, Pu & Sima'an 2022) each
line is tokenized words instead (or a tree, whose leaves are taken): ``--source-dependency-parser`` parses the lines
of a buffer together, each word is BPE'd on its own (the ``sequence`` form), and each parse goes through the offline code:
``sparse_record`` (the floors of ``preprocess/parse_dependency.py``: ``--source-dependency-arc-floor`` and
``--source-dependency-label-floor``, its defaults unless given), then ``record_item`` with the label table and floor
``fairseq-syntax-preprocess-dependencies`` recorded in ``syntax.json``. A sentence so gets the source tokens and the
``B x 17 x T x T`` ``src_ldd`` it has in the data directory. A line the parser cannot parse (empty, too long, a
parser error) stops with its line number.
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

from fairseq_syntax import dependency, trees
from fairseq_syntax.data.ldd_side_input import LDD, record_item
from fairseq_syntax.data.side_inputs import SIDE_INPUTS
from fairseq_syntax.data.syntax_pair_dataset import SyntaxLanguagePairDataset
from fairseq_syntax.input_forms import source_form
from fairseq_syntax.parsing.dependency import DEFAULT_ARC_FLOOR, DEFAULT_LABEL_FLOOR, RetainedMass, sparse_record
from fairseq_syntax.tasks.cpu_autocast import CpuAutocastConfig, CpuAutocastMixin

logger = logging.getLogger(__name__)

META_FILE = "syntax.json"
LDD_META_KEY = "ldd"  # {"labels": ..., "floor": ...} of fairseq-syntax-preprocess-dependencies


@dataclass
class SyntaxTranslationConfig(TranslationConfig, CpuAutocastConfig):
    source_parser: Optional[str] = field(
        default=None,
        metadata={"help": "fairseq-interactive only: parse raw input lines with this constituency parser "
                  "(see fairseq_syntax.parsing.constituency.load_parser), instead of reading one tree per line"},
    )
    source_dependency_parser: Optional[str] = field(
        default=None,
        metadata={"help": "fairseq-interactive only, for models reading src_ldd (transformer_ldd): parse the input "
                  "lines (tokenized words) with this SuPar biaffine dependency parser (local path or model name), "
                  "the one that made the data directory's side data"},
    )
    source_dependency_arc_floor: float = field(
        default=DEFAULT_ARC_FLOOR,
        metadata={"help": "with --source-dependency-parser: the --arc-floor preprocess/parse_dependency.py used"},
    )
    source_dependency_label_floor: float = field(
        default=DEFAULT_LABEL_FLOOR,
        metadata={"help": "with --source-dependency-parser: the --label-floor preprocess/parse_dependency.py used"},
    )
    source_dependency_labels: Optional[str] = field(
        default=None,
        metadata={"help": "with --source-dependency-parser, for a data directory whose syntax.json does not record "
                  "it: the --labels (stanford, universal) given to fairseq-syntax-preprocess-dependencies"},
    )
    source_dependency_floor: Optional[float] = field(
        default=None,
        metadata={"help": "with --source-dependency-parser, for a data directory whose syntax.json does not record "
                  "it: the --floor given to fairseq-syntax-preprocess-dependencies (its default: 0.001)"},
    )


@register_task("syntax_translation", dataclass=SyntaxTranslationConfig)
class SyntaxTranslationTask(CpuAutocastMixin, TranslationTask):
    cfg: SyntaxTranslationConfig

    def __init__(self, cfg: SyntaxTranslationConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self.requested_side_inputs = set()  # shared with every dataset; set by build_model
        self.meta = read_meta(utils_first_path(cfg.data))
        self._interactive_side: Dict[Tuple[int, ...], Dict[str, torch.Tensor]] = {}  # current buffer, by tokens
        self._parser = None
        self._dependency_parser = None
        self._ldd_label_index: Dict[str, int] = {}  # label -> group, and the floor: read with the parser
        self._ldd_floor = 0.0
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
        numbers = range(self._interactive_lines + 1, self._interactive_lines + 1 + len(lines))
        self._interactive_lines += len(lines)
        if LDD.name in self.requested_side_inputs:
            sources = self._interactive_dependency_sources(lines, numbers, encode_fn)
        else:
            sources = [self._interactive_tree_source(line, number, encode_fn) for line, number in zip(lines, numbers)]
        # fairseq-interactive translates all batches of a buffer before it reads the next buffer
        self._interactive_side = {}
        tokens = []
        for number, (source_tokens, side) in zip(numbers, sources):
            ids = self.source_dictionary.encode_line(" ".join(source_tokens), add_if_not_exist=False).long()
            key = tuple(ids.tolist())
            if key in self._interactive_side and not _same_side(self._interactive_side[key], side):
                raise ValueError(f"<input>:{number}: a line of the same buffer has the same source tokens but "
                                 "other syntax (words outside the dictionary are all <unk>); use --buffer-size 1")
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

    def _interactive_tree_source(self, line: str, number: int, encode_fn) -> Tuple[List[str], Dict[str, torch.Tensor]]:
        tree = trees.apply_bpe(self._interactive_tree(line, number), lambda word: encode_fn(word).split())
        form = source_form(tree, self.meta["form"], self.meta["preterminals"])
        return form.tokens, ({"src_parents": torch.from_numpy(form.parents)} if form.parents is not None else {})

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

    def _interactive_dependency_sources(
        self, lines: List[str], numbers: range, encode_fn
    ) -> List[Tuple[List[str], Dict[str, torch.Tensor]]]:
        """Lines of tokenized words -> (BPE tokens, ``src_ldd`` stored array) each, as the offline path makes them."""
        if self._dependency_parser is None:
            if self.cfg.source_dependency_parser is None:
                raise ValueError(
                    "the model reads labeled dependency distributions (src_ldd): give --source-dependency-parser, "
                    "the SuPar biaffine dependency parser that made the data directory's side data, to parse the "
                    "input lines (tokenized words)"
                )
            labels, self._ldd_floor = ldd_settings(self.cfg, self.meta, utils_first_path(self.cfg.data))
            self._ldd_label_index = dependency.label_index(dependency.LABEL_TABLES[labels])
            from fairseq_syntax.parsing.dependency import DependencyParser

            self._dependency_parser = DependencyParser(self.cfg.source_dependency_parser)
        parser = self._dependency_parser
        # a bracketed tree is also accepted: its leaves are the words (the parser gives the dependencies)
        sentences = [trees.words(trees.parse_tree(line.strip(), source="<input>", line=number))
                     if line.lstrip().startswith("(") else line.split() for line, number in zip(lines, numbers)]
        sources = []
        for number, words, parse in zip(numbers, sentences, parser.parse(sentences)):
            if parse.fallback is not None:
                raise ValueError(f"<input>:{number}: the dependency parser gave no parse of {' '.join(words)!r}: "
                                 f"{parse.fallback}")
            record = sparse_record(parse, parser.label_names, self.cfg.source_dependency_arc_floor,
                                   self.cfg.source_dependency_label_floor, RetainedMass())
            pieces = [encode_fn(word).split() for word in words]
            try:
                item = record_item(record, [len(p) for p in pieces], self._ldd_label_index, self._ldd_floor)
            except ValueError as error:
                raise ValueError(f"<input>:{number}: {error}") from None
            sources.append(([piece for word in pieces for piece in word], {LDD.name: torch.from_numpy(item)}))
        return sources

    def _interactive_batch(self, src_tokens: torch.Tensor, names: List[str]) -> Dict[str, torch.Tensor]:
        pad = self.source_dictionary.pad()
        sides = [self._interactive_side[tuple(t for t in row if t != pad)] for row in src_tokens.tolist()]
        left_pad, length = bool(self.cfg.left_pad_source), src_tokens.size(1)
        return {
            name: SIDE_INPUTS[name].collate([side[name] for side in sides], left_pad, length).to(src_tokens.device)
            for name in names
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


def ldd_settings(cfg: SyntaxTranslationConfig, meta: dict, data_path: str) -> Tuple[str, float]:
    """(label table, floor) the data directory's ``src_ldd`` was made with: recorded in syntax.json by
    fairseq-syntax-preprocess-dependencies, or for an older directory given as task options."""
    path = os.path.join(data_path, META_FILE)
    given = {"labels": cfg.source_dependency_labels, "floor": cfg.source_dependency_floor}
    recorded = meta.get(LDD_META_KEY)
    if recorded is None:
        missing = [f"--source-dependency-{key} (the --{key} given to fairseq-syntax-preprocess-dependencies)"
                   for key, value in given.items() if value is None]
        if missing:
            raise ValueError(f"{path} does not record how the src_ldd side data was made: pass {' and '.join(missing)}")
        settings = given
    else:
        settings = recorded
        conflicts = [f"--source-dependency-{key} {value} (recorded: {recorded[key]})"
                     for key, value in given.items() if value is not None and value != recorded[key]]
        if conflicts:
            raise ValueError(f"{path} records other settings than {', '.join(conflicts)}: the model was trained on "
                             "the recorded ones; leave the option out")
    if settings["labels"] not in dependency.LABEL_TABLES:
        raise ValueError(f"label table {settings['labels']!r}: choose from {sorted(dependency.LABEL_TABLES)}")
    return settings["labels"], settings["floor"]
