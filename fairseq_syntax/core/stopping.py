"""Commands that write temporary files stop on SIGTERM and SIGINT with their temporary files removed and one line.

SIGTERM's default action ends Python at once (no ``finally`` runs), and Ctrl-C ends in a traceback. Inside
:func:`stopping_cleanly` both raise :class:`Stopped` where the command is, so its ``with`` blocks and ``finally``
clauses clean up; it then ends with one line (``COMMAND: stopped by SIGTERM; ...``) and exit status 128 + the
signal's number (143, 130). A second signal while cleaning up is ignored; a forked worker exits quietly.

SIGKILL cannot be caught: :func:`temporary_directory` names each folder ``fairseq-syntax-NAME-PID-XXXXXXXX`` and
records the owner's host, pid and start time (:data:`OWNER_FILE`); before making one it removes, and names, the
folders of earlier runs whose process no longer runs on this host."""
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Iterator

logger = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: the start of the name of every temporary folder :func:`temporary_directory` makes
PREFIX = "fairseq-syntax-"
#: the file in such a folder naming the process that made it (JSON: host, pid, start)
OWNER_FILE = "owner.pid"


class Stopped(BaseException):
    """Raised by the signal handler of :func:`stopping_cleanly` (a BaseException, as KeyboardInterrupt is, so that
    ``except Exception`` clauses let it through)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def stopping_cleanly(command: str) -> Iterator[None]:
    """Run a command's work as the module docstring says; installed in the main thread, the previous handlers come
    back when the block ends."""
    owner, stopping = os.getpid(), []

    def stop(signum, frame):
        if os.getpid() != owner:  # a forked worker: the command it belongs to cleans up
            os._exit(128 + signum)
        if stopping:  # already cleaning up
            return
        stopping.append(signum)
        raise Stopped(signum)

    previous = {signum: signal.signal(signum, stop) for signum in SIGNALS}
    try:
        yield
    except (Stopped, KeyboardInterrupt) as error:
        signum = error.signum if isinstance(error, Stopped) else signal.SIGINT
        print(f"{command}: stopped by {signal.Signals(signum).name}; the temporary files it made are removed",
              file=sys.stderr)
        raise SystemExit(128 + signum) from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGTERM and SIGINT wait until the block ends (a folder made and its owner recorded, or neither)."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # POSIX, as the package is (core.files' flock)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


@contextlib.contextmanager
def temporary_directory(name: str) -> Iterator[str]:
    """A new folder ``PREFIX + name + "-PID-..."`` in ``TMPDIR``, removed when the block ends however it ends;
    abandoned folders of killed runs are removed first (:func:`remove_abandoned`)."""
    remove_abandoned()
    folder = None
    try:
        with _signals_held():
            folder = tempfile.mkdtemp(prefix=f"{PREFIX}{name}-{os.getpid()}-")
            with open(os.path.join(folder, OWNER_FILE), "w", encoding="utf-8") as handle:
                json.dump(_identity(os.getpid()), handle)
        yield folder
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot, /proc/PID/stat field 22), or None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _identity(pid: int) -> dict:
    return {"host": socket.gethostname(), "pid": pid, "start": _start_time(pid)}


def _running(owner: dict) -> bool:
    """Whether the process ``owner`` names (on this host) still runs."""
    try:
        os.kill(owner["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user: not the one that made the folder, or it cannot be told
        return True
    return owner.get("start") is None or _start_time(owner["pid"]) in (None, owner["start"])


def remove_abandoned() -> list[str]:
    """Remove and return the folders of :func:`temporary_directory` whose :data:`OWNER_FILE` names this host and a
    process that no longer runs; a warning names each."""
    root = tempfile.gettempdir()
    try:
        names = [name for name in os.listdir(root) if name.startswith(PREFIX)]
    except OSError:
        return []
    removed = []
    for name in sorted(names):
        folder = os.path.join(root, name)
        try:
            with open(os.path.join(folder, OWNER_FILE), encoding="utf-8") as handle:
                owner = json.load(handle)
            mine = owner["host"] == socket.gethostname() and isinstance(owner["pid"], int)
        except (OSError, ValueError, KeyError, TypeError):  # not one of these folders, or not readable by us
            continue
        if mine and not _running(owner):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
            logger.warning(f"removed {folder}: the temporary folder of a run (process {owner['pid']}) that was "
                           "killed without cleaning up")
    return removed
