"""A checkpoint given another corpus's dictionaries is refused in one line by interactive (fairseq-generate loads
through the same load_model_ensemble_and_task), train and the evaluation loader; resumed at its --max-update, it
trains nothing."""
import filecmp
import logging
import os
import shutil
import subprocess

import pytest
import torch
from conftest import REPO, TINY, TRANSLATION, preprocess_in_process, train_here
from fairseq.data import Dictionary

import fairseq_syntax  # noqa: F401  (routes fairseq's checkpoint loads through the plugin's checks)
from fairseq_syntax.core.checkpoints import TRAINED_DICTIONARIES, dictionary_mismatch

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]  # fairseq's four symbols before a dictionary file's first line


@pytest.fixture(scope="module")
def trained(data_dirs, tmp_path_factory):
    """The save directory of a tiny transformer trained 2 updates on the sequence form of the tiny corpus."""
    save = tmp_path_factory.mktemp("trained")
    train_here(train_arguments(data_dirs["sequence"], save, 2))
    return save


@pytest.fixture(scope="module")
def other_dictionaries(data_dirs, raw_corpus, tmp_path_factory):
    """name -> data directory whose source dictionary has lines 4 and 5 swapped ("swapped") or one added ("longer")."""
    trained_lines = open(os.path.join(data_dirs["sequence"], "dict.en.txt"), encoding="utf-8").read().splitlines()
    swapped = list(trained_lines)
    swapped[3], swapped[4] = swapped[4], swapped[3]
    out = {}
    for name, dictionary in (("swapped", swapped), ("longer", trained_lines + ["zebra 1"])):
        folder = tmp_path_factory.mktemp(name)
        path = folder / "dict.txt"
        path.write_text("\n".join(dictionary) + "\n", encoding="utf-8")
        preprocess_in_process(raw_corpus, str(folder / "data"), "sequence", "--srcdict", str(path))
        out[name] = str(folder / "data")
    return out


def train_arguments(data, save, updates):  # fairseq-train's: a tiny transformer, up to ``updates`` updates
    return [data, *TRANSLATION, "--arch", "transformer_tiny", "--max-epoch", "10", "--save-dir", str(save), *TINY,
            "--max-update", str(updates)]


def fix(data_dirs) -> str:
    return (f"give the data directory it was trained on ({data_dirs['sequence']}), or one made with its dictionaries "
            "(fairseq-syntax-preprocess --srcdict and --tgtdict of that directory)")


def swapped(checkpoint, data, data_dirs) -> str:
    """The refusal of ``checkpoint`` on the "swapped" dictionary's data directory ``data``: file line 4 is entry 7
    (after the four SPECIALS)."""
    return (f"error: {checkpoint} was trained with another source dictionary than {data}/dict.en.txt: entry 7 is "
            f"'dog' in the checkpoint, 'man' at {data}/dict.en.txt:4; {fix(data_dirs)}")


def refused(result):
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    return result.stderr.strip().splitlines()[-1]


