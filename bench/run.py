"""``python3 bench/run.py [--quick]``: training speed and memory of every syntax architecture of the method registry
as ratios to fairseq's ``transformer`` on the same batches in the same run, at several source lengths; the
throughput of ``fairseq-syntax-preprocess`` and side-data bytes per sentence; CPU speed options (bf16, threads,
batch size) against fp32. Writes ``RESULTS.md``, ``RESULTS.json`` (rows of ``arch, src_words, tokens_per_s_ratio,
peak_mem_ratio, repeats, ...``: :func:`report.write_rows`) and ``RESULTS.details.json.gz`` (every raw measurement) to
``--out`` (default: this folder); what is measured and how, as RESULTS.md states it: :func:`results_markdown`.
``--device cuda --out bench/cuda``: the same on a GPU (:data:`ON_CUDA`). The architectures: :func:`benchmark_archs`
and :data:`VARIANTS` (``--list``)."""
import argparse
import gzip
import json
import logging
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

os.environ.setdefault("TQDM_DISABLE", "1")  # before fairseq imports tqdm: no progress bars from preprocessing
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import recipe  # noqa: E402
import report  # noqa: E402
import synthetic  # noqa: E402


@dataclass(frozen=True)
class Form:
    """One data directory: an input form of ``fairseq-syntax-preprocess`` and its POS-node option."""

    form: str
    preterminals: str = "auto"

    @property
    def name(self) -> str:
        from fairseq_syntax.core.method import data_dir_name  # after TQDM_DISABLE is set

        return data_dir_name(self.form, self.preterminals)


@dataclass(frozen=True)
class Variant:
    """An architecture computed another way (``--archs ARCH:KEY``, row ``ARCH (LABEL)``): trains ``arch`` (without
    ``_tiny``) with ``model_options`` added."""

    key: str
    label: str
    arch: Optional[str] = None
    model_options: Tuple[str, ...] = ()


#: bench/'s own variants, by the architecture they apply to; each is benchmarked right after that architecture
NAIVE_HIER_ACCUM = Variant("dense", "dense, naive", arch="transformer_hier_accum_dense")
#: the mask bias as a matrix product (no scatter-add in its backward: bench/cuda/README.md)
ONE_HOT_MASK_BIAS = Variant("one_hot", "one-hot bias", model_options=("--mask-bias", "one_hot"))
VARIANTS: Dict[str, Tuple[Variant, ...]] = {"transformer_hier_accum": (NAIVE_HIER_ACCUM,),
                                            "transformer_syntax_mask": (ONE_HOT_MASK_BIAS,)}


def registry_archs(systems) -> Tuple["System", ...]:
    """One :class:`System` per :class:`fairseq_syntax.core.method.System`, then the :data:`VARIANTS` of its arch."""
    archs: List[System] = []
    for system in systems:
        arch = System(system.arch, Form(system.form, system.preterminals), arch_options=tuple(system.model_args),
                      dependencies="src_ldd" in system.side_inputs)
        if any(a.key == arch.key for a in archs):
            raise ValueError(f"two benchmarked systems train {arch.key}: the benchmark tells systems by arch")
        archs += [arch] + [replace(arch, variant=variant) for variant in VARIANTS.get(arch.arch, ())]
    return tuple(archs)


@lru_cache(maxsize=None)
def benchmark_archs() -> Tuple["System", ...]:
    """Every translation system of the registry that is neither baseline nor ablation, and the :data:`VARIANTS`."""
    from fairseq_syntax import methods

    return registry_archs(methods.systems(task="translation", baselines=False, ablations=False))


BASELINE = report.BASELINE
REFERENCE_FORM = Form(report.REFERENCE_FORM)  # the longest form: it sets the batches and is the context reference
CONTEXT_FORMS = (Form("sequence"),)  # the transformer on these is always reported against REFERENCE_FORM


# CPU speed options: name -> (spec overrides, "archs" | "reference": the systems tried on)
SPEED_THRESHOLD = 1.3  # an option is worth proposing from this speed-up on (if BLEU holds: bench/parity.py)
SPEED_OPTIONS = {
    "bf16_autocast": ({"precision": "bf16_autocast"}, "archs"),
    "bf16_weights": ({"precision": "bf16_weights"}, "archs"),
    "bf16_autocast_layers": ({"precision": "bf16_autocast_layers"}, "reference"),
    "threads_2": ({"threads": 2}, "reference"),
    "bf16_autocast_threads_2": ({"precision": "bf16_autocast", "threads": 2}, "reference"),
    "max_tokens_x2": ({"max_tokens_factor": 2}, "reference"),
}


#: --precision -> fairseq-train's flags (fp32 master weights; --fp16 with dynamic loss scaling)
PRECISION_FLAGS = {"fp32": [], "bf16": ["--bf16"], "fp16": ["--fp16"]}


