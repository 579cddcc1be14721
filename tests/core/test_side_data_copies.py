"""Side data copied from another data directory is refused in one line by its fingerprints."""
import hashlib
import json
import shutil

import pytest
import torch
from conftest import TRANSLATION, run_preprocess
from fairseq import options, tasks
from fairseq.data.indexed_dataset import MMapIndexedDataset

from fairseq_syntax.core.data_dir import read_meta
from fairseq_syntax.core.side_inputs import collate_side_inputs, load_side_data
from fairseq_syntax.methods.ldd import preprocess as preprocess_dependencies


def rotated_corpus(raw, dest):
    """``raw``'s training split with each line moved up by one: same dictionary and count, other sentences."""
    dest.mkdir()
    for name in ("train.en", "train.de", "train.tree", "train.arcs.jsonl"):
        lines = (raw / name).read_text().splitlines(keepends=True)
        (dest / name).write_text("".join(lines[1:] + lines[:1]))
    return dest


def ldd_directory(raw, dest):
    run_preprocess(raw, dest, "sequence", splits=("train",))
    preprocess_dependencies.main(["--destdir", str(dest), "-s", "en", "-t", "de", "--labels", "stanford",
                                  "--trainpref", f"{raw}/train"])
    return dest


def copy_side_data(source, dest, suffix):
    for extension in ("bin", "idx"):
        shutil.copy(source / f"train.en-de.en.{suffix}.{extension}", dest)


def load_error(directory) -> str:
    with pytest.raises(SystemExit) as error:
        load_side_data(str(directory), "train", "en", "de", read_meta(str(directory)))
    return str(error.value)


@pytest.mark.parametrize("form, suffix, made_by", [
    ("sequence", "ldd", "fairseq-syntax-preprocess-dependencies"),
    ("preorder", "parents", "fairseq-syntax-preprocess --form preorder"),
])
def test_side_data_is_fingerprinted_and_a_copy_from_another_directory_refused(small_corpus, tmp_path, form, suffix,
                                                                               made_by):
    other_raw = rotated_corpus(small_corpus, tmp_path / "rotated")
    if suffix == "ldd":
        made, other = ldd_directory(small_corpus, tmp_path / "made"), ldd_directory(other_raw, tmp_path / "other")
    else:
        made, other = tmp_path / "made", tmp_path / "other"
        run_preprocess(small_corpus, made, form, splits=("train",))
        run_preprocess(other_raw, other, form, splits=("train",))
    def sha256(prefix):  # .idx then .bin
        return "sha256:" + hashlib.sha256((made / f"{prefix}.idx").read_bytes()
                                          + (made / f"{prefix}.bin").read_bytes()).hexdigest()

    assert read_meta(str(made))["side_data"] == {
        suffix: {"train": {"tokens": sha256("train.en-de.en"), "files": sha256(f"train.en-de.en.{suffix}")}}}
    assert list(load_side_data(str(made), "train", "en", "de", read_meta(str(made))))  # its own side data loads
    copy_side_data(other, made, suffix)  # cp OTHER/train.en-de.en.SUFFIX.* DIR/: the tokens of DIR are unchanged
    files = f"{made}/train.en-de.en.{suffix}.{{bin,idx}}"
    name = {"ldd": "src_ldd", "parents": "src_parents"}[suffix]
    message = (f"error: {files} (side input {name}) is not the side data syntax.json records for train (their "
               "fingerprints differ): copied in from another data directory, or changed since it was made; remove "
               f"it, or make it again with {made_by}")
    assert load_error(made) == message
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(made), *TRANSLATION, "--arch", "transformer", "-s", "en", "-t", "de", "--cpu"])
    with pytest.raises(SystemExit) as error:  # where fairseq-train loads it
        tasks.setup_task(args).load_dataset("train")
    assert str(error.value) == message


def test_a_collate_error_names_the_side_data_and_the_command_that_remakes_it():
    parents = [torch.tensor([-1, 0, 1, 1, 0], dtype=torch.int16)]  # 5 tokens + EOS: 6 positions
    with pytest.raises(ValueError) as error:
        collate_side_inputs(["src_parents"], [{"src_parents": parents[0]}], False, 4, "DIR/train")
    assert str(error.value) == (
        "DIR/train: side input src_parents (parents files) does not fit the batch's source tokens (collate_parents: "
        "pad_to_length=4 is shorter than the longest row (6)): it was made for other tokens; make it again with "
        "fairseq-syntax-preprocess --form preorder")


def test_each_part_of_a_sharded_data_directory_gives_its_own_side_data(small_corpus, tmp_path):
    """--data part0:part1: epoch 1 trains on part0, epoch 2 on part1, each with its own side data."""
    other_raw = rotated_corpus(small_corpus, tmp_path / "rotated")
    part0, part1 = tmp_path / "part0", tmp_path / "part1"
    run_preprocess(small_corpus, part0, "preorder", splits=("train",))
    # --joined-dictionary (run_preprocess) with --srcdict: part0's joined dictionary on both sides
    run_preprocess(other_raw, part1, "preorder", "--srcdict", str(part0 / "dict.en.txt"), splits=("train",))
    args = options.parse_args_and_arch(options.get_training_parser(), [
        f"{part0}:{part1}", *TRANSLATION, "--arch", "transformer", "-s", "en", "-t", "de", "--cpu"])
    task = tasks.setup_task(args)
    for epoch, part in ((1, part0), (2, part1)):
        task.load_dataset("train", epoch=epoch)
        stored = MMapIndexedDataset(str(part / "train.en-de.en.parents"))
        loaded = task.dataset("train").side_data["src_parents"]
        assert [loaded[k].tolist() for k in range(len(loaded))] == [stored[k].tolist() for k in range(len(stored))]
    (part1 / "syntax.json").write_text(json.dumps({**read_meta(str(part1)), "form": "linearized"}))
    with pytest.raises(SystemExit) as error:
        task.load_dataset("train", epoch=2)
    assert str(error.value) == (
        f"error: {part1} holds the linearized form (--preterminals auto), but {part0} the preorder form "
        "(--preterminals auto): the parts of one data directory (--data part0:part1) must be made alike, with the "
        "same --srcdict and --tgtdict")
