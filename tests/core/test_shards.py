"""fairseq_syntax.parsing.shards and batching with a stand-in parser (upper-cased lines, CoNLL-U-like blocks)."""
import argparse
import json
import os

import pytest

from fairseq_syntax.parsing import shards
from fairseq_syntax.parsing.batching import token_batches
from fairseq_syntax.parsing.shards import BLOCKS, LINES, Outcome, ParseJob, Shard

# line 3 is empty, line 5 is no UTF-8: both are fallbacks, in the line numbers of the whole input
INPUT = b"a b\nc\n\nd e f\ng \xff h\ni\nj k\n"
FALLBACKS = [(3, "empty line"), (5, "unreadable line: {path}:5: not valid UTF-8 (byte 0xff at byte 3 of the line)")]
#: the stand-in parser's lines of INPUT
UPPER = "A B\nC\n\nD E F\n\nI\nJ K\n"


def test_shard_k_holds_every_nth_chunk_of_the_input():
    # 11 lines in chunks of 2: [1 2] [3 4] [5 6] [7 8] [9 10] [11], dealt to 3 shards in turn
    layout = [Shard(index, 3, 2) for index in range(3)]
    assert [[line for line in range(1, 12) if shard.holds(line)] for shard in layout] == [
        [1, 2, 7, 8], [3, 4, 9, 10], [5, 6, 11]]
    assert [shard.lines(11) for shard in layout] == [4, 4, 3]
    assert Shard(5, 6, 2).lines(11) == 1 and Shard(6, 7, 2).lines(11) == 0  # chunk 5 is line 11; no chunk 6
    assert layout[1].path("out/train.tree") == "out/train.tree.shard1-of-3"
    assert layout[2].path("train.arcs.jsonl.gz") == "train.arcs.jsonl.shard2-of-3.gz"


def test_token_batches_bound_the_padded_size_shortest_first():
    # lengths by index: 3 1 2 5 1; sorted 1 1 2 3 5; padded sizes 2x1, 1x2, 1x3, 1x5 (5 > 4 alone)
    assert token_batches([3, 1, 2, 5, 1], 4) == [[1, 4], [2], [0], [3]]
    assert token_batches([2, 2, 2], 6) == [[0, 1, 2]]
    assert token_batches([], 10) == []


def stand_in_job(path, tmp_path, settings=None) -> ParseJob:
    def load(device):
        def parse(lines, outputs, progress):
            fallbacks, words = [], 0
            for line in lines:
                outputs[0].write(" ".join(line.tokens).upper() + "\n")
                outputs[1].write(f"# line {line.number}\n" + "".join(f"{token}\n" for token in line.tokens) + "\n")
                if line.problem or not line.tokens:
                    fallbacks.append((line.number, line.problem or "empty line"))
                words += len(line.tokens)
                progress(1)
            return Outcome(fallbacks, {"words": words})

        return parse

    return ParseJob(str(path), None, [(str(tmp_path / "out.txt"), LINES), (str(tmp_path / "out.blocks.gz"), BLOCKS)],
                    2, settings or {"model": "upper"}, load)


def options(**given):
    defaults = {"num_shards": None, "shard_id": None, "merge": False, "workers": 1, "device": "cpu",
                "progress_file": None, "batch_size": 2}
    return argparse.Namespace(**{**defaults, **given})


def merge(job, count):
    return shards.run(job, options(num_shards=count, merge=True), [])


def parse_shards(job, count, indices=None):
    """Shards ``indices`` (default: all) of ``count``, each as its own run would parse it."""
    for index in range(count) if indices is None else indices:
        shards.run(job, options(num_shards=count, shard_id=index), [])


def outputs(tmp_path):
    from fairseq_syntax.parsing.text import open_text

    with open_text(str(tmp_path / "out.blocks.gz")) as blocks:
        return (tmp_path / "out.txt").read_text(), blocks.read()


def leftovers(tmp_path):
    return sorted(path.name for path in tmp_path.iterdir() if ".shard" in path.name)


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "input.txt"
    path.write_bytes(INPUT)
    return path


