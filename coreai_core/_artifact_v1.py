"""Reading artifacts of format 1 (coreai-torch 0.1.0): ``program.coreai``, one ``.npy`` per
weight (``weights/<i>.npy``) and state value (``state/<i>.npy``) next to ``manifest.json``.

Format 1 stored the types ``.npy`` lacks as their bits: bfloat16 as uint16, float8 as uint8,
4-bit types packed two per byte into a 1-D uint8 array. Every ``.npy`` header is checked
against the manifest and the file size before data is read, and ``allow_pickle`` is off.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Literal

import numpy as np

from coreai_core._artifact_read import PROGRAM_FILE, assemble, check_listed_file
from coreai_core._dtypes import SUB_BYTE, DType
from coreai_core._ir import ProgramData
from coreai_core._safetensors_io import MMAP_BYTES, element_type_of, some
from coreai_core._text_parser import DEFAULT_MAX_BYTES
from coreai_core.errors import ArtifactError
from coreai_core.packing import unpack_nibbles

__all__ = ["FILE_NAME", "load_v1"]

# the only files format 1 wrote (which also rules out paths escaping the folder)
FILE_NAME = re.compile(r"program\.coreai|(weights|state)/\d{1,9}\.npy")
_BITS: dict[DType, np.dtype] = {DType.bfloat16: np.dtype(np.uint16),
                                DType.float8_e4m3fn: np.dtype(np.uint8),
                                DType.float8_e5m2: np.dtype(np.uint8)}


def _stored_form(dtype: DType, shape: tuple[int, ...]) -> tuple[np.dtype, tuple[int, ...]]:
    if dtype in SUB_BYTE:
        return np.dtype(np.uint8), ((math.prod(shape) + 1) // 2,)
    return _BITS.get(dtype, dtype.numpy), shape


def _checked_files(root: Path, files: Any) -> dict[str, Path]:
    if not isinstance(files, dict):
        raise ArtifactError("manifest.json: 'files' must be an object")
    out: dict[str, Path] = {}
    for rel, entry in files.items():
        if not FILE_NAME.fullmatch(rel):
            raise ArtifactError(f"manifest.json: {rel[:80]!r} is not a file of format 1")
        size = entry.get("size") if isinstance(entry, dict) else None
        sha = entry.get("sha256") if isinstance(entry, dict) else None
        if type(size) is not int or not isinstance(sha, str):
            raise ArtifactError(f"manifest.json: file {rel!r} needs 'sha256' and 'size'")
        # no symlink anywhere on the way: weights/ and state/ too, not only the file
        out[rel] = check_listed_file(root, rel, size, sha, "manifest.json")
    return out


def _read_npy(path: Path, rel: str, want: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """The array in ``path`` after checking its header declares ``want[shape]`` and the
    file holds exactly that many bytes."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                header = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                header = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unsupported .npy version {version}")
            offset = f.tell()
    except (ValueError, OSError, EOFError) as e:
        raise ArtifactError(f"{rel}: not a valid .npy file ({e})") from None
    got_shape, fortran, dtype = header
    if dtype != want or tuple(got_shape) != shape or fortran:
        raise ArtifactError(f"{rel}: holds {dtype}{list(got_shape)}, expected {want}"
                            f"{list(shape)}")
    nbytes = math.prod(shape) * want.itemsize
    if os.stat(path).st_size != offset + nbytes:
        raise ArtifactError(f"{rel}: {os.stat(path).st_size - offset} bytes of data for "
                            f"{want}{list(shape)} ({nbytes} bytes)")
    mmap: Literal["r"] | None = "r" if nbytes > MMAP_BYTES else None
    try:
        return np.load(path, mmap_mode=mmap, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise ArtifactError(f"{rel}: not a valid .npy file ({e})") from None


def _weight(files: dict[str, Path], name: str, entry: Any) -> np.ndarray | None:
    what = f"manifest.json: weight {name!r}"
    if not isinstance(entry, dict):
        raise ArtifactError(f"{what} must be an object")
    rel = entry.get("file")
    if rel is None:
        return None
    if not isinstance(rel, str) or rel not in files:
        raise ArtifactError(f"{what}: file {str(rel)[:80]!r} is not listed with a checksum")
    dtype, shape = element_type_of(entry, what)
    want, stored_shape = _stored_form(dtype, shape)
    arr = _read_npy(files[rel], rel, want, stored_shape)
    if dtype in SUB_BYTE:
        try:
            return unpack_nibbles(arr, dtype, shape)
        except ValueError as e:
            raise ArtifactError(f"{rel}: {e}") from None
    return arr.view(dtype.numpy) if dtype in _BITS else arr


def load_v1(program: ProgramData, root: Path, manifest: dict[str, Any], *,
            max_bytes: int | None = DEFAULT_MAX_BYTES) -> None:
    """Load the format-1 artifact ``root`` (its parsed ``manifest``) into ``program``.

    State lives in the text (format 1's state files are checked, not needed).
    """
    if "revision" in manifest:
        raise ArtifactError("manifest.json: 'version' is 1, but the manifest is a format 2 one "
                            "(it names a 'revision'; format 1 stored no revisions): the "
                            "version field was edited, or the manifest is not this artifact's")
    files = _checked_files(root, manifest.get("files"))
    if PROGRAM_FILE not in files:
        raise ArtifactError(f"manifest.json: {PROGRAM_FILE} is not listed")
    table = manifest.get("weights")
    if not isinstance(table, dict):
        raise ArtifactError("manifest.json: 'weights' must be an object")
    weights = {}
    for name, entry in table.items():
        data = _weight(files, name, entry)
        if data is not None:
            weights[name] = data
    state = manifest.get("state")
    used = {PROGRAM_FILE}
    for entries in (table, state if isinstance(state, dict) else {}):
        used.update(e["file"] for e in entries.values()
                    if isinstance(e, dict) and isinstance(e.get("file"), str))
    unused = sorted(set(files) - used)
    if unused:
        raise ArtifactError(f"manifest.json lists {some(unused)}, but no weight or state uses "
                            "them")
    try:
        text = files[PROGRAM_FILE].read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ArtifactError(f"{PROGRAM_FILE}: not UTF-8 text ({e})") from None
    except OSError as e:
        raise ArtifactError(f"{PROGRAM_FILE}: cannot read: {e.strerror or e}") from None
    assemble(program, text, weights, max_bytes=max_bytes)