@dataclass
class Settings:
    lengths: Tuple[int, ...] = (16, 32, 64)
    repeats: int = 3
    warmup: int = 1
    updates: int = 2  # timed updates per run
    max_tokens: int = 4096
    speed_length: Optional[int] = 32  # where the speed options are measured (None: not measured)
    speed_options: Tuple[str, ...] = tuple(SPEED_OPTIONS)
    preprocess_sentences: int = 2000  # corpus size for the preprocessing throughput (0: not measured)
    tiny: bool = False  # *_tiny archs and fairseq's transformer_tiny (for --quick)
    device: str = "cpu"  # or "cuda"
    model_size: str = "recipe"  # a key of recipe.MODEL_SIZES: the recipe's 3+3 x 256 or the papers' 6+6 x 512
    generate_batches: int = 1  # timed beam-search batches per fp32 run, after one untimed (0: decoding not measured)
    time_budget_min: float | None = None  # no measurement is started that would end after this (None: no limit)
    deadline: float | None = None  # nor one that would end after this Unix time (None: no limit)
    precision: str = "fp32"  # fairseq's own training precision for every system: fp32, bf16 (--bf16), fp16 (--fp16)

    @property
    def model(self) -> str:
        return "tiny" if self.tiny else self.model_size


#: what --device cuda changes: more warm-up and timed steps, no CPU-only measurements
ON_CUDA = dict(device="cuda", warmup=3, updates=20, speed_length=None, preprocess_sentences=0, generate_batches=3)
GENERATE_BEAM = 5  # fairseq-generate's default, and the recipes'
QUICK = Settings(lengths=(8,), repeats=1, warmup=1, updates=1, max_tokens=1024, speed_length=8,
                 speed_options=("bf16_autocast", "bf16_weights", "bf16_autocast_layers"), preprocess_sentences=0,
                 tiny=True)


# --- helpers


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def arch_name(name: str, settings: Settings) -> str:
    return f"{name}_tiny" if settings.tiny else name


def model_args(system: "System", settings: Settings) -> List[str]:
    """fairseq-train's options after DATA for ``system``: its arch, the recipe's sizes (not for *_tiny), the training
    options, then its own options (a system's ``--criterion`` replaces the recipe's)."""
    training = recipe.TRAINING if settings.device == "cpu" else [a for a in recipe.TRAINING if a != "--cpu"]
    return (["--arch", arch_name(system.trained_arch, settings)]
            + ([] if settings.tiny else recipe.MODEL_SIZES[settings.model_size] + recipe.REGULARISATION)
            + training + PRECISION_FLAGS[settings.precision] + list(system.model_options))


# --- data


def write_dictionary(path: str) -> None:
    """Every token any form can hold, count 1: one dictionary (about 10k) for every form and corpus size."""
    vocab = synthetic.vocabulary()
    tokens = set()
    for index, word in enumerate(vocab):
        tokens.update(synthetic.bpe_pieces(word, index))
        tokens.update(synthetic.bpe_pieces(word[::-1], index))
    tokens.update("(" + label for label in synthetic.PHRASE_LABELS + synthetic.POS_TAGS)
    with open(path, "w") as f:
        f.writelines(f"{token} 1\n" for token in sorted(tokens))


def preprocess(raw_prefix: str, form: Form, dest: str, dictionary: str, dependencies: bool) -> Dict[str, float]:
    """fairseq-syntax-preprocess (and the dependency side data) in this process; returns its CPU and wall seconds."""
    from fairseq_syntax.cli import preprocess as syntax_preprocess
    from fairseq_syntax.methods.ldd import preprocess as preprocess_dependencies

    shutil.rmtree(dest, ignore_errors=True)  # fairseq-preprocess will not overwrite a dictionary
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    syntax_preprocess.main(["-s", "en", "-t", "de", "--trainpref", raw_prefix, "--form", form.form,
                            "--preterminals", form.preterminals, "--destdir", dest, "--srcdict", dictionary,
                            "--joined-dictionary", "--workers", "1"])
    seconds = {"cpu_s": time.process_time() - cpu_start, "wall_s": time.perf_counter() - wall_start}
    if dependencies:
        preprocess_dependencies.main(["-s", "en", "-t", "de", "--trainpref", raw_prefix, "--destdir", dest,
                                      "--labels", "universal"])
    return seconds


