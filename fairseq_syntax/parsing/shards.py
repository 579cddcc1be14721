"""Parsing a corpus in shards: on many cores of one machine, on many machines, resumably, on a GPU when present.
``fairseq-syntax-parse`` runs through :func:`run`; layout and options: docs/parsers.md, "A large corpus".

Shard K of N writes ``OUTPUT.shardK-of-N`` files (``.gz`` stays last: ``train.arcs.jsonl.shard0-of-4.gz``), whole,
then its manifest ``OUTPUT.shardK-of-N.json``: a shard is finished exactly when its manifest is there. ``--merge``
writes OUTPUT only from N finished shards of the same input and settings (else it names the missing and stale
ones), then removes them; ``OUTPUT.skipped`` is the union of theirs, in the whole input's line numbers. With several
GPUs, worker slot k sees GPU k mod their number. Each chunk is parsed under a fixed seed
(``torch_load.supar_device``), so the merged files equal a single run's. An unreadable input line (bad UTF-8, a
carriage return) is parsed as an empty sentence and listed as a fallback.

One live process parses a shard: it holds ``OUTPUT.shardK-of-N.lock`` (``flock``); another finding it held stops
with one line naming the holder's pid (``--workers`` leaves the shard to it). A worker stops as soon as the
process that started it is gone: :data:`WORKER_PRELUDE` asks the kernel to signal it when its parent dies, and
:func:`watch_parent` polls where that signal does not exist."""
from __future__ import annotations

import argparse
import contextlib
import glob
import json
import math
import os
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO, TypeVar

import torch
from tqdm import tqdm

from fairseq_syntax.core.files import atomic_path, held_lock, is_locked
from fairseq_syntax.core.text_lines import TextLineError, iter_lines_or_errors
from fairseq_syntax.parsing.models import ModelUnavailable
from fairseq_syntax.parsing.provenance import file_sha256, model_digest
from fairseq_syntax.parsing.report import ParseReport
from fairseq_syntax.parsing.text import open_output, open_text, tokenizer, write_json

LINES, BLOCKS = "lines", "blocks"  # one record per input line: a line, or lines up to a blank one (CoNLL-U)
POLL_SECONDS = 0.5  # how often the workers' progress is read
PROGRESS_SECONDS = 1.0  # how often a worker writes its progress
LOG_LINES_SHOWN = 15  # lines of a failed worker's log printed
PARENT_POLL_SECONDS = 0.2  # how often a worker looks whether the process that started it is still there
PARENT_GONE_EXIT = 3  # a worker's exit status when its parent is gone
#: a worker's exit status when its model did not load (one line): the parent prints it and stops the others
WORKER_REFUSED_EXIT = 4
#: run before the worker's script (``python -c WORKER_PRELUDE SCRIPT ARGS``), before its slow imports: PR_SET_PDEATHSIG,
#: and exit if the parent is gone already
WORKER_PRELUDE = """
import ctypes, os, runpy, signal, sys
parent = int(sys.argv[sys.argv.index("--parent-pid") + 1])
def stop(*_):
    sys.stderr.write(f"the process that started this worker (pid {parent}) is gone, or stopped it; stopping\\n")
    sys.stderr.flush()
    os._exit(%d)
signal.signal(signal.SIGTERM, stop)
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
except (AttributeError, OSError):
    pass  # not Linux: shards.watch_parent's thread notices once the script runs
if os.getppid() != parent:
    stop()
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
""" % PARENT_GONE_EXIT
Result = TypeVar("Result")


