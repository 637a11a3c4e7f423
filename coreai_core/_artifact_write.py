"""Saving an artifact atomically (the layout and its guarantees: docs/saving.md).

The artifact folder holds ``manifest.json`` and revision folders ``rev-<16 hex digits>/``
(``program.coreai`` and ``weights.safetensors``). A save writes a new revision next to the
current one, then replaces ``manifest.json`` with ``os.replace``, the one atomic step that
switches the artifact from the old revision to the new; only then are the old revision and
leftovers of interrupted saves removed. Saves to one folder hold an exclusive lock on it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from coreai_core import durable_fs as fs
from coreai_core._artifact_read import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    PROGRAM_FILE,
    REVISION_FILES,
    REVISION_NAME,
    WEIGHTS_FILE,
    assemble,
    digest,
    first_symlink,
    raw_manifest,
    writer,
)
from coreai_core._dtypes import DType
from coreai_core._ir import ProgramData, TensorType, structure
from coreai_core._safetensors_io import ELEMENT_TYPES_KEY, decode, stored_form, tensor_specs
from coreai_core.errors import ArtifactError
from coreai_core.text import print_program

__all__ = ["save"]

MANIFEST_TMP = re.compile(r"manifest\.json\.tmp-[0-9a-f]{16}")
# the temporary file the safetensors library writes a file through (then renames it), left
# inside a revision folder if the process dies during the write
_SAFETENSORS_TMP = re.compile(r"\.tmp[0-9A-Za-z]{6}")
# the files of a format-1 artifact (removed once a format-2 manifest replaces its manifest)
_LEGACY_FILE = re.compile(r"program\.coreai|(weights|state)/\d+\.npy")


@attrs.frozen
class _Payload:
    """What a save writes, prepared and checked before the disk is touched."""

    text: bytes
    stored: dict[str, np.ndarray]
    metadata: dict[str, str]


def save(program: ProgramData, path: str | os.PathLike[str]) -> Path:
    """Write ``program`` as an artifact folder at ``path`` and return the path.

    Atomic: ``path`` holds the complete old artifact until the complete new one replaces
    it, also if the save fails or the process is killed. An existing artifact is replaced
    (files a user added to its folder are kept); any other existing file or non-empty folder
    raises ``FileExistsError`` and is left untouched. A program whose saved form would not
    load back raises :class:`ArtifactError` before anything is written.
    """
    target = Path(path)
    payload = _prepare(program, target)
    _check_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with fs.locked_dir(target) as created:
        try:
            old = _check_target(target)  # again: another process may have saved meanwhile
            revision, files = _write_revision(target, payload)
            _switch(target, revision, files)
        except BaseException:
            if created:
                _ignore_errors(fs.remove_dir, target)
            raise
        try:
            fs.fsync_dir(target)  # the switch is durable
        finally:
            _clean(target, revision, old)
    return target


def _prepare(program: ProgramData, target: Path) -> _Payload:
    """The text and stored weights, after checking that loading them gives ``program``
    back: whatever save accepts, load loads."""
    try:
        return _checked_payload(program, target)
    except RecursionError:
        raise ArtifactError(f"cannot save {target}: the program's regions are nested too "
                            "deeply to write as text (the text form allows 48 levels). "
                            "Nothing was written.") from None


def _checked_payload(program: ProgramData, target: Path) -> _Payload:
    text = print_program(program, locations=True)  # debug info travels with the program
    stored: dict[str, np.ndarray] = {}
    real: dict[str, Any] = {}
    for name, data in program.weights.items():
        if data is not None:
            stored[name], entry = stored_form(np.asarray(data))
            if entry is not None:
                real[name] = entry
    metadata = {ELEMENT_TYPES_KEY: json.dumps(real, sort_keys=True)}
    loaded = ProgramData()
    try:  # exactly what load does with these bytes
        assemble(loaded, text, decode(stored, metadata, WEIGHTS_FILE))
    except ArtifactError as e:
        raise ArtifactError(f"cannot save {target}: the saved program would not load back: "
                            f"{e}. Nothing was written.") from None
    if _layout(loaded) != _layout(program):
        raise ArtifactError(f"cannot save {target}: the text form does not reproduce the "
                            "program (please report this as a bug). Nothing was written.")
    return _Payload(text.encode("utf-8"), stored, metadata)


def _layout(program: ProgramData) -> Any:
    """``program``'s structure with weight data left out (``assemble`` compares the data
    printed inline; the stored data is the program's own)."""
    view = ProgramData()
    view.graphs, view.initial_state = program.graphs, program.initial_state
    view.weight_types = dict(program.weight_types)
    for name, data in program.weights.items():  # as the printer declares them
        if name not in view.weight_types and data is not None:
            view.weight_types[name] = TensorType(np.shape(data), DType.of(np.asarray(data).dtype))
    view.weights = dict.fromkeys(view.weight_types)
    return structure(view)


# ============================================================================== the target

