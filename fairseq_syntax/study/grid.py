"""A study's grid: every run (a system of the method registry, or one on control structures, with one training seed)
that its file asks for, the exact fairseq commands each is trained and decoded with, and the study's identity.

A :class:`Run` is ``SYSTEM.seedK``: its data directory is the registry system's for that training seed (a control run
reads the structures drawn with its training seed, ``FORM.CONTROL-sK``: :meth:`~fairseq_syntax.core.method.System.
for_training_seed`), its checkpoints ``WORK/ckpt/ckpt-SYSTEM.seedK``, its record ``RUNS/SYSTEM.seedK.run.json``.
The training command is built here from the file's ``[model]`` and ``[training]`` and the system's own options, in
the order the project's recipes have always used (so a record made by the recipes and one made by the study command
compare equal, :func:`same_training`).

The study's identity (:func:`study_identity`), written into every record it makes: the study's name, a SHA-256 of the
settings that change what a run is trained on or how (:data:`~fairseq_syntax.study.config.TRAINING_SECTIONS`, less
paths and thread counts), and the fingerprints of the data directories a run read. A record whose identity differs
from the file's is of another study or a changed setting, and is refused, naming what differs.
"""
from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fairseq_syntax.core.method import System
from fairseq_syntax.study.config import NOT_TRAINING_KEYS, TRAINING_SECTIONS, StudyConfig

#: options a run's training command may change between its first start and a resume from its checkpoints: its
#: budget (a cap that may grow) and who loads its batches; nothing else, or the checkpoints are of another run
RESUMABLE_OPTIONS = ("--max-epoch", "--max-update", "--num-workers")
#: options of a training command that may differ between two runs of the same setting: where it writes and its seed,
#: beside those a resume may change
RUN_SPECIFIC_OPTIONS = ("--save-dir", "--seed", *RESUMABLE_OPTIONS)


@dataclass(frozen=True)
class Run:
    """One run of the grid: ``system`` (a registry system, possibly on a control) trained with ``seed``."""
    system: System
    seed: int
    control_of: str | None = None  # the method system a control run is the control of

    @property
    def name(self) -> str:
        return f"{self.system.name}.seed{self.seed}"

    @property
    def data(self) -> str:
        """Its data directory's name under ``WORK/data-bin``."""
        return self.system.data


def registry_systems() -> dict[str, System]:
    """The registry's systems by name, controls included (each method's ``NAME_CONTROL``)."""
    from fairseq_syntax.methods import systems

    return {system.name: system for system in systems(task=None, controls=True)}


def study_runs(config: StudyConfig) -> list[Run]:
    """Every run of the study in the file's order: each system's seeds, then each of its controls' seeds."""
    registry = registry_systems()
    runs = []
    for entry in config.systems:
        system = registry[entry.name]
        runs += [Run(system.for_training_seed(seed), seed) for seed in range(1, entry.seeds + 1)]
        for kind, seeds in entry.controls.items():
            control = registry[entry.control_name(kind)]
            runs += [Run(control.for_training_seed(seed), seed, control_of=entry.name) for seed in range(1, seeds + 1)]
    return runs


def data_directories(config: StudyConfig) -> list[str]:
    """The data directories the study's runs read, in first-use order."""
    return list(dict.fromkeys(run.data for run in study_runs(config)))


def control_pairs(config: StudyConfig) -> dict[str, tuple[str, str]]:
    """control system -> (its method system, control kind), from the file."""
    return {entry.control_name(kind): (entry.name, kind) for entry in config.systems for kind in entry.controls}


def planned_seeds(config: StudyConfig) -> dict[str, int]:
    """system -> the seeds the file gives it (controls included)."""
    plan = {}
    for entry in config.systems:
        plan[entry.name] = entry.seeds
        plan.update({entry.control_name(kind): seeds for kind, seeds in entry.controls.items()})
    return plan


def compared_with(config: StudyConfig, system: str) -> list[str]:
    """The systems ``system``'s record over seeds is tested against: the baseline (not for itself), its controls (a
    method) or its method (a control)."""
    partners = [] if system == config.baseline else [config.baseline]
    pairs = control_pairs(config)
    if system in pairs:
        partners.append(pairs[system][0])
    partners += [control for control, (method, _) in pairs.items() if method == system]
    return list(dict.fromkeys(partners))


