"""Task ``syntax_translation``: fairseq's ``translation`` plus per-sentence source syntax.

Loads what ``fairseq-syntax-preprocess`` wrote: the tokens of the input form through fairseq's loader, and the side
inputs beside them (:mod:`fairseq_syntax.core.side_inputs`); the model (``model.encoder.side_inputs``) decides which
reach ``net_input``, so baselines run on the same data directories. Another input form, a missing side input or
split, a split without its source or target files, or another corpus's dictionaries stop with one line.

``fairseq-interactive`` gives each input line the source tokens and side data it gets offline
(:mod:`fairseq_syntax.core.interactive_source`); a line that cannot be converted, or is too long, is reported and
gets an empty hypothesis."""
import atexit
import itertools
import logging
import os
import sys
from dataclasses import dataclass
from typing import Dict, Sequence, Tuple

import torch
from fairseq import utils
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from fairseq_syntax.core import interactive_input
from fairseq_syntax.core.checkpoints import TRAINED_DICTIONARIES, dictionary_mismatch, dictionary_record
from fairseq_syntax.core.bpe import BPE_JOINER, BPE_META_KEY, data_dir_bpe
from fairseq_syntax.core.cpu_autocast import CpuAutocastConfig, CpuAutocastMixin
from fairseq_syntax.core.data_dir import (
    META_FILE,
    TRANSLATION_TASK,
    first_data_path,
    read_meta,
    require_data_dir_of,
    require_language_pair,
    require_meta,
)
from fairseq_syntax.core.interactive_source import InteractiveSource, InteractiveSourceConfig
from fairseq_syntax.core.pair_dataset import SyntaxLanguagePairDataset
from fairseq_syntax.core.side_inputs import (
    SIDE_INPUTS,
    BadLine,
    collate_side_inputs,
    load_side_data,
    task_options,
)

logger = logging.getLogger(__name__)

#: the files of one side of a binarized split (fairseq's mmap format; fairseq-syntax-preprocess writes no other)
BINARIZED = ("bin", "idx")
#: task state (saved in every checkpoint): the input form of the data directory the model was trained on
TRAINED_FORM = "syntax_source_form"


@dataclass
class SyntaxTranslationConfig(TranslationConfig, CpuAutocastConfig, InteractiveSourceConfig, *task_options()):
    pass


