"""One run of a study, start to end (:func:`execute`, what every executor calls, a :class:`RunTask` in, a
:class:`RunOutcome` out), its steps the recipes':

1. **claim** ``WORK/claims/RUN.lock`` (``flock``-ed while the process and the commands it starts live);
2. a run whose record and decode are kept is never trained again (a record of another setting is refused);
3. **train**, or resume checkpoints made by the same command up to its budget (:func:`resume_key`);
4. **decode** the best-validation checkpoint, kept as hypotheses only, logs portable and gzipped;
5. **score** against the raw test reference, with the paired bootstrap against the baseline's run of the same seed,
   into the run record with the study's identity.

A failure leaves ``WORK/failed/RUN.txt`` (the step and the log's last lines) for ``plan``."""
from __future__ import annotations

import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fairseq_syntax.core.files import atomic_path, held_lock, is_locked, write_atomically
from fairseq_syntax.evaluation.run_commands import as_old_form, command_text, old_form_words
from fairseq_syntax.evaluation.tables import json_text
from fairseq_syntax.study.config import StudyConfig, load_study
from fairseq_syntax.study.devices import cuda_problem
from fairseq_syntax.study.grid import (
    RESUMABLE_OPTIONS,
    Run,
    decode_arguments,
    study_identity,
    study_runs,
    train_arguments,
)
from fairseq_syntax.study.processes import PACKAGE_DIR, REPO_ROOT, environment
from fairseq_syntax.study.record_checks import finished
from fairseq_syntax.study.records import (
    StudyError,
    checkpoints_dir,
    keep_test_set,
    kept,
    project_root,
    reference_path,
    runs_dir,
    work_dir,
)


@dataclass(frozen=True)
class RunTask:
    """What a worker or Slurm job is given: the study file, a run's name (``SYSTEM.seedK``) and, over sizes, its
    point (``n1000``, ``n1000/sweep/LABEL``)."""
    config_path: str
    run_name: str
    point: str = ""

    def __str__(self) -> str:
        return f"{self.point}/{self.run_name}" if self.point else self.run_name

    def study(self) -> StudyConfig:
        """The study (or the point of a study over sizes) the run belongs to, read from its file."""
        config = load_study(self.config_path)
        if not self.point:
            return config
        from fairseq_syntax.study.sizes import point_config

        return point_config(config, self.point)


@dataclass(frozen=True)
class RunOutcome:
    run_name: str
    state: str  # "done" (finished now), "finished" (already), "held" (another process has it), "failed"
    detail: str = ""


def find_run(config: StudyConfig, name: str) -> Run:
    for run in study_runs(config):
        if run.name == name:
            return run
    raise StudyError(f"{config.path}: no run {name!r} in the study's grid (fairseq-syntax-study plan lists them)")


# --- claims

#: the descriptors of the claims this process holds, passed on to the processes it starts
_CLAIMS: set[int] = set()


@contextmanager
def claim(config: StudyConfig, name: str):
    """Yield True while this process holds ``name``'s lock, False when another process does."""
    folder = work_dir(config) / "claims"
    folder.mkdir(parents=True, exist_ok=True)
    with held_lock(folder / f"{name}.lock", wait=False) as descriptor:
        if descriptor is None:
            yield False
            return
        # the training and decoding this process starts hold the lock too (an inherited descriptor): a run whose
        # runner was killed is not taken over while its fairseq-train lives on
        _CLAIMS.add(descriptor)
        try:
            yield True
        finally:
            _CLAIMS.discard(descriptor)


def is_claimed(config: StudyConfig, name: str) -> bool:
    """Whether a process holds ``name``'s lock now (it is in training or being decoded)."""
    return is_locked(work_dir(config) / "claims" / f"{name}.lock")


# --- the steps

def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The processor's model name as Linux gives it (``model name`` of ``/proc/cpuinfo``), else Python's."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown processor"