def _precision_args(training: dict) -> list[str]:
    precision, device = training["precision"], training["device"]
    if device == "cpu":
        return {"fp32": ["--cpu"], "bf16": ["--cpu", "--cpu-bf16-autocast"]}[precision]
    return {"fp32": [], "bf16": ["--bf16"], "fp16": ["--fp16"]}[precision]


def train_arguments(config: StudyConfig, run: Run, work: Path | str) -> list[str]:
    """The arguments after ``fairseq-train``: the data directory, the task, the shared model and protocol, the
    precision, the system's own options; ``--num-workers 0`` on a CPU (fairseq's loader workers each hold ~1 GB
    and stay for the run)."""
    model, training = config["model"], config["training"]
    work = str(work)
    args = [f"{work}/data-bin/{run.data}", "--user-dir", "fairseq_syntax", "--task", "syntax_translation",
            "--arch", run.system.arch, "--save-dir", f"{work}/ckpt/ckpt-{run.name}", "--no-epoch-checkpoints",
            "--log-format", "simple", "--log-interval", "50",
            "--encoder-layers", str(model["encoder_layers"]), "--decoder-layers", str(model["decoder_layers"]),
            "--encoder-embed-dim", str(model["embed_dim"]), "--decoder-embed-dim", str(model["embed_dim"]),
            "--encoder-ffn-embed-dim", str(model["ffn_dim"]), "--decoder-ffn-embed-dim", str(model["ffn_dim"]),
            "--encoder-attention-heads", str(model["heads"]), "--decoder-attention-heads", str(model["heads"])]
    if model["share_all_embeddings"]:
        args.append("--share-all-embeddings")
    args += ["--dropout", str(model["dropout"]), "--weight-decay", str(training["weight_decay"]),
             "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", str(training["label_smoothing"]),
             "--optimizer", training["optimizer"]]
    if training["optimizer"] == "adam":
        args += ["--adam-betas", training["adam_betas"]]
    args += ["--lr", _number_text(training["lr"]), "--lr-scheduler", training["lr_scheduler"],
             "--warmup-updates", str(training["warmup_updates"]), "--clip-norm", str(training["clip_norm"]),
             "--seed", str(run.seed), "--max-source-positions", str(model["max_source_positions"]),
             "--batch-size", str(training["batch_sentences"]), "--max-epoch", str(training["max_epoch"]),
             "--patience", str(training["patience"]), "--best-checkpoint-metric", "nll_loss",
             *_precision_args(training), *training["extra_args"]]
    # the system's own options, as the recipes pass a spec's EXTRA (``--option=value``)
    model_args = run.system.model_args
    args += [f"{key}={value}" for key, value in zip(model_args[::2], model_args[1::2])]
    if training["device"] == "cpu":
        args += _in_process_loading(args)
    return args


def _in_process_loading(args: list[str]) -> list[str]:
    """``--num-workers 0`` unless ``args`` choose their loader workers: on a CPU a worker buys nothing."""
    return [] if any(arg.startswith("--num-workers") for arg in args) else ["--num-workers", "0"]


def decode_arguments(config: StudyConfig, run: Run, work: Path | str) -> list[str]:
    """The arguments after ``fairseq-generate``: the best checkpoint on the test split, BPE removed, beam search;
    on a CPU its batches loaded in the decoding process (``--num-workers 0``): a loader worker buys nothing there,
    and one that cannot start (its socket's path under a long TMPDIR is too long for AF_UNIX) left fairseq-generate
    waiting for it for good."""
    decoding = config["decoding"]
    args = [f"{work}/data-bin/{run.data}", "--user-dir", "fairseq_syntax", "--task", "syntax_translation",
            "--path", f"{work}/ckpt/ckpt-{run.name}/checkpoint_best.pt", "--gen-subset", "test",
            "--post-process", "subword_nmt", "--beam", str(decoding["beam"]), "--batch-size",
            str(decoding["batch_size"]), *decoding["extra_args"]]
    if config["training"]["device"] == "cpu":
        args += ["--cpu", *_in_process_loading(args)]
    return args


def command_text(program: str, args: list[str]) -> str:
    """A command as its record holds it: the words joined by spaces, as the recipes wrote them."""
    return " ".join([program, *args])