def side_data_bytes(dest: str) -> Dict[str, float]:
    """Bytes per sentence on disk (``.bin`` + ``.idx``) of the binarized source tokens and of each side input."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    prefix = os.path.join(dest, "train.en-de.en")
    sentences = len(MMapIndexedDataset(prefix))
    stems = {"source tokens": prefix}
    for name in os.listdir(dest):
        if name.startswith("train.en-de.en.") and name.endswith(".bin") and name != "train.en-de.en.bin":
            stems[name[len("train.en-de.en."):-len(".bin")]] = os.path.join(dest, name[:-len(".bin")])
    return {kind: round((os.path.getsize(stem + ".bin") + os.path.getsize(stem + ".idx")) / sentences, 1)
            for kind, stem in sorted(stems.items())}


def token_sizes(dest: str) -> np.ndarray:
    """fairseq's ``num_tokens`` of each training pair: max(source, target) length, EOS included."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    source = MMapIndexedDataset(os.path.join(dest, "train.en-de.en"))
    target = MMapIndexedDataset(os.path.join(dest, "train.en-de.de"))
    return np.maximum(np.array(source.sizes), np.array(target.sizes))


def make_batches(sizes: np.ndarray, max_tokens: int, count: int) -> List[List[int]]:
    """The first ``count`` batches fairseq's ``batch_by_size`` makes from the length-sorted ids."""
    from fairseq.data import data_utils

    order = np.argsort(sizes, kind="stable")
    batches = data_utils.batch_by_size(order, lambda i: int(sizes[i]), max_tokens=max_tokens)
    if len(batches) < count:
        raise SystemExit(f"internal error: the corpus gives {len(batches)} batches of {max_tokens} tokens, "
                         f"{count} are needed")
    return [b.tolist() for b in batches[:count]]


# --- measuring


@dataclass(frozen=True)
class System:
    """What one measurement trains: an architecture of the registry, a :class:`Variant` of one, or fairseq's
    transformer, on a data directory."""

    arch: str  # registered name without _tiny
    form: Form
    variant: Optional[Variant] = None
    arch_options: Tuple[str, ...] = ()  # the method's own model options for this system (System.model_args)
    dependencies: bool = False  # its data directory has fairseq-syntax-preprocess-dependencies' side data

    @property
    def key(self) -> str:
        """Its name in ``--archs``."""
        return self.arch if self.variant is None else f"{self.arch}:{self.variant.key}"

    @property
    def trained_arch(self) -> str:
        """The arch fairseq trains (without ``_tiny``): the variant's own, if it has one."""
        return self.variant.arch if self.variant is not None and self.variant.arch else self.arch

    @property
    def model_options(self) -> Tuple[str, ...]:
        return self.arch_options + (self.variant.model_options if self.variant else ())

    def variant_options(self, settings: Settings) -> str:
        """What the variant changes, as fairseq-train options (recorded with the results)."""
        arch = ["--arch", arch_name(self.variant.arch, settings)] if self.variant.arch else []
        return " ".join(arch + list(self.variant.model_options))

    @property
    def label(self) -> str:
        variant = "" if self.variant is None else f" ({self.variant.label})"
        return f"{self.arch}{variant} ({self.form.name})"

    def row_name(self, settings: Settings) -> str:
        """The ``arch`` of its result rows: the registered arch, and the variant's label."""
        name = arch_name(self.arch, settings)
        return name if self.variant is None else f"{name} ({self.variant.label})"


class Measurer:
    """Sends specs to one ``measure.py`` server, which forks a fresh process per measurement."""

    def __init__(self, log_path: str):
        self.log_path = log_path
        self.stderr = open(log_path, "w")
        self.server = subprocess.Popen([sys.executable, os.path.join(HERE, "measure.py")], cwd=REPO, text=True,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)
        #: every arch fairseq knows with --user-dir fairseq_syntax (the server's first line)
        self.registered = set(json.loads(self._answer("ARCHS", "starting the measuring server")))

    def _answer(self, expected: str, doing: str) -> str:
        for line in self.server.stdout:
            tag, _, payload = line.partition(" ")
            if tag == expected:
                return payload
            if tag == "ERROR":
                raise SystemExit(f"error: {doing} failed:\n{json.loads(payload)}")
        raise SystemExit(f"error: the measuring server stopped while {doing}; see {self.log_path}")

    def measure(self, system: System, data: str, batches: List[List[int]], settings: Settings,
                options: Dict) -> Dict:
        spec = {"data": data, "train_args": model_args(system, settings), "batches": batches,
                "warmup": settings.warmup, "precision": options.get("precision", "fp32"),
                "threads": options.get("threads", 1), "device": settings.device}
        if settings.generate_batches and not options:  # decoding: the plain (fp32) run of each system only
            # one untimed batch (the first warm-up batch), then the first timed training batches
            spec["generate"] = {"batches": batches[:1] + batches[settings.warmup:][:settings.generate_batches],
                                "warmup": 1, "beam": GENERATE_BEAM}
        self.server.stdin.write(json.dumps(spec) + "\n")
        self.server.stdin.flush()
        return json.loads(self._answer("RESULT", f"measuring {system.label} {options}"))

    def close(self) -> None:
        self.server.stdin.close()
        self.server.wait()
        self.stderr.close()