# --- options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the module docstring; the command also has ``--batch-size`` (lines per chunk) and
    ``--threads``."""
    group = parser.add_argument_group("shards, workers and device (fairseq_syntax.parsing.shards)")
    group.add_argument("--num-shards", type=int,
                       help="cut the input into N shards (chunks of --batch-size lines, dealt in turn); "
                            "default: --workers")
    group.add_argument("--shard-id", type=int,
                       help="parse only shard K (0-based) of --num-shards into OUTPUT.shardK-of-N files: one task of "
                            "a cluster array job; --merge writes OUTPUT once all are there")
    group.add_argument("--merge", action="store_true",
                       help="write OUTPUT from its --num-shards finished shards (nothing when one is missing) and "
                            "remove them")
    group.add_argument("--workers", type=int, default=1,
                       help="parse the unfinished shards in W local processes of one torch thread each, then merge; "
                            "a run started again keeps the finished shards")
    group.add_argument("--device", choices=["cpu", "cuda"], help="where the parser runs (default: cuda when available)")
    group.add_argument("--progress-file", help=argparse.SUPPRESS)  # a worker's count of parsed lines, for the bar
    group.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)  # a worker stops once this process is gone


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``parser.error`` (usage and exit 2) for combinations that mean nothing."""
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, not {args.workers}")
    if args.num_shards is not None and args.num_shards < 1:
        parser.error(f"--num-shards must be at least 1, not {args.num_shards}")
    if args.batch_size < 1:
        parser.error(f"--batch-size must be at least 1, not {args.batch_size}")
    if (args.shard_id is not None or args.merge) and args.num_shards is None:
        parser.error("--shard-id and --merge need --num-shards")
    if args.shard_id is not None and not 0 <= args.shard_id < args.num_shards:
        parser.error(f"--shard-id must be 0 .. {args.num_shards - 1} for --num-shards {args.num_shards}")
    if args.shard_id is not None and args.merge:
        parser.error("--merge writes the whole output: give it no --shard-id")
    if (args.shard_id is not None or args.merge) and args.workers > 1:
        parser.error(f"--{'shard-id' if args.shard_id is not None else 'merge'} runs in this one process: give it no "
                     "--workers (--workers W --num-shards N parses the unfinished shards in W processes, then merges)")


def select_device(requested: str | None) -> str:
    """``cuda`` when requested or, by default, when available; ``cpu`` otherwise."""
    if requested == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda: torch sees no CUDA device here (torch.cuda.is_available() is False)")
    return requested or ("cuda" if torch.cuda.is_available() else "cpu")


def model_identity(name_or_path: str | None) -> str | None:
    """What a shard records of a model: a local file's digest, or the name of one a library downloads."""
    if name_or_path is None or not os.path.isfile(name_or_path):
        return name_or_path
    return f"{os.path.basename(name_or_path)} sha256:{model_digest(name_or_path)}"


# --- shard layout


@dataclass(frozen=True)
class Shard:
    index: int  # K, 0-based
    count: int  # N
    chunk: int  # lines per chunk

    def holds(self, line: int) -> bool:
        """Whether 1-based input ``line`` is in this shard."""
        return (line - 1) // self.chunk % self.count == self.index

    def lines(self, total: int) -> int:
        """How many of ``total`` input lines this shard holds."""
        chunks = math.ceil(total / self.chunk)
        mine = range(self.index, chunks, self.count)
        return sum(min(self.chunk, total - c * self.chunk) for c in mine)

    def path(self, output: str) -> str:
        """``train.tree`` -> ``train.tree.shard1-of-3``; ``x.jsonl.gz`` -> ``x.jsonl.shard1-of-3.gz``."""
        stem, gz = (output[:-3], ".gz") if output.endswith(".gz") else (output, "")
        return f"{stem}.shard{self.index}-of-{self.count}{gz}"


# --- input


@dataclass(frozen=True)
class InputLine:
    number: int  # 1-based line of the whole input
    tokens: list[str]
    problem: str | None = None  # why the line could not be read; it is parsed as an empty sentence


@dataclass(frozen=True)
class InputFile:
    path: str
    lines: int
    sha256: str  # of the file's bytes (compressed ones for .gz): shards of one input agree on it


def scan_input(path: str) -> InputFile:
    """Counts the lines (as the parsers read them) and hashes the file; a missing file is ``SystemExit``."""
    if not os.path.isfile(path):
        raise SystemExit(f"error: {path}: no such file")
    try:
        lines = sum(1 for _ in iter_lines_or_errors(path))
    except TextLineError as error:  # a gzip file cut short
        raise SystemExit(f"error: {error}") from None
    return InputFile(path, lines, file_sha256(path))


def read_input(path: str, tokenize_lang: str | None = None, shard: Shard | None = None) -> Iterator[InputLine]:
    """The lines of ``path`` (those of ``shard`` only, when given), tokenized as ``text.tokenizer`` says."""
    split = tokenizer(tokenize_lang)
    for number, line in enumerate(iter_lines_or_errors(path), 1):
        if shard is not None and not shard.holds(number):
            continue
        if isinstance(line, TextLineError):
            yield InputLine(number, [], f"unreadable line: {line}")
        else:
            yield InputLine(number, split(line))