def _check_target(target: Path) -> dict[str, Any] | None:
    """Refuse a target that is not ours; return the current manifest (None if none)."""
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        raise FileExistsError(f"{target} is a symlink; not saving through it (save to the "
                              "folder it points to)")
    if not stat.S_ISDIR(info.st_mode):
        raise FileExistsError(f"{target} exists and is not a folder; not overwriting it")
    names = os.listdir(target)
    if MANIFEST in names:
        try:
            raw = raw_manifest(target)
        except ArtifactError as e:
            raise FileExistsError(f"{target} holds a {MANIFEST} that is not a coreai "
                                  f"artifact's ({e}); not overwriting anything in it") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise FileExistsError(f"{target} holds a {MANIFEST} that is not a coreai "
                                  "artifact's; not overwriting anything in it")
        if raw.get("version") not in (1, FORMAT_VERSION):
            raise FileExistsError(f"{target} is an artifact in format {raw.get('version')!r} "
                                  f"(written by {raw.get('writer', 'a newer version')}); this "
                                  f"{writer()} writes format {FORMAT_VERSION} and does not "
                                  "overwrite it")
        return raw
    strays = sorted(n for n in names if not _is_leftover(target / n))
    if strays:
        raise FileExistsError(f"{target} is a folder that is not a coreai artifact (it has no "
                              f"{MANIFEST} and holds {strays[:3]}); not overwriting it: save "
                              "to a new path or an empty folder")
    return None


def _is_leftover(path: Path) -> bool:
    """A revision folder or temporary manifest an interrupted save left."""
    try:
        info = os.lstat(path)
        if REVISION_NAME.fullmatch(path.name) and stat.S_ISDIR(info.st_mode):
            return all(_is_revision_file(name) for name in os.listdir(path))
        return bool(MANIFEST_TMP.fullmatch(path.name)) and stat.S_ISREG(info.st_mode)
    except OSError:
        return False


# ============================================================================== the steps

def _write_revision(target: Path, payload: _Payload) -> tuple[str, dict[str, Any]]:
    """Write a new revision folder inside ``target``; return its name and file entries."""
    name = f"rev-{secrets.token_hex(8)}"
    folder = target / name
    fs.make_dir(folder)
    try:
        fs.write_file(folder / PROGRAM_FILE, payload.text)
        specs = tensor_specs(payload.stored)  # reads payload.stored's memory: keep it alive
        fs.write_safetensors(folder / WEIGHTS_FILE, specs, payload.metadata)
        fs.fsync_dir(folder)
        files = {PROGRAM_FILE: {"sha256": hashlib.sha256(payload.text).hexdigest(),
                                "size": len(payload.text)},
                 WEIGHTS_FILE: {"sha256": digest(folder / WEIGHTS_FILE),
                                "size": os.stat(folder / WEIGHTS_FILE).st_size}}
    except BaseException:
        _remove_revision(folder)
        raise
    return name, files


def _switch(target: Path, revision: str, files: dict[str, Any]) -> None:
    """Point ``manifest.json`` at ``revision``: the atomic step. Before it the old artifact
    is current, after it the new one; a failure before it removes the new revision."""
    manifest = {"format": FORMAT, "version": FORMAT_VERSION, "writer": writer(),
                "revision": revision, "files": files}
    data = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8")
    tmp = target / f"{MANIFEST}.tmp-{secrets.token_hex(8)}"
    try:
        fs.write_file(tmp, data)
        fs.replace(tmp, target / MANIFEST)
    except BaseException:
        _ignore_errors(fs.remove_file, tmp)
        _remove_revision(target / revision)
        raise


def _clean(target: Path, keep: str, old: dict[str, Any] | None) -> None:
    """Remove what earlier revisions and interrupted saves left, and the files of a
    replaced format-1 artifact; only files the project writes, by their exact names.
    Failures are ignored: the new artifact is complete, and the next save tries again."""
    try:
        names = os.listdir(target)
    except OSError:
        return
    for name in names:
        path = target / name
        if REVISION_NAME.fullmatch(name) and name != keep:
            if stat.S_ISDIR(_mode(path)):
                _remove_revision(path)
        elif MANIFEST_TMP.fullmatch(name) and stat.S_ISREG(_mode(path)):
            _ignore_errors(fs.remove_file, path)
    legacy = old.get("files") if old is not None and old.get("version") == 1 else None
    if isinstance(legacy, dict):
        for rel in legacy:
            # never through a symlinked weights/ or state/: the link and what it points to
            # are the user's (format 1 wrote no links) and are kept
            if isinstance(rel, str) and _LEGACY_FILE.fullmatch(rel) \
                    and stat.S_ISREG(_real_mode(target, rel)):
                _ignore_errors(fs.remove_file, target / rel)
        for folder in ("weights", "state"):
            if stat.S_ISDIR(_real_mode(target, folder)):
                _ignore_errors(fs.remove_dir, target / folder)  # kept if a user file is in it


def _is_revision_file(name: str) -> bool:
    return name in REVISION_FILES or bool(_SAFETENSORS_TMP.fullmatch(name))


def _remove_revision(folder: Path) -> None:
    """Remove a revision's files; the folder goes only if nothing else is in it."""
    try:
        names = os.listdir(folder)
    except OSError:
        names = []
    for name in names:
        if _is_revision_file(name) and stat.S_ISREG(_mode(folder / name)):
            _ignore_errors(fs.remove_file, folder / name)
    _ignore_errors(fs.remove_dir, folder)


def _mode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0


def _real_mode(root: Path, rel: str) -> int:
    """The mode of ``root/rel``, or 0 if it is missing or a symlink is on its way."""
    try:
        return 0 if first_symlink(root, rel) is not None else os.lstat(root / rel).st_mode
    except OSError:
        return 0


def _ignore_errors(step: Any, path: Path) -> None:
    with contextlib.suppress(OSError):
        step(path)
