"""fairseq's own CLIs with --user-dir fairseq_syntax: train, generate, interactive, --restore-file, and training
under fairseq's distributed data parallel on CPU (2 processes, gloo), on the tiny corpus of conftest.py."""
import os
import re
import socket
import subprocess

import numpy as np
import pytest
import torch
from conftest import REPO, TINY, run, train


def generate(data, checkpoint, *extra):
    out = run(["fairseq-generate", data, "--user-dir", "fairseq_syntax", "--task", "syntax_translation",
               "--path", checkpoint, "--beam", "2", "--cpu", "--gen-subset", "test", *extra]).stdout
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^H-(\d+)\t\S+\t(.*)$", out, re.M)}


@pytest.fixture(scope="module")
def mask_checkpoint(data_dirs, tmp_path_factory):
    save = str(tmp_path_factory.mktemp("mask"))
    train(data_dirs["preorder"], save, "transformer_syntax_mask_tiny", 3)
    return os.path.join(save, "checkpoint_last.pt")


def test_mask_model_trains_and_generates_every_test_sentence(data_dirs, mask_checkpoint):
    hyps = generate(data_dirs["preorder"], mask_checkpoint)
    # 21 test sentences: not a multiple of fairseq's default batch multiple (8), which used to drop the last batch
    assert sorted(hyps) == list(range(21))


@pytest.mark.parametrize("form", ["sequence", "linearized"])
def test_baselines_are_fairseqs_transformer_on_the_same_task(data_dirs, tmp_path, form):
    train(data_dirs[form], str(tmp_path), "transformer_tiny", 1)
    assert sorted(generate(data_dirs[form], str(tmp_path / "checkpoint_last.pt"))) == list(range(21))


def test_restore_file_continues_training(data_dirs, mask_checkpoint, tmp_path):
    log = train(data_dirs["preorder"], str(tmp_path), "transformer_syntax_mask_tiny", 4,
                "--restore-file", mask_checkpoint).stdout
    assert "Loaded checkpoint" in log and "epoch 004" in log


def update_losses(log: str) -> dict:
    """update -> training loss, from the per-update lines of a --log-format simple --log-interval 1 log."""
    return {int(update): loss for loss, update in re.findall(r" loss=([\d.]+),.* num_updates=(\d+),", log)}


def test_resuming_at_an_epoch_boundary_repeats_the_uninterrupted_run_exactly(data_dirs, tmp_path):
    # fairseq's own translation task does not (its end-of-epoch checkpoint resumes with batches ordered by the
    # next epoch's seed while the uninterrupted run keeps the first epoch's); the syntax tasks build each epoch's
    # batches from its own seed in both runs (README, "Resuming")
    options = ("--dropout", "0")
    whole = train(data_dirs["sequence"], str(tmp_path / "whole"), "transformer_tiny", 3, *options).stdout
    first = train(data_dirs["sequence"], str(tmp_path / "parts"), "transformer_tiny", 1, *options).stdout
    rest = train(data_dirs["sequence"], str(tmp_path / "parts"), "transformer_tiny", 3, *options).stdout
    assert "Loaded checkpoint" in rest
    resumed = {**update_losses(first), **update_losses(rest)}
    assert len(update_losses(whole)) > 2 * len(update_losses(first)) > 0
    assert resumed == update_losses(whole)


def test_checkpoints_of_training_with_eval_bleu_load_for_generation(data_dirs, tmp_path):
    # --eval-bleu puts numpy arrays (BLEU n-gram counts) into the checkpoint; torch's weights-only loader must
    # still accept it (fairseq_syntax.core.checkpoints allow-lists numpy's array reconstructors)
    train(data_dirs["sequence"], str(tmp_path), "transformer_tiny", 1, "--eval-bleu",
          "--eval-bleu-args", '{"beam": 1}', "--best-checkpoint-metric", "bleu", "--maximize-best-checkpoint-metric")
    import fairseq_syntax  # noqa: F401  (installs the allow-list, as --user-dir does)

    state = torch.load(tmp_path / "checkpoint_best.pt", map_location="cpu")  # weights_only, torch's default
    assert any(isinstance(v, np.ndarray) for v in _leaves(state["extra_state"]))
    assert sorted(generate(data_dirs["sequence"], str(tmp_path / "checkpoint_best.pt"))) == list(range(21))


