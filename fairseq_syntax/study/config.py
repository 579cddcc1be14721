"""A study's configuration: one TOML file that says everything a controlled study of source-side syntax needs,
validated before anything runs.

Each section is a frozen dataclass (:data:`SECTIONS`) whose fields are its keys, each with its default, one line of
help and its check (:func:`key`): from them come :func:`load_study`'s problems (a line each naming file and key, raised
together in a :class:`ConfigError`), the ``init`` :func:`template` and docs/study.md's :func:`key_tables`. Paths are
relative to the file's folder; ``study.base`` names a file whose keys (and ``[[systems]]``) this one takes where it
sets none."""
from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairseq_syntax.core.control_kinds import CONTROLS


class ConfigError(ValueError):
    """Every problem of a study file, one line each (``problems``)."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def _integer(minimum: int) -> Callable[[Any], str | None]:
    def check(value):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            return f"must be an integer >= {minimum}, not {value!r}"
        return None
    return check


def _number(minimum: float, maximum: float = math.inf, open_low: bool = False) -> Callable[[Any], str | None]:
    def check(value):
        low_ok = lambda v: v > minimum if open_low else v >= minimum  # noqa: E731
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (low_ok(value) and value <= maximum):
            bounds = f"{'>' if open_low else '>='} {minimum}" + (f" and <= {maximum}" if maximum < math.inf else "")
            return f"must be a number {bounds}, not {value!r}"
        return None
    return check


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    def check(value):
        return None if value in choices else f"must be one of {', '.join(choices)}, not {value!r}"
    return check


def _strings(value) -> str | None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return f"must be a list of strings, not {value!r}"
    return None


def _text(value) -> str | None:
    return None if isinstance(value, str) else f"must be a string, not {value!r}"


def _flag(value) -> str | None:
    return None if isinstance(value, bool) else f"must be true or false, not {value!r}"


def _positive_list(value) -> str | None:
    if not isinstance(value, list) or any(_integer(1)(v) for v in value):
        return f"must be a list of positive integers, not {value!r}"
    return None


def _sizes_list(value: list) -> str | None:
    if not value or _positive_list(value):
        return f"must be a list of positive integers (training pairs), not {value!r}"
    twice = sorted({v for v in value if value.count(v) > 1})
    return f"lists {', '.join(map(str, twice))} twice" if twice else None


def _nonempty(value) -> str | None:
    return _text(value) or (None if value.strip() else "must not be empty")


def key(default: Any, doc: str, check: Callable[[Any], str | None]) -> Any:
    """A key of a section (a field of its dataclass): its default (None: required), its line of help and its check
    (a problem, or None), as the module docstring says."""
    metadata = {"doc": doc, "check": check}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def default_of(key_field: dataclasses.Field) -> Any:
    """A key's default (None: required)."""
    return key_field.default_factory() if key_field.default is dataclasses.MISSING else key_field.default


class Section:
    """A section of the study file (module docstring), its docstring its help; it reads as a mapping too
    (``section["lr"]``, ``dict(section)``), as records store it."""

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def keys(self) -> list[str]:
        return [key_field.name for key_field in dataclasses.fields(self)]

    def items(self) -> list[tuple[str, Any]]:
        return [(name, getattr(self, name)) for name in self.keys()]

    @classmethod
    def doc(cls) -> str:
        return " ".join(cls.__doc__.split())


def _extra(value) -> str | None:
    if isinstance(value, dict) and all(isinstance(v, (str, int)) and k and not k.startswith("-")
                                       for k, v in value.items()):
        return None
    return f"must be a table of sbatch parameters (strings or integers) without their '--', not {value!r}"


@dataclass(frozen=True)
class Study(Section):
    """What the study is called and where its files go (paths relative to this file)."""
    base: str = key("", "another study file whose keys this one takes where it does not set them (beside it)", _text)
    name: str = key(None, "the study's name: its run records' dataset and its table's title", _nonempty)
    work: str = key("work", "folder of the prepared data and the checkpoints (large; not committed)", _nonempty)
    runs: str = key("runs", "folder of the run records, kept training logs and decodes (small; commit it), inside the "
                    "study's project (the git checkout that holds this file, else its folder): records name their "
                    "files relative to it", _nonempty)
    report: str = key("report", "folder of RESULTS.md, RESULTS.json and seeds.png", _nonempty)