@pytest.fixture
def job(corpus, tmp_path):
    """The stand-in job on the corpus, its outputs in tmp_path."""
    return stand_in_job(corpus, tmp_path)


def expected_fallbacks(path):
    return [(line, reason.format(path=path)) for line, reason in FALLBACKS]


def test_a_single_run_writes_every_line_once_and_lists_the_fallbacks(corpus, job, tmp_path):
    result = shards.run(job, options(), [])
    lines, blocks = outputs(tmp_path)
    assert lines == UPPER
    assert blocks.startswith("# line 1\na\nb\n\n# line 2\nc\n\n# line 3\n\n# line 4\nd\n")
    assert result.whole and result.report.sentences == 7 and result.stats == {"words": 9}
    assert result.report.fallbacks == expected_fallbacks(corpus)


def test_merge_writes_nothing_until_every_shard_is_there_and_whole(job, tmp_path):
    parse_shards(job, 3, [1])
    with pytest.raises(SystemExit, match=r"shard 0 is missing; shard 2 is missing \(parse them with --num-shards 3"):
        merge(job, 3)
    parse_shards(job, 3, [0, 2])
    first = tmp_path / "out.txt.shard0-of-3"
    kept = first.read_text()
    first.write_text(kept.split("\n", 1)[1])  # one record short: a file that is not the shard's whole output
    with pytest.raises(SystemExit, match=r"out.txt.shard0-of-3 ends before its 3 records"):
        merge(job, 3)
    assert not (tmp_path / "out.txt").exists()
    first.write_text(kept + "EXTRA\n")
    with pytest.raises(SystemExit, match=r"out.txt.shard0-of-3 holds more than its 3 records"):
        merge(job, 3)
    first.write_text(kept)
    merge(job, 3)
    assert outputs(tmp_path)[0] == UPPER


def test_shards_of_another_input_or_settings_are_not_merged(corpus, job, tmp_path):
    parse_shards(job, 2)
    other = stand_in_job(corpus, tmp_path, settings={"model": "lower"})
    with pytest.raises(SystemExit, match='shard 0 was made with other settings: model "upper" .this run: "lower".; '
                                         'shard 1 was made with other settings: model "upper" .this run: "lower".'):
        merge(other, 2)
    corpus.write_bytes(INPUT + b"l\n")
    with pytest.raises(SystemExit, match=r"shard 0 was made with other settings: input_lines 7 \(this run: 8\), "
                                         r"input_sha256 \"[0-9a-f]{12}\.\.\.\" \(this run: \"[0-9a-f]{12}\.\.\.\"\)"):
        merge(job, 2)


def test_a_run_started_again_parses_only_the_shards_not_finished(corpus, job, tmp_path, capsys):
    parse_shards(job, 3, [0, 1])
    manifest = tmp_path / "out.txt.shard1-of-3.json"
    recorded = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**recorded, "settings": {**recorded["settings"], "model": "old"}}))
    (tmp_path / "out.txt.shard2-of-3.partial").write_text("A B\n")  # a write cut short: no manifest
    loads = []
    counted = stand_in_job(corpus, tmp_path)
    counted.load = lambda device: loads.append(device) or job.load(device)
    result = shards.run(counted, options(num_shards=3, workers=1), [])
    err = capsys.readouterr().err
    assert 'shard 1 was made with other settings: model "old" (this run: "upper"): parsing it again' in err
    assert "1 of 3 shards already parsed; parsing 2 with 1 worker(s) on cpu" in err
    assert loads == ["cpu"]  # one model for both shards of this process
    assert outputs(tmp_path)[0] == UPPER
    assert result.report.fallbacks == expected_fallbacks(corpus) and result.stats == {"words": 9}
    assert leftovers(tmp_path) == []  # the .partial of the cut-short write was written again and renamed
    # the rate is of the lines this run parsed: shard 0's lines 1 2 7 were an earlier run's
    assert (result.report.sentences, result.report.earlier) == (4, 3)
    assert result.report.summary().startswith(f"parsed 4 sentences in {result.report.seconds:.1f} s (")
    assert ", 3 more by an earlier run; 2 got the flat fallback structure" in result.report.summary()


