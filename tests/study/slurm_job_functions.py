"""Functions test_slurm.py runs as Slurm jobs; standard library only, so that a job starts in a second."""
import fcntl
import signal
import subprocess
import sys
import time
from pathlib import Path

LONGEST_WAIT_S = 120


def inverse(number: int) -> float:
    return 1 / number


def wait_for_release(release: str) -> str:
    """Touches RELEASE.started, then waits for the file ``release``."""
    release = Path(release)
    release.with_name(release.name + ".started").touch()
    deadline = time.monotonic() + LONGEST_WAIT_S
    while not release.exists():
        if time.monotonic() > deadline:
            return f"never released: {release.name}"
        time.sleep(0.2)
    return f"released: {release.name}"


def child_until_release(release: str) -> tuple[str, str]:
    """As a study run: a child waits for ``release``; ("failed", why) where a signal ended it, else ("done", ...)."""
    waiting = (f"import time, pathlib\nrelease = pathlib.Path({release!r})\n"
               f"release.with_name(release.name + '.started').touch()\ndeadline = time.monotonic() + {LONGEST_WAIT_S}\n"
               "while not release.exists() and time.monotonic() < deadline:\n    time.sleep(0.2)\n")
    child = subprocess.run([sys.executable, "-c", waiting])
    if child.returncode < 0:
        return "failed", f"the child ended by {signal.Signals(-child.returncode).name}"
    return "done", f"the child ended with exit status {child.returncode}"


def wait_or_child(kind_and_release: tuple[str, str]):
    """``child_until_release`` for kind "child", else ``wait_for_release``."""
    kind, release = kind_and_release
    return (child_until_release if kind == "child" else wait_for_release)(release)


def hold_claim_until_release(claim_and_release: tuple[str, str]) -> str:
    """As a run in training: holds a flock on ``claim`` (none where "") until ``release`` exists."""
    claim, release = claim_and_release
    if not claim:
        return wait_for_release(release)
    with open(claim, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        return wait_for_release(release)
