"""Saving and loading programs, and binding weights from state dicts and weight files.

An artifact is a directory::

    model.coreai/
      manifest.json       format version; every file's SHA-256 and size; weights and state
      program.coreai      the text form (large weight data elided)
      weights/<i>.npy     one .npy per bound weight (bfloat16 stored as its uint16 bits,
                          float8 as uint8 bits, 4-bit types packed two per byte)
      state/<i>.npy       the initial value of each state variable

Loading never unpickles (``allow_pickle=False`` everywhere). Every file is checked against
the manifest (present, regular, inside the folder, same size and SHA-256, nothing extra) and
every array against the manifest and the program text (dtype and shape) before anything is
returned; problems raise :class:`ArtifactError` naming the file. Weights larger than
``MMAP_BYTES`` are memory-mapped read-only rather than read into memory.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np

from coreai_core._dtypes import SUB_BYTE, DType
from coreai_core._ir import ProgramData, TensorType
from coreai_core._text_parser import parse_into
from coreai_core.errors import ArtifactError, CoreAIError
from coreai_core.packing import pack_nibbles, unpack_nibbles
from coreai_core.text import print_program
from coreai_core.verifier import verify

__all__ = ["FORMAT", "FORMAT_VERSION", "MMAP_BYTES", "bind_weights", "load_into",
           "read_safetensors", "save"]

FORMAT = "coreai-artifact"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PROGRAM_FILE = "program.coreai"
# Arrays stored in files larger than this are memory-mapped on load.
MMAP_BYTES = 1 << 20
# A manifest larger than this is rejected before parsing (it lists files, not data).
MAX_MANIFEST_BYTES = 64 << 20
_CHUNK = 1 << 20
# one-byte ml_dtypes float types, stored as their uint8 bits
_BYTE_BITS = frozenset({DType.float8_e4m3fn, DType.float8_e5m2})


# ============================================================================== saving

def _storage(data: np.ndarray, dtype: DType) -> np.ndarray:
    """The array written to disk: npy has no bfloat16 or ml_dtypes types, so bfloat16 is
    stored as its raw uint16 bits, float8 types as their uint8 bits, and 4-bit types packed
    two per byte into a 1-D uint8 array (see :mod:`coreai_core.packing`)."""
    if dtype in SUB_BYTE:
        return pack_nibbles(data)
    if dtype is DType.bfloat16:
        return data.view(np.uint16)
    if dtype in _BYTE_BITS:
        return np.ascontiguousarray(data).view(np.uint8)
    return data


def _stored_form(dtype: DType, shape: tuple[int, ...]) -> tuple[np.dtype, tuple[int, ...]]:
    """The dtype and shape of the .npy holding an array of ``dtype`` and ``shape``."""
    if dtype in SUB_BYTE:
        return np.dtype(np.uint8), ((int(np.prod(shape, dtype=np.int64)) + 1) // 2,)
    if dtype is DType.bfloat16:
        return np.dtype(np.uint16), shape
    if dtype in _BYTE_BITS:
        return np.dtype(np.uint8), shape
    return dtype.numpy, shape


def _from_storage(arr: np.ndarray, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    if dtype in SUB_BYTE:
        return unpack_nibbles(np.asarray(arr), dtype, shape)
    if dtype is DType.bfloat16 or dtype in _BYTE_BITS:
        return arr.view(dtype.numpy)
    return arr


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def save(program: ProgramData, path: str | os.PathLike[str]) -> Path:
    """Write ``program`` as a directory artifact at ``path`` and return the path.

    An existing artifact at ``path`` is replaced; any other existing file or non-empty
    directory is left alone and raises ``FileExistsError``. The artifact is written to a
    temporary sibling directory first, so a failed save never leaves a half-written one.
    """
    target = Path(path)
    if target.exists() and not _is_replaceable(target):
        raise FileExistsError(f"{target} exists and is not a coreai artifact; not overwriting")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        files: dict[str, dict[str, Any]] = {}

        def add(rel: str) -> str:
            p = tmp / rel
            files[rel] = {"sha256": _digest(p), "size": p.stat().st_size}
            return rel

        (tmp / PROGRAM_FILE).write_text(print_program(program), encoding="utf-8")
        add(PROGRAM_FILE)
        weights: dict[str, dict[str, Any]] = {}
        for i, (name, t) in enumerate(program.weight_types.items()):
            entry: dict[str, Any] = {"file": None, "dtype": t.element_type.value,
                                     "shape": _shape_list(t)}
            data = program.weights.get(name)
            if data is not None:
                entry["file"] = _write_array(tmp, f"weights/{i}.npy", np.asarray(data),
                                             t.element_type, add)
            weights[name] = entry
        state: dict[str, dict[str, Any]] = {}
        for i, (name, value) in enumerate(program.initial_state.items()):
            arr = np.asarray(value)
            dtype = DType.of(arr.dtype)
            state[name] = {"file": _write_array(tmp, f"state/{i}.npy", arr, dtype, add),
                           "dtype": dtype.value, "shape": list(arr.shape)}
        manifest = {"format": FORMAT, "version": FORMAT_VERSION, "program": PROGRAM_FILE,
                    "files": files, "weights": weights, "state": state}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n",
                                    encoding="utf-8")
        os.chmod(tmp, 0o755)  # mkdtemp creates it private; an artifact is a normal folder
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _is_replaceable(target: Path) -> bool:
    if target.is_symlink() or not target.is_dir():
        return False
    return (target / MANIFEST).is_file() or not any(target.iterdir())


def _shape_list(t: TensorType) -> list[int]:
    shape = t.static_shape
    if shape is None:
        raise ValueError(f"weight type {t} is not static")
    return list(shape)


def _write_array(root: Path, rel: str, data: np.ndarray, dtype: DType, add: Any) -> str:
    (root / rel).parent.mkdir(exist_ok=True)
    with open(root / rel, "wb") as f:
        np.save(f, _storage(data, dtype), allow_pickle=False)
    return add(rel)


# ============================================================================== loading

def _fail(message: str) -> ArtifactError:
    return ArtifactError(message)


def _safe_path(root: Path, rel: Any, what: str) -> Path:
    """``root / rel`` after checking that ``rel`` stays inside ``root``."""
    if not isinstance(rel, str) or not rel or "\\" in rel or "\x00" in rel:
        raise _fail(f"{what}: invalid file name {rel!r} in {MANIFEST}")
    parts = rel.split("/")
    if rel.startswith("/") or os.path.isabs(rel) or any(p in ("", ".", "..") for p in parts):
        raise _fail(f"{what}: file {rel!r} escapes the artifact folder (absolute paths, '.' "
                    f"and '..' are not allowed)")
    path = root.joinpath(*parts)
    real = Path(os.path.realpath(path))
    if real != root and root not in real.parents:
        raise _fail(f"{what}: file {rel!r} resolves to {real}, outside the artifact folder "
                    f"{root} (a symlink?)")
    if path.is_symlink():
        raise _fail(f"{what}: file {rel!r} is a symlink; artifacts contain regular files only")
    return path


def _read_manifest(root: Path) -> dict[str, Any]:
    path = root / MANIFEST
    if path.is_symlink() or not path.is_file():
        raise _fail(f"{root} is not a coreai artifact: {MANIFEST} is missing")
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise _fail(f"{MANIFEST} is larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _fail(f"{MANIFEST} is not valid JSON: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _fail(f"{MANIFEST}: not a {FORMAT} manifest")
    if manifest.get("version") != FORMAT_VERSION:
        raise _fail(f"{MANIFEST}: unsupported format version {manifest.get('version')!r} "
                    f"(this reader supports {FORMAT_VERSION})")
    for key in ("files", "weights", "state"):
        if not isinstance(manifest.get(key), dict):
            raise _fail(f"{MANIFEST}: {key!r} must be an object")
    if manifest.get("program") != PROGRAM_FILE:
        raise _fail(f"{MANIFEST}: program file must be {PROGRAM_FILE!r}")
    return manifest


def _check_files(root: Path, files: dict[str, Any]) -> dict[str, Path]:
    """Verify every listed file (inside, regular, size, SHA-256) and that nothing is extra."""
    checked: dict[str, Path] = {}
    for rel, entry in files.items():
        path = _safe_path(root, rel, rel)
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str) or \
                not isinstance(entry.get("size"), int) or isinstance(entry.get("size"), bool):
            raise _fail(f"{rel}: manifest entry needs 'sha256' and 'size'")
        if not path.is_file():
            raise _fail(f"{rel}: file is missing")
        size = path.stat().st_size
        if size != entry["size"]:
            raise _fail(f"{rel}: size {size} bytes, manifest says {entry['size']} "
                        "(truncated or modified)")
        if _digest(path) != entry["sha256"]:
            raise _fail(f"{rel}: SHA-256 checksum does not match the manifest (file modified)")
        checked[rel] = path
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(filenames + [d for d in dirnames
                                        if os.path.islink(os.path.join(dirpath, d))]):
            rel = Path(dirpath, name).relative_to(root).as_posix()
            if rel != MANIFEST and rel not in checked:
                raise _fail(f"{rel}: file is not listed in {MANIFEST}")
    return checked


def _entry(table: str, name: str, entry: Any) -> tuple[DType, tuple[int, ...]]:
    what = f"{MANIFEST}: {table} {name!r}"
    if not isinstance(entry, dict):
        raise _fail(f"{what} must be an object")
    try:
        dtype = DType.of(entry.get("dtype"))
    except (TypeError, ValueError):
        raise _fail(f"{what}: unknown dtype {entry.get('dtype')!r}") from None
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise _fail(f"{what}: shape must be a list of non-negative ints, got {shape!r}")
    return dtype, tuple(shape)


def _load_array(files: dict[str, Path], rel: Any, dtype: DType, shape: tuple[int, ...],
                what: str) -> np.ndarray:
    if rel not in files:
        raise _fail(f"{what}: file {rel!r} is not listed with a checksum in {MANIFEST}")
    path = files[rel]
    mmap: Literal["r"] | None = "r" if path.stat().st_size > MMAP_BYTES else None
    try:
        arr = np.load(path, mmap_mode=mmap, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise _fail(f"{rel}: not a valid .npy file ({e})") from None
    if not isinstance(arr, np.ndarray):
        raise _fail(f"{rel}: not a .npy array")
    stored, stored_shape = _stored_form(dtype, shape)
    if arr.dtype != stored or arr.shape != stored_shape:
        raise _fail(f"{rel}: holds {arr.dtype}{list(arr.shape)}, but {what} is "
                    f"{dtype.value}{list(shape)}, stored as {stored}{list(stored_shape)}")
    try:
        return _from_storage(arr, dtype, shape)
    except ValueError as e:
        raise _fail(f"{rel}: {e}") from None


def load_into(program: ProgramData, path: str | os.PathLike[str]) -> None:
    """Load an artifact written by :func:`save` into the empty ``program``, verifying it
    completely first (``coreai_core.load`` makes the program).

    Raises :class:`ArtifactError` (naming the file) for a missing, extra, truncated, modified
    or inconsistent file, a path escaping the artifact folder, or a symlink.
    """
    root = Path(os.path.realpath(path))
    if not root.is_dir():
        raise _fail(f"{path}: not a coreai artifact directory")
    manifest = _read_manifest(root)
    files = _check_files(root, manifest["files"])
    if PROGRAM_FILE not in files:
        raise _fail(f"{PROGRAM_FILE}: not listed in {MANIFEST}")
    weights: dict[str, np.ndarray | None] = {}
    for name, entry in manifest["weights"].items():
        dtype, shape = _entry("weight", name, entry)
        rel = entry.get("file")
        weights[name] = None if rel is None else _load_array(
            files, rel, dtype, shape, f"weight {name!r}")
    state: dict[str, np.ndarray] = {}
    for name, entry in manifest["state"].items():
        dtype, shape = _entry("state", name, entry)
        state[name] = _load_array(files, entry.get("file"), dtype, shape, f"state {name!r}")
    try:
        text = files[PROGRAM_FILE].read_bytes().decode("utf-8")
        parse_into(program, text, weights=weights)
        verify(program)
    except UnicodeDecodeError as e:
        raise _fail(f"{PROGRAM_FILE}: not UTF-8 text ({e})") from None
    except CoreAIError as e:
        raise _fail(f"{PROGRAM_FILE}: {e}") from None
    _reconcile(program, weights, state)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
        np.ascontiguousarray(a).reshape(-1).view(np.uint8),
        np.ascontiguousarray(b).reshape(-1).view(np.uint8))


def _reconcile(program: ProgramData, weights: dict[str, Any], state: dict[str, np.ndarray]) -> None:
    """Check the manifest's weights and state against the text's, then install the arrays."""
    for kind, listed, declared in (("weight", weights, program.weight_types),
                                   ("state", state, program.initial_state)):
        missing = sorted(set(declared) - set(listed))
        extra = sorted(set(listed) - set(declared))
        if missing or extra:
            raise _fail(f"{MANIFEST} and {PROGRAM_FILE} disagree on the {kind}s: "
                        f"missing from the manifest {missing}, not in the program {extra}")
    for name, t in program.weight_types.items():
        data = weights[name]
        if data is None:
            if program.weights.get(name) is not None:
                raise _fail(f"{PROGRAM_FILE}: weight {name!r} has data but the manifest "
                            "lists it as unbound")
            continue
        if data.shape != t.shape or data.dtype != t.element_type.numpy:
            raise _fail(f"weight {name!r}: manifest says {data.dtype}{list(data.shape)}, "
                        f"{PROGRAM_FILE} declares {t}")
        inline = program.weights.get(name)
        if inline is not None and inline is not data and not _same(np.asarray(inline), data):
            raise _fail(f"weight {name!r}: data in {PROGRAM_FILE} differs from its .npy file")
        program.weights[name] = data
    for name, value in state.items():
        if not _same(np.asarray(program.initial_state[name]), value):
            raise _fail(f"state {name!r}: initial value in {PROGRAM_FILE} differs from its "
                        ".npy file")
        program.initial_state[name] = value
    program.reset_state()
    program.invalidate()


# ============================================================================== binding

_SAFETENSORS_DTYPES = {
    "BOOL": DType.bool, "U8": DType.uint8, "I8": DType.int8, "I16": DType.int16,
    "U16": DType.uint16, "I32": DType.int32, "U32": DType.uint32, "I64": DType.int64,
    "U64": DType.uint64, "F16": DType.float16, "BF16": DType.bfloat16, "F32": DType.float32,
    "F64": DType.float64,
}
MAX_SAFETENSORS_HEADER = 100 << 20


def read_safetensors(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read a .safetensors file into read-only arrays memory-mapped from it (no pickle).

    Layout: an 8-byte little-endian header length N, N bytes of JSON mapping each tensor name
    to its ``dtype``, ``shape`` and ``data_offsets`` (relative to the end of the header), then
    the raw little-endian data.
    """
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise _fail(f"{path.name}: too short for a safetensors file")
        n = int.from_bytes(head, "little")
        if n > min(size - 8, MAX_SAFETENSORS_HEADER):
            raise _fail(f"{path.name}: header length {n} exceeds the file ({size} bytes)")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise _fail(f"{path.name}: safetensors header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise _fail(f"{path.name}: safetensors header must be a JSON object")
    start = 8 + n
    raw = np.memmap(path, dtype=np.uint8, mode="r") if size > start else np.zeros(0, np.uint8)
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        what = f"{path.name}: tensor {name!r}"
        if not isinstance(info, dict):
            raise _fail(f"{what}: entry must be an object")
        dtype = _SAFETENSORS_DTYPES.get(str(info.get("dtype")))
        if dtype is None:
            raise _fail(f"{what}: unsupported dtype {info.get('dtype')!r}")
        shape, offsets = info.get("shape"), info.get("data_offsets")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise _fail(f"{what}: invalid shape {shape!r}")
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(isinstance(o, int) for o in offsets)):
            raise _fail(f"{what}: invalid data_offsets {offsets!r}")
        begin, end = offsets
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if not 0 <= begin <= end or end - begin != nbytes or start + end > size:
            raise _fail(f"{what}: data_offsets {offsets} do not hold {nbytes} bytes inside "
                        f"the file")
        stored = np.dtype(np.uint16) if dtype is DType.bfloat16 else dtype.numpy
        arr = raw[start + begin:start + end].view(stored.newbyteorder("<")).reshape(shape)
        out[name] = arr.view(dtype.numpy) if dtype is DType.bfloat16 else arr
    return out


