"""study.devices: device = "cuda" with no GPU refused in one line where the runs train; fp16 on the CPU refused."""
import os
import shutil
import stat

import pytest
import torch

from study.forbid_torch import study_forbidding_torch

from fairseq_syntax.study import runner
from fairseq_syntax.study.config import ConfigError, load_study
from fairseq_syntax.study.devices import device_problem, visible_gpus

STUDY = """\
[study]
name = "gpu"
[corpus]
raw = "raw"
[training]
device = "cuda"
{training}
[executor]
kind = "{executor}"
[seeds]
count = 1
[[systems]]
name = "sequence"
"""

#: a slurm study is planned and run only where the cluster's commands are (CI installs Slurm; a fresh machine may not)
needs_slurm = pytest.mark.skipif(not all(map(shutil.which, ("sbatch", "squeue", "srun"))),
                                 reason="sbatch, squeue, srun not on PATH (apt-get install slurm-client)")
NO_GPU = ('{study}: training.device: "cuda", but this machine shows no GPU ({why}), and executor local trains here: '
          'fairseq-train would fall back to the CPU. Run it where a GPU is (executor slurm with slurm.gpus_per_job), '
          'or give device = "cpu"')


def write(folder, executor="local", training="", name="study.toml"):
    """The study file beside a corpus of three pairs a split."""
    (folder / "raw").mkdir(exist_ok=True)
    for split in ("train", "valid", "test"):
        for side in ("en", "de"):
            (folder / "raw" / f"{split}.{side}").write_text("a b .\nc d .\ne f .\n", encoding="utf-8")
    path = folder / name
    path.write_text(STUDY.format(executor=executor, training=training), encoding="utf-8")
    return path


def fake_nvidia_smi(folder, output: str) -> str:
    """The path of an nvidia-smi that prints ``output`` for -L."""
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] && printf '%b' '{output}'\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_the_gpus_are_counted_as_the_driver_lists_them(tmp_path):
    proc = tmp_path / "gpus"
    proc.mkdir()
    none = dict(proc_gpus=str(proc), nvidia_smi=None, amd_driver=str(tmp_path / "kfd"))
    assert visible_gpus(environ={}, **none) == (0, f"no NVIDIA driver lists one ({proc} is empty, no nvidia-smi)")
    for address in ("0000:17:00.0", "0000:65:00.0"):
        (proc / address).mkdir()
    assert visible_gpus(environ={}, **none) == (2, f"{proc} lists 2")
    assert visible_gpus(environ={"CUDA_VISIBLE_DEVICES": ""}, **none) == (
        0, "CUDA_VISIBLE_DEVICES='' hides every GPU")
    assert visible_gpus(environ={"CUDA_VISIBLE_DEVICES": "-1"}, **none)[0] == 0
    assert visible_gpus(environ={"CUDA_VISIBLE_DEVICES": "1"}, **none)[0] == 2
    gone = dict(none, proc_gpus=str(tmp_path / "absent"))
    smi = fake_nvidia_smi(tmp_path, "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\\n")
    assert visible_gpus(environ={}, **dict(gone, nvidia_smi=smi)) == (1, "nvidia-smi -L lists 1")
    empty = fake_nvidia_smi(tmp_path, "No devices were found\\n")
    assert visible_gpus(environ={}, **dict(gone, nvidia_smi=empty)) == (
        0, f"no NVIDIA driver lists one ({tmp_path / 'absent'} is not there, nvidia-smi -L lists none)")
    (tmp_path / "kfd").touch()
    assert visible_gpus(environ={}, **gone)[0] is None


def test_a_gpu_study_is_refused_where_it_would_train_on_no_gpu(tmp_path):
    path = write(tmp_path)
    config = load_study(path)
    machine = dict(environ={}, proc_gpus=str(tmp_path / "absent"), nvidia_smi=None, amd_driver=str(tmp_path / "x"))
    assert device_problem(config, "local", **machine) == NO_GPU.format(
        study=path, why=f"no NVIDIA driver lists one ({tmp_path / 'absent'} is not there, no nvidia-smi)")
    assert device_problem(config, "slurm", **machine) is None
    (tmp_path / "gpus").mkdir()
    (tmp_path / "gpus" / "0000:17:00.0").mkdir()
    assert device_problem(config, "local", **dict(machine, proc_gpus=str(tmp_path / "gpus"))) is None
    (tmp_path / "mine.toml").write_text('[study]\nbase = "study.toml"\nname = "mine"\n', encoding="utf-8")
    assert device_problem(load_study(tmp_path / "mine.toml"), "local", **machine).startswith(
        f"{path}: training.device: \"cuda\", but")


