"""The commands a study starts (training, decoding, scoring, parsing, BPE, binarizing): this checkout's package first
on their path, their console output into a log, a failure as one line of that log."""
from __future__ import annotations

import contextlib
import logging
import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import fairseq_syntax

PACKAGE_DIR = os.path.dirname(os.path.abspath(fairseq_syntax.__file__))
REPO_ROOT = os.path.dirname(PACKAGE_DIR)


def environment(**extra: str) -> dict[str, str]:
    """A child command's environment with ``extra``: this checkout's package first, whatever an older install
    left in site-packages."""
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def error_line(log: Path) -> str:
    """A failed command's message: its last ``error:`` line (without the prefix), else its last line."""
    lines = [line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    return (errors[-1].removeprefix("error: ") if errors else lines[-1]) if lines else "no output"


def run_logged(command: Sequence[str], log: Path, pass_fds: Sequence[int] = (), stdin=None, stdout=None) -> str | None:
    """``command`` from the repository root, its output (``stdout`` elsewhere where given) appended to ``log``;
    None once it succeeded, else its :func:`error_line`. ``pass_fds``: the locks it holds with this process."""
    with open(log, "a", encoding="utf-8") as out:
        status = subprocess.run(list(command), stdin=stdin, stdout=stdout or out, stderr=out, cwd=REPO_ROOT,
                                env=environment(), pass_fds=tuple(pass_fds)).returncode
    return None if status == 0 else error_line(log)


@contextlib.contextmanager
def quiet(log: Path) -> Iterator[None]:
    """The console output of library calls in this process (progress bars, fairseq's log lines) into ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        root = logging.getLogger()
        saved = list(root.handlers)
        handler = logging.StreamHandler(out)
        root.handlers = [handler]
        try:
            yield
        finally:
            root.handlers = saved
            handler.close()