def _to_numpy(value: Any) -> np.ndarray:
    if type(value).__module__.startswith("torch"):
        # torch is imported only when torch is asked for: importing coreai_core never loads it
        import torch

        t = value.detach().cpu()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(DType.bfloat16.numpy)
        return t.numpy()
    return np.asarray(value)


def _source_arrays(source: Any) -> Mapping[str, Any]:
    if isinstance(source, Mapping):
        return source
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as npz:
                return {k: npz[k] for k in npz.files}
        if path.suffix == ".safetensors":
            return read_safetensors(path)
        raise ValueError(f"{path}: expected a .npz or .safetensors file")
    raise TypeError("bind_weights expects a mapping name -> array/tensor, or a path to an .npz "
                    f"or .safetensors file, got {type(source).__name__}")


def bind_weights(program: ProgramData, source: Any, *, strict: bool = True) -> None:
    """Fill ``program.weights`` from ``source``: a mapping name -> numpy array or torch
    tensor (e.g. a state dict), or the path of an ``.npz`` or ``.safetensors`` file.

    Every given array must match its weight's declared shape and dtype exactly. With
    ``strict`` (the default), a name the program does not declare and an unbound weight left
    without data are errors too (close names are suggested). Nothing is bound unless every
    check passes.
    """
    arrays = _source_arrays(source)
    problems: list[str] = []
    bound: dict[str, np.ndarray] = {}
    for name, value in arrays.items():
        t = program.weight_types.get(name)
        if t is None:
            if strict:
                problems.append(f"unknown weight {name!r}{_suggest(name, program.weight_types)}")
            continue
        arr = _to_numpy(value)
        if t.element_type is DType.bfloat16 and arr.dtype.kind == "V" and arr.itemsize == 2:
            arr = arr.view(DType.bfloat16.numpy)  # np.savez stores bfloat16 as raw 2-byte void
        if arr.dtype != t.element_type.numpy or arr.shape != t.shape:
            problems.append(f"weight {name!r}: expected {t.element_type.value}{list(t.shape)}, "
                            f"got {arr.dtype}{list(arr.shape)}")
            continue
        bound[name] = arr
    if strict:
        for name, data in program.weights.items():
            if data is None and name not in bound and name not in arrays:
                problems.append(f"missing weight {name!r}{_suggest(name, arrays)}")
    if problems:
        raise ValueError("cannot bind weights:\n  " + "\n  ".join(problems))
    program.weights.update(bound)
    program.invalidate()


def _suggest(name: str, candidates: Any) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=3)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
