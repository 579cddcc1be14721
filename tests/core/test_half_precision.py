"""Every model in --fp16/--bf16 as fairseq trains it: loss within 3e-2 (bf16) / 5e-3 (fp16) of float32's."""
from types import SimpleNamespace

import pytest
import torch
from conftest import check_half_precision
from test_cuda import masked_lm_dir, sst_dir  # noqa: F401  (fixtures)
from test_cuda import ALL_CASES, CASES, method_cases, run_at_once, train_losses

import fairseq_syntax  # noqa: F401  (registers the tasks, models and criterion)
from fairseq_syntax.core.mixed_precision import tpu_implied_by_bf16, untie_bf16_from_tpu


@pytest.mark.parametrize("kind, system, extra", ALL_CASES)
def test_every_model_trains_in_bfloat16_on_the_cpu(request, kind, system, extra):
    check_half_precision(CASES[kind](request, system, extra), torch.bfloat16)


#: float16 on the CPU is slow: one case per task here; every case in float16 on CUDA (tests/core/test_cuda.py)
FIRST_CASES = [pytest.param(kind, *next(method_cases(kind)).values, id=f"{kind}-first") for kind in CASES]


@pytest.mark.parametrize("kind, system, extra", FIRST_CASES)
def test_the_first_model_of_each_task_trains_in_float16_on_the_cpu(request, kind, system, extra):
    check_half_precision(CASES[kind](request, system, extra), torch.float16)


def test_the_comparison_sees_a_model_broken_in_half_precision(request):
    """The check fails on a model whose logits overflow float16: non-finite gradients or a loss off."""
    system, extra = next(method_cases("translation")).values
    task, model, criterion, sample, args = CASES["translation"](request, system, extra)
    with torch.no_grad():
        model.decoder.output_projection.weight.mul_(1e4)
    with pytest.raises(AssertionError):
        check_half_precision((task, model, criterion, sample, args), torch.float16)


@pytest.mark.parametrize("bf16, tpu, argv, untied", [
    (True, True, ["fairseq-train", "DATA", "--bf16"], True),  # --bf16 alone: fairseq set tpu, untied
    (True, True, ["fairseq-train", "DATA", "--bf16", "--tpu"], False),  # asked for a TPU: kept
    (False, False, ["fairseq-train", "DATA"], False),
    (False, True, ["fairseq-train", "DATA", "--tpu"], False),
])
def test_bf16_no_longer_implies_a_tpu(bf16, tpu, argv, untied):
    cfg = SimpleNamespace(common=SimpleNamespace(bf16=bf16, tpu=tpu, cpu=False))  # fairseq's cfg, as it reads it
    assert tpu_implied_by_bf16(cfg.common, argv) is untied
    assert untie_bf16_from_tpu(cfg, argv) is untied
    assert cfg.common.tpu is (tpu and not untied)


def test_fairseq_train_bf16_trains_on_the_cpu(data_dirs, tmp_path):
    """``fairseq-train --bf16 --cpu`` goes through fairseq's bf16 path (not TPU) with the plugin; losses finite."""
    from conftest import TINY, TRANSLATION, run

    log = run(["fairseq-train", data_dirs["preorder"], *TRANSLATION, "--arch", "transformer_syntax_mask_tiny",
               "--bf16", *TINY, "--max-update", "4", "--no-save", "--save-dir", str(tmp_path)])
    text = log.stdout + log.stderr
    assert "training in bfloat16 on the CPU" in text and "xla" not in text.lower()
    assert "'tpu': True" not in text.split("training in bfloat16")[1].split("\n")[1]  # every group's copy untied
    losses = train_losses(text)
    assert losses and all(loss == loss and loss < 100 for loss in losses), losses
    assert "num_updates 4" in text or "num_updates=4" in text


def test_commands_run_at_once_with_long_outputs(tmp_path):
    """Commands run at once each write more than a pipe holds; none stalls while another is waited for."""
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