# --- main


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: the first architecture's *_tiny arch, one short length, one round, the "
                        "bf16 variants")
    parser.add_argument("--archs", help="comma-separated subset of the benchmarked architectures (from the "
                        "method registry, see --list), by name or name:variant (transformer_hier_accum:dense); "
                        "default: all; --quick: the first")
    parser.add_argument("--list", action="store_true",
                        help="print the benchmarked architectures (input form, extra preprocessing, what fairseq "
                        "trains) and exit")
    parser.add_argument("--out", default=HERE, help="where RESULTS.md / RESULTS.json / RESULTS.details.json.gz go")
    parser.add_argument("--work", help="keep corpora and data directories here (default: a temporary folder)")
    parser.add_argument("--lengths", help="comma-separated source lengths in words (default 16,32,64)")
    parser.add_argument("--repeats", type=int, help="rounds (default 3)")
    parser.add_argument("--no-speed-options", action="store_true", help="skip the bf16 / threads / batch options")
    parser.add_argument("--no-preprocess-throughput", action="store_true")
    parser.add_argument("--model-size", choices=sorted(recipe.MODEL_SIZES), default="recipe",
                        help="recipe: 3+3 layers, d=256, 4 heads (the Multi30k recipe); large: 6+6, d=512, 8 heads "
                             "(the papers' IWSLT/WMT size)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cuda: train on the GPU (wall-clock throughput, CUDA memory; no CPU speed options)")
    parser.add_argument("--generate-batches", type=int,
                        help="timed beam-search (beam 5) batches per system and round, after one untimed; 0: no "
                             "decoding speed (default 1 on a CPU, 3 on a GPU)")
    parser.add_argument("--precision", choices=sorted(PRECISION_FLAGS), default="fp32",
                        help="train every system with fairseq's own --bf16 or --fp16 (as users train on a GPU; "
                             "fp16 needs CUDA); decoding runs in the same format, as fairseq-generate --fp16 does")
    parser.add_argument("--time-budget", type=float, metavar="MINUTES",
                        help="start no measurement that would end after MINUTES from the start (judged by the "
                             "longest measurement so far), and write the results of the rounds measured by then")
    parser.add_argument("--deadline", type=float, metavar="UNIX_SECONDS",
                        help="the same for a time of day, as `date +%%s` gives it (a caller's own time limit)")
    return parser.parse_args(argv)