@register_task("syntax_translation", dataclass=SyntaxTranslationConfig)
class SyntaxTranslationTask(CpuAutocastMixin, TranslationTask):
    cfg: SyntaxTranslationConfig

    def __init__(self, cfg: SyntaxTranslationConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self.meta = read_meta(first_data_path(cfg.data))
        self.model_side_inputs: Tuple[str, ...] = ()  # what the models built by this task read
        self.model_supervision_inputs: Tuple[str, ...] = ()  # what their training losses read
        self.criterion_supervision_inputs: Tuple[str, ...] = ()  # what the criterion built for training reads
        self._interactive_side: Dict[Tuple[int, ...], Dict[str, torch.Tensor]] = {}  # current buffer, by tokens
        self._interactive_source: InteractiveSource | None = None
        self._fairseq_interactive = False  # set up by fairseq-interactive (setup_task)
        self._fairseq_bpe = None  # fairseq's --bpe, for a data directory that records no BPE
        self._interactive_lines = 0  # fairseq-interactive sends lines in chunks; number them across chunks
        self._bad_lines = 0  # interactive lines that could not be converted (reported, given an empty hypothesis)
        self._model_max_source_positions: int | None = None  # the shortest limit of the models built
        self.state.merge_state_dict({TRAINED_FORM: source_form_of(self.meta),
                                     TRAINED_DICTIONARIES: dictionary_record(src_dict, tgt_dict)})

    @classmethod
    def setup_task(cls, cfg: SyntaxTranslationConfig, **kwargs):
        require_data_dir_of(TRANSLATION_TASK, first_data_path(cfg.data))
        require_language_pair(first_data_path(cfg.data), cfg.source_lang, cfg.target_lang)
        for data_path in utils.split_paths(cfg.data):  # every part of --data part0:part1 is read by its syntax.json
            require_meta(data_path)
        interactive = interactive_input.use_in_fairseq_interactive()
        task = super().setup_task(cfg, **kwargs)
        task._fairseq_interactive = interactive
        return task

    def load_state_dict(self, state_dict):
        """A checkpoint's task state, before its model is built: stops when the model was trained on another input
        form than this data directory holds."""
        self._require_trained_form(state_dict)
        super().load_state_dict({key: value for key, value in state_dict.items()
                                 if key not in (TRAINED_FORM, TRAINED_DICTIONARIES)})

    def check_checkpoint(self, path: str, state: dict) -> None:
        """A checkpoint loaded for this task, before a model is built from it: its input form, then its dictionaries
        against ``dict.SRC.txt`` and ``dict.TGT.txt``."""
        self._require_trained_form(state.get("task_state") or {})
        data_path = first_data_path(self.cfg.data)
        problem = dictionary_mismatch(path, state, {
            "source": (os.path.join(data_path, f"dict.{self.cfg.source_lang}.txt"), self.src_dict),
            "target": (os.path.join(data_path, f"dict.{self.cfg.target_lang}.txt"), self.tgt_dict),
        })
        if problem is not None:
            raise SystemExit(problem)

    def _require_trained_form(self, task_state: dict) -> None:
        trained, here = task_state.get(TRAINED_FORM), source_form_of(self.meta)
        if trained is not None and trained != here:
            data_path = first_data_path(self.cfg.data)
            raise SystemExit(
                f"error: the model was trained on the {_form_words(trained)}, but {data_path} holds the "
                f"{_form_words(here)} ({os.path.join(data_path, META_FILE)}): give it a data directory made by "
                f"fairseq-syntax-preprocess {_form_options(trained)} with --srcdict and --tgtdict of the directory "
                "it was trained on"
            )

    # --- data
    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        if self.cfg.num_batch_buckets:
            raise ValueError("syntax_translation does not support --num-batch-buckets")
        self._require_split(split, epoch, combine)
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        pair = self.datasets[split]
        data_path = self._split_path(split, epoch)  # with data-bin/part0:part1 the part fairseq read the tokens from
        src, tgt = self.cfg.source_lang, self.cfg.target_lang
        side_data = load_side_data(data_path, split, src, tgt, self._part_meta(data_path))
        if side_data:
            logger.info(f"{split}: side inputs {sorted(side_data)}")
        self.datasets[split] = SyntaxLanguagePairDataset(
            pair.src, pair.src_sizes, pair.src_dict, pair.tgt, pair.tgt_sizes, pair.tgt_dict,
            left_pad_source=pair.left_pad_source, left_pad_target=pair.left_pad_target,
            align_dataset=pair.align_dataset, eos=pair.eos, shuffle=pair.shuffle, pad_to_multiple=pair.pad_to_multiple,
            side_data=side_data, where=os.path.join(data_path, split))
        self._require_side_data(self.datasets[split])

    def _split_path(self, split: str, epoch: int) -> str:
        """The data path fairseq reads ``split`` from in ``epoch``: with ``--data part0:part1`` the training split
        cycles through the parts, the others come from the first."""
        paths = utils.split_paths(self.cfg.data)
        return paths[(epoch - 1) % len(paths)] if split == self.cfg.train_subset else paths[0]

    def _part_meta(self, data_path: str) -> dict:
        """``syntax.json`` of one part of a sharded data directory; a part of another input form stops the run."""
        if data_path == first_data_path(self.cfg.data):
            return self.meta
        meta = read_meta(data_path)
        if source_form_of(meta) != source_form_of(self.meta):
            raise SystemExit(f"error: {data_path} holds the {_form_words(source_form_of(meta))}, but "
                             f"{first_data_path(self.cfg.data)} the {_form_words(source_form_of(self.meta))}: the "
                             "parts of one data directory (--data part0:part1) must be made alike, with the same "
                             "--srcdict and --tgtdict")
        return meta

    def _require_split(self, split: str, epoch: int, combine: bool) -> None:
        """Stop with one line (naming the directory and its splits) when fairseq would not find ``split``, or would
        find its source tokens without its target tokens or a ``.bin`` without its ``.idx``. Checked as fairseq
        reads: ``train``, then with ``combine`` ``train1``, ``train2``... while they are there."""
        data_path = self._split_path(split, epoch)
        src, tgt = self.cfg.source_lang, self.cfg.target_lang
        for k in itertools.count():
            split_k = split + (str(k) if k > 0 else "")
            pairs = [os.path.join(data_path, f"{split_k}.{pair}.") for pair in (f"{src}-{tgt}", f"{tgt}-{src}")]
            # the pair direction fairseq reads (the one whose source tokens are there), else any with a file there
            stem = next((stem for stem in pairs if all(os.path.exists(f"{stem}{src}.{ext}") for ext in BINARIZED)),
                        None) or next((stem for stem in pairs if any(os.path.exists(f"{stem}{lang}.{ext}")
                                                                     for lang in (src, tgt) for ext in BINARIZED)),
                                      None)
            if stem is None:
                if k > 0:
                    return
                index = f".{src}-{tgt}.{src}.idx"
                splits = sorted(name[: -len(index)] for name in os.listdir(data_path) if name.endswith(index))
                raise SystemExit(f"error: {data_path} has no {split} split ({split}.{src}-{tgt}.{src}.{{bin,idx}}); "
                                 f"its splits: {', '.join(splits) or 'none'}")
            missing = {lang: [ext for ext in BINARIZED if not os.path.exists(f"{stem}{lang}.{ext}")]
                       for lang in (src, tgt)}
            missing = {lang: exts for lang, exts in missing.items() if exts}
            if missing:
                files = " and ".join(f"{stem}{lang}.{exts[0] if len(exts) == 1 else '{' + ','.join(exts) + '}'}"
                                     for lang, exts in missing.items())
                sides = " and ".join(("source" if lang == src else "target") + f" ({lang})" for lang in missing)
                raise SystemExit(f"error: {files}: no such file: {data_path} holds only part of the {split_k} split, "
                                 f"whose {sides} tokens are missing: a data directory made halfway, or a file "
                                 "removed: make it again with fairseq-syntax-preprocess")
            if not combine:
                return

    def _require_side_data(self, dataset) -> None:
        """Stop with one line when the models built so far read a side input the data directory lacks."""
        if isinstance(dataset, SyntaxLanguagePairDataset) and self.model_side_inputs:
            try:
                dataset.batching(self.model_side_inputs)
            except KeyError as error:
                raise SystemExit(f"error: {error.args[0]}") from None
        missing = [name for name in self.criterion_supervision_inputs if name not in getattr(dataset, "side_data", {})]
        if missing:
            made_by = "; ".join(f"{name}: {SIDE_INPUTS[name].made_by}" for name in missing)
            raise SystemExit(f"error: {getattr(dataset, 'where', 'the data')}: --criterion {self._criterion_name} "
                             f"trains on side data {missing}, which this data directory lacks (made by {made_by}): "
                             "make it, or train another system")

    def build_criterion(self, cfg, from_checkpoint=False):
        """The criterion, checked against the models built: a model with supervision inputs needs a criterion that
        reads them and vice versa, and the data directory must hold them (checked for every split loaded)."""
        criterion = super().build_criterion(cfg, from_checkpoint)
        reads = tuple(getattr(criterion, "supervision_inputs", ()))
        name = getattr(cfg, "_name", None) or getattr(cfg, "criterion", None) or type(criterion).__name__
        if self.model_supervision_inputs and not set(self.model_supervision_inputs) <= set(reads):
            from fairseq.criterions import CRITERION_REGISTRY

            fitting = sorted(key for key, criterion_class in CRITERION_REGISTRY.items()
                             if set(self.model_supervision_inputs) <= set(getattr(criterion_class,
                                                                                  "supervision_inputs", ())))
            raise SystemExit(f"error: --arch {self._model_arch} is trained on side data "
                             f"{list(self.model_supervision_inputs)} by a criterion that reads it (--criterion "
                             f"{' or '.join(fitting)}); --criterion {name} would train it without that supervision")
        if reads and not set(reads) <= set(self.model_supervision_inputs):
            raise SystemExit(f"error: --criterion {name} trains a model on side data {list(reads)}, which --arch "
                             f"{self._model_arch} does not learn from: give an --arch that does, or another "
                             "--criterion")
        self.criterion_supervision_inputs, self._criterion_name = reads, name
        for dataset in self.datasets.values():
            self._require_side_data(dataset)
        return criterion

    def get_batch_iterator(self, dataset, *args, **kwargs):
        if isinstance(dataset, SyntaxLanguagePairDataset):
            dataset = dataset.batching(self.batched_side_inputs(dataset))
        # fairseq's batch_by_size drops a last batch that is no multiple of --required-batch-size-multiple: keep it
        if len(args) > 4:  # positional: max_tokens, max_sentences, max_positions, ignore_invalid, multiple, ...
            args = args[:4] + (1,) + args[5:]
        else:
            kwargs["required_batch_size_multiple"] = 1
        return super().get_batch_iterator(dataset, *args, **kwargs)

    def batched_side_inputs(self, dataset: SyntaxLanguagePairDataset) -> Tuple[str, ...]:
        """What the batches of ``dataset`` hold: the side inputs the models read, and the targets of their training
        losses where the data directory has them (decoding needs none)."""
        targets = tuple(name for name in self.model_supervision_inputs if name in dataset.side_data)
        return tuple(dict.fromkeys(dataset.side_inputs + self.model_side_inputs + targets))

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        read = tuple(getattr(model.encoder, "side_inputs", ()))
        self.model_side_inputs = tuple(dict.fromkeys(self.model_side_inputs + read))  # an ensemble reads the union
        targets = tuple(getattr(model.encoder, "supervision_inputs", ()))
        self._model_arch = getattr(cfg, "arch", None) or getattr(cfg, "_name", type(model).__name__)
        self.model_supervision_inputs = tuple(dict.fromkeys(self.model_supervision_inputs + targets))
        limits = [limit for limit in (self._model_max_source_positions, model.encoder.max_positions()) if limit]
        self._model_max_source_positions = min(limits) if limits else None
        for dataset in self.datasets.values():
            self._require_side_data(dataset)
        return model

    # --- interactive
    def get_interactive_tokens_and_lengths(self, lines, encode_fn):
        numbers = range(self._interactive_lines + 1, self._interactive_lines + 1 + len(lines))
        self._interactive_lines += len(lines)
        readable = [(line, number) for line, number in zip(lines, numbers)
                    if not isinstance(line, interactive_input.UnreadableLine)]
        converted = iter(self._interactive_sources([line for line, _ in readable], [n for _, n in readable],
                                                   encode_fn))
        sources = [BadLine(line.message) if isinstance(line, interactive_input.UnreadableLine) else next(converted)
                   for line in lines]
        # fairseq-interactive translates all batches of a buffer before it reads the next buffer
        self._interactive_side = {}
        tokens = []
        limit = min(filter(None, (self.cfg.max_source_positions, self._model_max_source_positions)))
        for number, source in zip(numbers, sources):
            if not isinstance(source, BadLine):
                source_tokens, side = source
                ids = self.source_dictionary.encode_line(" ".join(source_tokens), add_if_not_exist=False).long()
                key = tuple(ids.tolist())
                if len(ids) > limit:  # fairseq would stop at it, or with --skip-invalid-size-... drop it unsaid
                    source = BadLine(f"<input>:{number}: too long: {len(ids)} source tokens with EOS (the "
                                     f"{self.meta['form']} form of the line); the model takes at most {limit}")
                elif key not in self._interactive_side or _same_side(self._interactive_side[key], side):
                    self._interactive_side[key] = side
                    tokens.append(ids)
                    continue
                else:
                    source = BadLine(f"<input>:{number}: a line of the same buffer has the same source tokens but "
                                     "other syntax (words outside the dictionary are all <unk>); use --buffer-size 1")
            self._report_bad_line(source.message)
            tokens.append(torch.LongTensor([self.source_dictionary.eos()]))  # no valid line is this empty source
        return tokens, [t.numel() for t in tokens]

    def inference_step(self, generator, models, sample, prefix_tokens=None, constraints=None):
        net_input = sample["net_input"]
        missing = [name for name in self.model_side_inputs if name not in net_input]
        if not missing and not self._bad_lines:
            return super().inference_step(generator, models, sample, prefix_tokens, constraints)
        # fairseq-interactive batches only tokens and lengths: find each row's side data by its tokens; bad lines get an
        # empty hypothesis
        src_tokens = net_input["src_tokens"]
        bad = src_tokens.ne(self.source_dictionary.pad()).sum(dim=1).eq(1)
        if not bad.any():
            net_input.update(self._interactive_batch(src_tokens, missing))
            return super().inference_step(generator, models, sample, prefix_tokens, constraints)
        good = (~bad).nonzero().squeeze(1)
        hypotheses = []
        if len(good):
            subset = {name: net_input[name].index_select(0, good) for name in ("src_tokens", "src_lengths")}
            subset.update(self._interactive_batch(subset["src_tokens"], missing))
            hypotheses = super().inference_step(
                generator, models, {**sample, "net_input": subset},
                None if prefix_tokens is None else prefix_tokens.index_select(0, good),
                None if constraints is None else constraints.index_select(0, good),
            )
        translated = iter(hypotheses)
        return [[self._empty_hypothesis(src_tokens.device)] if is_bad else next(translated) for is_bad in bad.tolist()]

    def _empty_hypothesis(self, device) -> Dict[str, object]:
        eos = self.target_dictionary.eos()
        return {"tokens": torch.tensor([eos], device=device), "score": float("-inf"), "attention": None,
                "alignment": [], "positional_scores": torch.tensor([float("-inf")], device=device)}

    def _report_bad_line(self, message: str) -> None:
        if not self._bad_lines:  # fairseq-interactive has no end-of-input hook: say the count as the process ends
            atexit.register(lambda: print(f"fairseq-interactive: {self._bad_lines} bad input lines, listed above; "
                                          "each has an empty hypothesis with score -inf", file=sys.__stderr__))
        self._bad_lines += 1
        logger.error(f"{message}; this line gets an empty hypothesis (score -inf)")

    def build_bpe(self, args):
        """fairseq's ``--bpe``; in fairseq-interactive one whose encode leaves the line as it is (the task segments
        after parsing: :meth:`_segmenter`) and whose decode removes the joiners."""
        given = super().build_bpe(args)
        if not self._fairseq_interactive:
            return given
        if given is not None and self.meta.get(BPE_META_KEY) is not None:
            raise SystemExit(f"error: {os.path.join(first_data_path(self.cfg.data), META_FILE)} records the BPE the "
                             "data directory was made with, which fairseq-interactive applies to every word: leave "
                             "out --bpe")
        self._fairseq_bpe = given
        return JoinerRemoval() if given is not None or self.meta.get(BPE_META_KEY) is not None else None

    def _segmenter(self):
        """word -> BPE pieces: the BPE syntax.json records, else fairseq's ``--bpe``; without either the words as
        they are, unless the dictionary holds BPE pieces."""
        data_path = first_data_path(self.cfg.data)
        try:
            recorded = data_dir_bpe(data_path, self.meta)
        except (OSError, ValueError) as error:
            raise SystemExit(f"error: the BPE {os.path.join(data_path, META_FILE)} records: {error}") from None
        if recorded is not None:
            return recorded.segment
        if self._fairseq_bpe is not None:
            return lambda word: self._fairseq_bpe.encode(word).split()
        pieces = [symbol for symbol in self.source_dictionary.symbols if symbol.endswith(BPE_JOINER)]
        if pieces:
            raise SystemExit(
                f"error: {os.path.join(data_path, META_FILE)} records no BPE (the directory was made without "
                f"fairseq-syntax-preprocess --bpe-codes), but the source dictionary holds BPE pieces (e.g. "
                f"{pieces[0]!r}): make the directory again with --bpe-codes CODES [--bpe-vocabulary VOCAB "
                "--bpe-vocabulary-threshold N] as the source was segmented, or give --bpe subword_nmt --bpe-codes "
                "CODES (fairseq's BPE takes no vocabulary: words may be split otherwise than offline)")
        return lambda word: [word]

    def _interactive_sources(self, lines: list[str], numbers: Sequence[int], encode_fn) -> list:
        """Per line: (source tokens, side items), or a :class:`BadLine`; options that do not fit the model or the
        data directory stop the run at the first buffer."""
        if self._interactive_source is None:
            try:
                self._interactive_source = InteractiveSource(self.cfg, self.meta, first_data_path(self.cfg.data),
                                                             self.model_side_inputs, self._segmenter())
            except ValueError as error:
                raise SystemExit(f"error: {error}") from None
        return self._interactive_source(lines, numbers, encode_fn)

    def _interactive_batch(self, src_tokens: torch.Tensor, names: Sequence[str]) -> Dict[str, torch.Tensor]:
        pad = self.source_dictionary.pad()
        sides = [self._interactive_side[tuple(t for t in row if t != pad)] for row in src_tokens.tolist()]
        batch = collate_side_inputs(names, sides, bool(self.cfg.left_pad_source), src_tokens.size(1), "<input>")
        return utils.apply_to_sample(lambda tensor: tensor.to(src_tokens.device), batch)  # tensors or tuples of them


class JoinerRemoval:
    """The BPE fairseq-interactive gets from :meth:`SyntaxTranslationTask.build_bpe`: encoding is the task's;
    decoding removes subword-nmt's joiners."""

    def encode(self, line: str) -> str:
        return line

    def decode(self, line: str) -> str:
        return (line + " ").replace(BPE_JOINER + " ", "").rstrip()


def _same_side(a: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def source_form_of(meta: dict) -> dict:
    """What of a data directory's syntax.json decides its source tokens: the input form and, for the tree forms,
    the POS-node convention (the sequence form is the words whatever the convention)."""
    form = meta["form"]
    return {"form": form, "preterminals": None if form == "sequence" else meta.get("preterminals")}


def _form_options(form: dict) -> str:
    return f"--form {form['form']}" + (f" --preterminals {form['preterminals']}" if form["preterminals"] else "")


def _form_words(form: dict) -> str:
    return f"{form['form']} form" + (f" (--preterminals {form['preterminals']})" if form["preterminals"] else "")
