"""Tiny functions that tests/study/test_slurm.py runs as Slurm jobs.

Standard library only: a job imports this module to unpickle its function, and starts in a second (importing
fairseq_syntax, torch with it, takes half a minute on a busy machine).
"""
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