def device_text(config: StudyConfig) -> str:
    """What a run is recorded as trained on, measured in its process: the GPU fairseq-train uses (the first visible
    one), or the CPU with its model and the vector instructions torch uses on it."""
    import torch

    if config.training.device == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return (f"cpu ({cpu_model()}, {torch.backends.cpu.get_cpu_capability()}, {os.cpu_count()} cores, "
            f"{config.training.threads} thread(s) per run)")


def _environment(config: StudyConfig) -> dict[str, str]:
    threads = str(config.training.threads)
    return environment(OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)


#: the files of a run's checkpoints folder that hold the commands it was trained and decoded by (argv lists, JSON)
TRAIN_COMMAND, DECODE_COMMAND = "train_command.json", "decode_command.json"
#: what checkpoints of the old form hold instead of TRAIN_COMMAND: the command's words joined by spaces
OLD_TRAIN_COMMAND = "train_command.txt"


def resume_key(argv: list[str]) -> list[str]:
    """``argv`` without the options a resume may change (grid.RESUMABLE_OPTIONS) and their values."""
    kept_words, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in RESUMABLE_OPTIONS:
            skip = True
        elif not word.startswith(tuple(f"{option}=" for option in RESUMABLE_OPTIONS)):
            kept_words.append(word)
    return kept_words


def checkpoints_command(checkpoints: Path, argv: list[str]) -> tuple[list[str] | None, list[str]]:
    """(the command ``checkpoints`` were trained by, ``argv`` in the same form): from TRAIN_COMMAND, or from
    OLD_TRAIN_COMMAND with both as old-form words (:func:`~fairseq_syntax.evaluation.run_commands.as_old_form`); None
    where neither file is there."""
    if (checkpoints / TRAIN_COMMAND).is_file():
        return json.loads((checkpoints / TRAIN_COMMAND).read_text(encoding="utf-8")), argv
    if (checkpoints / OLD_TRAIN_COMMAND).is_file():
        return old_form_words((checkpoints / OLD_TRAIN_COMMAND).read_text(encoding="utf-8")), as_old_form(argv)
    return None, argv


def _executable(program_module: str, args: list[str]) -> list[str]:
    """The argv that runs a recorded command: fairseq's module by this Python, the plugin by its path."""
    return [sys.executable, "-m", program_module,
            *[PACKAGE_DIR if arg == "fairseq_syntax" and previous == "--user-dir" else arg
              for previous, arg in zip(["", *args], args)]]


def _fail(config: StudyConfig, run: Run, step: str, log: Path | None, why: str = "") -> RunOutcome:
    """``WORK/failed/RUN.txt`` (its first line what ``plan`` shows: ``why``, else the step; then the log's last
    lines) and the failed outcome."""
    tail = ""
    if log is not None and log.is_file():
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-20:])
    folder = work_dir(config) / "failed"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{run.name}.txt").write_text(f"{why or step + ' failed'}\n{tail}\n", encoding="utf-8")
    return RunOutcome(run.name, "failed", why or f"{step} failed; see {log}")