@dataclass(frozen=True)
class Corpus(Section):
    """The parallel text: STEM.LANG or STEM.LANG.gz files in one folder."""
    raw: str = key(None, "folder of the parallel text files", _nonempty)
    source: str = key("en", "source language code (the side that is parsed)", _nonempty)
    target: str = key("de", "target language code", _nonempty)
    text: str = key("raw", "raw: untokenized (tokenized here with sacremoses); tokenized: Moses-tokenized, escaped",
                    _one_of("raw", "tokenized"))
    train: str = key("train", "file stem of the training split", _nonempty)
    valid: str = key("valid", "file stem of the validation split (model selection, early stopping)", _nonempty)
    test: str = key("test", "file stem of the test split (scored)", _nonempty)
    subset: int | list[int] = key(
        0, "training pairs drawn at random (0: all); a list ([1000, 5000]) makes a study over sizes, each subset "
        "inside the larger ([sizes.N])",
        lambda value: _sizes_list(value) if isinstance(value, list) else _integer(0)(value))
    subset_seed: int = key(1, "the seed of that draw", _integer(0))
    max_train_words: int = key(0, "leave out training pairs longer than this many words on either side (0: keep all;"
                               " counted and listed)", _integer(0))
    reference: str = key("", "the raw test reference scored against (default: RAW/TEST.TARGET[.gz])", _text)


@dataclass(frozen=True)
class Parses(Section):
    """The source side's parses: a parse archive, or a parser per kind (a pretrained name or a path)."""
    archive: str = key("", "a parse archive folder (MANIFEST.json; e.g. examples/multi30k/parses): no parser runs",
                       _text)
    constituency: str = key("", "constituency parser: a pretrained name (benepar_en3, crf-con-en, ...) or a path",
                            _text)
    constituency_backend: str = key("crf-con", "benepar, crf-con or stanza", _one_of("benepar", "crf-con", "stanza"))
    tagger: str = key("", "POS tagger for crf-con's preterminals (a path; empty: none)", _text)
    dependency: str = key("", "dependency parser: a pretrained name (biaffine-dep-en, ...) or a path", _text)
    dependency_backend: str = key("biaffine", "biaffine or stanza", _one_of("biaffine", "stanza"))
    preterminals: str = key("auto", "POS nodes in the tree input forms: auto, keep, split or drop",
                            _one_of("auto", "keep", "split", "drop"))
    workers: int = key(1, "parser processes, each on its own core", _integer(1))


@dataclass(frozen=True)
class Bpe(Section):
    """Joint BPE over both sides of the training text (subword-nmt)."""
    merges: int = key(10000, "BPE merges learned", _integer(1))


@dataclass(frozen=True)
class Model(Section):
    """The Transformer every system shares (fairseq's transformer options)."""
    encoder_layers: int = key(3, "encoder layers", _integer(1))
    decoder_layers: int = key(3, "decoder layers", _integer(1))
    embed_dim: int = key(256, "model width d (encoder and decoder)", _integer(1))
    ffn_dim: int = key(1024, "feed-forward width", _integer(1))
    heads: int = key(4, "attention heads (encoder and decoder)", _integer(1))
    dropout: float = key(0.3, "dropout", _number(0.0, 1.0))
    share_all_embeddings: bool = key(True, "one embedding table for source, target and output (joint BPE)", _flag)
    max_source_positions: int = key(1024, "the longest source, in tokens of the longest input form", _integer(1))


@dataclass(frozen=True)
class Training(Section):
    """One protocol for every system: the same sentences per update, trained until validation stops improving."""
    batch_sentences: int = key(64, "sentences per update, whatever the input form (--batch-size)", _integer(1))
    optimizer: str = key("adam", "fairseq optimizer", _nonempty)
    adam_betas: str = key("(0.9, 0.98)", "Adam's betas (with optimizer adam)", _text)
    lr: float = key(1e-3, "peak learning rate", _number(0.0, open_low=True))
    lr_scheduler: str = key("inverse_sqrt", "fairseq learning-rate scheduler", _nonempty)
    warmup_updates: int = key(1000, "warm-up updates", _integer(0))
    weight_decay: float = key(0.0001, "weight decay", _number(0.0))
    clip_norm: float = key(1.0, "gradient clipping norm", _number(0.0))
    label_smoothing: float = key(0.1, "label smoothing of the cross-entropy", _number(0.0, 1.0))
    patience: int = key(5, "stop once validation nll_loss has not improved for this many epochs", _integer(1))
    max_epoch: int = key(100, "epoch cap (a cap only: patience stops training)", _integer(1))
    precision: str = key("fp32", "fp32, bf16 (--bf16 on a GPU, --cpu-bf16-autocast on a CPU) or fp16 (GPU only)",
                         _one_of("fp32", "bf16", "fp16"))
    device: str = key("cpu", "cpu or cuda (one GPU a run)", _one_of("cpu", "cuda"))
    threads: int = key(1, "CPU threads per run (OMP_NUM_THREADS; on a CPU the run's cores)", _integer(1))
    extra_args: list[str] = key([], "more fairseq-train arguments for every system, e.g. [\"--update-freq\", \"2\"]",
                                _strings)