def numbered(lines: Iterable[InputLine], parse: Callable[[Iterator[list[str]]], Iterator[Result]]
             ) -> Iterator[tuple[InputLine, Result]]:
    """``parse`` (tokens in, one result per sentence out, in order, reading ahead as it likes) over ``lines``, each
    result with its line."""
    pending: deque[InputLine] = deque()

    def tokens() -> Iterator[list[str]]:
        for line in lines:
            pending.append(line)
            yield line.tokens

    for result in parse(tokens()):
        yield pending.popleft(), result


# --- jobs


@dataclass
class Outcome:
    """What parsing some lines gives besides the written records."""

    fallbacks: list[tuple[int, str]]  # (1-based input line, reason)
    stats: dict = field(default_factory=dict)  # numbers that add up over shards (e.g. retained probability mass)


#: lines, the open outputs (in ``ParseJob.outputs`` order), a callback taking a count of lines parsed
ParseFunction = Callable[[Iterable[InputLine], list[TextIO], Callable[[int], None]], Outcome]


@dataclass
class ParseJob:
    input: str
    tokenize: str | None
    outputs: list[tuple[str, str]]  # (path, LINES or BLOCKS)
    chunk: int  # lines per chunk
    settings: dict  # everything the output depends on besides the input (models, options): shards must agree
    load: Callable[[str], ParseFunction]  # device -> the parse function (loads the models)


@dataclass
class ParseRun:
    report: ParseReport  # seconds: wall time of the parsing, models loaded
    stats: dict
    whole: bool  # the whole output was written (False: one shard of it)
    shard_seconds: list[float] = field(default_factory=list)  # each shard's own parsing time


def _settings(job: ParseJob, source: InputFile) -> dict:
    return json.loads(json.dumps({"input_sha256": source.sha256, "input_lines": source.lines, "chunk": job.chunk,
                                  **job.settings}))


def _stem(job: ParseJob, shard: Shard) -> str:
    """The shard's first output without ``.gz``: its manifest, lock, progress and log add their endings."""
    return shard.path(job.outputs[0][0]).removesuffix(".gz")


def _manifest_path(job: ParseJob, shard: Shard) -> str:
    return _stem(job, shard) + ".json"


def _digest(value) -> str | None:
    """The digest of a model file's :func:`model_identity`, else None."""
    return value.split(" sha256:")[1] if isinstance(value, str) and " sha256:" in value else None


def _same_setting(recorded, expected) -> bool:
    """A model file is the same where its digest is: moved or renamed, it made the same shards."""
    if _digest(recorded) and _digest(expected):
        return _digest(recorded) == _digest(expected)
    return recorded == expected


def _short(value) -> str:
    """A setting as the messages show it: JSON, a long string (a digest) cut to its first 12 characters."""
    if isinstance(value, str) and len(value) > 40:
        return json.dumps(value[:12] + "...")
    return json.dumps(value)


def _setting_change(key: str, recorded, expected) -> str:
    """What differs between a shard's setting and this run's, in words."""
    if _digest(recorded):
        name, digest = recorded.split(" sha256:")
        if _digest(expected):
            return (f"--{key} {name} of another digest (sha256 {digest[:12]}... in the shard, "
                    f"{_digest(expected)[:12]}... now): another model file")
        if expected is not None and not os.path.exists(expected):
            return f"--{key} {expected} is no file here (the shard was made with {name}, sha256 {digest[:12]}...)"
    return f"{key} {_short(recorded)} (this run: {_short(expected)})"


def _holder(lock_path: str) -> int | None:
    """The pid of the live process holding the shard's lock, or None when none does."""
    if not is_locked(lock_path):
        return None
    text = Path(lock_path).read_text().strip()
    return int(text) if text.isdigit() else -1


@contextlib.contextmanager
def _shard_lock(job: ParseJob, shard: Shard) -> Iterator[None]:
    """Held while this process parses ``shard``; another live process holding it stops this one with one line."""
    path = _stem(job, shard) + ".lock"
    with held_lock(path, wait=False) as descriptor:
        if descriptor is None:
            holder = Path(path).read_text().strip() or "unknown"
            raise SystemExit(f"error: shard {shard.index} of {shard.count} ({shard.path(job.outputs[0][0])}) is being "
                             f"parsed by another process (pid {holder}, holding {path}): let it finish, or stop it "
                             "and run again")
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()}\n".encode())
        yield


