"""fairseq's CLIs with --user-dir: train, generate, interactive, --restore-file, DDP on CPU (2 processes, gloo)."""
import os
import re
import subprocess

import numpy as np
import pytest
import torch
from conftest import REPO, TINY, free_port, run, train, write_sst_data
from fairseq import checkpoint_utils

from fairseq_syntax.cli import plot
from fairseq_syntax.core.classification_task import (
    TreeClassificationConfig,
    TreeClassificationTask,
)
from fairseq_syntax.core.translation_task import (
    SyntaxTranslationConfig,
    SyntaxTranslationTask,
)


@pytest.fixture(scope="module")
def mask_checkpoint(data_dirs, tmp_path_factory):
    save = str(tmp_path_factory.mktemp("mask"))
    train(data_dirs["preorder"], save, "transformer_syntax_mask_tiny", 3)
    return os.path.join(save, "checkpoint_last.pt")


def update_losses(log: str) -> dict:
    """update -> training loss, from the per-update lines of a --log-format simple --log-interval 1 log."""
    return {int(update): loss for loss, update in re.findall(r" loss=([\d.]+),.* num_updates=(\d+),", log)}


#: resumed runs: no dropout (losses equal to the bit); "better" is a higher loss, so --patience 2 stops at epoch 3;
#: --eval-bleu puts numpy arrays into their checkpoints
RESUME_OPTIONS = ("--dropout", "0", "--patience", "2", "--best-checkpoint-metric", "loss",
                  "--maximize-best-checkpoint-metric", "--eval-bleu", "--eval-bleu-args", '{"beam": 1}')


@pytest.fixture(scope="module")
def resumed_runs(data_dirs, tmp_path_factory):
    """(uninterrupted, [first, second, rest], its save directory): logs of a run --patience 2 stops after epoch 3,
    and of it cut twice; fairseq's transformer on the sequence form."""
    root = tmp_path_factory.mktemp("resume")
    whole = train(data_dirs["sequence"], str(root / "whole"), "transformer_tiny", 8, *RESUME_OPTIONS).stdout
    parts = [train(data_dirs["sequence"], str(root / "parts"), "transformer_tiny", epochs, *RESUME_OPTIONS).stdout
             for epochs in (1, 2, 8)]
    return whole, parts, root / "whole"


def test_resuming_at_an_epoch_boundary_repeats_the_uninterrupted_run_exactly(resumed_runs):
    # fairseq's own translation task does not; the syntax tasks build each epoch's batches from its own seed
    whole, (first, second, rest), _ = resumed_runs
    assert "Loaded checkpoint" in second and "Loaded checkpoint" in rest
    resumed = {**update_losses(first), **update_losses(second), **update_losses(rest)}
    assert len(update_losses(whole)) > 2 * len(update_losses(first)) > 0
    assert len(update_losses(second)) > 0 and len(update_losses(rest)) > 0  # each piece trained
    assert resumed == update_losses(whole)


def valid_losses(log: str) -> dict:
    """epoch -> validation loss, from a fairseq-train log."""
    found = re.findall(r"epoch (\d+) \| valid on 'valid' subset \| loss ([\d.]+)", log)
    return {int(epoch): loss for epoch, loss in found}


def test_a_resumed_run_stops_early_where_the_uninterrupted_run_stops(resumed_runs):
    # the uninterrupted run stops after epoch 3 (RESUME_OPTIONS)
    whole, (first, second, rest), _ = resumed_runs
    losses = valid_losses(whole)
    assert sorted(losses) == [1, 2, 3] and losses[1] > losses[2] > losses[3]  # the premise of the count above
    assert "early stop since valid performance hasn't improved for last 2 runs" in whole
    assert ("early stopping resumes its count: best " in rest
            and "1 validation(s) without improvement since" in rest)
    assert {**valid_losses(first), **valid_losses(second), **valid_losses(rest)} == losses
    assert "early stop since" in rest and "early stop since" not in first + second


def test_checkpoints_of_training_with_eval_bleu_load_for_generation(data_dirs, resumed_runs):
    # --eval-bleu puts numpy arrays into the checkpoint; torch's weights-only loader must still accept it
    # and fairseq's transformer generates on the same task (the linearized form's: test_interactive_parsing.py);
    # 21 test sentences: not a multiple of fairseq's default batch multiple (8), which used to drop the last batch
    import fairseq_syntax  # noqa: F401  (installs the allow-list, as --user-dir does)

    best = resumed_runs[2] / "checkpoint_best.pt"
    state = torch.load(best, map_location="cpu")  # weights_only, torch's default
    assert any(isinstance(v, np.ndarray) for v in _leaves(state["extra_state"]))
    out = run(["fairseq-generate", data_dirs["sequence"], "--user-dir", "fairseq_syntax", "--task",
               "syntax_translation", "--path", str(best), "--beam", "2", "--cpu", "--gen-subset", "test"]).stdout
    assert sorted(map(int, re.findall(r"^H-(\d+)\t", out, re.M))) == list(range(21))