def test_an_empty_shard_needs_no_parser(job, tmp_path):
    job.load = lambda device: pytest.fail("no model is loaded for a shard without lines")
    shards.run(job, options(num_shards=5, shard_id=4), [])  # 7 lines in chunks of 2: chunk 4 does not exist
    assert (tmp_path / "out.txt.shard4-of-5").read_text() == ""
    assert json.loads((tmp_path / "out.txt.shard4-of-5.json").read_text())["lines"] == 0


def test_device_cuda_without_a_gpu_is_one_error_line():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    with pytest.raises(SystemExit, match=r"^error: --device cuda: torch sees no CUDA device here"):
        shards.select_device("cuda")


class FakeWorker:
    """A worker that ends after ``POLLS[shard]`` polls with ``EXIT[shard]``, leaving a lock, a ``.partial`` output
    and a log (with a refusal's line where it exits 4); ``GPUS[shard]``: the GPU it was given."""

    POLLS: dict = {}
    EXIT: dict = {}
    GPUS: dict = {}
    started: list = []
    terminated: list = []

    def __init__(self, argv, stdout, stderr, env):
        self.shard = int(argv[argv.index("--shard-id") + 1])
        stem = argv[argv.index("--progress-file") + 1].removesuffix(".progress")
        FakeWorker.started.append(self.shard)
        FakeWorker.GPUS[self.shard] = env.get("CUDA_VISIBLE_DEVICES")
        open(stem + ".lock", "w").close()
        open(stem + ".partial", "w").close()  # the stem is the shard's output: out.txt.shardK-of-N
        stdout.write("a warning first\n" + (f"error: shard {self.shard}'s model does not load\n"
                                            if FakeWorker.EXIT[self.shard] == 4 else ""))
        stdout.flush()
        self.returncode = None

    def poll(self):
        FakeWorker.POLLS[self.shard] -= 1
        if FakeWorker.POLLS[self.shard] == 0:
            self.returncode = FakeWorker.EXIT[self.shard]
        return self.returncode

    def terminate(self):
        FakeWorker.terminated.append(self.shard)
        self.returncode = -15

    def wait(self):
        return self.returncode


@pytest.fixture
def fake_workers(monkeypatch):
    monkeypatch.setattr(shards, "POLL_SECONDS", 0)
    monkeypatch.setattr(shards.subprocess, "Popen", FakeWorker)
    FakeWorker.GPUS, FakeWorker.started, FakeWorker.terminated = {}, [], []


