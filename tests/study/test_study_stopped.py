"""run stopped by SIGTERM while scoring over seeds (the demo's run, a slow scorer) leaves no temporary folder."""
import os
import shutil
import signal
import subprocess
import sys
import time

from conftest import REPO

from fairseq_syntax.core.stopping import PREFIX

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
    assert "parsers.json" in os.listdir(tmpdir / scratch)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert "== mask over its seeds: no record over its seeds yet" in out
    assert (process.returncode, err) == (130, "interrupted: fairseq-syntax-study run goes on from here\n")
    assert os.listdir(tmpdir) == []
    assert not (demo / "runs" / "mask.seeds.run.json").exists()