def test_the_checkpoint_records_its_dictionaries(data_dirs, trained):
    state = torch.load(trained / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    words = [line.split()[0] for line in open(os.path.join(data_dirs["sequence"], "dict.en.txt"), encoding="utf-8")]
    assert len(words) == 20  # 13 words of the tiny corpus, padded to a multiple of 8 by fairseq (24 with SPECIALS)
    assert state["task_state"][TRAINED_DICTIONARIES] == {"source": SPECIALS + words, "target": SPECIALS + words}


def test_interactive_with_a_larger_dictionary_names_the_sizes(data_dirs, trained, other_dictionaries):
    data = other_dictionaries["longer"]
    checkpoint = str(trained / "checkpoint_last.pt")
    result = subprocess.run(["fairseq-interactive", data, "--user-dir", "fairseq_syntax", "--task",
                             "syntax_translation", "--path", checkpoint, "--cpu"], input="the cat sees the dog .\n",
                            cwd=REPO, capture_output=True, text=True, check=False)
    assert refused(result) == (
        f"error: {checkpoint} was trained with another source dictionary than {data}/dict.en.txt: 24 entries in the "
        f"checkpoint, 25 in {data}/dict.en.txt; {fix(data_dirs)}")


def test_resumed_training_on_another_dictionary_is_refused_before_anything_is_written(data_dirs, trained,
                                                                                     other_dictionaries, tmp_path):
    data = other_dictionaries["swapped"]
    save = tmp_path / "save"
    shutil.copytree(trained, save)
    with pytest.raises(SystemExit) as stopped:  # fairseq-train, in this process
        train_here(train_arguments(data, save, 4))
    assert str(stopped.value) == swapped(f"{save}/checkpoint_last.pt", data, data_dirs)
    assert sorted(os.listdir(save)) == sorted(os.listdir(trained))
    assert all(filecmp.cmp(save / name, trained / name, shallow=False) for name in os.listdir(trained))


def updates_and_weights(path):
    state = torch.load(path, map_location="cpu", weights_only=False)
    return state["optimizer_history"][-1]["num_updates"], state["model"]


def test_the_same_command_on_a_finished_run_trains_nothing_and_a_larger_budget_goes_on(data_dirs, trained,
                                                                                      tmp_path, caplog):
    save = tmp_path / "ckpt"
    shutil.copytree(trained, save)
    last = save / "checkpoint_last.pt"
    updates, weights = updates_and_weights(last)
    assert updates == 2
    before = last.stat().st_mtime_ns
    with caplog.at_level(logging.INFO), pytest.raises(SystemExit) as stopped:
        train_here(train_arguments(data_dirs["sequence"], save, 2))
    assert stopped.value.code == 0 and ("the checkpoint resumed from has 2 updates, --max-update is 2: nothing left "
                                        "to train (give a larger --max-update to train on)") in caplog.text
    assert last.stat().st_mtime_ns == before  # not saved again
    updates_again, weights_again = updates_and_weights(last)
    assert updates_again == 2 and all(torch.equal(weights[name], weights_again[name]) for name in weights)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        train_here(train_arguments(data_dirs["sequence"], save, 4))
    assert updates_and_weights(last)[0] == 4
    assert "nothing left to train" not in caplog.text


def dictionary(*words) -> Dictionary:
    made = Dictionary()
    for word in words:
        made.add_symbol(word)
    return made


def test_the_target_side_is_named_where_only_it_differs():
    source, target = dictionary("a", "b"), dictionary("x", "y")
    state = {"task_state": {TRAINED_DICTIONARIES: {"source": list(source.symbols),
                                                   "target": SPECIALS + ["x", "z"]}}}
    problem = dictionary_mismatch("c.pt", state, {"source": ("D/dict.en.txt", source),
                                                  "target": ("D/dict.de.txt", target)})
    assert problem.startswith("error: c.pt was trained with another target dictionary than D/dict.de.txt: entry 5 "
                              "is 'z' in the checkpoint, 'y' at D/dict.de.txt:2; give the data directory it was "
                              "trained on, or one made")
    assert dictionary_mismatch("c.pt", state, {"source": ("D/dict.en.txt", source),
                                               "target": ("D/dict.de.txt", dictionary("x", "z"))}) is None
    assert dictionary_mismatch("c.pt", {"task_state": {}}, {"source": ("D/dict.en.txt", source)}) is None


def test_the_evaluation_commands_loader_refuses_another_dictionary_in_one_line(data_dirs, trained, other_dictionaries):
    """core.model_inputs.load_model's task checks the dictionary as fairseq-generate's does."""
    from fairseq_syntax.core.model_inputs import load_model

    checkpoint = str(trained / "checkpoint_last.pt")
    data = other_dictionaries["swapped"]
    with pytest.raises(SystemExit) as stopped:
        load_model(checkpoint, data)
    assert str(stopped.value) == swapped(checkpoint, data, data_dirs)
    model, task = load_model(checkpoint, data_dirs["sequence"])
    assert model.encoder.embed_tokens.weight.shape[0] == 24 and not model.training
    assert task.cfg.data == data_dirs["sequence"]