@dataclass(frozen=True)
class Decoding(Section):
    """Decoding the test split with the checkpoint of the best validation nll_loss."""
    beam: int = key(5, "beam size", _integer(1))
    batch_size: int = key(128, "sentences per decoding batch", _integer(1))
    extra_args: list[str] = key([], "more fairseq-generate arguments", _strings)


@dataclass(frozen=True)
class Seeds(Section):
    """Training seeds: seeds 1..N for each system unless the system says otherwise."""
    count: int = key(3, "seeds per system (N: seeds 1..N)", _integer(1))


@dataclass(frozen=True)
class Comparisons(Section):
    """The comparisons: every system against the baseline, every control against its system."""
    baseline: str = key("sequence", "the system every other is tested against (one of [[systems]])", _nonempty)
    bootstrap_rounds: int = key(10000, "rounds of the seed-aware paired bootstrap over sentences and seeds",
                                _integer(100))
    run_bootstrap_rounds: int = key(1000, "rounds of each run's paired bootstrap against the baseline's run of its "
                                    "seed", _integer(100))
    alpha: float = key(0.05, "significance level of the verdict rule", _number(0.0, 1.0, open_low=True))
    by_length: list[int] = key([10, 15, 20], "source-length bins of each run's scores by length (empty: none)",
                               _positive_list)


@dataclass(frozen=True)
class Executor(Section):
    """Where the runs go: this machine (local) or a Slurm cluster (slurm, through submitit)."""
    kind: str = key("local", "local or slurm (the --executor option overrides it)", _one_of("local", "slurm"))
    jobs: int = key(1, "local: runs at once, each its own process and cores (--jobs overrides)", _integer(1))


@dataclass(frozen=True)
class Slurm(Section):
    """Slurm jobs (executor slurm): one job array a call of run, one job a run."""
    partition: str = key("", "the partition (sbatch --partition; empty: the cluster's default)", _text)
    cpus_per_job: int = key(1, "CPUs per job (--cpus-per-task; give training.threads the same)", _integer(1))
    gpus_per_job: int = key(0, "GPUs per job, with training.device cuda (--gpus-per-node; 0: none)", _integer(0))
    mem_gb: float = key(8.0, "memory per job, GB (--mem)", _number(0.0, open_low=True))
    time_min: int = key(240, "time limit per job, minutes (--time; a run that times out resumes on the next "
                        "run call)", _integer(1))
    array_parallelism: int = key(16, "jobs of the array running at once (the P of --array=0-N%P)", _integer(1))
    extra: dict[str, str | int] = key({}, "more sbatch parameters, e.g. {account = \"nlp\", qos = \"normal\"}",
                                      _extra)


@dataclass(frozen=True)
class SystemKeys(Section):
    """The systems: [[systems]] entries, one a system, each with these keys:"""
    name: str = key(None, "a system of the method registry (python3 -m fairseq_syntax.methods systems --controls)",
                    _nonempty)
    controls: list[str] = key([], "control kinds it is also trained on (random, struct, left, right), each tested "
                              "against it", _strings)
    seeds: int = key(0, "its seeds 1..N (0: seeds.count)", _integer(0))
    control_seeds: dict[str, int] = key({}, "seeds of each control, e.g. {random = 5, struct = 3} (default: the "
                                        "system's)", lambda value: None if isinstance(value, dict) and not any(
                                            map(_integer(1), value.values()))
                                        else f"must be a table of integers >= 1, not {value!r}")