def test_running_workers_hold_slots_and_each_slot_its_gpu(corpus, job, monkeypatch, fake_workers):
    """A starting worker takes the lowest free slot, which names its GPU: shard 2 gets shard 1's GPU."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7,9")
    FakeWorker.POLLS, FakeWorker.EXIT = {0: 3, 1: 1, 2: 1, 3: 1}, dict.fromkeys(range(4), 0)

    class Bar:
        count = 0

        def update(self, count):
            Bar.count += count

    todo = [Shard(index, 4, 2) for index in range(4)]
    shards._run_workers(job, shards.scan_input(str(corpus)), todo, 2, "cuda", ["parse"], Bar())
    assert FakeWorker.GPUS == {0: "7", 1: "9", 2: "9", 3: "9"}
    assert Bar.count == 7  # every line of the 4 shards (2 + 2 + 2 + 1) counted once on the bar


@pytest.mark.parametrize("exits, message, started, terminated", [
    # two workers fail: the third shard is never started
    ({0: 1, 1: 1, 2: 0}, "error: 2 worker(s) failed; the finished shards are kept", [0, 1], []),
    # shard 1 refuses (its model does not load) while shard 0 runs on: shard 0 is stopped, its files removed
    ({0: None, 1: 4, 2: 0}, "error: shard 1's model does not load", [0, 1], [0]),
])
def test_a_refusing_worker_stops_the_others_and_leaves_no_file(tmp_path, fake_workers, exits, message, started,
                                                                terminated):
    source = tmp_path / "input.txt"
    source.write_text("a\nb\nc\n")
    job = ParseJob(str(source), None, [(str(tmp_path / "out.txt"), LINES)], 1, {"model": "m"}, lambda device: None)
    FakeWorker.POLLS, FakeWorker.EXIT = dict.fromkeys(range(3), 2), exits
    todo = [Shard(index, 3, 1) for index in range(3)]
    with pytest.raises(SystemExit) as stop:
        shards._run_workers(job, shards.scan_input(str(source)), todo, 2, "cpu", ["python", "parse"],
                            shards._WorkersBar("status", 3, 0))
    assert str(stop.value).startswith(message)
    assert (FakeWorker.started, FakeWorker.terminated) == (started, terminated)
    left = sorted(os.listdir(tmp_path))
    if exits[1] == 4:
        assert left == ["input.txt"]  # no lock, log or .partial of shard 0 or 1
    else:  # an ordinary failure keeps the logs to read
        assert "out.txt.shard0-of-3.log" in left and "out.txt.shard1-of-3.log" in left


def model_job(corpus, tmp_path, model):
    return stand_in_job(corpus, tmp_path, settings={"model": shards.model_identity(str(model))})


def test_a_model_file_moved_makes_the_same_shards_and_one_changed_or_missing_is_named(corpus, tmp_path):
    import hashlib

    model = tmp_path / "models" / "parser.pt"
    model.parent.mkdir()
    model.write_bytes(b"weights")
    job = model_job(corpus, tmp_path, model)
    parse_shards(job, 2)
    digest = hashlib.sha256(b"weights").hexdigest()
    renamed = tmp_path / "models" / "renamed.pt"
    model.rename(renamed)
    with pytest.raises(SystemExit) as error:
        merge(model_job(corpus, tmp_path, model), 2)
    assert str(error.value).startswith(
        f"error: cannot write {tmp_path}/out.txt, {tmp_path}/out.blocks.gz from 2 shards: shard 0 was made with other "
        f"settings: --model {model} is no file here (the shard was made with parser.pt, sha256 {digest[:12]}...); ")
    merge(model_job(corpus, tmp_path, renamed), 2)  # the same model, moved
    assert outputs(tmp_path)[0] == UPPER
    parse_shards(model_job(corpus, tmp_path, renamed), 2)
    renamed.write_bytes(b"retrained")
    with pytest.raises(SystemExit) as error:
        merge(model_job(corpus, tmp_path, renamed), 2)
    assert (f"shard 1 was made with other settings: --model renamed.pt of another digest (sha256 {digest[:12]}... in "
            f"the shard, {hashlib.sha256(b'retrained').hexdigest()[:12]}... now): another model file") in str(error.value)


def test_a_merge_of_another_number_of_shards_names_the_shards_there(job, tmp_path):
    parse_shards(job, 3)
    with pytest.raises(SystemExit) as error:
        merge(job, 2)
    assert str(error.value) == (
        f"error: cannot write {tmp_path}/out.txt, {tmp_path}/out.blocks.gz from 2 shards: shard 0 is missing; shard 1 "
        f"is missing; the shards there are of --num-shards 3 ({tmp_path}/out.txt.shard0-of-3.json, "
        f"{tmp_path}/out.txt.shard1-of-3.json, {tmp_path}/out.txt.shard2-of-3.json): merge with --num-shards 3 (parse "
        "them with --num-shards 2 --shard-id K, or let --workers W parse what is missing and merge)")


@pytest.mark.parametrize("given", [["--shard-id", "1"], ["--merge"]])
def test_workers_with_one_shard_or_a_merge_are_refused(given, capsys):
    parser = argparse.ArgumentParser(prog="parse")
    parser.add_argument("--batch-size", type=int, default=2)
    shards.add_arguments(parser)
    with pytest.raises(SystemExit):
        shards.check_arguments(parser, parser.parse_args(["--workers", "2", "--num-shards", "3", *given]))
    assert f"error: {given[0]} runs in this one process: give it no --workers" in capsys.readouterr().err


def test_a_shard_is_parsed_by_one_live_process_at_a_time(job, tmp_path, capsys):
    shard = Shard(1, 3, 2)
    lock = f"{tmp_path}/out.txt.shard1-of-3.lock"
    with shards._shard_lock(job, shard):  # another process holds it (flock: another open file is another holder)
        with pytest.raises(SystemExit) as error:
            shards.run(job, options(num_shards=3, shard_id=1), [])
        assert str(error.value) == (
            f"error: shard 1 of 3 ({tmp_path}/out.txt.shard1-of-3) is being parsed by another process (pid "
            f"{os.getpid()}, holding {lock}): let it finish, or stop it and run again")
        with pytest.raises(SystemExit) as error:  # --workers leaves it to its holder, parses the others
            shards.run(job, options(num_shards=3, workers=1), [])
        assert "shard 1 is being parsed by another process" in str(error.value)
        assert f"shard 1 is being parsed by another process (pid {os.getpid()}): left to it" in capsys.readouterr().err
        assert sorted(p.name for p in tmp_path.glob("out.txt.shard*.json")) == ["out.txt.shard0-of-3.json",
                                                                                 "out.txt.shard2-of-3.json"]
    shards.run(job, options(num_shards=3, workers=1), [])  # released: parsed and merged
    assert outputs(tmp_path)[0] == UPPER and leftovers(tmp_path) == []


SLOW_PARSER = """
import argparse, time
from fairseq_syntax.parsing import shards
from fairseq_syntax.parsing.shards import LINES, Outcome, ParseJob

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=1)
parser.add_argument("--threads", type=int)
shards.add_arguments(parser)
args = parser.parse_args()

