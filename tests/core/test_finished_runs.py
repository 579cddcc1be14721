"""A finished run is not trained on (:func:`fairseq_syntax.core.checkpoints._stop_if_trained_to_max_update`):
fairseq-train run again on a save directory whose checkpoint has --max-update updates leaves it as it is (fairseq
alone trained one more update and saved it over the finished checkpoints), and goes on with a larger --max-update."""
import torch

from conftest import train


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
