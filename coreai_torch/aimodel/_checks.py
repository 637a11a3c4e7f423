"""What an ``.aimodel`` must be before Apple's interpreter is given it, and the errors raised.

Apple's loader trusts its files: a truncated or bit-flipped ``main.mlirb`` aborts the process,
a folder there crashes it, and a FIFO or a link to ``/dev/zero`` blocks it forever. So
:func:`check_asset` looks at every entry first: only folders and regular files, each within
a size bound, ``main.hash`` (Apple's writer stores the SHA-256 digest of ``main.mlirb``, 32
raw bytes) matching ``main.mlirb``, and ``metadata.json`` valid JSON. What it cannot see (a
file damaged and re-hashed on purpose, a bug of Apple's) is what ``isolated=True`` is for.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from coreai_core import ArtifactError

__all__ = ["AimodelAssetError", "AimodelEntrypointError", "AimodelInterpreterError",
           "MAX_METADATA_BYTES", "check_asset", "max_program_bytes"]

PROGRAM, HASH, METADATA = "main.mlirb", "main.hash", "metadata.json"
MAX_METADATA_BYTES = 16 << 20  # the metadata of a real asset is a few hundred bytes
MAX_ENTRIES = 10_000  # files and folders in one asset (Apple's writer makes three files)
_CHUNK = 1 << 20
_FIX = "export it again with export_aimodel, or restore it from a copy"


class AimodelAssetError(ArtifactError):
    """An ``.aimodel`` asset is damaged, tampered with or holds what no asset holds: the
    message names the file and what is wrong with it. Raised before Apple's interpreter
    reads anything."""


class AimodelInterpreterError(RuntimeError):
    """Apple's Core AI interpreter failed on an asset: in isolated mode its process died
    (an abort or a crash) or raised. The message carries what the interpreter wrote to its
    stderr (``stderr`` holds all of it)."""

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


class AimodelEntrypointError(KeyError):
    """The asset has no function of that name; the message lists the ones it has."""

    def __str__(self) -> str:  # KeyError's own quotes its message as a repr
        return str(self.args[0]) if self.args else ""


def max_program_bytes() -> int:
    """The largest ``main.mlirb`` accepted: this machine's memory (Apple's loader reads the
    whole file into memory; a larger one cannot load, and hashing it would take minutes)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 1 << 40


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "a special file"


def _problem(asset: Path, rel: str, what: str) -> AimodelAssetError:
    return AimodelAssetError(f"{asset}/{rel}: {what}; the asset is damaged or was tampered "
                             f"with ({_FIX})")


def _entries(asset: Path) -> dict[str, os.stat_result]:
    """Every entry under ``asset`` by relative path (lstat: links are not followed), after
    checking that each is a folder or a regular file."""
    found: dict[str, os.stat_result] = {}
    pending = [""]
    while pending:
        rel_dir = pending.pop()
        with os.scandir(asset / rel_dir) as it:
            for entry in it:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                info = entry.stat(follow_symlinks=False)
                found[rel] = info
                if len(found) > MAX_ENTRIES:
                    raise _problem(asset, rel, f"the asset holds more than {MAX_ENTRIES} "
                                   "files and folders")
                if stat.S_ISDIR(info.st_mode):
                    pending.append(rel)
                elif not stat.S_ISREG(info.st_mode):
                    target = f" (to {os.readlink(entry.path)!r})" if entry.is_symlink() else ""
                    raise _problem(asset, rel, f"is {_kind(info.st_mode)}{target}; an asset "
                                   "holds only folders and regular files")
    return found


def _read(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (never following a link swapped in since)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} changed while it was checked")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(limit + 1)
    finally:
        os.close(fd)


def _digest(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} changed while it was checked")
        h = hashlib.sha256()
        with os.fdopen(fd, "rb", buffering=0, closefd=False) as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
        return h.digest()
    finally:
        os.close(fd)


def check_asset(asset: Path) -> dict[str, Any]:
    """Check the asset folder ``asset`` as the module docstring says; return its metadata
    (``metadata.json`` parsed). Raises :class:`AimodelAssetError` naming the first file
    that is wrong."""
    entries = _entries(asset)
    for rel in (PROGRAM, HASH, METADATA):
        if rel not in entries:
            raise _problem(asset, rel, "is missing (Apple's writer always writes it)")
        if not stat.S_ISREG(entries[rel].st_mode):
            raise _problem(asset, rel, f"is {_kind(entries[rel].st_mode)}, not a file")
    limit = max_program_bytes()
    if entries[PROGRAM].st_size > limit:
        raise _problem(asset, PROGRAM, f"is {entries[PROGRAM].st_size} bytes, more than this "
                       f"machine's memory ({limit} bytes), which Apple's loader reads it into")
    if entries[METADATA].st_size > MAX_METADATA_BYTES:
        raise _problem(asset, METADATA, f"is {entries[METADATA].st_size} bytes (an asset's "
                       f"metadata is at most {MAX_METADATA_BYTES})")
    expected = _read(asset / HASH, 32)
    if len(expected) != 32:
        raise _problem(asset, HASH, f"holds {len(expected)} bytes, not the 32 of a SHA-256 "
                       f"digest of {PROGRAM}")
    if _digest(asset / PROGRAM) != expected:
        raise AimodelAssetError(
            f"{asset}/{PROGRAM} does not match {HASH} (the SHA-256 digest Apple's writer "
            f"stored): the program was changed or damaged after export; {_FIX}")
    text = _read(asset / METADATA, MAX_METADATA_BYTES)
    try:
        metadata = json.loads(text)
    except (ValueError, RecursionError) as e:
        reason = "it is nested too deeply" if isinstance(e, RecursionError) else str(e)
        raise _problem(asset, METADATA, f"is not valid JSON ({reason})") from None
    if not isinstance(metadata, dict):
        raise _problem(asset, METADATA, f"holds a JSON {type(metadata).__name__}, not an "
                       "object")
    return metadata