def _finished(job: ParseJob, source: InputFile, shard: Shard) -> tuple[dict | None, str | None]:
    """(the shard's manifest, None) when it is finished with these settings, else (None, why not)."""
    path = _manifest_path(job, shard)
    if not os.path.exists(path):
        holder = _holder(_stem(job, shard) + ".lock")
        return None, f"shard {shard.index} is " + (f"being parsed by another process (pid {holder})" if holder
                                                      else "missing")
    try:
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, json.JSONDecodeError) as error:
        return None, f"shard {shard.index}: {path} is unreadable ({error})"
    recorded = manifest.get("settings", {})
    expected = _settings(job, source)
    changed = sorted(key for key in expected.keys() | recorded.keys()
                     if not _same_setting(recorded.get(key), expected.get(key)))
    if changed:
        return None, (f"shard {shard.index} was made with other settings: "
                      + ", ".join(_setting_change(key, recorded.get(key), expected.get(key)) for key in changed))
    missing = [shard.path(output) for output, _ in job.outputs if not os.path.exists(shard.path(output))]
    if missing:
        return None, f"shard {shard.index}: {', '.join(missing)} is missing"
    return manifest, None


def _remove_shard(job: ParseJob, shard: Shard) -> None:
    """Every file of a shard: its outputs, manifest and progress (whole or ``.partial``: a worker stopped while
    writing one), log and lock."""
    stem = _stem(job, shard)
    for path in [shard.path(output) for output, _ in job.outputs] + [stem + end for end in
                                                                    (".json", ".progress", ".log", ".lock")]:
        for written in (path, path + ".partial"):
            if os.path.exists(written):
                os.remove(written)


def _other_layouts(job: ParseJob, count: int) -> dict[int, list[str]]:
    """``{N: manifests}`` of the finished shards of OUTPUT cut into another number of shards than ``count``."""
    stem = job.outputs[0][0].removesuffix(".gz")
    layouts: dict[int, list[str]] = {}
    for path in sorted(glob.glob(glob.escape(stem) + ".shard*-of-*.json")):
        found = re.fullmatch(r".*\.shard\d+-of-(\d+)\.json", path)
        if found and int(found.group(1)) != count:
            layouts.setdefault(int(found.group(1)), []).append(path)
    return layouts


# --- parsing


class ProgressFile:
    """A worker's count of parsed lines, rewritten whole at most once a second, for the parent's bar."""

    def __init__(self, path: str | None):
        self.path, self.done, self.written = path, 0, 0.0

    def __call__(self, count: int) -> None:
        self.done += count
        if self.path is not None and time.monotonic() - self.written >= PROGRESS_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self.path is not None:
            with atomic_path(self.path) as temporary, open(temporary, "w") as handle:
                handle.write(f"{self.done}\n")
            self.written = time.monotonic()


def watch_parent(parent: int, what: str) -> None:
    """Stop this worker as soon as ``parent`` is gone: now if it already is, and from then on by a daemon thread. Its
    shard lock goes with it; its files stay ``.partial``."""
    def gone() -> bool:
        return os.getppid() != parent

    def stop() -> None:
        print(f"{what}: the process that started this worker (pid {parent}) is gone; stopping", file=sys.stderr,
              flush=True)
        os._exit(PARENT_GONE_EXIT)

    if gone():
        stop()

    def watch() -> None:
        while not gone():
            time.sleep(PARENT_POLL_SECONDS)
        stop()

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _parse_into(parse: ParseFunction, lines: Iterable[InputLine], paths: list[str],
                progress: Callable[[int], None]) -> tuple[Outcome, float]:
    with ExitStack() as stack:
        handles = [stack.enter_context(open_output(path)) for path in paths]
        start = time.perf_counter()
        outcome = parse(lines, handles, progress)
        return outcome, time.perf_counter() - start


def parse_whole(job: ParseJob, device: str) -> ParseRun:
    """One process, no shard files: the outputs written directly (whole, then renamed)."""
    source = scan_input(job.input)
    parse = job.load(device)
    with tqdm(total=source.lines, unit="sent") as progress:
        outcome, seconds = _parse_into(parse, read_input(job.input, job.tokenize), [p for p, _ in job.outputs],
                                       progress.update)
    return ParseRun(ParseReport(source.lines, seconds, outcome.fallbacks), outcome.stats, True, [seconds])


