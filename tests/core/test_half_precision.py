"""Every model of the package in half precision as fairseq trains it: ``--fp16`` and ``--bf16`` turn the model and
the batch's float tensors (side data included) into float16 / bfloat16 (``Trainer._prepare_sample``), so every
method's attention and structure code runs in that format. On the same batch the loss and the gradients must stay
within a tolerance of float32's; the maths of each method on edge values is tested in
``tests/core/test_half_precision_maths.py``, the same comparison on CUDA and short ``fairseq-train --fp16 / --bf16``
runs in ``tests/core/test_cuda.py``.

Tolerances, from the formats: bfloat16 keeps 8 significant bits (relative rounding 2^-9, machine epsilon
2^-8 = 3.9e-3), float16 11 (2^-11 = 4.9e-4). A tiny model's loss is a sum over a few hundred tokens of terms each
rounded a few dozen times, so its relative error should stay within a few epsilons: 3e-2 for bfloat16 (about 8
epsilons), 5e-3 for float16 (10). Gradients pass through the backward of every layer, each adding its rounding:
the relative L2 error of all gradients together within 0.15 (bfloat16) and 0.03 (float16), and every gradient
finite. What these bounds catch is what the formats break: an overflow (inf/NaN in fp16 past 65504), a log of an
underflowed 0, a cumulative sum that loses a term, a mask that no longer masks.
"""
import pytest
import torch
from conftest import check_half_precision
from test_cuda import ALL_CASES, CASES, masked_lm_dir, method_cases, run_at_once, sst_dir, train_losses  # noqa: F401  (fixtures)

import fairseq_syntax  # noqa: F401  (registers the tasks, models and criterion)
from fairseq_syntax.core.mixed_precision import tpu_implied_by_bf16, untie_bf16_from_tpu


@pytest.mark.parametrize("kind, system, extra", ALL_CASES)
def test_every_model_trains_in_bfloat16_on_the_cpu(request, kind, system, extra):
    check_half_precision(CASES[kind](request, system, extra), torch.bfloat16)


#: float16 on the CPU: its kernels are slow there (no hardware fp16 arithmetic), so one case per task runs here; every
#: case runs in float16 on CUDA (tests/core/test_cuda.py), where --fp16 is used
FIRST_CASES = [pytest.param(kind, *next(method_cases(kind)).values, id=f"{kind}-first") for kind in CASES]


@pytest.mark.parametrize("kind, system, extra", FIRST_CASES)
def test_the_first_model_of_each_task_trains_in_float16_on_the_cpu(request, kind, system, extra):
    check_half_precision(CASES[kind](request, system, extra), torch.float16)


def test_the_comparison_sees_a_model_broken_in_half_precision(request):
    """The check fails on a model whose half-precision maths is wrong: the first translation system with its
    output projection scaled so that its logits overflow float16 (65504) gives non-finite gradients or a loss off."""
    system, extra = next(method_cases("translation")).values
    task, model, criterion, sample, args = CASES["translation"](request, system, extra)
    with torch.no_grad():
        model.decoder.output_projection.weight.mul_(1e4)
    with pytest.raises(AssertionError):
        check_half_precision((task, model, criterion, sample, args), torch.float16)


class Common:
    def __init__(self, bf16, tpu, cpu=False):
        self.bf16, self.tpu, self.cpu = bf16, tpu, cpu


class Config:
    def __init__(self, **common):
        self.common = Common(**common)


@pytest.mark.parametrize("bf16, tpu, argv, untied", [
    (True, True, ["fairseq-train", "DATA", "--bf16"], True),  # --bf16 alone: fairseq set tpu, untied
    (True, True, ["fairseq-train", "DATA", "--bf16", "--tpu"], False),  # asked for a TPU: kept
    (False, False, ["fairseq-train", "DATA"], False),
    (False, True, ["fairseq-train", "DATA", "--tpu"], False),
])
def test_bf16_no_longer_implies_a_tpu(bf16, tpu, argv, untied):
    cfg = Config(bf16=bf16, tpu=tpu)
    assert tpu_implied_by_bf16(cfg.common, argv) is untied
    assert untie_bf16_from_tpu(cfg, argv) is untied
    assert cfg.common.tpu is (tpu and not untied)


def test_fairseq_train_bf16_trains_on_the_cpu(data_dirs, tmp_path):
    """``fairseq-train --bf16 --cpu`` goes through fairseq's bf16 path (model in bfloat16, fp32 master weights in
    FP16Optimizer), not its TPU path, with the plugin loaded; the losses are finite."""
    from conftest import TRANSLATION, run

    log = run(["fairseq-train", data_dirs["preorder"], *TRANSLATION, "--arch", "transformer_syntax_mask_tiny",
               "--bf16", "--cpu", "--optimizer", "adam", "--lr", "0.005", "--max-tokens", "1000", "--max-update",
               "4", "--no-save", "--log-format", "simple", "--log-interval", "1", "--num-workers", "0",
               "--save-dir", str(tmp_path)])
    text = log.stdout + log.stderr
    assert "training in bfloat16 on the CPU" in text and "xla" not in text.lower()
    assert "'tpu': True" not in text.split("training in bfloat16")[1].split("\n")[1]  # every group's copy untied
    losses = train_losses(text)
    assert losses and all(loss == loss and loss < 100 for loss in losses), losses
    assert "num_updates 4" in text or "num_updates=4" in text


def test_commands_run_at_once_with_long_outputs(tmp_path):
    """The CUDA mixed-precision test runs fairseq-train for every system at once: each process writes more than a
    pipe holds (fairseq logs its whole configuration), and none may stall while another is waited for."""
    import sys

    talk = "import sys; sys.stdout.write('x' * 1_000_000 + '\\nloss {}\\n'.format(sys.argv[1]))"
    commands = {f"p{k}": [sys.executable, "-c", talk, str(k)] for k in range(3)}
    results = run_at_once(commands, str(tmp_path))
    assert {name: (code, len(log), log.split()[-1]) for name, (code, log) in results.items()} == {
        f"p{k}": (0, 1_000_000 + len(f"\nloss {k}\n"), str(k)) for k in range(3)}


def test_train_losses_reads_both_of_fairseqs_simple_lines():
    log = ("2026-11-28 | INFO | train_inner | epoch 001:      1 / 4 loss=5.206, ppl=36.92, wps=0\n"
           "2026-11-28 | INFO | train | epoch 001 | loss 4.992 | ppl 31.8 | wps 100\n")
    assert train_losses(log) == [5.206, 4.992]
