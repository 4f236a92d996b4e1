"""Atomic file writes: a crash or a kill mid-write never leaves a broken file where a good one
was. Used for checkpoints and for the factors the command line writes."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path next to ``path``; moved onto ``path`` only if the block succeeds.

    A crash (or a kill) before the move leaves whatever was at ``path`` untouched; the file is
    synced before the move, so the new content is complete when it appears under ``path``.
    """
    tmp = _new_temporary(path)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)


def _new_temporary(path: Path) -> Path:
    """An empty new file next to ``path``, created with the permissions the umask gives.

    (``tempfile.mkstemp`` would make it private, 0600, and the final file would keep that.)
    """
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(f"cannot create a temporary file next to {str(path)!r}")


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[Any]:
    """A binary file handle whose content replaces ``path`` atomically on success."""
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        yield handle


def _fsync_folder(folder: Path) -> None:
    """Make the rename durable too (POSIX); a no-op where folders cannot be opened."""
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
