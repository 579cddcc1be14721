"""A data directory that lost a file is never trained or decoded on."""
import os
import shutil
from pathlib import Path

import pytest
from conftest import TINY, TRANSLATION, train_here
from fairseq import options, tasks

MODEL = [*TRANSLATION, "--arch", "transformer_syntax_mask_tiny"]
REMAKE = "a data directory made halfway, or a file removed: make it again with fairseq-syntax-preprocess"


@pytest.fixture
def made(data_dirs):
    """A whole data directory of the preorder form (whose source has side data, src_parents)."""
    return Path(data_dirs["preorder"])


def without(made, tmp_path, name):
    """A copy of the data directory ``made`` without the file ``name``."""
    data = tmp_path / "data"
    shutil.copytree(made, data)
    os.remove(data / name)
    return data


def train_stops(data, tmp_path):
    """fairseq-train (fairseq_cli.train, in this process) on ``data``: the one line it stops with, after checking
    that it wrote no checkpoint, not even fairseq's crash.pt."""
    with pytest.raises(SystemExit) as stopped:
        train_here([str(data), *MODEL, "--max-epoch", "1", "--save-dir", str(tmp_path / "save"), *TINY])
    assert not list(tmp_path.glob("save/*.pt"))
    return str(stopped.value)


@pytest.mark.parametrize("name, split", [
    ("train.en-de.de.bin", "train"),  # a step trained, then the traceback
    ("valid.en-de.de.idx", "valid"),
])
def test_fairseq_train_on_a_split_without_its_target_tokens_is_one_line(made, tmp_path, name, split):
    data = without(made, tmp_path, name)
    assert train_stops(data, tmp_path) == (f"error: {data}/{name}: no such file: {data} holds only part of the "
                                           f"{split} split, whose target (de) tokens are missing: {REMAKE}")


def test_fairseq_train_without_syntax_json_is_one_line(made, tmp_path):
    data = without(made, tmp_path, "syntax.json")
    assert train_stops(data, tmp_path) == (
        f"error: {data}/syntax.json: no such file: {data} is a data directory made halfway "
        "(fairseq-syntax-preprocess writes syntax.json last: a run that was stopped, or the file was removed), so "
        "nothing records its input form and side data: make it again with fairseq-syntax-preprocess")


def load(data, split):
    """The task's load_dataset of ``split``, as fairseq-train and fairseq-generate (after loading the model) call
    it."""
    args = options.parse_args_and_arch(options.get_generation_parser(), [str(data), *TRANSLATION])
    tasks.setup_task(args).load_dataset(split, combine=True)


def test_a_half_there_source_side_and_a_half_there_second_part_are_named(made, tmp_path):
    data = without(made, tmp_path, "train.en-de.en.idx")
    with pytest.raises(SystemExit) as error:  # fairseq's loader saw no source and said no train split (or none)
        load(data, "train")
    assert str(error.value) == (f"error: {data}/train.en-de.en.idx: no such file: {data} holds only part of the "
                                f"train split, whose source (en) tokens are missing: {REMAKE}")
    # both sides of the test split's target gone at once: one line for the pair of files
    os.remove(data / "test.en-de.de.idx")
    os.remove(data / "test.en-de.de.bin")
    with pytest.raises(SystemExit) as error:
        load(data, "test")
    assert str(error.value) == (f"error: {data}/test.en-de.de.{{bin,idx}}: no such file: {data} holds only part of "
                                f"the test split, whose target (de) tokens are missing: {REMAKE}")
    # fairseq combines train, train1, train2...: a train1 with its source alone would end in fairseq's assertion
    shutil.copy(made / "train.en-de.en.idx", data / "train.en-de.en.idx")
    for extension in ("bin", "idx"):
        shutil.copy(made / f"valid.en-de.en.{extension}", data / f"train1.en-de.en.{extension}")
    with pytest.raises(SystemExit) as error:
        load(data, "train")
    assert str(error.value) == (f"error: {data}/train1.en-de.de.{{bin,idx}}: no such file: {data} holds only part "
                                f"of the train1 split, whose target (de) tokens are missing: {REMAKE}")
