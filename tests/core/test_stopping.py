"""Commands stopped by SIGTERM or SIGINT mid-work remove their temporary files and exit 128 + signal in one line."""
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
from conftest import REPO, run_preprocess, tiny_corpus, write_arcs
from test_parse_command import GSD_DEV, stanza_german_model  # noqa: F401  (the fixture: a tiny stanza parser file)

from fairseq_syntax.core import stopping
from fairseq_syntax.core.stopping import OWNER_FILE, PREFIX, remove_abandoned, temporary_directory

LINES = 5000  # enough work left after the command is seen working for the signal to land mid-work


def wait_for(condition, process, what: str, seconds: float = 300):
    """Poll ``condition()`` until it returns something true; fail when ``process`` ends first or time runs out."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        if process.poll() is not None:
            pytest.fail(f"the command ended (status {process.returncode}) before {what}: "
                        f"{process.stderr.read()[-3000:]}")
        time.sleep(0.02)
    process.kill()
    pytest.fail(f"no {what} within {seconds} s")


def folders(tmpdir, kind):
    return sorted(name for name in os.listdir(tmpdir) if name.startswith(PREFIX + kind))


def assert_stopped(process, signum, command):
    """Send ``signum``: the command exits 128 + signum (SIGTERM 143, SIGINT 130), its stderr's last line says so."""
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=300)
    assert "Traceback" not in stderr, stderr[-3000:]
    assert (process.returncode, stderr.strip().splitlines()[-1]) == (
        128 + signum, f"{command}: stopped by {signal.Signals(signum).name}; the temporary files it made are removed")


