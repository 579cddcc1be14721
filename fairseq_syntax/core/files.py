"""Files written whole and locks between processes: the one way the package does either (standard library only).

A file written through :func:`atomic_path` is the old one or the new one to a reader, or after a run killed while
writing it, never a cut-short one; :func:`held_lock` holds a file's (or a folder's) ``flock`` for a block."""
from __future__ import annotations

import contextlib
import fcntl
import os
from typing import Callable, Iterator


@contextlib.contextmanager
def atomic_path(path, suffix: str = ".partial", sync: bool = False) -> Iterator[str]:
    """Yields ``path + suffix`` to write; renamed to ``path`` when the block ends without error, removed when it
    raises or the rename fails; with ``sync`` the data is on disk before the rename. A ``path`` that is a folder is
    refused (:class:`IsADirectoryError`) first."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path}: a folder, not a file: give a file's path")
    temporary = path + suffix
    try:
        yield temporary
        if sync:
            descriptor = os.open(temporary, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise


def write_atomically(path, data: bytes | str) -> None:
    """``data`` (text as UTF-8) written to ``path`` through :func:`atomic_path`, by a temporary file of this
    process's own (``PATH.partial.PID``): two processes writing one file leave one's data whole."""
    with atomic_path(path, f".partial.{os.getpid()}") as temporary, open(temporary, "wb") as out:
        out.write(data.encode("utf-8") if isinstance(data, str) else data)


def _open(path) -> int:
    """A descriptor to lock: a folder read-only, a file read-write (made where missing, never truncated)."""
    return os.open(path, os.O_RDONLY) if os.path.isdir(path) else os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


def try_lock(descriptor: int, shared: bool = False) -> bool:
    """``flock`` without waiting: True once held, False where another process holds it."""
    try:
        fcntl.flock(descriptor, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextlib.contextmanager
def held_lock(path, shared: bool = False, wait: bool = True,
              waiting: Callable[[], None] | None = None) -> Iterator[int | None]:
    """Yields the descriptor of ``path``'s lock once held (calling ``waiting`` first where another process holds
    it), or None at once where ``wait`` is False and another process holds it; released when the block ends."""
    descriptor = _open(path)
    try:
        if not try_lock(descriptor, shared):
            if not wait:
                yield None
                return
            if waiting is not None:
                waiting()
            fcntl.flock(descriptor, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield descriptor
        finally:
            fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)


def is_locked(path) -> bool:
    """Whether another process holds ``path``'s lock now (False where there is no such file)."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        return not try_lock(descriptor, shared=True)
    finally:
        os.close(descriptor)  # releases the probe's lock