def settings_from(args: argparse.Namespace) -> Settings:
    settings = QUICK if args.quick else Settings()
    changes = dict(model_size=args.model_size, precision=args.precision, time_budget_min=args.time_budget,
                   deadline=args.deadline)
    if args.lengths:
        changes["lengths"] = tuple(int(x) for x in args.lengths.split(","))
    if args.repeats:
        changes["repeats"] = args.repeats
    if args.no_speed_options:
        changes["speed_length"] = None
    if args.no_preprocess_throughput:
        changes["preprocess_sentences"] = 0
    if args.device == "cuda":
        changes.update(ON_CUDA)
    if args.generate_batches is not None:
        changes["generate_batches"] = args.generate_batches
    settings = replace(settings, **changes)
    if args.precision == "fp16" and args.device != "cuda":
        raise SystemExit("error: --precision fp16 needs --device cuda (fairseq's --fp16 does not train on a CPU)")
    if args.precision != "fp32" and settings.speed_length is not None and args.device == "cpu":
        raise SystemExit("error: --precision with the CPU speed options: add --no-speed-options (they compare "
                         "their own bf16 variants against fp32)")
    if settings.speed_length is not None and settings.speed_length not in settings.lengths:
        settings.speed_length = settings.lengths[len(settings.lengths) // 2]
    if not 0 <= settings.generate_batches <= settings.updates:
        raise SystemExit(f"error: --generate-batches {settings.generate_batches}: decoding reuses the timed training "
                         f"batches, {settings.updates} of them")
    return settings


def choose_archs(args: argparse.Namespace, registered: set, settings: Settings) -> Tuple[List[System], List[str]]:
    archs = benchmark_archs()
    table = {a.key: a for a in archs}
    if args.archs:
        unknown = [name for name in args.archs.split(",") if name not in table]
        if unknown:
            raise SystemExit(f"error: --archs {unknown} are not benchmarked architectures (see --list): "
                             f"{list(table)}")
        wanted = [table[name] for name in args.archs.split(",")]
    else:
        wanted = list(archs[:1] if args.quick else archs)
    unregistered = [a for a in wanted if arch_name(a.trained_arch, settings) not in registered]
    for arch in unregistered:
        log(f"skipped {arch.key}: fairseq has no arch {arch_name(arch.trained_arch, settings)} registered (yet)")
    return [a for a in wanted if a not in unregistered], [a.key for a in unregistered]


def registered_systems(names: Optional[str], settings: Settings, variants: bool = True):
    """(archs, their systems, names skipped): ``names`` (``--archs``; None: all) that :func:`measure.import_models`
    registers."""
    import measure
    from fairseq.models import ARCH_MODEL_REGISTRY

    measure.import_models()
    archs, skipped = choose_archs(argparse.Namespace(archs=names, quick=False), set(ARCH_MODEL_REGISTRY), settings)
    archs = [a for a in archs if variants or a.variant is None]
    return archs, measured_systems(archs, data_forms(archs)), skipped


def one_length_data(work: str, archs: List[System], settings: Settings, batches: int) -> Tuple[Dict, List]:
    """{form name: data directory} at ``settings``' one length, and its first ``batches`` batches."""
    dirs = prepare_data(work, archs, data_forms(archs), settings)[settings.lengths[0]]
    return dirs, make_batches(token_sizes(dirs[REFERENCE_FORM.name]), settings.max_tokens, batches)


def arch_listing(archs: Sequence[System]) -> List[str]:
    """``--list``: one line per benchmarked architecture."""
    lines = []
    for arch in archs:
        trains = " ".join(["--arch", arch.trained_arch] + list(arch.model_options))
        extra = "dependencies" if arch.dependencies else "-"
        lines.append(f"{arch.key:<32} {arch.form.name:<16} {extra:<14} {trains}")
    return [f"{'--archs':<32} {'data':<16} {'extra':<14} fairseq-train"] + lines


def prepare_data(work: str, archs: List[System], forms: List[Form], settings: Settings) -> Dict:
    """Per length: raw corpus and one data directory per form. Returns {length: {form name: dest}}."""
    dictionary = os.path.join(work, "dict.txt")
    write_dictionary(dictionary)
    with_dependencies = {a.form for a in archs if a.dependencies}
    batches = 2 * (settings.warmup + settings.updates)  # room for the doubled batches of max_tokens_x2
    dirs = {}
    for n_words in settings.lengths:
        raw = os.path.join(work, f"raw{n_words}", "train")
        os.makedirs(os.path.dirname(raw), exist_ok=True)
        # each sentence is at least n_words + 1 tokens long in every form: always enough sentences
        sentences = batches * (settings.max_tokens // (n_words + 1) + 1)
        synthetic.write_corpus(raw, [n_words] * sentences, seed=n_words)
        dirs[n_words] = {}
        for form in forms:
            dest = os.path.join(work, f"data{n_words}-{form.name}")
            preprocess(raw, form, dest, dictionary, form in with_dependencies)
            dirs[n_words][form.name] = dest
        log(f"data for {n_words} words: {', '.join(f.name for f in forms)}")
    return dirs


def preprocess_throughput(work: str, settings: Settings) -> Dict:
    """Sentences per CPU (and wall) second of fairseq-syntax-preprocess --form preorder, set-up included, imports
    not."""
    n_words, count = settings.speed_length or settings.lengths[0], settings.preprocess_sentences
    raw = os.path.join(work, "preprocess", "train")
    os.makedirs(os.path.dirname(raw), exist_ok=True)
    synthetic.write_corpus(raw, [n_words] * count, seed=1)
    seconds = preprocess(raw, REFERENCE_FORM, raw + "-data", os.path.join(work, "dict.txt"), dependencies=False)
    return {"form": REFERENCE_FORM.name, "src_words": n_words, "sentences": count,
            "sentences_per_cpu_s": round(count / seconds["cpu_s"], 1),
            "sentences_per_wall_s": round(count / seconds["wall_s"], 1)}


def main(argv: Optional[Sequence[str]] = None) -> List[Dict]:
    args = parse_args(argv)
    if args.list:
        print("\n".join(arch_listing(benchmark_archs())))
        return []
    settings = settings_from(args)
    started = time.time()
    # the preprocessing tools run in this process: keep their warnings, not their progress reports
    logging.getLogger().setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="bench-") as scratch:
        work = args.work or scratch
        os.makedirs(work, exist_ok=True)
        measurer = Measurer(os.path.join(work, "measure.log"))
        try:
            details = benchmark(args, settings, work, measurer, started)
        finally:
            measurer.close()
    details["minutes"] = round((time.time() - started) / 60, 1)
    details["command"] = reproducing_command(argv)
    rows = details.pop("rows")
    write_results(args.out, rows, details)
    log(f"wrote {args.out}/RESULTS.md, RESULTS.json, RESULTS.details.json.gz in {details['minutes']} min")
    return rows


def data_forms(archs: Sequence[System], context: Sequence[Form] = ()) -> list[Form]:
    """The data directories: the reference form first, then each architecture's and the ``context`` forms."""
    return [REFERENCE_FORM] + [f for f in dict.fromkeys([a.form for a in archs] + list(context))
                               if f != REFERENCE_FORM]


def measured_systems(arch_systems: Sequence[System], forms: Sequence[Form]) -> list[System]:
    """What a round measures, in order: per input form the transformer, then the systems on that form."""
    return [s for form in forms for s in [System(BASELINE, form)] + [a for a in arch_systems if a.form == form]]


def benchmark(args: argparse.Namespace, settings: Settings, work: str, measurer: "Measurer",
              started: float) -> Dict:
    arch_systems, skipped = choose_archs(args, measurer.registered, settings)
    forms = data_forms(arch_systems, [] if args.quick else CONTEXT_FORMS)
    systems = measured_systems(arch_systems, forms)
    log(f"systems: {', '.join(s.label for s in systems)}; lengths {settings.lengths}; {settings.repeats} rounds")
    log(f"model size: {settings.model}")

    dirs = prepare_data(work, arch_systems, forms, settings)
    throughput = None
    if settings.preprocess_sentences:
        throughput = preprocess_throughput(work, settings)
        log(f"preprocessing: {throughput}")
    batches = {n: make_batches(token_sizes(by_form[REFERENCE_FORM.name]), settings.max_tokens,
                               settings.warmup + settings.updates) for n, by_form in dirs.items()}
    measurements, stopped = run_rounds(measurer, systems, dirs, batches, settings, started)
    return {
        "rows": result_rows(arch_systems, forms, measurements, settings),
        "settings": {**asdict(settings), "training_args": " ".join(recipe.TRAINING),
                     "model_args": "the *_tiny archs" if settings.tiny else " ".join(
                         recipe.MODEL_SIZES[settings.model_size] + recipe.REGULARISATION)},
        "skipped_archs": skipped,
        "stopped_by_time_budget": stopped,
        "variants": {s.row_name(settings): s.variant_options(settings) for s in arch_systems if s.variant},
        "preprocessing_throughput": throughput,
        "side_data_bytes_per_sentence": {n: {form: side_data_bytes(dest) for form, dest in by_form.items()}
                                         for n, by_form in dirs.items()},
        "speed_options": speed_rows(systems, measurements, settings),
        "load_average_at_end": os.getloadavg(),
        "devices": sorted({m["device"] for runs in measurements.values() for m in runs}),
        "measurements": [{"system": k[0].label, "src_words": k[1], "option": k[2], "runs": v}
                         for k, v in measurements.items()],
    }


def run_rounds(measurer: Measurer, systems: List[System], dirs: Dict, batches: Dict, settings: Settings,
               started: float | None = None) -> tuple[dict, bool]:
    """{(system, length, option): [measurement per round, with its "round" from 1]}; option "fp32" is the plain run.
    No measurement starts that would end after ``settings.time_budget_min`` (from ``started``) or
    ``settings.deadline`` (judged by the longest so far); the second value says whether that stopped the rounds."""
    measurements: Dict[Tuple[System, int, str], List[Dict]] = {}
    limit = time_limit(time.time() if started is None else started, settings.time_budget_min, settings.deadline)
    longest = 0.0
    for round_index in range(settings.repeats):
        order = systems if round_index % 2 == 0 else systems[::-1]
        for n_words in settings.lengths:
            for system in order:
                runs = [("fp32", {})]
                if n_words == settings.speed_length:
                    runs += [(name, SPEED_OPTIONS[name][0]) for name in settings.speed_options
                             if speed_option_applies(system, SPEED_OPTIONS[name][1])]
                for option, overrides in runs:
                    if time.time() + longest > limit:
                        log(f"time budget reached: stopped in round {round_index + 1}/{settings.repeats}; the "
                            "results are those of the rounds measured")
                        return measurements, True
                    measuring = time.time()
                    factor = overrides.get("max_tokens_factor", 1)
                    run_batches = batches[n_words] if factor == 1 else make_batches(
                        token_sizes(dirs[n_words][REFERENCE_FORM.name]), settings.max_tokens * factor,
                        settings.warmup + settings.updates)
                    result = measurer.measure(system, dirs[n_words][system.form.name], run_batches, settings, overrides)
                    result["round"] = round_index + 1
                    if not measurements:
                        log(f"device: {result['device']}")  # from_logs.py reads it back
                    measurements.setdefault((system, n_words, option), []).append(result)
                    log(report.progress_line(round_index + 1, settings.repeats, n_words, system.label, option,
                                             result))
                    longest = max(longest, time.time() - measuring)
    return measurements, False


def time_limit(started: float, budget_min: float | None, deadline: float | None) -> float:
    """When the last measurement must end (Unix seconds): ``budget_min`` after ``started`` or ``deadline``, the
    earlier (infinity: neither)."""
    return min(math.inf if budget_min is None else started + 60 * budget_min, deadline or math.inf)


def speed_option_applies(system: System, applies: str) -> bool:
    if system.variant is not None:
        return False
    if applies == "reference":
        return system == System(BASELINE, REFERENCE_FORM)
    return system.arch != BASELINE or system.form == REFERENCE_FORM


def result_rows(arch_systems: List[System], forms: List[Form], measurements: Dict, settings: Settings) -> List[Dict]:
    """Each architecture against the transformer on its own form; the transformer on other forms against the
    transformer on the reference form (context)."""
    pairs = [(s, System(BASELINE, s.form)) for s in arch_systems]
    pairs += [(System(BASELINE, f), System(BASELINE, REFERENCE_FORM)) for f in forms if f != REFERENCE_FORM]
    rows = []
    for system, baseline in pairs:
        for n_words in settings.lengths:
            mine, theirs = (measurements.get((s, n_words, "fp32"), []) for s in (system, baseline))
            if not report.paired_rounds(mine, theirs)[0]:  # a time budget stopped the rounds before both ran
                continue
            row = report.ratio_row(mine, theirs, arch=system.row_name(settings), form=system.form.name,
                                   src_words=n_words, model=settings.model,
                                   baseline=f"{arch_name(BASELINE, settings)} ({baseline.form.name})")
            rows.append({**row, "device": mine[0]["device"]})
    return rows


def speed_rows(systems: List[System], measurements: Dict, settings: Settings) -> List[Dict]:
    """Each speed option against fp32 (1 thread, --max-tokens as set) on the same system, same rounds."""
    rows = []
    for system in systems:
        fp32 = measurements.get((system, settings.speed_length, "fp32"), [])
        for option in SPEED_OPTIONS:
            runs = measurements.get((system, settings.speed_length, option), [])
            if report.paired_rounds(runs, fp32)[0]:
                row = report.ratio_row(runs, fp32, arch=system.row_name(settings), form=system.form.name,
                                       src_words=settings.speed_length, option=option, baseline="fp32")
                rows.append({**row, "last_loss": statistics.median(m["last_loss"] for m in runs)})
    return rows


def write_results(out: str, rows: List[Dict], details: Dict) -> None:
    os.makedirs(out, exist_ok=True)
    report.write_rows(os.path.join(out, "RESULTS.json"), rows)
    with gzip.open(os.path.join(out, "RESULTS.details.json.gz"), "wt", encoding="utf-8") as f:  # raw measurements
        json.dump(details, f, indent=1)
    with open(os.path.join(out, "RESULTS.md"), "w") as f:
        f.write("\n".join(results_markdown(rows, details)) + "\n")


#: options that say where files go or when to stop, not what is measured: left out of the command a table shows
PLACE_AND_TIME_OPTIONS = ("--out", "--work", "--time-budget", "--deadline")


def reproducing_command(argv: Optional[Sequence[str]], script: str = "bench/run.py") -> str:
    """The command (``argv``; None: this process's) that measures what this run measured, to the table's default
    ``--out``; ``--time-budget`` and ``--deadline`` are left out."""
    kept, skip = [], False
    for argument in sys.argv[1:] if argv is None else argv:
        if skip:
            skip = False
            continue
        name = argument.split("=", 1)[0]
        if name in PLACE_AND_TIME_OPTIONS:
            skip = "=" not in argument
            continue
        kept.append(argument)
    if "--device" in kept and kept[kept.index("--device") + 1:][:1] == ["cuda"] or "--device=cuda" in kept:
        kept += ["--out", "bench/cuda"]
    return " ".join(["python3", script, *kept])


def results_markdown(rows: List[Dict], details: Dict) -> List[str]:
    settings = details["settings"]
    on_cuda = settings["device"] == "cuda"
    lines = [
        f"# Training cost against fairseq's transformer (generated by `{details['command']}`)",
        "",
        f"Device: {', '.join(details['devices'])}. Precision: {settings['precision']} "
        f"(fairseq's own flags, the same for the systems and the transformer). Model: {settings['model_args']}.",
        f"Batches: fairseq's batch_by_size, --max-tokens {settings['max_tokens']} over the preorder form; every "
        f"system trains on the same sentences. {settings['warmup']} warm-up + {settings['updates']} timed updates "
        f"per run, {'' if on_cuda else 'one torch thread, '}{settings['repeats']} rounds in alternating order; "
        "ratio = system / baseline within a round, median over rounds.",
        "tok/s = target tokens per wall-clock second of GPU training (each step synchronized); peak mem = peak CUDA "
        "memory allocated by training beyond the model's weights. Compare the ratios." if on_cuda else
        "tok/s = target tokens per CPU second of the training process; peak mem = peak RSS added by training. "
        "Absolute numbers vary with the load on the shared cores; compare the ratios.",
        generate_note(settings),
        "",
    ]
    if details.get("stopped_by_time_budget"):
        lines += [("Stopped by its time budget in a round: each ratio is over the rounds in which both the system "
                   "and its baseline were measured (`repeats`)."), ""]
    if details["variants"]:
        described = "; ".join(f"{name}: `{options}`" for name, options in details["variants"].items())
        lines += [f"Variants (the same model computed another way, by bench/'s own arch or extra model options; same "
                  f"baseline and batches): {described}.", ""]
    if details["skipped_archs"]:
        lines += [f"Skipped (not registered when this ran): {', '.join(details['skipped_archs'])}.", ""]
    lines += report.markdown_table(rows, ("arch", "form", "src_words", "model", "baseline", "tokens_per_s_ratio",
                                          "peak_mem_ratio", "generate_ratio", "wall_tokens_per_s_ratio", "tokens_per_s",
                                          "baseline_tokens_per_s", "peak_mem_mb", "baseline_peak_mem_mb",
                                          "source_tokens_per_sentence", "sentences_per_batch", "repeats"))
    throughput = details["preprocessing_throughput"]
    if throughput:
        lines += ["", "## Preprocessing", ""]
        lines.append(f"`fairseq-syntax-preprocess --form {throughput['form']}` on {throughput['sentences']} sentences "
                     f"of {throughput['src_words']} words: {throughput['sentences_per_cpu_s']} sentences per CPU "
                     f"second ({throughput['sentences_per_wall_s']} per wall second), one worker, imports excluded.")
    lines += ["", "## Data", "", "Bytes per sentence on disk (.bin + .idx):", ""]
    side_rows = [{"src_words": n, "form": form, **sizes}
                 for n, by_form in details["side_data_bytes_per_sentence"].items() for form, sizes in by_form.items()]
    columns = ["src_words", "form"] + sorted({k for r in side_rows for k in r} - {"src_words", "form"})
    lines += report.markdown_table(side_rows, columns)
    if details["speed_options"]:
        lines += ["", "## CPU speed options against fp32 (same system, same round)", "",
                  "bf16 variants: see bench/precision.py. *threads_2: two torch threads instead of one (compare the "
                  "wall-clock ratio: CPU time adds up both threads). max_tokens_x2: batches of twice the tokens.", ""]
        lines += report.markdown_table(details["speed_options"], (
            "arch", "form", "src_words", "option", "tokens_per_s_ratio", "wall_tokens_per_s_ratio",
            "peak_mem_ratio", "tokens_per_s", "baseline_tokens_per_s", "last_loss", "repeats"))
        lines += ["", speed_summary(details["speed_options"])]
    load = ", ".join(f"{x:.1f}" for x in details["load_average_at_end"])
    lines += ["", f"Load average (1, 5, 15 min) at the end: {load}; the run took {details['minutes']} minutes."]
    return lines


def generate_note(settings: dict) -> str:
    if not settings.get("generate_batches"):
        return "Decoding speed not measured."
    return (f"generate = beam search with beam {GENERATE_BEAM} as fairseq-generate runs it (task.build_generator, "
            f"task.inference_step) on {settings['generate_batches']} of the timed batches after one untimed, each "
            "batch held at the length of its longest reference so that every system decodes the same steps; "
            "generate_ratio = hypothesis tokens per second, system / baseline, timed like training.")


def speed_summary(speed: List[Dict]) -> str:
    """Which options reach SPEED_THRESHOLD on every system they were tried on (by the clock that applies)."""
    by_option: Dict[str, List[float]] = {}
    for row in speed:
        ratio = row["wall_tokens_per_s_ratio"] if "threads" in row["option"] else row["tokens_per_s_ratio"]
        by_option.setdefault(row["option"], []).append(ratio)
    def described(option: str, ratios: List[float]) -> str:
        low, high = min(ratios), max(ratios)
        return f"{option} ({low:.2f}x)" if low == high else f"{option} ({low:.2f}-{high:.2f}x)"

    passing = [described(option, r) for option, r in by_option.items() if min(r) >= SPEED_THRESHOLD]
    failing = [described(option, r) for option, r in by_option.items() if min(r) < SPEED_THRESHOLD]
    return (f"At least {SPEED_THRESHOLD}x faster than fp32 on every system tried: {', '.join(passing) or 'none'}. "
            f"Not: {', '.join(failing) or 'none'}.")


if __name__ == "__main__":
    main(sys.argv[1:])