#: every section of a study file but [[systems]] and [sizes.N], in the template's order
SECTIONS: dict[str, type[Section]] = {
    "study": Study, "corpus": Corpus, "parses": Parses, "bpe": Bpe, "model": Model, "training": Training,
    "decoding": Decoding, "seeds": Seeds, "test": Comparisons, "executor": Executor, "slurm": Slurm}

#: the sections whose settings decide what a run trains on and how it is trained and decoded: the study's identity
#: hashes them (not the paths, the executor or the test, which change no run)
TRAINING_SECTIONS = ("corpus", "parses", "bpe", "model", "training", "decoding")
#: keys of those sections that change no run's result: where files are, how many cores parse
NOT_TRAINING_KEYS = {("corpus", "raw"), ("corpus", "reference"), ("parses", "workers"), ("training", "threads")}


@dataclass(frozen=True)
class SystemEntry:
    """One ``[[systems]]`` entry, resolved: its seeds and each control's seeds."""
    name: str
    seeds: int
    controls: dict[str, int] = field(default_factory=dict)  # control kind -> its seeds

    def control_name(self, kind: str) -> str:
        """The registry's name of this system on control structures of ``kind``."""
        return f"{self.name}_{kind}"


#: the sections a size of ``[sizes.N]`` may set or sweep: the protocol, never the data, the parses or the decoding
SIZE_SECTIONS = ("bpe", "model", "training")


@dataclass(frozen=True)
class SizeEntry:
    """One ``[sizes.N]`` table: what changes at N training pairs (``settings``: section -> key -> value), the
    protocol sweep (section -> key -> candidate values), the systems given more seeds at this size (``systems``:
    name -> the file's entry with its seeds and control seeds raised) or the study file whose runs are that size's."""
    pairs: int
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    sweep: dict[str, dict[str, list]] = field(default_factory=dict)
    study_file: str = ""
    systems: dict[str, SystemEntry] = field(default_factory=dict)

    def values(self, section: str, key: str, default: Any) -> list:
        """The values ``section.key`` takes at this size: its sweep's candidates, else its setting, else ``default``."""
        return self.sweep.get(section, {}).get(key, [self.settings.get(section, {}).get(key, default)])


@dataclass(frozen=True)
class StudyConfig:
    """A validated study file: a field a section of :data:`SECTIONS` (``config.training.lr``; ``config["training"]``
    by name), the systems in the file's order, the file; ``sizes``: its ``[sizes.N]`` tables, by N,
    where ``corpus.subset`` lists sizes; ``point``: for one size of such a study (:mod:`fairseq_syntax.study.sizes`),
    its label (``n1000``, ``n1000/sweep/merges2000-dropout0.3``)."""
    path: Path
    systems: tuple[SystemEntry, ...]
    study: Study
    corpus: Corpus
    parses: Parses
    bpe: Bpe
    model: Model
    training: Training
    decoding: Decoding
    seeds: Seeds
    test: Comparisons
    executor: Executor
    slurm: Slurm
    sizes: dict[int, SizeEntry] = field(default_factory=dict)
    point: str = ""
    #: the file each key was read from (``(section, key)``), where a study's keys come from several (``study.base``)
    origins: dict[tuple[str, str], str] = field(default_factory=dict, compare=False, repr=False)

    def key_file(self, section: str, key: str) -> str:
        """The file ``section.key`` was read from (a base's, or this file's)."""
        return self.origins.get((section, key), str(self.path))

    @property
    def size_list(self) -> list[int]:
        """The training-set sizes of a study over sizes, ascending (empty for a study of one training set)."""
        return sorted(self.corpus.subset) if isinstance(self.corpus.subset, list) else []

    @property
    def sections(self) -> dict[str, Section]:
        return {section: getattr(self, section) for section in SECTIONS}

    def __getitem__(self, section: str) -> Section:
        return self.sections[section]

    def folder(self, key: str) -> Path:
        """``study.work`` / ``study.runs`` / ``study.report`` as a path."""
        return self.resolve(self.study[key])

    def resolve(self, value: str) -> Path:
        """A path of the file, relative to its folder (``~`` expanded)."""
        path = Path(os.path.expanduser(value))
        return path if path.is_absolute() else (self.path.parent / path)

    @property
    def name(self) -> str:
        return self.study.name

    @property
    def baseline(self) -> str:
        return self.test.baseline

    def with_changes(self, section: str, **values) -> StudyConfig:
        """The same study with some keys of one section changed (the command line's --jobs, --executor)."""
        return dataclasses.replace(self, **{section: dataclasses.replace(self[section], **values)})


