"""The filesystem steps of an atomic save, each durable on return (fsync where needed).

:func:`replace` is the project's one atomic replace: the artifact save
(:func:`coreai_core.serialization.save`), the command line's output files
(:func:`replacing`) and the ``.aimodel`` export all switch a path from its old content to
the new with it. Those saves touch the disk only through the functions of :data:`__all__`,
so a test can fail or kill a save at each step in turn (``tests/core/test_save_atomic.py``,
``tests/interop/test_aimodel_save_atomic.py``).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import secrets
import shutil
import stat
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import safetensors

try:  # POSIX; elsewhere concurrent saves to one path are not serialized (docs/saving.md)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["fsync_dir", "fsync_tree", "locked_dir", "make_dir", "remove_dir", "remove_file",
           "remove_tree", "replace", "replacing", "write_file", "write_safetensors"]


def fsync_dir(path: Path) -> None:
    """Make the entries of directory ``path`` (creations, renames) durable."""
    _fsync_dir(path)


def _fsync_dir(path: Path) -> None:
    if os.name != "posix":  # pragma: no cover - directories cannot be opened elsewhere
        return
    _fsync_path(path)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path: Path) -> None:
    """Make every file and folder under the folder ``path`` (and ``path``) durable, e.g. one
    another library wrote; symlinks are not followed (their target is not part of it)."""
    for folder, dirs, files in os.walk(path):
        for name in files:
            if stat.S_ISREG(os.lstat(os.path.join(folder, name)).st_mode):
                _fsync_path(Path(folder, name))
        for name in dirs:
            if not os.path.islink(os.path.join(folder, name)):
                _fsync_dir(Path(folder, name))
    _fsync_dir(path)


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


def replace(src: Path, dst: Path) -> Path | None:
    """Atomically make ``dst`` name what ``src`` names, durably: at every instant ``dst``
    holds its complete old content or the complete new one, never neither.

    ``src`` must be durable already (written with :func:`write_file`, :func:`fsync_tree`, or
    fsynced by the caller) and on ``dst``'s filesystem. A file replaces a file (a rename);
    a folder replaces a missing path (a rename) or a folder, by an atomic exchange of the
    two (``renameat2(RENAME_EXCHANGE)`` on Linux, ``renamex_np(RENAME_SWAP)`` on macOS): the
    old folder is then at ``src``, and that path is returned for the caller to remove
    (None otherwise). ``dst``'s directory (and ``src``'s) is fsynced on return, so the switch
    survives a power cut. A filesystem without an exchange (some network filesystems)
    raises OSError rather than leaving a moment with no folder at ``dst``.
    """
    if os.path.isdir(src) and os.path.isdir(dst) and not os.path.islink(dst):
        _exchange(src, dst)
        old: Path | None = src
    else:
        os.replace(src, dst)
        old = None
    _fsync_dir(Path(dst).parent)
    if Path(src).parent != Path(dst).parent:
        _fsync_dir(Path(src).parent)
    return old


_RENAME_EXCHANGE = 2  # linux/fs.h
_RENAME_SWAP = 2  # macOS sys/stdio.h
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> None:
    """Swap the names ``a`` and ``b`` in one atomic step."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    args = (os.fsencode(a), os.fsencode(b))
    if sys.platform == "darwin":  # pragma: no cover - tested on Linux
        done = libc.renamex_np(*args, _RENAME_SWAP)
    elif hasattr(libc, "renameat2"):  # glibc 2.28 (2018) and later
        done = libc.renameat2(_AT_FDCWD, args[0], _AT_FDCWD, args[1], _RENAME_EXCHANGE)
    else:  # pragma: no cover - an older C library: the system call itself
        raise OSError(errno.ENOSYS, "this C library has no renameat2 to swap two folders "
                      "atomically", str(b))
    if done != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"cannot swap {a} and {b} atomically ({os.strerror(code)}; "
                      "the filesystem may not support it)", str(b))


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A fresh temporary path next to ``path`` that becomes ``path`` when the block succeeds
    (fsynced, then :func:`replace`: ``path`` holds its old content or the complete new
    file) and is removed when the block fails or is interrupted."""
    # a fresh name rather than mkstemp (which makes the file private), so the result gets the
    # permissions the user's umask gives
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        yield tmp
        _fsync_path(tmp)
        replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def remove_file(path: Path) -> None:
    os.unlink(path)


def remove_dir(path: Path) -> None:
    """Remove the empty directory ``path``."""
    os.rmdir(path)


def remove_tree(path: Path) -> None:
    """Remove the folder ``path`` and everything in it (symlinks in it are removed, never
    followed)."""
    shutil.rmtree(path)


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