def start(command, tmpdir):
    """``command`` started from the repository root with ``tmpdir`` as its TMPDIR; its stderr piped."""
    return subprocess.Popen(command, cwd=REPO, env=dict(os.environ, TMPDIR=str(tmpdir), OMP_NUM_THREADS="1"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def long_corpus(tmp_path_factory):
    """``LINES`` training pairs of the tiny corpus with their trees and arcs files."""
    raw = tmp_path_factory.mktemp("long")
    tiny_corpus(str(raw / "train"), LINES, 1)
    write_arcs(str(raw / "train"))
    return raw


def test_preprocess_stopped_mid_work_removes_its_copy_of_the_corpus(long_corpus, tmp_path):
    # SIGINT takes the same way out: test_parse_stopped_mid_parse_leaves_no_partial_output
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    process = start([sys.executable, "-m", "fairseq_syntax.cli.preprocess", "-s", "en", "-t", "de", "--trainpref",
                     f"{long_corpus}/train", "--form", "preorder", "--destdir", str(tmp_path / "data"),
                     "--joined-dictionary", "--workers", "1"], tmpdir)
    copy = wait_for(lambda: [name for name in folders(tmpdir, "preprocess-")
                             if os.path.exists(tmpdir / name / "train.en")], process, "its copy of the corpus")
    assert copy[0].startswith(f"{PREFIX}preprocess-{process.pid}-")
    assert_stopped(process, signal.SIGTERM, "fairseq-syntax-preprocess")
    assert os.listdir(tmpdir) == []
    assert not os.path.exists(tmp_path / "data" / "syntax.json")  # not made: the next run says it was stopped


def test_preprocess_dependencies_stopped_mid_work_removes_its_partial_side_data(long_corpus, tmp_path):
    data = tmp_path / "data"
    run_preprocess(long_corpus, data, "sequence", splits=("train",))
    before = sorted(os.listdir(data))
    process = start([sys.executable, "-m", "fairseq_syntax.methods.ldd.preprocess", "--destdir", str(data), "-s",
                     "en", "-t", "de", "--labels", "stanford", "--trainpref", f"{long_corpus}/train"], tmp_path)
    wait_for(lambda: [name for name in os.listdir(data) if name.endswith(".partial")], process,
             "its .partial side data")
    assert_stopped(process, signal.SIGTERM, "fairseq-syntax-preprocess-dependencies")
    assert sorted(os.listdir(data)) == before  # no .partial, no side data


def test_measure_throughput_stopped_mid_work_stops_its_workers_and_removes_its_folder(tagger_model, tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("The cat sleeps and the dog runs .\n" * 20000)
    process = start([sys.executable, os.path.join(REPO, "preprocess", "measure_throughput.py"), "--input",
                     str(sentences), "--lines", "20000", "--tagger", str(tagger_model), "--workers", "2", "--repeats",
                     "1", "--no-gpu", "--out", str(tmp_path / "out.json")], tmpdir)
    # the shard workers are started once their logs are there
    wait_for(lambda: [name for folder in folders(tmpdir, "throughput-")
                      for name in os.listdir(tmpdir / folder) if ".shard" in name], process, "its parse workers")
    assert_stopped(process, signal.SIGTERM, "measure_throughput.py")
    assert os.listdir(tmpdir) == []
    assert not (tmp_path / "out.json").exists()


#: a stanza Pipeline that takes ten minutes to start: the signal lands while its temporary folder is there
SLOW_STANZA = """
import sys, time
import stanza
class Slow(stanza.Pipeline):
    def __init__(self, *args, **kwargs):
        time.sleep(600)
        super().__init__(*args, **kwargs)
stanza.Pipeline = Slow
from fairseq_syntax.cli import parse
parse.main(sys.argv[1:])
"""


def start_parse(model, tmp_path, lines: int, *extra, program=("-m", "fairseq_syntax.cli.parse")):
    """fairseq-syntax-parse of ``lines`` German sentences with the stanza model file: (process, out, tmp)."""
    import gzip

    out, tmpdir = tmp_path / "out", tmp_path / "tmp"
    out.mkdir()
    tmpdir.mkdir()
    sentences = [" ".join(line.split("\t")[1] for line in block.splitlines() if line[:1].isdigit())
                 for block in gzip.open(GSD_DEV, "rt", encoding="utf-8").read().split("\n\n")[:20]]
    (tmp_path / "in.txt").write_text("".join(f"{sentences[k % 20]}\n" for k in range(lines)), encoding="utf-8")
    process = start([sys.executable, *program, "dependency", "--backend", "stanza", "--lang", "de", "--model", model,
                     "--input", str(tmp_path / "in.txt"), "--output", str(out / "arcs.jsonl"), "--device", "cpu",
                     *extra], tmpdir)
    return process, out, tmpdir


def test_parse_stopped_while_a_stanza_model_file_starts_removes_its_folder(stanza_german_model,  # noqa: F811
                                                                          tmp_path):
    process, out, tmpdir = start_parse(stanza_german_model, tmp_path, 10, program=("-c", SLOW_STANZA))
    started = wait_for(lambda: [name for name in folders(tmpdir, "stanza-resources-")
                                if os.path.exists(tmpdir / name / "resources.json")], process,
                       "the folder its stanza Pipeline starts from")
    assert started[0].startswith(f"{PREFIX}stanza-resources-{process.pid}-")
    assert_stopped(process, signal.SIGTERM, "fairseq-syntax-parse")
    assert os.listdir(tmpdir) == [] and os.listdir(out) == []


def test_parse_stopped_mid_parse_leaves_no_partial_output(stanza_german_model, tmp_path):  # noqa: F811
    process, out, tmpdir = start_parse(stanza_german_model, tmp_path, 20000, "--batch-size", "20")
    wait_for(lambda: os.path.exists(out / "arcs.jsonl.partial"), process, "its .partial output")
    assert_stopped(process, signal.SIGINT, "fairseq-syntax-parse")
    assert os.listdir(out) == [] and os.listdir(tmpdir) == []


def test_parse_workers_stopped_mid_parse_leave_only_finished_shards(stanza_german_model, tmp_path):  # noqa: F811
    process, out, tmpdir = start_parse(stanza_german_model, tmp_path, 20000, "--batch-size", "20", "--workers", "2",
                                       "--num-shards", "4")
    # both workers parsing: their shards' outputs are being written
    wait_for(lambda: len([name for name in os.listdir(out) if name.endswith(".partial")]) >= 2, process,
             "two workers writing their shards", seconds=600)
    assert_stopped(process, signal.SIGTERM, "fairseq-syntax-parse")
    left = sorted(os.listdir(out))
    finished = {name.removesuffix(".json") for name in left if name.endswith(".json")}
    # only finished shards' files are left: the stopped workers' .partial outputs, logs, progress and locks are gone
    assert len(finished) <= 2 and all(any(name == stem or name.startswith(stem + ".") for stem in finished)
                                      for name in left), left
    assert not [name for name in left if name.endswith(".partial")], left
    assert os.listdir(tmpdir) == []


def dead_pid() -> int:
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    return finished.pid


def test_only_folders_of_processes_no_longer_running_here_are_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    here, me = socket.gethostname(), os.getpid()
    start = stopping._start_time(me)
    owners = {
        f"{PREFIX}dead": {"host": here, "pid": dead_pid(), "start": None},
        f"{PREFIX}reused": {"host": here, "pid": me, "start": start - 1},  # the pid now is another process's
        f"{PREFIX}alive": {"host": here, "pid": me, "start": start},
        f"{PREFIX}elsewhere": {"host": here + "-another", "pid": dead_pid(), "start": None},
        "other-dead": {"host": here, "pid": dead_pid(), "start": None},  # not one of ours by its name
    }
    for name, owner in owners.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / OWNER_FILE).write_text(json.dumps(owner))
    (tmp_path / f"{PREFIX}study-cores-0").mkdir()  # a folder of the package without an owner file: kept
    assert sorted(remove_abandoned()) == [str(tmp_path / f"{PREFIX}dead"), str(tmp_path / f"{PREFIX}reused")]
    assert sorted(os.listdir(tmp_path)) == sorted([f"{PREFIX}alive", f"{PREFIX}elsewhere", "other-dead",
                                                   f"{PREFIX}study-cores-0"])


def test_a_temporary_directory_first_removes_a_killed_runs_and_is_removed_on_an_error(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    killed = {"host": socket.gethostname(), "pid": dead_pid(), "start": None}  # what a SIGKILL leaves
    (tmp_path / f"{PREFIX}preprocess-1").mkdir()
    (tmp_path / f"{PREFIX}preprocess-1" / OWNER_FILE).write_text(json.dumps(killed))
    with caplog.at_level(logging.WARNING, logger=stopping.__name__), pytest.raises(ValueError), \
            temporary_directory("test") as folder:
        assert os.listdir(tmp_path) == [os.path.basename(folder)]
        assert os.path.dirname(folder) == str(tmp_path)
        assert os.path.basename(folder).startswith(f"{PREFIX}test-{os.getpid()}-")
        owner = json.loads(open(os.path.join(folder, OWNER_FILE)).read())
        assert owner == {"host": socket.gethostname(), "pid": os.getpid(), "start": stopping._start_time(os.getpid())}
        raise ValueError
    assert os.listdir(tmp_path) == []
    assert caplog.messages == [f"removed {tmp_path}/{PREFIX}preprocess-1: the temporary folder of a run (process "
                               f"{killed['pid']}) that was killed without cleaning up"]