def template() -> str:
    """The file ``fairseq-syntax-study init`` prints: every key with its default and one comment line each, the
    required ones commented with what to put there, and two example systems of the method registry."""
    lines = ["# A fairseq-syntax study: does source-side syntax help on this corpus?",
             "# Every key with its default; fairseq-syntax-study plan STUDY.toml checks the file before anything runs.",
             ""]
    for section, keys in SECTIONS.items():
        lines += [f"# {keys.doc()}", f"[{section}]"]
        for key in dataclasses.fields(keys):
            default, doc = default_of(key), key.metadata["doc"]
            lines.append(f"{key.name} = \"\"  # REQUIRED: {doc}" if default is None
                         else f"{key.name} = {_toml_value(default)}  # {doc}")
        lines.append("")
    lines += [f"# {SystemKeys.doc()}"]
    lines += [f"#   {key.name}: {key.metadata['doc']}" for key in dataclasses.fields(SystemKeys)]
    from fairseq_syntax.methods import control_pairs  # the methods layer, below the study's

    system, kind = next(iter(control_pairs("translation").values()))  # the registry's first system with a control
    lines += ["[[systems]]", f"name = \"{Comparisons.baseline}\"", "",
              "[[systems]]", f"name = \"{system}\"", f"controls = [\"{kind}\"]", "",
              "# A study over training-set sizes: corpus.subset = [1000, 5000], and a [sizes.N] table a size, with",
              f"# keys of [{'], ['.join(SIZE_SECTIONS)}] for that size, sweep.SECTION.KEY = [values] (every "
              "combination is a",
              "# run of the baseline, seed 1; the lowest validation NLL per sentence is the size's protocol),",
              "# systems.NAME = {seeds = 5} (more seeds at that size, its controls' too), or",
              "# study_file = \"other.toml\" (a study already run at that size, read as it is):",
              "# [sizes.1000]", "# training.warmup_updates = 100", "# sweep.bpe.merges = [1000, 2000, 4000]", ""]
    return "\n".join(lines)


#: the lines around docs/study.md's key tables (:func:`key_tables`)
KEY_TABLES = ("<!-- key tables: generated by `python -m fairseq_syntax.study.config` from the sections of "
              "fairseq_syntax/study/config.py; tests/study/test_config.py checks it -->",
              "<!-- end of the key tables -->")


def key_tables() -> str:
    """docs/study.md's tables of the keys, between the lines :data:`KEY_TABLES`: a table a section, each key with
    its default and its help, from the sections' fields as the template."""
    lines = [KEY_TABLES[0]]
    for section, keys in {**SECTIONS, "[systems]": SystemKeys}.items():
        lines += ["", f"`[{section}]`: {keys.doc()}", "", "| key | default | what |", "|---|---|---|"]
        lines += [f"| `{key.name}` | {'required' if default_of(key) is None else f'`{_toml_value(default_of(key))}`'} "
                  f"| {key.metadata['doc']} |" for key in dataclasses.fields(keys)]
    return "\n".join([*lines, "", KEY_TABLES[1]])


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def load_study(path: str | os.PathLike) -> StudyConfig:
    """Read and validate a study file; a system or control the method registry does not know is a problem of the
    file."""
    path = Path(path)
    where = str(path)
    raw, origins = _read_with_base(path, [])
    problems: list[str] = []
    sections: dict[str, Section] = {}
    for unknown in sorted(set(raw) - set(SECTIONS) - {"systems", "sizes"}):
        problems.append(f"{where}: [{unknown}]: unknown section (known: {', '.join([*SECTIONS, 'sizes', 'systems'])})")
    for section, keys in SECTIONS.items():
        given = raw.get(section, {})
        if not isinstance(given, dict):
            problems.append(f"{where}: {section}: must be a table ([{section}]), not {given!r}")
            given = {}
        sections[section] = keys(**_read_keys(lambda key, section=section: origins.get((section, key), where),
                                              section, keys, given, problems))
    systems = _read_systems(origins.get(("systems", ""), where), raw.get("systems"), sections, problems)
    sizes = _read_sizes(lambda size: origins.get(("sizes", size), where), raw.get("sizes", {}), sections, systems,
                        problems)
    problems += _precision_problems(lambda key: origins.get(key, where), sections["training"], sizes)
    if problems:
        raise ConfigError(problems)
    return StudyConfig(path=path, systems=tuple(systems), sizes=sizes, origins=origins, **sections)


