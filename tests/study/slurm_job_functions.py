"""Tiny functions that tests/study/test_slurm.py runs as Slurm jobs.

Standard library only: a job imports this module to unpickle its function, and starts in a second (importing
fairseq_syntax, torch with it, takes half a minute on a busy machine).
"""
import fcntl
import signal
import subprocess
import sys
import time
from pathlib import Path

#: how long a waiting job waits for its release at most, should a test fail before releasing or cancelling it
LONGEST_WAIT_S = 120


def square(number: int) -> int:
    return number * number


def inverse(number: int) -> float:
    return 1 / number  # ZeroDivisionError for 0: a job whose function raises


def wait_for_release(release: str) -> str:
    """Marks itself started (``RELEASE.started``), then waits until the file ``release`` exists."""
    release = Path(release)
    release.with_name(release.name + ".started").touch()
    deadline = time.monotonic() + LONGEST_WAIT_S
    while not release.exists():
        if time.monotonic() > deadline:
            return f"never released: {release.name}"
        time.sleep(0.2)
    return f"released: {release.name}"


def child_until_release(release: str) -> tuple[str, str]:
    """As a study run does with its training: starts a child process that waits for the file ``release`` (marking
    ``RELEASE.started`` first) and returns its outcome, ``("done", ...)`` when the child ended by itself, else
    ``("failed", why)``: ``scancel`` sends SIGTERM to every process of the job, which kills the child while
    submitit's own process ignores it, so the function returns a failed outcome instead of raising."""
    waiting = (f"import time, pathlib\nrelease = pathlib.Path({release!r})\n"
               f"release.with_name(release.name + '.started').touch()\ndeadline = time.monotonic() + {LONGEST_WAIT_S}\n"
               "while not release.exists() and time.monotonic() < deadline:\n    time.sleep(0.2)\n")
    child = subprocess.run([sys.executable, "-c", waiting])
    if child.returncode < 0:
        return "failed", f"the child ended by {signal.Signals(-child.returncode).name}"
    return "done", f"the child ended with exit status {child.returncode}"


def hold_claim_until_release(claim_and_release: tuple[str, str]) -> str:
    """As a study run in training does: holds an exclusive ``flock`` on the file ``claim`` (a run's
    ``WORK/claims/RUN.lock``; none where ``claim`` is "") until the file ``release`` exists."""
    claim, release = claim_and_release
    if not claim:
        return wait_for_release(release)
    with open(claim, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        return wait_for_release(release)