def _leaves(tree):
    if isinstance(tree, dict):
        for value in tree.values():
            yield from _leaves(value)
    elif isinstance(tree, (list, tuple)):
        for value in tree:
            yield from _leaves(value)
    else:
        yield tree


GOOD_TREE = "(S (NP (DT the) (NN cat)) (VP (VBZ sees) (NP (DT the) (NN dog))) (. .))"


@pytest.mark.parametrize("from_file", [False, True], ids=["stdin", "input-file"])
def test_interactive_reports_bad_lines_translates_the_rest_and_keeps_the_ids(data_dirs, mask_checkpoint, tmp_path,
                                                                             from_file):
    # lines 2 (malformed), 3 (blank), 4 (untreed), 5 (a Latin-1 byte), 6 (a lone \r), 7 (26 tokens >
    # --max-source-positions 20) are reported by number and get empty hypotheses, score -inf; 8 ends with \r\n
    too_long = "(S " + " ".join(["(NN cat)"] * 12) + ")"
    raw = (GOOD_TREE.encode() + b"\n(S (NP the cat\n\nthe cat sees the dog .\n(S (NN caf\xe9))\n"
           b"(S (NN cat)\r (VBZ sees))\n" + too_long.encode() + b"\n" + GOOD_TREE.encode() + b"\r\n")
    (tmp_path / "input.txt").write_bytes(raw)
    result = subprocess.run(["fairseq-interactive", data_dirs["preorder"], "--user-dir", "fairseq_syntax", "--task",
                             "syntax_translation", "--path", mask_checkpoint, "--cpu", "-s", "en", "-t", "de", "--beam",
                             "2", "--source-format", "tree", "--buffer-size", "2", "--max-source-positions", "20",
                             "--skip-invalid-size-inputs-valid-test",
                             *(["--input", str(tmp_path / "input.txt")] if from_file else [])],
                            cwd=REPO, capture_output=True, input=None if from_file else raw)
    stdout, stderr = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == 0, stderr[-3000:]
    hypotheses = re.findall(r"^H-(\d+)\t(\S+)\t(.*)$", stdout, re.MULTILINE)
    assert [(int(id_), score == "-inf") for id_, score, _ in hypotheses] == [(k, 0 < k < 7) for k in range(8)]
    assert hypotheses[7][2] == hypotheses[0][2] != ""
    assert re.findall(r"^S-0\t(.*)$", stdout, re.M) == [
        "(S (NP (DT the (NN cat (VP (VBZ sees (NP (DT the (NN dog (. ."]  # a tree read as one line, in preorder
    assert "<input>:2: " in stderr and "<input>:3: empty line; expected a bracketed tree" in stderr
    assert "<input>:4: expected a bracketed tree" in stderr
    assert "<input>:5: not valid UTF-8 (byte 0xe9 at byte 11 of the line)" in stderr
    assert "<input>:6: a carriage return inside the line (byte 12)" in stderr
    assert ("<input>:7: too long: 26 source tokens with EOS (the preorder form of the line); the model takes at "
            "most 20") in stderr
    assert "6 bad input lines" in stderr and "Traceback" not in stderr
    assert "Please install tensorboardX" not in stderr  # a dependency now: fairseq's note is gone


def test_a_model_on_a_data_directory_of_another_form_is_one_line_saying_which_to_make(data_dirs, mask_checkpoint):
    # the two dictionaries have the same size: the weights would load without the dictionary check
    result = subprocess.run(["fairseq-generate", data_dirs["sequence"], "--user-dir", "fairseq_syntax", "--task",
                             "syntax_translation", "--path", mask_checkpoint, "--cpu", "--gen-subset", "test"],
                            cwd=REPO, capture_output=True, text=True, check=False)
    sequence = data_dirs["sequence"]
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"error: the model was trained on the preorder form (--preterminals auto), but {sequence} holds the sequence "
        f"form ({sequence}/syntax.json): give it a data directory made by fairseq-syntax-preprocess --form preorder "
        "--preterminals auto with --srcdict and --tgtdict of the directory it was trained on")