def test_plan_and_run_refuse_it_in_one_line_without_torch(tmp_path, monkeypatch):
    write(tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    expected = "error: " + NO_GPU.format(study="study.toml", why="CUDA_VISIBLE_DEVICES='' hides every GPU") + "\n"
    for command in (["plan", "study.toml"], ["run", "study.toml"]):
        refused = study_forbidding_torch(*command, cwd=tmp_path)
        assert (refused.returncode, refused.stdout, refused.stderr) == (2, "", expected), refused.stderr
    assert sorted(os.listdir(tmp_path)) == ["raw", "study.toml"]


@needs_slurm
def test_plan_passes_a_gpu_study_whose_jobs_go_to_slurm(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    write(tmp_path, executor="slurm")
    planned = study_forbidding_torch("plan", "study.toml", cwd=tmp_path)
    assert planned.returncode == 0 and planned.stdout.startswith("study gpu: 1 runs (study.toml)"), planned.stderr


@needs_slurm
def test_a_run_whose_process_sees_no_gpu_fails_in_one_line_before_training(tmp_path, monkeypatch, capsys):
    path = write(tmp_path, executor="slurm")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    trained = []
    monkeypatch.setattr(runner, "train", lambda *args: trained.append(args))
    assert runner.main([str(path), "sequence.seed1"]) == 1
    line = (f"sequence.seed1: training.device is \"cuda\" ({path}), but torch sees no GPU on {os.uname().nodename} "
            "(CUDA_VISIBLE_DEVICES=''): nothing trained (fairseq-train would fall back to the CPU); give the jobs a "
            "GPU (slurm.gpus_per_job, a GPU partition)")
    assert capsys.readouterr().out == f"== sequence.seed1: failed: {line}\n"
    assert trained == [] and not (tmp_path / "work" / "ckpt").exists()
    assert (tmp_path / "work" / "failed" / "sequence.seed1.txt").read_text().splitlines()[0] == line
    from fairseq_syntax.study.commands import plan_lines

    assert plan_lines(load_study(path))[1].split(None, 2)[1:] == ["failed", f"{line:<24} reads data-bin/sequence"]


def test_the_record_names_the_device_the_runs_process_measured(tmp_path, monkeypatch):
    config = load_study(write(tmp_path))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert runner.device_text(config) == (f"cpu ({runner.cpu_model()}, {torch.backends.cpu.get_cpu_capability()}, "
                                          f"{os.cpu_count()} cores, 1 thread(s) per run)")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: f"NVIDIA H100 80GB HBM3 #{index}")
    assert runner.device_text(config) == "NVIDIA H100 80GB HBM3 #0"
    on_cpu = config.with_changes("training", device="cpu")
    assert runner.device_text(on_cpu).startswith("cpu (")


def test_fp16_on_the_cpu_is_a_problem_of_the_file(tmp_path):
    fix = 'give bf16 (--cpu-bf16-autocast on a CPU) or fp32, or device = "cuda"'
    path = write(tmp_path, training='precision = "fp16"')
    assert load_study(path)["training"]["precision"] == "fp16"
    path.write_text(path.read_text().replace('device = "cuda"\n', ""), encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_study(path)
    assert raised.value.problems == [f'{path}: training.precision: fp16 trains on a GPU only, and training.device is '
                                     f'"cpu": {fix}']
    write(tmp_path, training='precision = "fp16"')
    mine = tmp_path / "mine.toml"
    mine.write_text('[study]\nbase = "study.toml"\n[training]\ndevice = "cpu"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_study(mine)
    assert raised.value.problems == [f'{path}: training.precision: fp16 trains on a GPU only, and training.device is '
                                     f'"cpu" ({mine}): {fix}']


def test_fp16_on_the_cpu_in_a_size_is_a_problem_of_the_file(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text('[study]\nname = "s"\n[corpus]\nraw = "raw"\nsubset = [100, 200]\n[sizes.200.training]\n'
                    'precision = "fp16"\n[[systems]]\nname = "sequence"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_study(path)
    assert raised.value.problems == [f'{path}: sizes.200: training.precision fp16 with training.device "cpu": fp16 '
                                     'trains on a GPU only; give bf16 (--cpu-bf16-autocast on a CPU) or fp32, or '
                                     'device = "cuda"']
    path.write_text(path.read_text().replace('precision = "fp16"', 'precision = "fp16"\ndevice = "cuda"'),
                    encoding="utf-8")
    assert load_study(path).sizes[200].settings == {"training": {"precision": "fp16", "device": "cuda"}}
