"""Every model computes on CUDA what it computes on the CPU, and trains and decodes there. Skipped without a GPU."""
import copy
import gzip
import json
import os
import sys

import pytest
import torch
from conftest import (
    REPO,
    TRANSLATION,
    build_on_cpu,
    check_half_precision,
    loss_and_gradients,
    run,
    write_sst_data,
)
from fairseq import utils

import fairseq_syntax  # noqa: F401  (registers the tasks, models and criterion)
from fairseq_syntax.methods import METHODS

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def assert_same_on(device, task, model, criterion, sample, args, translation=True):
    """A copy of ``model`` on ``device`` gives the loss, gradients and beam search of ``model`` on the CPU."""
    on_gpu = copy.deepcopy(model).to(device)
    sample_gpu = utils.move_to_cuda(sample) if device == "cuda" else copy.deepcopy(sample)
    assert all(p.device.type == device for p in on_gpu.parameters())
    loss, gradients = loss_and_gradients(model, criterion, sample)
    loss_gpu, gradients_gpu = loss_and_gradients(on_gpu, criterion, sample_gpu)
    torch.testing.assert_close(loss_gpu, loss, rtol=1e-4, atol=1e-4)
    assert gradients and gradients_gpu.keys() == gradients.keys()
    for name, gradient in gradients.items():
        torch.testing.assert_close(gradients_gpu[name], gradient, rtol=1e-3, atol=1e-5, msg=lambda m: f"{name}: {m}")
    if not translation:
        return
    args.beam, args.max_len_a, args.max_len_b = 2, 0, 12
    with torch.no_grad():
        hypotheses = task.inference_step(task.build_generator([model], args), [model], sample)
        hypotheses_gpu = task.inference_step(task.build_generator([on_gpu], args), [on_gpu], sample_gpu)
    for row, (want, got) in enumerate(zip(hypotheses, hypotheses_gpu)):
        assert got[0]["tokens"].device.type == device
        assert got[0]["tokens"].tolist() == want[0]["tokens"].tolist(), f"sentence {row}"
        torch.testing.assert_close(got[0]["positional_scores"].cpu(), want[0]["positional_scores"],
                                   rtol=1e-4, atol=1e-4)


def method_cases(task):
    """(system, extra model options) of every system for ``task``, and each method's ``cuda_variants``."""
    for method in METHODS:
        own = [system for system in method.systems if system.task == task]
        for system in own:
            yield pytest.param(system, system.model_args, id=system.name)
        if task == "translation" and own:
            main = next(system for system in own if not system.baseline)
            for variant in method.cuda_variants:
                yield pytest.param(main, variant, id=f"{main.name}{''.join(variant)}")


def case_argv(request, kind, system, extra):
    """The data, task and model options of ``system``'s case (``kind``: its task), for CPU builds and fairseq-train."""
    if kind == "translation":
        return [request.getfixturevalue("translation_data")(system), *TRANSLATION, "--arch", system.tiny_arch, *extra]
    user_dir = ["--user-dir", os.path.join(REPO, "fairseq_syntax")]
    if kind == "classification":
        return [request.getfixturevalue("sst_dir"), *user_dir, "--task", "tree_classification", "--arch",
                system.tiny_arch, "--criterion", "tree_cross_entropy", "--input-form", system.form, "--preterminals",
                system.preterminals, *extra]
    return [request.getfixturevalue("masked_lm_dir"), *user_dir, "--task", "sentence_masked_lm", "--criterion",
            "masked_lm", "--arch", system.tiny_arch, "--tokens-per-sample", "32", *extra]


def masked_lm_case(request, system, extra):
    task, model, criterion, sample, args = build_on_cpu(case_argv(request, "masked_lm", system, extra))
    assert sample["net_input"]["src_tokens"].eq(task.mask_idx).any()
    return task, model, criterion, sample, args


CASES = {kind: lambda request, system, extra, kind=kind: build_on_cpu(case_argv(request, kind, system, extra))
         for kind in ("translation", "classification")}
CASES["masked_lm"] = masked_lm_case
#: every case of every task: (kind, system, extra model options)
ALL_CASES = [pytest.param(kind, *param.values, id=f"{kind}-{param.id}")
             for kind in CASES for param in method_cases(kind)]


@pytest.fixture(scope="module")
def sst_dir(tmp_path_factory):
    return write_sst_data(tmp_path_factory.mktemp("sst_cuda"))


@pytest.fixture(scope="module")
def masked_lm_dir(raw_corpus, tmp_path_factory):
    from fairseq import options
    from fairseq_cli import preprocess

    dest = str(tmp_path_factory.mktemp("masked_lm_cuda"))
    preprocess.main(options.get_preprocessing_parser().parse_args([  # fairseq-preprocess, in this process
        "--only-source", "--trainpref", f"{raw_corpus}/train.de", "--validpref", f"{raw_corpus}/valid.de",
        "--testpref", f"{raw_corpus}/test.de", "--destdir", dest, "--workers", "1"]))
    return dest


@pytest.mark.parametrize("kind", CASES)
def test_the_comparison_runs_with_the_cpu_on_both_sides(request, kind):
    """The first case of each task through the whole comparison, the copy on the CPU: it must agree."""
    system, extra = next(method_cases(kind)).values
    assert_same_on("cpu", *CASES[kind](request, system, extra), translation=kind == "translation")


@needs_cuda
@pytest.mark.parametrize("kind, system, extra", ALL_CASES)
def test_every_model_agrees_on_cuda(request, kind, system, extra):
    assert_same_on("cuda", *CASES[kind](request, system, extra), translation=kind == "translation")


