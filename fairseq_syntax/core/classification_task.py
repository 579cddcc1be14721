"""Task ``tree_classification``: one class per tree (SST-2 / SST-5), and optionally one per node.

Nguyen et al. (2020, section 5.2) classify SST sentences from their trees and train on "every sentiment label
provided in the dataset". The data directory holds

* ``{split}.tree``: one bracketed tree per line whose interior labels are classes (SST's format); a label that is
  no class marks an unlabelled node (SST-2's neutral nodes); the root's label must be a class;
* ``labels.txt``: the classes, one per line (class id = line number);
* ``dict.txt``: the input dictionary (:func:`build_dictionary`).

Each tree becomes the ``--input-form`` (:mod:`fairseq_syntax.core.input_forms`) with every interior node written
``(X``, so labels never leak into the input. A batch holds ``net_input`` (``src_tokens`` ``B x T``, right padded,
EOS appended; ``src_lengths``; the encoder's side inputs), ``target`` (``B``, the root class) and ``token_labels``
(``B x T``: the class of each non-root node token and of each word whose own POS node is not a token, ``-1``
elsewhere). Encoders plug in through :mod:`fairseq_syntax.core.classifier`; the criterion is
``tree_cross_entropy``."""
import copy
import logging
import os
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch
from fairseq.data import Dictionary, FairseqDataset, data_utils
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import FairseqTask, register_task

import fairseq_syntax.core.tree_cross_entropy  # noqa: F401  (registers tree_cross_entropy, this task's criterion)
from fairseq_syntax.core import trees
from fairseq_syntax.core.command_help import option
from fairseq_syntax.core.cpu_autocast import CpuAutocastConfig, CpuAutocastMixin
from fairseq_syntax.core.data_dir import (
    CLASSIFICATION_FILES,
    CLASSIFICATION_TASK,
    require_data_dir_of,
)
from fairseq_syntax.core.input_forms import FORMS, PRETERMINALS, source_form
from fairseq_syntax.core.side_inputs import collate_side_inputs

logger = logging.getLogger(__name__)

NODE_LABEL = "X"  # every interior node is the input token "(X"
NO_LABEL = -1
LABELS_FILE, DICT_FILE = CLASSIFICATION_FILES


def labelled_example(
    tree: trees.Tree, form: str, preterminals: str
) -> Tuple[List[str], Optional[np.ndarray], List[Optional[str]]]:
    """A tree whose interior labels are classes -> (input tokens, parent array or None, label of each token): node
    tokens carry their node's label (the root's is the sentence's); a word carries its own POS node's label when
    that node is no token; others None."""
    interior: List[trees.Tree] = []  # interior nodes in preorder
    word_owner: List[Optional[int]] = []  # for each word, left to right: the number of its own POS node, or None

    def numbered(root: trees.Tree) -> trees.Tree:
        # the form is built from a copy labelled by preorder number, mapping node tokens back to nodes
        top = trees.Tree("")
        stack = [(root, top, False, None)]  # (node, its parent's copy, node is a word, the word's own POS node)
        while stack:
            node, parent_copy, is_word, owner = stack.pop()
            if is_word:
                word_owner.append(owner)
                parent_copy.children.append(trees.Tree(node.label))
                continue
            interior.append(node)
            number = len(interior) - 1
            copy = trees.Tree(str(number))
            parent_copy.children.append(copy)
            own = number if len(node.children) == 1 else None
            stack.extend((child, copy, child.is_leaf, own) for child in reversed(node.children))
        return top.children[0]

    form_out = source_form(numbered(tree), form, preterminals)
    emitted = {int(token[1:]) for token in form_out.tokens if token.startswith("(")}
    tokens, labels = [], []
    words = iter(word_owner)
    for token in form_out.tokens:
        if token.startswith("("):
            number = int(token[1:])
            tokens.append("(" + NODE_LABEL)
            labels.append(interior[number].label if number != 0 else None)
        elif token == ")":
            tokens.append(token)
            labels.append(None)
        else:
            owner = next(words)
            tokens.append(token)
            labels.append(interior[owner].label if owner is not None and owner not in emitted else None)
    return tokens, form_out.parents, labels


def build_dictionary(tree_list: Iterable[trees.Tree]) -> Dictionary:
    """The input dictionary of every form: the words of the trees, ``(X`` and ``)``, most frequent first."""
    dictionary = Dictionary()
    for symbol in ("(" + NODE_LABEL, ")"):
        dictionary.add_symbol(symbol)
    for tree in tree_list:
        for word in trees.words(tree):
            dictionary.add_symbol(word)
    dictionary.finalize()
    return dictionary


@dataclass
class TreeClassificationConfig(CpuAutocastConfig):
    data: Optional[str] = option(None, "data directory ({split}.tree, labels.txt, dict.txt)")
    input_form: ChoiceEnum(FORMS) = option(
        "preorder", "how a tree becomes the input sequence (see fairseq_syntax.core.input_forms)")
    preterminals: ChoiceEnum(PRETERMINALS) = option(
        "drop", "which POS nodes are tree nodes; Nguyen et al. drop them (SST has no BPE, so 'split' is the same as "
        "'drop')")
    max_positions: int = option(1024, "longest input, in tokens with EOS")