def load(device):
    time.sleep(2)  # a model loading
    def parse(lines, outputs, progress):
        for line in lines:
            time.sleep(1)
            outputs[0].write(" ".join(line.tokens) + "\\n")
            progress(1)
        return Outcome([])
    return parse

job = ParseJob("{input}", None, [("{output}", LINES)], 1, {{"model": "slow"}}, load)
shards.run(job, args, shards.rerun_command(__file__, None))
"""


def test_workers_stop_at_once_when_their_parent_is_killed(tmp_path):
    """Killed while its workers still start (importing torch), the parent leaves workers that stop before a line."""
    import signal
    import subprocess
    import sys
    import time

    import psutil

    source = tmp_path / "input.txt"
    source.write_text("".join(f"w{k}\n" for k in range(12)))
    script = tmp_path / "slow_parser.py"
    script.write_text(SLOW_PARSER.format(input=source, output=tmp_path / "out.txt"))
    log = tmp_path / "parent.log"
    with open(log, "w") as stderr:
        parent = subprocess.Popen([sys.executable, str(script), "--workers", "2", "--num-shards", "6"],
                                  stderr=stderr, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 600  # the parent imports torch first: seconds, minutes on a loaded machine
    while len(psutil.Process(parent.pid).children()) < 2:  # both workers started
        assert parent.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.05)
    workers = psutil.Process(parent.pid).children()
    parent.send_signal(signal.SIGKILL)
    parent.wait()

    def alive(process):
        try:
            return process.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + 60  # a worker still importing notices once it runs its first line of ours
    while any(alive(worker) for worker in workers):
        assert time.monotonic() < deadline, "a worker outlived its parent"
        time.sleep(0.1)
    assert not list(tmp_path.glob("out.txt.shard*-of-6.json"))  # no shard was parsed to its end
    logs = [path.read_text() for path in tmp_path.glob("out.txt.shard*-of-6.log")]
    assert len(logs) == 2 and all(f"the process that started this worker (pid {parent.pid}) is gone" in log
                                  for log in logs)