@needs_cuda
def test_fairseq_train_and_generate_run_on_the_gpu(data_dirs, tmp_path):
    """fairseq's own CLIs without --cpu: training steps and beam search on CUDA, the checkpoint loads for decoding."""
    save = str(tmp_path / "checkpoints")
    log = run(["fairseq-train", data_dirs["preorder"], *TRANSLATION, "--arch", "transformer_syntax_mask_tiny",
               "--optimizer", "adam", "--lr", "0.005", "--max-tokens", "1000", "--max-update", "20", "--seed", "1",
               "--no-epoch-checkpoints", "--log-format", "simple", "--save-dir", save]).stdout
    assert "num_updates 20" in log and "cuda" in log.lower()
    out = run(["fairseq-generate", data_dirs["preorder"], *TRANSLATION, "--path", f"{save}/checkpoint_last.pt",
               "--beam", "2", "--gen-subset", "test"]).stdout
    assert out.count("\nH-") == 21


@needs_cuda
def test_benchmark_trains_on_the_gpu(tmp_path):
    out = tmp_path / "bench"
    run([sys.executable, "bench/run.py", "--quick", "--device", "cuda", "--out", str(out)])
    details = json.loads(gzip.decompress((out / "RESULTS.details.json.gz").read_bytes()))
    assert details["devices"] == [torch.cuda.get_device_name()]
    runs = [run for measurement in details["measurements"] for run in measurement["runs"]]
    assert runs and all(r["updates"] == 20 and r["peak_mem_mb"] > 0 for r in runs)
    assert "wall-clock second of GPU training" in (out / "RESULTS.md").read_text()


# --- mixed precision on CUDA
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("kind, system, extra", ALL_CASES)
def test_every_model_in_half_precision_on_cuda(request, kind, system, extra, dtype):
    """Loss and gradients in float16 / bfloat16 on the GPU within test_half_precision.py's tolerances of float32's."""
    errors = check_half_precision(CASES[kind](request, system, extra), dtype, "cuda")
    print(f"HALF {kind} {system.name}{''.join(extra)} {dtype} loss {errors['loss']:.2e} "
          f"gradients {errors['gradients']:.2e} worst {errors['worst'][0]:.2e} {errors['worst'][1]}")


#: fairseq-train updates of each mixed-precision run
MIXED_PRECISION_UPDATES = 200
OVERFLOW = "gradient overflow detected"


def mixed_precision_commands(request, flag, save_root):
    """name -> fairseq-train command of every system, trained MIXED_PRECISION_UPDATES updates with ``flag``."""
    common = ["--optimizer", "adam", "--lr", "0.002", "--max-update", str(MIXED_PRECISION_UPDATES), "--seed", "1",
              "--no-save", "--disable-validation", "--log-format", "simple", "--log-interval", "10",
              "--num-workers", "0", flag]
    batches = {"translation": ["--max-tokens", "300"], "classification": ["--batch-size", "4"],
               "masked_lm": ["--max-tokens", "300"]}
    commands = {system.name: ["fairseq-train", *case_argv(request, system.task, system, system.model_args),
                              *batches[system.task], *common]
                for method in METHODS for system in method.systems}
    for name, command in commands.items():
        command += ["--save-dir", str(save_root / name)]
    return commands


def run_at_once(commands, log_dir):
    """Runs every command at once, each one's output into a file of ``log_dir``; name -> (exit, log)."""
    import subprocess

    processes = {}
    for name, command in commands.items():
        with open(os.path.join(log_dir, f"{name}.log"), "w") as log:
            processes[name] = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True,
                                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    codes = {name: process.wait() for name, process in processes.items()}
    return {name: (code, open(os.path.join(log_dir, f"{name}.log")).read()) for name, code in codes.items()}


def train_losses(log):
    """The ``loss`` of every ``train_inner`` and ``train`` line of a fairseq-train log (``--log-format simple``)."""
    import re

    return [float(match.group(1)) for match in re.finditer(r"\| train(?:_inner)? \|.*?\bloss[= ]([^,| ]+)", log)]


@needs_cuda
@pytest.mark.parametrize("flag", ["--fp16", "--bf16"])
def test_fairseq_train_in_mixed_precision_on_the_gpu(request, tmp_path, flag):
    """--fp16 / --bf16 train every system on the GPU: losses finite, falling; fp16 skips <= the transformer's + 1."""
    results = run_at_once(mixed_precision_commands(request, flag, tmp_path), str(tmp_path))
    failures, summary = [], []
    for name, (code, log) in results.items():
        losses, skips = train_losses(log), log.count(OVERFLOW)
        summary.append(f"{name}: exit {code}, losses {losses[:1]}..{losses[-1:]}, overflow skips {skips}")
        if code != 0 or f"num_updates {MIXED_PRECISION_UPDATES}" not in log:
            failures.append(f"{name} exited {code}:\n{log[-3000:]}")
        elif not losses or not all(loss == loss and loss < 1e3 for loss in losses) or losses[-1] >= losses[0]:
            failures.append(f"{name}: losses {losses}")
    print("MIXED " + flag + "\n" + "\n".join(summary))
    if flag == "--fp16":
        baseline = results["sequence"][1].count(OVERFLOW)
        failures += [f"{name}: {log.count(OVERFLOW)} overflow skips against the transformer's {baseline}"
                     for name, (_, log) in results.items() if log.count(OVERFLOW) > baseline + 1]
    assert not failures, "\n".join(failures)