def _precision_problems(at: Callable[[tuple[str, str]], str], training: Training,
                        sizes: dict[int, SizeEntry]) -> list[str]:
    """fp16 (``--fp16``) with ``device = "cpu"``, in the file's training or a size's settings or sweep: every such
    run would fail at its start."""
    fix = "give bf16 (--cpu-bf16-autocast on a CPU) or fp32, or device = \"cuda\""
    problems = []
    on_cpu = training.precision == "fp16" and training.device == "cpu"
    if on_cpu:
        named, device_file = at(("training", "precision")), at(("training", "device"))
        problems.append(f"{named}: training.precision: fp16 trains on a GPU only, and training.device is \"cpu\""
                        f"{f' ({device_file})' if device_file != named else ''}: {fix}")
    for pairs, entry in sizes.items():
        if ("fp16" in entry.values("training", "precision", training.precision) and not on_cpu  # said above
                and "cpu" in entry.values("training", "device", training.device)):
            problems.append(f"{at(('sizes', str(pairs)))}: sizes.{pairs}: training.precision fp16 with "
                            f"training.device \"cpu\": fp16 trains on a GPU only; {fix}")
    return problems


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError([f"{path}: no such file"]) from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError([f"{path}: not a TOML file: {error}"]) from None


def _read_with_base(path: Path, named_by: list[Path]) -> tuple[dict, dict[tuple[str, str], str]]:
    """The file's tables over those of its ``study.base`` chain (each section's keys merged, the file's own winning;
    ``systems`` the file's own when it has any), and the file each key was read from (``(section, key)``;
    ``("systems", "")``). ``named_by``: the files that led here (naming one again is a circle)."""
    raw = _read_toml(path)
    own = {(section, key): str(path) for section, keys in raw.items() if isinstance(keys, dict) for key in keys}
    if "systems" in raw:
        own[("systems", "")] = str(path)
    study = raw.get("study")
    base = study.get("base", "") if isinstance(study, dict) else ""
    if not base:
        return raw, own
    where = named_by[0] if named_by else path
    if not isinstance(base, str):
        raise ConfigError([f"{path}: study.base: must be a file name (text), not {base!r}"])
    base_path = (path.parent / os.path.expanduser(base)).resolve()
    if base_path in {p.resolve() for p in (*named_by, path)}:
        raise ConfigError([f"{path}: study.base: {base} leads back to {where}: a circle of bases"])
    if not base_path.is_file():
        raise ConfigError([f"{path}: study.base: {base}: no such file (a base is named relative to the file)"])
    merged, origins = _read_with_base(base_path, [*named_by, path])
    origins.update(own)
    for section, keys in raw.items():
        if section == "systems":
            merged["systems"] = keys
        elif isinstance(keys, dict) and isinstance(merged.get(section), dict):
            merged[section] = {**merged[section], **keys}
        else:
            merged[section] = keys
    return merged, origins


def _read_keys(where: str | Callable[[str], str], section: str, keys: type[Section], given: dict,
               problems: list[str]) -> dict[str, Any]:
    """``section``'s values, defaults filled in; each problem named with its file (``where``, or ``where(key)``
    where a study's keys come from several files)."""
    def at(key: str) -> str:
        return where(key) if callable(where) else where

    known = {key.name: key for key in dataclasses.fields(keys)}
    for unknown in sorted(set(given) - set(known)):
        problems.append(f"{at(unknown)}: {section}.{unknown}: unknown key (known: {', '.join(sorted(known))})")
    values = {}
    for name, key in known.items():
        if name not in given:
            if default_of(key) is None:
                problems.append(f"{at(name)}: {section}.{name}: required ({key.metadata['doc']})")
            continue
        problem = key.metadata["check"](given[name])
        if problem:
            problems.append(f"{at(name)}: {section}.{name}: {problem}")
        values[name] = given[name]
    return values