def test_a_checkpoint_that_does_not_record_its_form_is_checked_by_its_side_inputs(data_dirs, mask_checkpoint,
                                                                                 tmp_path):
    # checkpoints saved before the task recorded its input form: the preorder model reads src_parents
    state = torch.load(mask_checkpoint)
    state["task_state"] = {}
    torch.save(state, tmp_path / "old.pt")
    _, _, task = checkpoint_utils.load_model_ensemble_and_task([str(tmp_path / "old.pt")],
                                                               arg_overrides={"data": data_dirs["sequence"]})
    with pytest.raises(SystemExit, match=r"^error: .*/test: the model reads side inputs \['src_parents'\], which "
                                         r"this data directory lacks \(made by src_parents: fairseq-syntax-preprocess "
                                         r"--form preorder\)$"):
        task.load_dataset("test")


def test_a_missing_gen_subset_names_the_splits_there_are(data_dirs, mask_checkpoint):
    _, _, task = checkpoint_utils.load_model_ensemble_and_task([mask_checkpoint],
                                                               arg_overrides={"data": data_dirs["preorder"]})
    with pytest.raises(SystemExit, match=rf"^error: {data_dirs['preorder']} has no test2 split "
                                         r"\(test2.en-de.en.\{bin,idx\}\); its splits: test, train, valid$"):
        task.load_dataset("test2")


def test_a_data_directory_of_the_other_task_is_one_line(tmp_path):
    sst = write_sst_data(tmp_path)
    translation = tmp_path / "translation"
    translation.mkdir()
    for name in ("dict.en.txt", "dict.de.txt"):  # what fairseq-preprocess writes first
        (translation / name).write_text("the 1\n")
    with pytest.raises(SystemExit, match=rf"^error: {sst} is a tree_classification data directory \(labels.txt, "
                                         r"dict.txt and \{split\}.tree\), not one for --task syntax_translation "
                                         r"\(made by fairseq-syntax-preprocess\): give --task tree_classification"):
        SyntaxTranslationTask.setup_task(SyntaxTranslationConfig(data=sst))
    with pytest.raises(SystemExit, match=r"is a syntax_translation data directory \(made by fairseq-syntax-preprocess"
                                         r"\), not one for --task tree_classification"):
        TreeClassificationTask.setup_task(TreeClassificationConfig(data=str(translation)))
    with pytest.raises(SystemExit, match=rf"^error: {tmp_path}/missing: no such data directory$"):
        SyntaxTranslationTask.setup_task(SyntaxTranslationConfig(data=str(tmp_path / "missing")))


def test_distributed_data_parallel_on_cpu_with_gloo(data_dirs, tmp_path):
    """fairseq's legacy DDP, one process per rank (torchrun and pytorch_ddp do not work on CPU with gloo here)."""
    port = free_port()
    procs = []
    for rank in range(2):
        cmd = ["fairseq-train", data_dirs["preorder"], "--user-dir", "fairseq_syntax", "--task", "syntax_translation",
               "--arch", "transformer_syntax_mask_tiny", "--max-epoch", "1", "--save-dir", str(tmp_path), *TINY,
               "--distributed-backend", "gloo", "--distributed-no-spawn", "--distributed-world-size", "2",
               "--distributed-rank", str(rank), "--distributed-init-method", f"tcp://127.0.0.1:{port}",
               "--ddp-backend", "legacy_ddp"]
        procs.append(subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], logs[0][-3000:] + logs[1][-3000:]
    assert "distributed init (rank 1)" in logs[0] + logs[1]
    assert "done training" in logs[0] and os.path.exists(tmp_path / "checkpoint_last.pt")


def test_plot_mask_strengths_of_a_checkpoint(mask_checkpoint, tmp_path, capsys):
    plot.main(["mask-strengths", mask_checkpoint, "--tree", "(S (NP (DT the) (NN cat)) (VP (VBZ sees)) (. .))",
               "--output", str(tmp_path / "m")])  # fairseq-syntax-plot, in this process
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["layer", "head", "min", "max", "range"]
    assert len(out.splitlines()) == 1 + 2 * 2  # transformer_syntax_mask_tiny: 2 layers x 2 heads
    assert (tmp_path / "m.strengths.png").stat().st_size > 0 and (tmp_path / "m.sentence.png").stat().st_size > 0


def test_plot_cross_attention_share_over_the_test_set(mask_checkpoint, capsys):
    plot.main(["cross-attention-share", mask_checkpoint])
    out = capsys.readouterr().out
    shares = [float(x) for x in re.findall(r"(?:nodes|leaves|EOS) ([\d.]+)%", out.splitlines()[0])]
    assert len(shares) == 3 and sum(shares) == pytest.approx(100.0, abs=0.2)
    assert len(out.splitlines()[1].split("%")) == 3  # two decoder layers in the tiny arch