def _number_text(value: float) -> str:
    """A learning rate as a user writes it (1e-3, not 0.001): the recipes' records hold it so."""
    text = repr(float(value))
    mantissa, _, exponent = f"{value:e}".partition("e")
    short = f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
    return short if len(short) < len(text) else text


def _options(command: str) -> dict[str, list[str]]:
    """A fairseq command's options, each with its values (``--x=v`` as ``--x v``); the program and the data
    directory under ``PROGRAM``."""
    words = command.replace("(0.9, 0.98)", "(0.9,0.98)").split()
    options: dict[str, list[str]] = {}
    current = "PROGRAM"
    for word in words:
        if word.startswith("--"):
            current, _, value = word.partition("=")
            options.setdefault(current, [])
            if value:
                options[current].append(value)
        else:
            options.setdefault(current, []).append(word)
    return options


def _canonical_number(value: str) -> str:
    try:
        return repr(float(value))
    except ValueError:
        return value


def training_differences(recorded: str, expected: str) -> list[str]:
    """How a recorded training command differs from the one the file gives (options that may differ between runs
    of one setting left out; the data directory compared by its name, the control seed's ``-sK`` left out, since a
    control run of an early study read the seed-1 structures and its record says which it read)."""
    mine, theirs = _options(recorded), _options(expected)
    for options in (mine, theirs):
        for key in RUN_SPECIFIC_OPTIONS:
            options.pop(key, None)
        program = options.pop("PROGRAM", [])
        options["DATA"] = [_data_name(program[1])] if len(program) > 1 else []
    differences = []
    # values that are numbers compare as numbers (1e-3 and 0.001 alike)
    canonical = lambda values: None if values is None else [_canonical_number(v) for v in values]  # noqa: E731
    for key in sorted(set(mine) | set(theirs)):
        if canonical(mine.get(key)) != canonical(theirs.get(key)):
            shown = lambda values: "absent" if values is None else (" ".join(values) or "set")  # noqa: E731
            differences.append(f"{key}: {shown(mine.get(key))} (file: {shown(theirs.get(key))})")
    return differences


def _data_name(path: str) -> str:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    base, dot, control = name.rpartition(".")
    return f"{base}.{control.split('-s')[0]}" if dot else name


def same_training(recorded: str, expected: str) -> bool:
    return not training_differences(recorded, expected)


def settings_digest(config: StudyConfig) -> str:
    """SHA-256 of the settings that change a run (:data:`TRAINING_SECTIONS` less :data:`NOT_TRAINING_KEYS`)."""
    settings = {section: {key: value for key, value in config[section].items()
                          if (section, key) not in NOT_TRAINING_KEYS} for section in TRAINING_SECTIONS}
    return "sha256:" + hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def data_fingerprint(directory: Path) -> str:
    """SHA-256 over a data directory's binarized splits, side data and dictionaries (names and bytes)."""
    digest = hashlib.sha256()
    for path in sorted(directory.iterdir()):
        if path.suffix in (".bin", ".idx") or path.name.startswith("dict."):
            digest.update(path.name.encode() + b"\0")
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    return "sha256:" + digest.hexdigest()


def study_identity(config: StudyConfig, data: str | None = None, work: Path | None = None) -> dict:
    """What a record of this study carries: the study's name, its settings' digest and, for a run, the fingerprint
    of the data directory it read."""
    identity = {"name": config.name, "settings": settings_digest(config)}
    if data is not None and work is not None:
        identity["data"] = {data: data_fingerprint(work / "data-bin" / data)}
    return identity


def identity_differences(recorded: dict | None, config: StudyConfig) -> list[str]:
    """How a record's study identity differs from the file's (empty: the same study and settings)."""
    if not recorded:
        return []
    found = []
    if recorded.get("name") != config.name:
        found.append(f"study {recorded.get('name')!r}, not {config.name!r}")
    if recorded.get("settings") != settings_digest(config):
        found.append("settings digest differs (a setting of [corpus], [parses], [bpe], [model], [training] or "
                     "[decoding] changed since it ran)")
    return found


def iter_quoted(command: str) -> Iterator[str]:
    """A command's words for a shell (the record's text is space-joined; the Adam betas need quotes)."""
    yield from shlex.split(command.replace("(0.9, 0.98)", "'(0.9, 0.98)'"))