class TreeClassificationDataset(FairseqDataset):
    """In-memory examples; a view made by :meth:`batching` batches the side inputs a model reads."""

    def __init__(self, examples: List[Dict], dictionary: Dictionary, shuffle: bool, where: str):
        self.examples = examples
        self.dictionary = dictionary
        self.shuffle = shuffle
        self.where = where
        self.sizes = np.array([len(example["source"]) for example in examples])
        self.side_inputs: tuple = ()

    def batching(self, side_inputs: Sequence[str]) -> "TreeClassificationDataset":
        view = copy.copy(self)
        view.side_inputs = tuple(side_inputs)
        return view

    def __getitem__(self, index):
        return self.examples[index]

    def __len__(self):
        return len(self.examples)

    def num_tokens(self, index):
        return int(self.sizes[index])

    def size(self, index):
        return int(self.sizes[index])

    def ordered_indices(self):
        order = np.random.permutation(len(self)) if self.shuffle else np.arange(len(self))
        return order[np.argsort(self.sizes[order], kind="mergesort")]

    def collater(self, samples):
        if not samples:
            return {}
        pad = self.dictionary.pad()
        sources = [sample["source"] for sample in samples]
        src_tokens = data_utils.collate_tokens(sources, pad, left_pad=False)
        length = src_tokens.size(1)
        net_input = {
            "src_tokens": src_tokens,
            "src_lengths": torch.tensor([len(source) for source in sources]),
        }
        try:
            net_input.update(collate_side_inputs(self.side_inputs, [sample["side"] for sample in samples], False,
                                                 length, self.where))
        except KeyError as error:
            raise KeyError(f"{error.args[0]}: use --input-form preorder") from None
        return {
            "id": torch.tensor([sample["id"] for sample in samples]),
            "nsentences": len(samples),
            "ntokens": int(sum(len(source) for source in sources)),
            "net_input": net_input,
            "target": torch.tensor([sample["label"] for sample in samples]),
            "token_labels": data_utils.collate_tokens(
                [sample["token_labels"] for sample in samples], NO_LABEL, left_pad=False
            ),
        }


@register_task("tree_classification", dataclass=TreeClassificationConfig)
class TreeClassificationTask(CpuAutocastMixin, FairseqTask):
    cfg: TreeClassificationConfig

    def __init__(self, cfg: TreeClassificationConfig, dictionary: Dictionary, label_names: List[str]):
        super().__init__(cfg)
        self.dictionary = dictionary
        self.label_names = label_names
        self.model_side_inputs: Tuple[str, ...] = ()  # what the models built by this task read

    @classmethod
    def setup_task(cls, cfg: TreeClassificationConfig, **kwargs):
        if cfg.data is None:
            raise ValueError("tree_classification needs a data directory")
        require_data_dir_of(CLASSIFICATION_TASK, cfg.data)
        dictionary = Dictionary.load(os.path.join(cfg.data, DICT_FILE))
        with open(os.path.join(cfg.data, LABELS_FILE), encoding="utf-8") as f:
            label_names = [line.strip() for line in f if line.strip()]
        if len(set(label_names)) != len(label_names) or len(label_names) < 2:
            raise ValueError(f"{cfg.data}/{LABELS_FILE}: expected at least two distinct classes, got {label_names}")
        logger.info(f"dictionary: {len(dictionary)} types; classes: {label_names}")
        return cls(cfg, dictionary, label_names)

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        path = os.path.join(self.cfg.data, f"{split}.tree")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such file")
        class_of = {name: index for index, name in enumerate(self.label_names)}
        examples = []
        for line, tree in enumerate(trees.read_trees(path), start=1):
            if tree.label not in class_of:
                raise trees.TreeError(f"root label {tree.label!r} is not a class of {LABELS_FILE}", path, line)
            tokens, parents, labels = labelled_example(tree, self.cfg.input_form, self.cfg.preterminals)
            if len(tokens) + 1 > self.cfg.max_positions:
                raise trees.TreeError(
                    f"{len(tokens)} tokens + EOS exceed --max-positions {self.cfg.max_positions}", path, line
                )
            source = self.dictionary.encode_line(" ".join(tokens), add_if_not_exist=False, append_eos=True).long()
            token_labels = [class_of.get(label, NO_LABEL) for label in labels] + [NO_LABEL]
            examples.append({
                "id": len(examples),
                "source": source,
                "label": class_of[tree.label],
                "token_labels": torch.tensor(token_labels),
                "side": {} if parents is None else {"src_parents": torch.from_numpy(parents)},
            })
        unknown = sum(int((example["source"] == self.dictionary.unk()).sum()) for example in examples)
        logger.info(f"{split}: {len(examples)} trees, {int(sum(len(e['source']) for e in examples))} tokens "
                    f"({unknown} unknown)")
        self.datasets[split] = TreeClassificationDataset(examples, self.dictionary, shuffle=split == "train",
                                                         where=path)

    def get_batch_iterator(self, dataset, **kwargs):
        # fairseq's batch_by_size leaves out the sentences that do not fill a multiple of
        # --required-batch-size-multiple (8 by default): accuracy must count every tree
        kwargs["required_batch_size_multiple"] = 1
        if isinstance(dataset, TreeClassificationDataset):
            dataset = dataset.batching(tuple(dict.fromkeys(dataset.side_inputs + self.model_side_inputs)))
        return super().get_batch_iterator(dataset, **kwargs)

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        read = tuple(getattr(model, "side_inputs", ()))
        self.model_side_inputs = tuple(dict.fromkeys(self.model_side_inputs + read))
        return model

    def max_positions(self):
        return self.cfg.max_positions

    @property
    def source_dictionary(self):
        return self.dictionary

    @property
    def target_dictionary(self):
        return None