def parse_shard(job: ParseJob, source: InputFile, shard: Shard, parse: ParseFunction | None,
                progress: Callable[[int], None]) -> dict:
    """Writes one shard's files and, last, its manifest; returns the manifest. An empty shard needs no parser. The
    shard's lock is held throughout (module docstring)."""
    with _shard_lock(job, shard):
        manifest_path = _manifest_path(job, shard)
        if os.path.exists(manifest_path):
            os.remove(manifest_path)  # the files are replaced next: until the new manifest, the shard is unfinished
        lines = read_input(job.input, job.tokenize, shard)
        outcome, seconds = _parse_into(parse or (lambda *_: Outcome([])), lines,  # an empty shard: no model
                                       [shard.path(p) for p, _ in job.outputs], progress)
        manifest = {"settings": _settings(job, source), "shard": shard.index, "num_shards": shard.count,
                    "lines": shard.lines(source.lines), "seconds": seconds, "fallbacks": outcome.fallbacks,
                    "stats": outcome.stats}
        write_json(manifest_path, manifest, indent=None)
        return manifest


def _records(handle: TextIO, kind: str) -> Iterator[str]:
    if kind == LINES:
        yield from handle
        return
    block: list[str] = []
    for line in handle:
        block.append(line)
        if line == "\n":
            yield "".join(block)
            block = []
    if block:
        yield "".join(block)


def merge(job: ParseJob, count: int, source: InputFile | None = None) -> ParseRun:
    """OUTPUT from its ``count`` finished shards (module docstring), or ``SystemExit`` naming what is missing."""
    source = source or scan_input(job.input)
    shards = [Shard(index, count, job.chunk) for index in range(count)]
    manifests, problems = [], []
    for shard in shards:
        manifest, problem = _finished(job, source, shard)
        manifests.append(manifest)
        if problem is not None:
            problems.append(problem)
    if problems:
        others = "".join(f"; the shards there are of --num-shards {other} ({', '.join(paths[:3])}"
                         f"{', ...' if len(paths) > 3 else ''}): merge with --num-shards {other}"
                         for other, paths in _other_layouts(job, count).items())
        raise SystemExit(
            f"error: cannot write {', '.join(path for path, _ in job.outputs)} from {count} shards: "
            + "; ".join(problems) + others + f" (parse them with --num-shards {count} --shard-id K, or let --workers W "
            "parse what is missing and merge)")
    for path, kind in job.outputs:
        with ExitStack() as stack:
            readers = [_records(stack.enter_context(open_text(shard.path(path))), kind) for shard in shards]
            out = stack.enter_context(open_output(path))
            for chunk in range(math.ceil(source.lines / job.chunk)):
                shard = shards[chunk % count]
                for _ in range(min(job.chunk, source.lines - chunk * job.chunk)):
                    record = next(readers[shard.index], None)
                    if record is None:
                        raise SystemExit(f"error: {shard.path(path)} ends before its {manifests[shard.index]['lines']} "
                                         "records: write the shard again (delete its .json)")
                    out.write(record)
            for shard, reader in zip(shards, readers):
                if next(reader, None) is not None:
                    raise SystemExit(f"error: {shard.path(path)} holds more than its "
                                     f"{manifests[shard.index]['lines']} records: write the shard again")
    stats: dict = {}
    for manifest in manifests:
        for key, value in manifest["stats"].items():
            stats[key] = stats.get(key, 0) + value
    fallbacks = sorted((line, reason) for manifest in manifests for line, reason in manifest["fallbacks"])
    seconds = [manifest["seconds"] for manifest in manifests]
    for shard in shards:
        _remove_shard(job, shard)
    return ParseRun(ParseReport(source.lines, sum(seconds), fallbacks), stats, True, seconds)


# --- workers


def _worker_environment(slot: int, device: str) -> dict:
    """The environment of worker ``slot``: one thread, and on CUDA GPU slot mod (the visible GPUs)."""
    environment = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if device == "cuda":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        gpus = visible.split(",") if visible else [str(gpu) for gpu in range(torch.cuda.device_count())]
        environment["CUDA_VISIBLE_DEVICES"] = gpus[slot % len(gpus)]
    return environment


