"""Atomic file writes: a crash or a kill mid-write never leaves a broken file where a good one
was. Used for checkpoints and for the factors the command line writes."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading
import time

try:  # POSIX advisory locks tell a live writer's temporary from a killed one's
    import fcntl
except ImportError:  # pragma: no cover - Windows: stale temporaries are left alone
    fcntl = None
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path next to ``path``; moved onto ``path`` only if the block succeeds.

    A crash (or a kill) before the move leaves whatever was at ``path`` untouched; the file is
    synced before the move, so the new content is complete when it appears under ``path``.
    While it is written, the temporary's lock file is locked, so the temporaries that killed
    writers of the same target left behind are recognised (nobody holds their lock) and removed
    on the next write. (The lock is on a separate file: writers such as HDF5 lock the data file
    themselves.)
    """
    path = Path(path)
    remove_stale_temporaries(path)
    tmp = lock = None
    try:
        with deferred_interrupt():  # a Ctrl-C here would leave the pair half made
            tmp, lock = _new_temporary(path)
        yield Path(tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        if lock is not None:
            with deferred_interrupt():  # the lock file and its descriptor go together
                _lock_path(tmp).unlink(missing_ok=True)
                os.close(lock)
    _fsync_folder(path.parent)


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold back a Ctrl-C (SIGINT) until the block is done, then raise it as usual.

    For the few steps that must not be cut in half (a file made and its descriptor kept, a
    file removed and its descriptor closed): a KeyboardInterrupt between them would leak the
    descriptor or leave a lock file nobody holds. Only the main thread receives signals in
    Python, so elsewhere (and where SIGINT has no Python handler) the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    try:
        previous = signal.signal(signal.SIGINT, lambda *caught: received.append(caught))
    except (ValueError, OSError):  # pragma: no cover - no signals in this interpreter
        yield
        return
    if previous is None:  # a handler not installed from Python (an embedding host)
        previous = signal.SIG_DFL  # what it will be restored as; its Ctrl-C ends the process
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received and callable(previous):
            previous(*received[0])  # Python's default handler raises KeyboardInterrupt
        elif received and previous == signal.SIG_DFL:
            signal.raise_signal(signal.SIGINT)  # the process was to end: it does now


_GRACE_SECONDS = 5.0


def _lock_path(tmp: Path) -> Path:
    return tmp.with_name(tmp.name + ".lock")


def _new_temporary(path: Path) -> tuple[Path, int]:
    """An empty new file next to ``path`` (the permissions the umask gives) and the descriptor
    of its locked lock file.

    (``tempfile.mkstemp`` would make it private, 0600, and the final file would keep that.)
    """
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            lock = os.open(_lock_path(tmp), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        try:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)
            made = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            try:
                os.close(made)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        except BaseException:  # no lock file may outlive its descriptor
            _lock_path(tmp).unlink(missing_ok=True)
            os.close(lock)
            raise
        return tmp, lock
    raise FileExistsError(f"cannot create a temporary file next to {str(path)!r}")


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Remove the temporaries of ``path`` that no live writer holds (left by a killed save).

    Returns the removed temporaries. One that another process is writing right now has its
    lock file locked, and is kept; one without a lock file (a write killed before it locked,
    or by an older version) is removed once it is a few seconds old, and so is a lock file
    without its temporary that nobody holds (a write killed between making the two).
    """
    if fcntl is None:
        return []
    removed = []
    folder, name = Path(path).parent, Path(path).name
    with deferred_interrupt():  # each lock probe opens a descriptor: never leak one
        for tmp in folder.glob(f".{name}.*.tmp"):
            if _remove_if_stale(tmp, _lock_path(tmp)):
                removed.append(tmp)
        for lock in folder.glob(f".{name}.*.tmp.lock"):
            tmp = lock.with_name(lock.name[:-len(".lock")])
            if not tmp.exists() and _remove_if_stale(tmp, lock):
                removed.append(lock)
    return removed


def _remove_if_stale(tmp: Path, lock: Path) -> bool:
    """Remove ``tmp`` and ``lock`` unless a live writer may hold them; True if removed. A
    file without its partner is left for ``_GRACE_SECONDS`` (its writer may be making the
    other); a lock file somebody holds is kept."""
    try:
        if not (lock.exists() and tmp.exists()):
            alone = tmp if tmp.exists() else lock
            if time.time() - alone.stat().st_mtime < _GRACE_SECONDS:
                return False
            if alone is tmp:
                tmp.unlink(missing_ok=True)
                return True
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # a live writer holds it
    else:
        tmp.unlink(missing_ok=True)
        lock.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[Any]:
    """A binary file handle whose content replaces ``path`` atomically on success."""
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        yield handle


def _fsync_folder(folder: Path) -> None:
    """Make the rename durable too (POSIX); a no-op where folders cannot be opened. A Ctrl-C
    waits for the descriptor to be closed (it would leak between open and close)."""
    with deferred_interrupt():
        try:
            fd = os.open(folder, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)
