"""Resuming fairseq-train: a finished run is not trained on; another model's optimizer state needs --reset-optimizer."""
import subprocess

import torch

from conftest import REPO, TINY, train


def updates_and_weights(path):
    state = torch.load(path, map_location="cpu", weights_only=False)
    return state["optimizer_history"][-1]["num_updates"], state["model"]


def test_the_same_command_on_a_finished_run_trains_nothing_and_a_larger_budget_goes_on(data_dirs, tmp_path):
    save = tmp_path / "ckpt"
    train(data_dirs["sequence"], str(save), "transformer_tiny", 10, "--max-update", "3")
    last = save / "checkpoint_last.pt"
    updates, weights = updates_and_weights(last)
    assert updates == 3
    before = last.stat().st_mtime_ns

    again = train(data_dirs["sequence"], str(save), "transformer_tiny", 10, "--max-update", "3")
    assert ("the checkpoint resumed from has 3 updates, --max-update is 3: nothing left to train (give a larger "
            "--max-update to train on)") in again.stdout + again.stderr
    assert "num_updates=4" not in again.stdout + again.stderr
    assert last.stat().st_mtime_ns == before  # not saved again
    updates_again, weights_again = updates_and_weights(last)
    assert updates_again == 3
    assert all(torch.equal(weights[name], weights_again[name]) for name in weights)

    longer = train(data_dirs["sequence"], str(save), "transformer_tiny", 10, "--max-update", "5")
    assert updates_and_weights(last)[0] == 5
    assert "nothing left to train" not in longer.stdout + longer.stderr


def test_a_checkpoint_from_before_the_link_projections_were_merged_resumes_with_reset_optimizer(data_dirs, tmp_path):
    """A Tree Transformer checkpoint with link_query and link_key per layer, and their optimizer state."""
    save = tmp_path / "ckpt"
    arch = ["transformer_constituent_tiny", "--encoder-layers", "2"]
    train(data_dirs["sequence"], str(save), arch[0], 10, "--max-update", "2", *arch[1:])
    last = save / "checkpoint_last.pt"
    state = torch.load(last, map_location="cpu", weights_only=False)
    model = state["model"]
    merged = [name for name in model if name.endswith("link_proj.weight")]
    assert len(merged) == 2
    for name in [name for name in list(model) if ".link_proj." in name]:
        query, key = model.pop(name).chunk(2)
        model[name.replace("link_proj", "link_query")] = query
        model[name.replace("link_proj", "link_key")] = key
    optimizer = state["last_optimizer_state"]
    params = optimizer["param_groups"][0]["params"]
    params.extend(range(len(params), len(params) + 2 * len(merged)))  # two parameters more a layer
    torch.save(state, last)
    command = ["fairseq-train", data_dirs["sequence"], "--user-dir", "fairseq_syntax", "--task", "syntax_translation",
               "--arch", arch[0], "--max-epoch", "10", "--save-dir", str(save), *TINY, "--max-update", "4", *arch[1:]]

    refused = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1] == (
        f"error: {save}/checkpoint_last.pt: its optimizer state is for other parameters than this model's (a "
        "checkpoint written before the model's parameters changed): its weights load, but training cannot go on "
        "with its optimizer state; add --reset-optimizer to go on from its weights with a fresh optimizer")

    train(data_dirs["sequence"], str(save), arch[0], 10, "--max-update", "4", *arch[1:], "--reset-optimizer")
    updates, weights = updates_and_weights(last)
    assert updates == 4 and len([name for name in weights if name.endswith("link_proj.weight")]) == 2
    assert not [name for name in weights if ".link_query." in name or ".link_key." in name]
