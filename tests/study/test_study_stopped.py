"""run stopped by SIGTERM while scoring over seeds (the demo's run, a slow scorer) says where it goes on and leaves no
record over seeds."""
import os
import shutil
import signal
import subprocess
import sys
import time

from conftest import REPO

SLOW_SCORER = """
import pathlib, subprocess, sys, time
original = subprocess.run
def run(argv, *args, **kwargs):
    if "fairseq_syntax.cli.score" in argv:
        pathlib.Path("scoring").touch()
        time.sleep(600)
    return original(argv, *args, **kwargs)
subprocess.run = run
from fairseq_syntax.cli import study
sys.exit(study.main(sys.argv[1:]))
"""


def test_run_stopped_while_scoring_over_seeds_says_where_it_goes_on(tmp_path):
    demo = tmp_path / "demo"
    shutil.copytree(os.path.join(REPO, "examples", "demo"), demo)
    (demo / "runs" / "mask.seeds.run.json").unlink()
    process = subprocess.Popen([sys.executable, "-c", SLOW_SCORER, "run", "our-run.toml"], cwd=demo,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (demo / "scoring").exists():
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no scoring over seeds within 300 s"
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert "== mask over its seeds: no record over its seeds yet" in out
    assert (process.returncode, err) == (130, "interrupted: fairseq-syntax-study run goes on from here\n")
    assert not (demo / "runs" / "mask.seeds.run.json").exists()
