"""The filesystem steps of an atomic save, each durable on return (fsync where needed).

:func:`coreai_core.serialization.save` touches the disk only through these functions, so a
test can fail or kill a save at each step in turn (``tests/core/test_save_atomic.py``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import safetensors

try:  # POSIX; elsewhere concurrent saves to one path are not serialized (docs/saving.md)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["fsync_dir", "locked_dir", "make_dir", "remove_dir", "remove_file", "replace",
           "write_file", "write_safetensors"]


def fsync_dir(path: Path) -> None:
    """Make the entries of directory ``path`` (creations, renames) durable."""
    if os.name != "posix":  # pragma: no cover - directories cannot be opened elsewhere
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dir(path: Path) -> None:
    """Create directory ``path`` (its parent must exist; FileExistsError if it does)."""
    os.mkdir(path)


def write_file(path: Path, data: bytes) -> None:
    """Create ``path`` (it must not exist), write ``data`` and fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_safetensors(path: Path, tensors: Mapping[str, Any],
                      metadata: Mapping[str, str]) -> None:
    """Write ``tensors`` (name -> ``safetensors.TensorSpec``) with the safetensors library,
    then fsync the file."""
    safetensors.serialize_file(dict(tensors), path, metadata=dict(metadata))
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace(src: Path, dst: Path) -> None:
    """Atomically make ``dst`` name the file ``src`` (``os.replace``)."""
    os.replace(src, dst)


def remove_file(path: Path) -> None:
    os.unlink(path)


def remove_dir(path: Path) -> None:
    """Remove the empty directory ``path``."""
    os.rmdir(path)


@contextlib.contextmanager
def locked_dir(path: Path) -> Iterator[bool]:
    """Hold an exclusive lock on directory ``path`` (created if missing) while in the block;
    yields whether this call created it.

    The lock is ``flock`` on the directory itself, so no lock file is left behind, and the
    kernel releases it when a process dies. If the directory was removed and recreated
    while this call waited, the lock is taken again on the new one.
    """
    created = False
    while True:
        try:
            make_dir(path)
            created = True
        except FileExistsError:
            pass
        if created:
            try:
                fsync_dir(path.parent)
            except BaseException:
                with contextlib.suppress(OSError):
                    remove_dir(path)
                raise
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # removed by a failed concurrent first save: try again
            continue
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            held, now = os.fstat(fd), os.stat(path)
            if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
                break
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        yield created
    finally:
        os.close(fd)
