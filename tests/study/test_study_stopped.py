"""``fairseq-syntax-study run`` stopped by SIGTERM while it scores a system over its seeds
(:mod:`fairseq_syntax.study.over_seeds`) leaves nothing in the temporary folder: the files it hands the scorer (the
first seed's parsers and commands) live in a folder of :func:`fairseq_syntax.core.stopping.temporary_directory`,
removed when run stops, and removed by the next run where a SIGKILL left it.

The study is a copy of the demo's committed run (examples/demo/our-run.toml: every run done, kept packed) without
Mask's record over its seeds, so that run has only that to make; the scorer stands in as a process that takes ten
minutes (the bootstrap over a large test set), so the signal lands while it runs."""
import os
import shutil
import signal
import subprocess
import sys
import time

from conftest import REPO

from fairseq_syntax.core.stopping import PREFIX

#: fairseq-syntax-study with a scorer that takes ten minutes to start
SLOW_SCORER = """
import subprocess, sys, time
original = subprocess.run
def run(argv, *args, **kwargs):
    if "fairseq_syntax.cli.score" in argv:
        time.sleep(600)
    return original(argv, *args, **kwargs)
subprocess.run = run
from fairseq_syntax.cli import study
sys.exit(study.main(sys.argv[1:]))
"""


def folders(tmpdir):
    return sorted(name for name in os.listdir(tmpdir) if name.startswith(PREFIX + "over-seeds-"))


def test_run_stopped_while_scoring_over_seeds_leaves_nothing_in_the_temporary_folder(tmp_path):
    demo, tmpdir = tmp_path / "demo", tmp_path / "tmp"
    shutil.copytree(os.path.join(REPO, "examples", "demo"), demo)
    (demo / "runs" / "mask.seeds.run.json").unlink()
    tmpdir.mkdir()
    process = subprocess.Popen([sys.executable, "-c", SLOW_SCORER, "run", "our-run.toml"], cwd=demo,
                               env=dict(os.environ, TMPDIR=str(tmpdir)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not [name for name in folders(tmpdir) if os.listdir(tmpdir / name)]:
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no scoring over seeds within 300 s"
        time.sleep(0.05)
    scratch = folders(tmpdir)[0]
    assert scratch.startswith(f"{PREFIX}over-seeds-{process.pid}-")
    assert "parsers.json" in os.listdir(tmpdir / scratch)  # Mask's first seed's parsers, for the scorer
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert "== mask over its seeds: no record over its seeds yet" in out
    assert (process.returncode, err) == (130, "interrupted: fairseq-syntax-study run goes on from here\n")
    assert os.listdir(tmpdir) == []
    assert not (demo / "runs" / "mask.seeds.run.json").exists()