def _read_sizes(where: Callable[[str], str], given, sections: dict, systems: list[SystemEntry],
                problems: list[str]) -> dict[int, SizeEntry]:
    """The ``[sizes.N]`` tables (:class:`SizeEntry`), each of a size ``corpus.subset`` lists; every value checked as
    its key is."""
    if not isinstance(given, dict):
        problems.append(f"{where('')}: sizes: must be tables [sizes.N], not {given!r}")
        return {}
    subset = sections["corpus"].subset
    listed = subset if isinstance(subset, list) else []
    keys_of = {section: {key.name: key.metadata["check"] for key in dataclasses.fields(SECTIONS[section])}
               for section in SIZE_SECTIONS}
    entries = {}
    for name, table in given.items():
        at = where(name)
        if not name.isdigit() or int(name) not in listed:
            problems.append(f"{at}: sizes.{name}: not one of corpus.subset's sizes ({listed or 'it lists none'})")
            continue
        if not isinstance(table, dict):
            problems.append(f"{at}: sizes.{name}: must be a table, not {table!r}")
            continue
        settings: dict[str, dict[str, Any]] = {}
        sweep: dict[str, dict[str, list]] = {}
        study_file = table.get("study_file", "")
        if not isinstance(study_file, str):
            problems.append(f"{at}: sizes.{name}.study_file: must be a file name, not {study_file!r}")
            study_file = ""
        raised: dict[str, SystemEntry] = {}
        for section, values in table.items():
            if section == "study_file":
                continue
            label = f"sizes.{name}.{section}"
            if section == "systems":
                raised = _raised_seeds(at, label, values, systems, problems)
                continue
            if section == "sweep":
                if not isinstance(values, dict) or not values:
                    problems.append(f"{at}: {label}: must hold keys with candidate lists "
                                    f"(sweep.bpe.merges = [1000, 2000]), not {values!r}")
                    continue
                for swept, candidates in values.items():
                    if swept not in keys_of or not isinstance(candidates, dict):
                        problems.append(f"{at}: {label}.{swept}: only keys of [{'], ['.join(SIZE_SECTIONS)}] are "
                                        "swept")
                        continue
                    for key, options in candidates.items():
                        where_key = f"{at}: {label}.{swept}.{key}"
                        if key not in keys_of[swept]:
                            problems.append(f"{where_key}: unknown key (known: {', '.join(sorted(keys_of[swept]))})")
                        elif not isinstance(options, list) or len(options) < 2:
                            problems.append(f"{where_key}: must list two or more candidates, not {options!r}")
                        elif len(set(map(repr, options))) < len(options):
                            problems.append(f"{where_key}: lists a candidate twice ({options!r})")
                        else:
                            problems += [f"{where_key}: a candidate {found}" for found in map(keys_of[swept][key],
                                                                                             options) if found]
                            sweep.setdefault(swept, {})[key] = list(options)
                continue
            if section not in keys_of or not isinstance(values, dict):
                problems.append(f"{at}: {label}: a size sets keys of [{'], ['.join(SIZE_SECTIONS)}], a sweep, "
                                "systems' seeds or a study_file only")
                continue
            settings[section] = _read_keys(at, label, SECTIONS[section], values, problems)
        both = {f"{section}.{key}" for section, keys in sweep.items() for key in keys
                if key in settings.get(section, {})}
        if both:
            problems.append(f"{at}: sizes.{name}: {', '.join(sorted(both))} both set and swept")
        if study_file and (settings or sweep or raised):
            problems.append(f"{at}: sizes.{name}: a study_file's runs have that study's protocol and seeds: no keys, "
                            "sweep or seeds beside it")
        entries[int(name)] = SizeEntry(pairs=int(name), settings=settings, sweep=sweep, study_file=study_file,
                                       systems=raised)
    return dict(sorted(entries.items()))