def _leaves(tree):
    if isinstance(tree, dict):
        for value in tree.values():
            yield from _leaves(value)
    elif isinstance(tree, (list, tuple)):
        for value in tree:
            yield from _leaves(value)
    else:
        yield tree


def test_interactive_reads_one_tree_per_line(data_dirs, mask_checkpoint):
    trees = ("(S (NP (DT the) (NN cat)) (VP (VBZ sees) (NP (DT the) (NN dog))) (. .))\n"
             "(S (NP (DT the) (NN dog)) (VP (VBZ likes) (NP (DT the) (NN man))) (. .))\n")
    out = run(["fairseq-interactive", data_dirs["preorder"], "--user-dir", "fairseq_syntax", "--task",
               "syntax_translation", "--path", mask_checkpoint, "--beam", "2", "--cpu", "-s", "en", "-t", "de"],
              input=trees).stdout
    sources = re.findall(r"^S-\d+\t(.*)$", out, re.M)
    assert sources[0] == "(S (NP (DT the (NN cat (VP (VBZ sees (NP (DT the (NN dog (. ."
    assert len(re.findall(r"^H-\d+\t", out, re.M)) == 2


GOOD_TREE = "(S (NP (DT the) (NN cat)) (VP (VBZ sees) (NP (DT the) (NN dog))) (. .))"


@pytest.mark.parametrize("buffer_size", ["1", "4"])
def test_interactive_reports_bad_lines_and_translates_the_rest(data_dirs, mask_checkpoint, buffer_size):
    # line 3 is malformed, line 5 blank, line 6 an untreed sentence (no --source-parser): each is reported with its
    # number, gets an empty hypothesis with score -inf, and the lines after it are translated
    lines = [GOOD_TREE, GOOD_TREE, "(S (NP the cat", GOOD_TREE, "", "the cat sees the dog .", GOOD_TREE]
    result = subprocess.run(["fairseq-interactive", data_dirs["preorder"], "--user-dir", "fairseq_syntax", "--task",
                             "syntax_translation", "--path", mask_checkpoint, "--cpu", "-s", "en", "-t", "de",
                             "--beam", "2", "--buffer-size", buffer_size],
                            input="".join(line + "\n" for line in lines), cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    hypotheses = dict(re.findall(r"^H-(\d+)\t(\S+)\t.*$", result.stdout, re.M))
    assert sorted(map(int, hypotheses)) == list(range(7))  # one hypothesis per input line, in order
    assert [id_ for id_, score in hypotheses.items() if score == "-inf"] == ["2", "4", "5"]
    translated = re.findall(r"^H-0\t\S+\t(.*)$", result.stdout, re.M)[0]
    assert translated and re.findall(r"^H-6\t\S+\t(.*)$", result.stdout, re.M)[0] == translated
    assert "<input>:3:" in result.stderr and "<input>:5: expected a bracketed tree" in result.stderr
    assert "<input>:6: expected a bracketed tree" in result.stderr
    assert "3 bad input lines" in result.stderr
    assert "Please install tensorboardX" not in result.stderr  # a dependency now: fairseq's note is gone


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def test_plot_mask_strengths_of_a_checkpoint(mask_checkpoint, tmp_path):
    out = run(["fairseq-syntax-plot", "mask-strengths", mask_checkpoint, "--tree",
               "(S (NP (DT the) (NN cat)) (VP (VBZ sees)) (. .))", "--output", str(tmp_path / "m")]).stdout
    assert out.splitlines()[0].split() == ["layer", "head", "min", "max", "range"]
    assert len(out.splitlines()) == 1 + 2 * 2  # transformer_syntax_mask_tiny: 2 layers x 2 heads
    assert (tmp_path / "m.strengths.png").stat().st_size > 0 and (tmp_path / "m.sentence.png").stat().st_size > 0


def test_plot_cross_attention_share_over_the_test_set(mask_checkpoint):
    out = run(["fairseq-syntax-plot", "cross-attention-share", mask_checkpoint]).stdout
    shares = [float(x) for x in re.findall(r"(?:nodes|leaves|EOS) ([\d.]+)%", out.splitlines()[0])]
    assert len(shares) == 3 and sum(shares) == pytest.approx(100.0, abs=0.2)
    assert len(out.splitlines()[1].split("%")) == 3  # two decoder layers in the tiny arch
