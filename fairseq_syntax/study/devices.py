"""Whether this machine can train a study's runs on the device its file names. fairseq-train falls back to the CPU
where torch sees no GPU, so ``training.device = "cuda"`` is checked twice: by ``plan`` and ``run`` with executor
``local`` (:func:`device_problem`, GPUs counted without torch), and in the run's own process before it trains
(:func:`cuda_problem`)."""
from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

from fairseq_syntax.study.config import ConfigError, StudyConfig

#: the NVIDIA driver's folder of GPUs (one entry a GPU, named by its PCI address)
PROC_GPUS = "/proc/driver/nvidia/gpus"
#: AMD's kernel driver (ROCm): torch.cuda may see its GPUs, which this module does not count
AMD_DRIVER = "/dev/kfd"
NVIDIA_SMI_TIMEOUT_S = 20


def visible_gpus(environ: Mapping[str, str] = os.environ, proc_gpus: str = PROC_GPUS,
                 nvidia_smi: str | None = "nvidia-smi", amd_driver: str = AMD_DRIVER) -> tuple[int | None, str]:
    """(the number of NVIDIA GPUs a process started here would see, or None where it cannot be told; how it was
    told)."""
    hidden = environ.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None and (not hidden.strip() or hidden.split(",")[0].strip() == "-1"):
        return 0, f"CUDA_VISIBLE_DEVICES={hidden!r} hides every GPU"
    try:
        listed = len(os.listdir(proc_gpus))
    except OSError:
        listed = None
    if listed:
        return listed, f"{proc_gpus} lists {listed}"
    smi = shutil.which(nvidia_smi) if nvidia_smi else None
    if smi is not None:
        try:
            lines = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S,
                                   check=False).stdout.splitlines()
        except (OSError, subprocess.TimeoutExpired):
            lines = []
        count = sum(line.startswith("GPU ") for line in lines)
        if count:
            return count, f"nvidia-smi -L lists {count}"
    if os.path.exists(amd_driver):
        return None, f"{amd_driver}: an AMD driver, whose GPUs torch may see"
    return 0, f"no NVIDIA driver lists one ({proc_gpus} {'is empty' if listed == 0 else 'is not there'}" + (
        ", nvidia-smi -L lists none)" if smi is not None else ", no nvidia-smi)")


def _devices(config: StudyConfig) -> set[str]:
    """Every ``training.device`` the study's runs train on: the file's, and each size's setting or sweep."""
    return {config.training.device, *(device for entry in config.sizes.values()
                                       for device in entry.values("training", "device", config.training.device))}


def device_problem(config: StudyConfig, executor: str, **machine) -> str | None:
    """The line that refuses a study whose runs would train here on a GPU this machine lacks, or None. ``machine``:
    :func:`visible_gpus`'s arguments (tests)."""
    if executor != "local" or "cuda" not in _devices(config):
        return None
    count, why = visible_gpus(**machine)
    if count is None or count > 0:
        return None
    return (f"{config.key_file('training', 'device')}: training.device: \"cuda\", but this machine shows no GPU "
            f"({why}), and executor local trains here: fairseq-train would fall back to the CPU. Run it where a GPU "
            "is (executor slurm with slurm.gpus_per_job), or give device = \"cpu\"")


def require_device(config: StudyConfig, executor: str) -> None:
    """:class:`ConfigError` with :func:`device_problem`'s line where it has one."""
    problem = device_problem(config, executor)
    if problem is not None:
        raise ConfigError([problem])


def cuda_problem(config: StudyConfig, run_name: str) -> str | None:
    """In the run's own process (where it trains): the line that fails a ``device = "cuda"`` run torch sees no GPU
    for, else None."""
    if config.training.device != "cuda":
        return None
    import torch

    if torch.cuda.is_available():
        return None
    seen = os.environ.get("CUDA_VISIBLE_DEVICES")
    return (f"{run_name}: training.device is \"cuda\" ({config.key_file('training', 'device')}), but torch sees no "
            f"GPU on {os.uname().nodename}" + (f" (CUDA_VISIBLE_DEVICES={seen!r})" if seen is not None else "")
            + ": nothing trained (fairseq-train would fall back to the CPU); give the jobs a GPU "
            "(slurm.gpus_per_job, a GPU partition)")