def _raised_seeds(at: str, label: str, given, systems: list[SystemEntry],
                  problems: list[str]) -> dict[str, SystemEntry]:
    """``[sizes.N]``'s ``systems.NAME = {seeds = 5, control_seeds = {random = 5}}``: more seeds for a system of the
    file (and for its controls) at this size, never fewer than the file gives it, so no run of the grid is dropped."""
    by_name = {entry.name: entry for entry in systems}
    if not isinstance(given, dict) or not given:
        problems.append(f"{at}: {label}: must name systems with their seeds "
                        f"(systems.udp = {{seeds = 5, control_seeds = {{random = 5}}}}), not {given!r}")
        return {}
    raised = {}
    for name, values in given.items():
        where = f"{at}: {label}.{name}"
        if name not in by_name:
            problems.append(f"{where}: not one of the study's systems ({', '.join(by_name) or 'none'})")
            continue
        if not isinstance(values, dict) or set(values) - {"seeds", "control_seeds"} or not values:
            problems.append(f"{where}: must set seeds and/or control_seeds "
                            f"({{seeds = 5, control_seeds = {{random = 5}}}}), not {values!r}")
            continue
        entry = by_name[name]
        checked = _read_keys(at, f"{label}.{name}", SystemKeys, {**values, "name": name}, problems)
        seeds = checked["seeds"] if isinstance(checked.get("seeds"), int) and checked["seeds"] else entry.seeds
        if seeds < entry.seeds:
            problems.append(f"{where}.seeds: {seeds} is fewer than the file's {entry.seeds}: a size only adds seeds")
            seeds = entry.seeds
        controls = dict(entry.controls)
        given_controls = checked.get("control_seeds") if isinstance(checked.get("control_seeds"), dict) else {}
        for kind in entry.controls:  # a control's seeds follow its system's, as in [[systems]]
            wanted = given_controls.get(kind, max(entry.controls[kind], seeds) if "seeds" in values
                                        else entry.controls[kind])
            if wanted < entry.controls[kind]:
                problems.append(f"{where}.control_seeds.{kind}: {wanted} is fewer than the file's "
                                f"{entry.controls[kind]}: a size only adds seeds")
                wanted = entry.controls[kind]
            controls[kind] = wanted
        for kind in sorted(set(given_controls) - set(entry.controls)):
            problems.append(f"{where}.control_seeds.{kind}: not one of its controls "
                            f"({', '.join(entry.controls) or 'none'})")
        raised[name] = SystemEntry(name=name, seeds=seeds, controls=controls)
    return raised


def _registry_systems() -> list[str]:
    from fairseq_syntax.methods import systems  # the methods layer, below the study's

    return [system.name for system in systems(task=None, controls=True)]


def _read_systems(where: str, given, sections: dict, problems: list[str]) -> list[SystemEntry]:
    if not isinstance(given, list) or not given:
        problems.append(f"{where}: systems: at least one [[systems]] entry is required")
        return []
    known = set(_registry_systems())
    default_seeds = sections["seeds"].count
    entries, seen = [], set()
    for index, entry in enumerate(given, 1):
        label = f"systems[{index}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: {label}: must be a table ([[systems]]), not {entry!r}")
            continue
        values = _read_keys(where, label, SystemKeys, entry, problems)
        name = values.get("name")
        if not isinstance(name, str) or not name.strip():
            continue
        label = f"systems[{index}] ({name})"
        if name not in known:
            problems.append(f"{where}: {label}.name: {name!r} is no system of the method registry "
                            "(python3 -m fairseq_syntax.methods systems --controls lists them)")
        if name in seen:
            problems.append(f"{where}: {label}.name: {name!r} is listed twice")
        seen.add(name)
        seeds = (values.get("seeds") if isinstance(values.get("seeds"), int) else 0) or default_seeds
        controls: dict[str, int] = {}
        kinds = values.get("controls") if isinstance(values.get("controls"), list) else []
        control_seeds = values.get("control_seeds") if isinstance(values.get("control_seeds"), dict) else {}
        for kind in kinds:
            if not isinstance(kind, str):
                continue
            if kind not in CONTROLS:
                problems.append(f"{where}: {label}.controls: {kind!r} is no control kind ({', '.join(CONTROLS)})")
                continue
            if f"{name}_{kind}" not in known and name in known:
                problems.append(f"{where}: {label}.controls: the registry describes no {kind!r} control of {name} "
                                f"({name}_{kind})")
                continue
            controls[kind] = control_seeds.get(kind, seeds)
        for kind in sorted(set(control_seeds) - set(kinds)):
            problems.append(f"{where}: {label}.control_seeds.{kind}: not one of its controls ({kinds or 'none'})")
        entries.append(SystemEntry(name=name, seeds=seeds, controls=controls))
    baseline = sections["test"].baseline
    if isinstance(baseline, str) and baseline and baseline not in seen:
        problems.append(f"{where}: test.baseline: {baseline!r} is not one of the study's systems "
                        f"({', '.join(entry.name for entry in entries)})")
    return entries


if __name__ == "__main__":
    print(key_tables())