def train(config: StudyConfig, run: Run) -> bool:
    """Train ``run`` (or go on from its checkpoints) to its patience stop; its log in RUNS/RUN.train.log."""
    work, runs = work_dir(config), runs_dir(config)
    args = train_arguments(config, run, work)
    argv = ["fairseq-train", *args]
    checkpoints = checkpoints_dir(config, run.name)
    log = runs / f"{run.name}.train.log"
    mode = "w"
    if any(checkpoints.glob("checkpoint*.pt")):
        recorded, mine = checkpoints_command(checkpoints, argv)
        if recorded is None or resume_key(recorded) != resume_key(mine):
            raise StudyError(f"{checkpoints} holds checkpoints of another command (its {TRAIN_COMMAND} or "
                             f"{OLD_TRAIN_COMMAND}, or neither): remove the folder to train the run afresh")
        mode = "a"
        print(f"== resume {run.name} from its checkpoints", flush=True)
        packed_gz = Path(f"{log}.gz")
        if packed_gz.is_file() and not log.is_file():  # the log goes on: the one a finished decode left, unzipped
            log.write_bytes(gzip.decompress(packed_gz.read_bytes()))
    else:
        shutil.rmtree(checkpoints, ignore_errors=True)
        checkpoints.mkdir(parents=True)
        (runs / f"{run.name}.run.json").unlink(missing_ok=True)  # an earlier run's record: not this run's facts
    for stale in (f"{run.name}.train.log.gz", f"{run.name}.gen.gz", f"{run.name}.gen.log.gz"):
        (runs / stale).unlink(missing_ok=True)
    (checkpoints / TRAIN_COMMAND).write_text(json.dumps(argv) + "\n", encoding="utf-8")
    if not (checkpoints / "device.txt").is_file():
        (checkpoints / "device.txt").write_text(device_text(config) + "\n", encoding="utf-8")
    parsers = work / "data-bin" / run.data / "parsers.json"
    if parsers.is_file() and not (checkpoints / "parsers.json").is_file():
        shutil.copyfile(parsers, checkpoints / "parsers.json")
    print(f"== train {run.name}: {command_text(argv)}", flush=True)
    with open(log, mode, encoding="utf-8") as out:
        status = subprocess.run(_executable("fairseq_cli.train", args), stdout=out, stderr=subprocess.STDOUT,
                                env=_environment(config), cwd=REPO_ROOT, pass_fds=tuple(_CLAIMS)).returncode
    return status == 0


def decode(config: StudyConfig, run: Run) -> bool:
    """Decode the test split with the best checkpoint; keep the hypotheses and both logs, portable and gzipped."""
    from fairseq_syntax.evaluation.records import make_log_portable
    from fairseq_syntax.evaluation.scoring import write_kept_decode

    work, runs = work_dir(config), runs_dir(config)
    args = decode_arguments(config, run, work)
    checkpoints = checkpoints_dir(config, run.name)
    (checkpoints / DECODE_COMMAND).write_text(json.dumps(["fairseq-generate", *args]) + "\n", encoding="utf-8")
    output, log = runs / f"{run.name}.gen", runs / f"{run.name}.gen.log"
    with open(output, "w", encoding="utf-8") as out, open(log, "w", encoding="utf-8") as err:
        status = subprocess.run(_executable("fairseq_cli.generate", args), stdout=out, stderr=err,
                                env=_environment(config), cwd=REPO_ROOT, pass_fds=tuple(_CLAIMS)).returncode
    if status != 0:
        return False
    # the kept decode appears whole or not at all: it is what marks the run decoded
    with atomic_path(f"{output}.gz", ".partial.gz") as temporary:  # gzipped: its name ends in .gz
        write_kept_decode(str(output), temporary)
    output.unlink()
    for path in (runs / f"{run.name}.train.log", log):
        make_log_portable(str(path), str(work), str(project_root(config)))
        write_atomically(path.with_name(path.name + ".gz"), gzip.compress(path.read_bytes(), mtime=0))
        path.unlink()
    return True


def detokenizing(config: StudyConfig) -> list[str]:
    """fairseq-syntax-score's ``--lang`` for raw text (hypotheses Moses-detokenized, scored against the raw
    reference); none for tokenized text, scored on its tokens."""
    corpus = config.corpus
    return ["--lang", corpus.target] if corpus.text == "raw" else []