def _read_progress(path: str) -> int:
    try:
        with open(path) as handle:
            return int(handle.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def _log_tail(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(deque(handle, LOG_LINES_SHOWN))
    except OSError:
        return ""


def _refusal(log: str) -> str:
    """The one line a worker that refused to parse ended its log with (:data:`WORKER_REFUSED_EXIT`)."""
    lines = [line for line in _log_tail(log).splitlines() if line.startswith("error: ")]
    return lines[-1] if lines else f"error: a worker stopped before parsing (exit status {WORKER_REFUSED_EXIT})"


def _stop_workers(running: dict) -> None:
    for process, log, *_ in running.values():
        process.terminate()
    for process, log, *_ in running.values():
        process.wait()
        log.close()


class _WorkersBar:
    """The workers' bar and its status line, shown once a worker has loaded its model (a model that does not load
    leaves its one line alone on the terminal)."""

    def __init__(self, status: str, total: int, initial: int):
        self.status, self.total, self.initial, self.bar = status, total, initial, None

    def update(self, count: int) -> None:
        if self.bar is None:
            print(self.status, file=sys.stderr)
            self.bar = tqdm(total=self.total, initial=self.initial, unit="sent")
        self.bar.update(count)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _run_workers(job: ParseJob, source: InputFile, todo: list[Shard], workers: int, device: str,
                 command: list[str], progress) -> None:
    """Each shard of ``todo`` in a subprocess (``command`` + its shard options), ``workers`` at a time, counted on
    ``progress``. After a failure no worker starts; a worker whose model does not load
    (:data:`WORKER_REFUSED_EXIT`) stops the others: its line is the error, and every unfinished shard's files are
    removed."""
    waiting, running, failed = deque(todo), {}, []
    try:
        while running or (waiting and not failed):
            while waiting and len(running) < workers and not failed:
                shard = waiting.popleft()
                stem = _stem(job, shard)
                if os.path.exists(stem + ".progress"):  # an earlier run's: not a sign of this worker's model
                    os.remove(stem + ".progress")
                log = open(stem + ".log", "w", encoding="utf-8")  # noqa: SIM115 (closed when the worker ends)
                argv = [command[0], "-c", WORKER_PRELUDE, *command[1:],  # python -c PRELUDE SCRIPT ARGS
                        "--num-shards", str(shard.count), "--shard-id", str(shard.index), "--workers", "1",
                        "--threads", "1", "--device", device, "--progress-file", stem + ".progress",
                        "--parent-pid", str(os.getpid())]
                slot = min(set(range(workers)) - {held for *_, held in running.values()})
                running[shard] = (subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                                   env=_worker_environment(slot, device)), log, 0, slot)
            time.sleep(POLL_SECONDS)
            for shard, (process, log, shown, slot) in list(running.items()):
                stem = _stem(job, shard)
                if os.path.exists(stem + ".progress"):
                    progress.update(0)  # its model loaded
                done = process.poll() is not None
                succeeded = done and process.returncode == 0
                count = shard.lines(source.lines) if succeeded else _read_progress(stem + ".progress")
                if count > shown:
                    progress.update(count - shown)
                    running[shard] = (process, log, count, slot)
                if done:
                    log.close()
                    del running[shard]
                    if process.returncode != 0:
                        failed.append((shard, process.returncode, stem + ".log"))
            refused = [log for _, code, log in failed if code == WORKER_REFUSED_EXIT]
            if refused:  # the running workers are stopped below
                line = _refusal(refused[0])
                for shard, *_ in failed:
                    _remove_shard(job, shard)
                raise SystemExit(line)
    except BaseException:  # a refusal, Ctrl-C or SIGTERM: the workers started here stop, their unfinished shards'
        _stop_workers(running)  # files go; finished shards are kept
        for shard in running:
            _remove_shard(job, shard)
        raise
    if failed:
        progress.update(0)
        details = "\n".join(f"shard {shard.index} exited with {code}; the end of {log}:\n{_log_tail(log)}"
                            for shard, code, log in failed)
        raise SystemExit(f"error: {len(failed)} worker(s) failed; the finished shards are kept, run again to parse "
                         f"the rest\n{details}")


# --- run


def _load(job: ParseJob, device: str, worker: bool) -> ParseFunction:
    """The job's parse function (its models loaded); in a worker, a model that does not load is its one line and
    :data:`WORKER_REFUSED_EXIT`."""
    try:
        return job.load(device)
    except ModelUnavailable as error:
        if not worker:
            raise
        print(f"error: {error}", file=sys.stderr, flush=True)
        raise SystemExit(WORKER_REFUSED_EXIT) from None


def run(job: ParseJob, args: argparse.Namespace, command: list[str]) -> ParseRun:
    """What the options say (module docstring). ``command`` runs this command again (``[python, script, *argv]``),
    for the workers."""
    if args.merge:
        return merge(job, args.num_shards)
    worker = getattr(args, "parent_pid", None) is not None
    if worker:  # not one instant past its parent
        watch_parent(args.parent_pid, Shard(args.shard_id or 0, args.num_shards or 1, 1).path(job.outputs[0][0]))
    device = select_device(args.device)
    if args.shard_id is not None:
        source = scan_input(job.input)
        shard = Shard(args.shard_id, args.num_shards, job.chunk)
        progress_file = ProgressFile(args.progress_file)
        parse = _load(job, device, worker) if shard.lines(source.lines) else None
        progress_file.flush()  # 0 lines: for the parent (a worker's), the sign that the model loaded
        with tqdm(total=shard.lines(source.lines), unit="sent", disable=args.progress_file is not None) as bar:

            def progress(count: int) -> None:
                progress_file(count)
                bar.update(count)

            manifest = parse_shard(job, source, shard, parse, progress)
        progress_file.flush()
        report = ParseReport(manifest["lines"], manifest["seconds"], [tuple(f) for f in manifest["fallbacks"]])
        return ParseRun(report, manifest["stats"], False, [manifest["seconds"]])
    count = args.num_shards or args.workers
    if count == 1:
        return parse_whole(job, device)
    source = scan_input(job.input)
    shards = [Shard(index, count, job.chunk) for index in range(count)]
    todo, finished_lines, held = [], 0, []
    for shard in shards:
        manifest, problem = _finished(job, source, shard)
        holder = _holder(_stem(job, shard) + ".lock")
        if manifest is not None:
            finished_lines += manifest["lines"]
        elif holder:  # another live run parses it: left to that run, never a second process on one shard
            held.append(shard)
            print(f"{job.outputs[0][0]}: shard {shard.index} is being parsed by another process (pid {holder}): left "
                  "to it", file=sys.stderr)
        else:
            todo.append(shard)
            if os.path.exists(_manifest_path(job, shard)):  # stale: another input or other settings
                print(f"{job.outputs[0][0]}: {problem}: parsing it again", file=sys.stderr)
    status = (f"{job.outputs[0][0]}: {count - len(todo) - len(held)} of {count} shards already parsed; parsing "
              f"{len(todo)} with {min(args.workers, len(todo))} worker(s) on {device}")
    start = time.perf_counter()
    empty = [shard for shard in todo if shard.lines(source.lines) == 0]
    todo = [shard for shard in todo if shard not in empty]
    if args.workers == 1 or not todo:
        parse = job.load(device) if todo else None  # a model that does not load: the run's one line, nothing written
        print(status, file=sys.stderr)
        with tqdm(total=source.lines, initial=finished_lines, unit="sent") as progress:
            for shard in todo:
                parse_shard(job, source, shard, parse, progress.update)
    else:
        progress = _WorkersBar(status, source.lines, finished_lines)
        try:
            _run_workers(job, source, todo, args.workers, device, command, progress)
        finally:
            progress.close()
    for shard in empty:
        parse_shard(job, source, shard, None, lambda n: None)
    seconds = time.perf_counter() - start
    merged = merge(job, count, source)
    # the rate of this run: the lines it parsed, not those of the shards an earlier run left
    merged.report.seconds, merged.report.sentences = seconds, source.lines - finished_lines
    merged.report.earlier = finished_lines
    return merged


def report_run(result: ParseRun, args: argparse.Namespace, output: str, skipped: str) -> None:
    """The command's last words: the fallbacks go to ``skipped``, the summary to stderr; one shard says what comes
    next."""
    if result.whole:
        result.report.write_skipped(skipped)
        print(f"{output}: {result.report.summary()}; fallbacks listed in {skipped}", file=sys.stderr)
    else:
        print(f"{Shard(args.shard_id, args.num_shards, 1).path(output)}: {result.report.summary()}; once all "
              f"{args.num_shards} shards are parsed, --merge writes {output}", file=sys.stderr)


def rerun_command(script: str, argv: list[str] | None) -> list[str]:
    """This command again, for a worker: the interpreter, the script, the options it was given."""
    return [sys.executable, os.path.abspath(script), *(sys.argv[1:] if argv is None else argv)]
