"""A study's grid: every run (a registry system, or one on control structures, with one training seed), the fairseq
commands each is trained and decoded with (argv lists), and the study's identity.

A :class:`Run` is ``SYSTEM.seedK``: its data directory is the system's for that training seed (a control reads
``FORM.CONTROL-sK``), its checkpoints ``WORK/ckpt/ckpt-SYSTEM.seedK``, its record ``RUNS/SYSTEM.seedK.run.json``.
Each piece of a training command says what it comes from, so that a record holding only its command is compared with
the file by key (:mod:`~fairseq_syntax.study.record_checks`)."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from fairseq_syntax.core.method import System
from fairseq_syntax.study.config import NOT_TRAINING_KEYS, TRAINING_SECTIONS, StudyConfig, Training

#: options a training command may change when it resumes from its checkpoints: its budget and who loads batches
RESUMABLE_OPTIONS = ("--max-epoch", "--max-update", "--num-workers")

#: what a piece of a training command comes from where it is no key of the study file (:func:`train_pieces`)
DATA_DIRECTORY = "the run's data directory"
THE_RUN = "the run's name and seed"
THE_SYSTEM = "the system's own options"
FIXED = "the study's fixed options"


@dataclass(frozen=True)
class Run:
    """One run of the grid: ``system`` (a registry system, possibly on a control) trained with ``seed``."""
    system: System
    seed: int

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
            runs += [Run(control.for_training_seed(seed), seed) for seed in range(1, seeds + 1)]
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


def _precision_args(training: Training) -> list[str]:
    precision, device = training.precision, training.device
    if device == "cpu":
        return {"fp32": ["--cpu"], "bf16": ["--cpu", "--cpu-bf16-autocast"]}[precision]
    return {"fp32": [], "bf16": ["--bf16"], "fp16": ["--fp16"]}[precision]


def train_pieces(config: StudyConfig, run: Run, work: Path | str) -> list[tuple[str, list[str]]]:
    """The arguments after ``fairseq-train`` in pieces, each with what it comes from: a key of the study file
    (``model.embed_dim``), or :data:`DATA_DIRECTORY`, :data:`THE_RUN`, :data:`THE_SYSTEM`, :data:`FIXED`;
    ``--num-workers 0`` on a CPU."""
    model, training = config.model, config.training
    pieces = [(DATA_DIRECTORY, [f"{work}/data-bin/{run.data}"]),
              (FIXED, ["--user-dir", "fairseq_syntax", "--task", "syntax_translation"]),
              (THE_SYSTEM, ["--arch", run.system.arch]),
              (THE_RUN, ["--save-dir", f"{work}/ckpt/ckpt-{run.name}"]),
              (FIXED, ["--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "50"]),
              ("model.encoder_layers", ["--encoder-layers", str(model.encoder_layers)]),
              ("model.decoder_layers", ["--decoder-layers", str(model.decoder_layers)]),
              ("model.embed_dim", ["--encoder-embed-dim", str(model.embed_dim),
                                   "--decoder-embed-dim", str(model.embed_dim)]),
              ("model.ffn_dim", ["--encoder-ffn-embed-dim", str(model.ffn_dim),
                                 "--decoder-ffn-embed-dim", str(model.ffn_dim)]),
              ("model.heads", ["--encoder-attention-heads", str(model.heads),
                               "--decoder-attention-heads", str(model.heads)]),
              ("model.share_all_embeddings", ["--share-all-embeddings"] if model.share_all_embeddings else []),
              ("model.dropout", ["--dropout", str(model.dropout)]),
              ("training.weight_decay", ["--weight-decay", str(training.weight_decay)]),
              (FIXED, ["--criterion", "label_smoothed_cross_entropy"]),
              ("training.label_smoothing", ["--label-smoothing", str(training.label_smoothing)]),
              ("training.optimizer", ["--optimizer", training.optimizer]),
              ("training.adam_betas", ["--adam-betas", training.adam_betas] if training.optimizer == "adam"
               else []),
              ("training.lr", ["--lr", _number_text(training.lr)]),
              ("training.lr_scheduler", ["--lr-scheduler", training.lr_scheduler]),
              ("training.warmup_updates", ["--warmup-updates", str(training.warmup_updates)]),
              ("training.clip_norm", ["--clip-norm", str(training.clip_norm)]),
              (THE_RUN, ["--seed", str(run.seed)]),
              ("model.max_source_positions", ["--max-source-positions", str(model.max_source_positions)]),
              ("training.batch_sentences", ["--batch-size", str(training.batch_sentences)]),
              ("training.max_epoch", ["--max-epoch", str(training.max_epoch)]),
              ("training.patience", ["--patience", str(training.patience)]),
              (FIXED, ["--best-checkpoint-metric", "nll_loss"]),
              ("training.precision", _precision_args(training)),
              ("training.extra_args", list(training.extra_args)),
              # the system's own options, as the recipes pass a spec's EXTRA (``--option=value``)
              (THE_SYSTEM, [f"{key}={value}" for key, value in zip(run.system.model_args[::2],
                                                                    run.system.model_args[1::2])])]
    if training.device == "cpu":
        pieces.append(("training.device", _in_process_loading([word for _, words in pieces for word in words])))
    return pieces


def train_arguments(config: StudyConfig, run: Run, work: Path | str) -> list[str]:
    """The arguments after ``fairseq-train`` (:func:`train_pieces`, one list)."""
    return [word for _, words in train_pieces(config, run, work) for word in words]


def _in_process_loading(args: list[str]) -> list[str]:
    """``--num-workers 0`` unless ``args`` choose their loader workers: on a CPU a worker buys nothing."""
    return [] if any(arg.startswith("--num-workers") for arg in args) else ["--num-workers", "0"]


def decode_arguments(config: StudyConfig, run: Run, work: Path | str) -> list[str]:
    """The arguments after ``fairseq-generate``: the best checkpoint on the test split, BPE removed, beam search;
    ``--num-workers 0`` on a CPU (a loader worker whose AF_UNIX socket path is too long hangs generate)."""
    decoding = config.decoding
    args = [f"{work}/data-bin/{run.data}", "--user-dir", "fairseq_syntax", "--task", "syntax_translation",
            "--path", f"{work}/ckpt/ckpt-{run.name}/checkpoint_best.pt", "--gen-subset", "test",
            "--post-process", "subword_nmt", "--beam", str(decoding.beam), "--batch-size",
            str(decoding.batch_size), *decoding.extra_args]
    if config.training.device == "cpu":
        args += ["--cpu", *_in_process_loading(args)]
    return args


def _number_text(value: float) -> str:
    """A learning rate as a user writes it (1e-3, not 0.001): the recipes' records hold it so."""
    text = repr(float(value))
    mantissa, _, exponent = f"{value:e}".partition("e")
    short = f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
    return short if len(short) < len(text) else text


def _training_settings(config: StudyConfig) -> dict[str, dict]:
    """The settings that change a run, by section: :data:`TRAINING_SECTIONS` less :data:`NOT_TRAINING_KEYS`."""
    return {section: {key: value for key, value in config[section].items() if (section, key) not in NOT_TRAINING_KEYS}
            for section in TRAINING_SECTIONS}


def study_settings(config: StudyConfig) -> dict[str, object]:
    """The settings that change a run by their keys (``training.lr``), as a record's JSON holds them."""
    return json.loads(json.dumps({f"{section}.{key}": value for section, keys in _training_settings(config).items()
                                  for key, value in keys.items()}))


def settings_digest(config: StudyConfig) -> str:
    """SHA-256 of :func:`_training_settings`: what a record without :func:`study_settings` holds instead."""
    return "sha256:" + hashlib.sha256(json.dumps(_training_settings(config), sort_keys=True).encode()).hexdigest()


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
    """What a record of this study carries: name, settings by key (:func:`study_settings`) and, for a run, the
    fingerprint of its data directory."""
    identity = {"name": config.name, "settings": study_settings(config)}
    if data is not None and work is not None:
        identity["data"] = {data: data_fingerprint(work / "data-bin" / data)}
    return identity