def score_arguments(config: StudyConfig, run: Run) -> list[str]:
    """fairseq-syntax-score's arguments for one run: its decode, the reference, the baseline's run of the same seed
    where decoded, and the record's facts."""
    work, runs = work_dir(config), runs_dir(config)
    checkpoints = checkpoints_dir(config, run.name)
    test = config.test
    args = [str(kept(runs / f"{run.name}.gen")), str(reference_path(config))]
    baseline = config.baseline
    if run.system.name != baseline:
        theirs = kept(runs / f"{baseline}.seed{run.seed}.gen")
        if theirs is not None:
            args += [str(theirs), "--baseline-name", baseline]
    args += [*detokenizing(config), "--bootstrap", str(test.run_bootstrap_rounds), "--run-seed", str(run.seed)]
    if test.by_length:
        args += ["--by-length", ",".join(map(str, test.by_length))]
    if (checkpoints / "device.txt").is_file():
        args += ["--device", (checkpoints / "device.txt").read_text(encoding="utf-8").strip()]
    if (checkpoints / DECODE_COMMAND).is_file():
        args += ["--decode-command", str(checkpoints / DECODE_COMMAND)]
    if (checkpoints / "parsers.json").is_file():
        args += ["--parsers", str(checkpoints / "parsers.json")]
    args += ["--repo-root", str(project_root(config)), "--out-dir", str(work),
             "--record", str(runs / f"{run.name}.run.json"),
             "--dataset", config.name, "--system", run.system.name, "--arch", run.system.arch,
             "--train-log", str(kept(runs / f"{run.name}.train.log")),
             "--train-command", str(checkpoints / TRAIN_COMMAND)]
    return args


def add_identity(path: Path, identity: dict) -> None:
    record = json.loads(path.read_text(encoding="utf-8"))
    record["study"] = identity
    write_atomically(path, json_text(record))


def score(config: StudyConfig, run: Run) -> bool:
    args = score_arguments(config, run)
    status = subprocess.run([sys.executable, "-m", "fairseq_syntax.cli.score", *args], env=_environment(config),
                            cwd=REPO_ROOT).returncode
    if status != 0:
        return False
    add_identity(runs_dir(config) / f"{run.name}.run.json", study_identity(config, run.data, work_dir(config)))
    return True


def execute(task: RunTask) -> RunOutcome:
    """Run one study run to its record (the module docstring's steps); what executors call."""
    config = task.study()
    run = find_run(config, task.run_name)
    runs_dir(config).mkdir(parents=True, exist_ok=True)
    with claim(config, run.name) as held:
        if not held:
            return RunOutcome(run.name, "held", "another process trains it")
        if finished(config, run):
            return RunOutcome(run.name, "finished")
        problem = cuda_problem(config, run.name)  # here, on the machine that trains (a Slurm job's node)
        if problem is not None:
            return _fail(config, run, "checking the device", None, problem)
        data = work_dir(config) / "data-bin" / run.data
        if not (data / "syntax.json").is_file():
            raise StudyError(f"{data}: the run's data directory is not prepared (fairseq-syntax-study run prepares "
                             "it first)")
        if not task.point:  # a study over sizes: one test set for every size, read from the data
            keep_test_set(config)
        started = time.time()
        (work_dir(config) / "failed" / f"{run.name}.txt").unlink(missing_ok=True)
        runs = runs_dir(config)
        if not train(config, run):
            return _fail(config, run, "training", runs / f"{run.name}.train.log")
        if not decode(config, run):
            return _fail(config, run, "decoding", runs / f"{run.name}.gen.log")
        if not score(config, run):
            return _fail(config, run, "scoring", None)
        return RunOutcome(run.name, "done", f"{(time.time() - started) / 60:.0f} min")


def main(argv: list[str] | None = None) -> int:
    """``python -m fairseq_syntax.study.runner STUDY.toml RUN [POINT]``: one run, as the local pool starts it."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (2, 3):
        print("usage: python -m fairseq_syntax.study.runner STUDY.toml RUN [POINT]", file=sys.stderr)
        return 2
    try:
        outcome = execute(RunTask(*argv))
    except (StudyError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"== {outcome.run_name}: {outcome.state}{': ' + outcome.detail if outcome.detail else ''}", flush=True)
    return {"done": 0, "finished": 0, "held": 3, "failed": 1}[outcome.state]


if __name__ == "__main__":
    sys.exit(main())
