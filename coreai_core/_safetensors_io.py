"""Weights in safetensors: the stored form of every element type, a validated memory-mapped
reader and the writer's tensor specs.

safetensors stores most of our element types natively (bfloat16 as ``BF16``, float8 as
``F8_E4M3`` / ``F8_E5M2``). The types it lacks are stored as a view of a supported type, with
the real type and shape recorded in the file's metadata under ``coreai.element_types``:

- ``int4``, ``uint4``, ``float4_e2m1fn``: packed two per byte into a 1-D ``U8`` tensor of
  ``ceil(n / 2)`` bytes, element ``2k`` in the low nibble of byte ``k``
  (:func:`coreai_core.packing.pack_nibbles`);
- ``complex64`` / ``complex128``: ``F32`` / ``F64`` with a trailing dimension of 2 (real,
  imaginary), numpy's own memory layout.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import safetensors

from coreai_core._dtypes import SUB_BYTE, DType
from coreai_core.errors import ArtifactError
from coreai_core.packing import pack_nibbles, unpack_nibbles

__all__ = ["ELEMENT_TYPES_KEY", "MAX_HEADER_BYTES", "MMAP_BYTES", "TensorInfo", "TensorLimit",
           "decode", "expected_storage", "from_stored", "load_json", "numpy_can_hold",
           "read_header", "read_safetensors", "read_stored", "real_types", "shape_of", "some",
           "stored_form", "tensor_specs", "tensor_view"]

# safetensors' dtype codes of the element types it stores natively
_CODES = {
    "BOOL": DType.bool, "U8": DType.uint8, "I8": DType.int8, "I16": DType.int16,
    "U16": DType.uint16, "I32": DType.int32, "U32": DType.uint32, "I64": DType.int64,
    "U64": DType.uint64, "F16": DType.float16, "BF16": DType.bfloat16, "F32": DType.float32,
    "F64": DType.float64, "F8_E4M3": DType.float8_e4m3fn, "F8_E5M2": DType.float8_e5m2,
    "C64": DType.complex64,
}
ELEMENT_TYPES_KEY = "coreai.element_types"
# the safetensors library's own limit on the JSON header
MAX_HEADER_BYTES = 100 << 20
# A weights file larger than this is memory-mapped rather than read into memory.
MMAP_BYTES = 1 << 20
# the element type names manifests and metadata hold
_WRITTEN_NAMES = {d.value: d for d in DType}
# numpy's largest dimension; a larger one in a header is malformed
_MAX_DIM = np.iinfo(np.intp).max


def _numpy_max_rank() -> int:
    """numpy's NPY_MAXDIMS (64 in numpy 2, 32 before), which it does not export."""
    try:
        np.empty((1,) * 64)
    except ValueError:
        return 32
    return 64


_MAX_RANK = _numpy_max_rank()


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def some(names: Any, shown: int = 5) -> str:
    """The first ``shown`` of ``names`` and how many more: an error about a million names
    stays a line long."""
    names = list(names)
    head = ", ".join(_short(n) for n in names[:shown])
    return f"[{head}]" + (f" and {len(names) - shown} more" if len(names) > shown else "")


# ============================================================================== stored forms

def stored_form(data: np.ndarray) -> tuple[np.ndarray, dict[str, Any] | None]:
    """The contiguous array written for ``data`` and, for a type safetensors lacks, the
    metadata entry recording the real type and shape."""
    dtype = DType.of(data.dtype)
    real = {"dtype": dtype.value, "shape": list(data.shape)}
    if dtype in SUB_BYTE:
        return pack_nibbles(data), real
    if dtype.is_complex:
        pairs = np.ascontiguousarray(data).view(dtype.real_dtype.numpy)
        return pairs.reshape((*data.shape, 2)), real
    # not np.ascontiguousarray: it turns a 0-d array into a 1-d one
    return np.require(data, requirements="C"), None


def from_stored(stored: np.ndarray, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Inverse of :func:`stored_form` (a view where possible; 4-bit data is unpacked)."""
    if dtype in SUB_BYTE:
        return unpack_nibbles(stored, dtype, shape)
    if dtype.is_complex:
        return stored.view(dtype.numpy).reshape(shape)
    return stored


def expected_storage(dtype: DType, shape: tuple[int, ...]) -> tuple[DType, tuple[int, ...]]:
    """The element type and shape of the stored tensor holding ``dtype[shape]``."""
    if dtype in SUB_BYTE:
        return DType.uint8, ((math.prod(shape) + 1) // 2,)
    if dtype.is_complex:
        return dtype.real_dtype, (*shape, 2)
    return dtype, shape


def tensor_specs(arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """``safetensors.TensorSpec`` for each stored array (the arrays must stay alive while
    the specs are used: the library reads their memory directly, without a copy)."""
    return {name: safetensors.TensorSpec(dtype=DType.of(a.dtype).value, shape=list(a.shape),
                                         data_ptr=a.ctypes.data, data_len=a.nbytes)
            for name, a in arrays.items()}


# ============================================================================== reading

@attrs.frozen
class TensorInfo:
    """One tensor of a safetensors header, checked against the file."""

    dtype: DType
    shape: tuple[int, ...]
    begin: int  # absolute byte offsets in the file
    end: int


def shape_of(value: Any) -> tuple[int, ...] | None:
    """``value`` as a shape if it is a JSON list of dimensions numpy can hold, else None."""
    if not isinstance(value, list) or not all(
            type(d) is int and 0 <= d <= _MAX_DIM for d in value):
        return None
    return tuple(value)


def numpy_can_hold(shape: tuple[int, ...], itemsize: int) -> bool:
    """Whether numpy can make an array of ``shape`` with ``itemsize``-byte elements: at most
    its largest rank, and the product of the non-zero dimensions times the element size
    within ``intp`` (numpy checks that even when another dimension is 0)."""
    if len(shape) > _MAX_RANK:
        return False
    nbytes = max(itemsize, 1)
    for d in shape:
        nbytes *= d or 1
        if nbytes > _MAX_DIM:
            return False
    return True


def _too_big(what: str, shape: tuple[int, ...], dtype: DType) -> ArtifactError:
    return ArtifactError(f"{what}: shape {list(shape)} is larger than numpy can hold (at most "
                         f"{_MAX_RANK} dimensions; the non-zero ones times the element size "
                         f"at most {_MAX_DIM} bytes) for {dtype.value}")


def element_type_of(entry: dict[str, Any], what: str) -> tuple[DType, tuple[int, ...]]:
    """The ``"dtype"`` and ``"shape"`` of a manifest or metadata ``entry``, checked."""
    # only the names the format writes (DType values): DType.of would also take numpy's
    # and the text form's spellings, and read None as float64 through np.dtype(None)
    name = entry.get("dtype")
    dtype = _WRITTEN_NAMES.get(name) if isinstance(name, str) else None
    if dtype is None:
        raise ArtifactError(f"{what}: unknown dtype {_short(entry.get('dtype'))} (the format "
                            f"writes one of {', '.join(map(repr, _WRITTEN_NAMES))})")
    shape = shape_of(entry.get("shape"))
    if shape is None:
        raise ArtifactError(f"{what}: shape must be a list of non-negative ints, got "
                            f"{str(entry.get('shape'))[:80]}")
    if not numpy_can_hold(shape, dtype.itemsize):
        raise _too_big(what, shape, dtype)
    return dtype, shape


class _TooManyObjects(Exception):
    pass


def load_json(data: bytes, what: str, max_objects: tuple[int, str] | None = None) -> Any:
    """The JSON value in ``data`` (``what`` in messages). ``max_objects``: (a count, a
    message): parsing stops at the object after that many and raises ArtifactError with the
    message, so a header of a million entries is refused having built a few of them."""
    hook = None
    if max_objects is not None:
        count = 0

        def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
            nonlocal count
            count += 1
            if count > max_objects[0]:
                raise _TooManyObjects
            return dict(pairs)
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=hook)
    except _TooManyObjects:
        assert max_objects is not None
        raise ArtifactError(max_objects[1]) from None
    except RecursionError:
        raise ArtifactError(f"{what} is nested too deeply to be valid") from None
    except (UnicodeDecodeError, ValueError) as e:  # JSONDecodeError, or an over-long int
        raise ArtifactError(f"{what} is not valid JSON: {e}") from None


@attrs.frozen
class TensorLimit:
    """At most ``count`` tensors may be in a file, ``because`` (the end of the message)."""

    count: int
    because: str


def read_header(path: Path, name: str, limit: TensorLimit | None = None,
                ) -> tuple[dict[str, TensorInfo], dict[str, str]]:
    """The tensors and metadata of safetensors file ``path`` (``name`` in messages).

    A header of more than ``limit.count`` tensors is refused while it is parsed, before any
    per-tensor work (each tensor entry is one JSON object; ``__metadata__`` and the header
    itself are two more). Every declared size is checked against the file before anything
    is allocated: offsets in bounds, each tensor's byte count equal to its shape times its
    element size, tensors contiguous and covering the data exactly, as the safetensors
    specification requires.
    """
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) != 8:
                raise ArtifactError(f"{name}: too short for a safetensors file ({size} bytes)")
            n = int.from_bytes(head, "little")
            if n > min(size - 8, MAX_HEADER_BYTES):
                raise ArtifactError(f"{name}: header length {n} exceeds the file ({size} bytes) "
                                    f"or the {MAX_HEADER_BYTES}-byte limit")
            raw = f.read(n)
    except OSError as e:
        raise ArtifactError(f"{name}: cannot read: {e.strerror or e}") from None
    most = None
    if limit is not None:
        too_many = f"{name}: the header lists more than {limit.count} tensors, but "
        most = (limit.count + 2, too_many + limit.because)
    header = load_json(raw, f"{name}: the safetensors header", most)
    if most is not None and isinstance(header, dict) \
            and len(header) - ("__metadata__" in header) > most[0] - 2:
        raise ArtifactError(most[1])
    if not isinstance(header, dict):
        raise ArtifactError(f"{name}: the safetensors header must be a JSON object")
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(
            isinstance(v, str) for v in metadata.values()):
        raise ArtifactError(f"{name}: __metadata__ must map names to strings")
    start = 8 + n
    tensors: dict[str, TensorInfo] = {}
    for key, info in header.items():
        what = f"{name}: tensor {key!r}"
        if not isinstance(info, dict):
            raise ArtifactError(f"{what}: entry must be an object")
        code = info.get("dtype")
        dtype = _CODES.get(code) if isinstance(code, str) else None
        if dtype is None:
            raise ArtifactError(f"{what}: unsupported dtype {info.get('dtype')!r} (supported: "
                                f"{', '.join(_CODES)})")
        shape, offsets = shape_of(info.get("shape")), info.get("data_offsets")
        if shape is None:
            raise ArtifactError(f"{what}: shape must be a list of non-negative ints, got "
                                f"{str(info.get('shape'))[:80]}")
        if not numpy_can_hold(shape, dtype.itemsize):
            raise _too_big(what, shape, dtype)
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(type(o) is int for o in offsets)):
            raise ArtifactError(f"{what}: data_offsets must be two ints, got {offsets!r}")
        nbytes = math.prod(shape) * dtype.itemsize
        begin, end = offsets
        if not 0 <= begin <= end or end - begin != nbytes or start + end > size:
            raise ArtifactError(f"{what}: data_offsets {offsets} do not hold its "
                                f"{nbytes} bytes ({dtype.value}{list(shape)}) inside the "
                                f"{size}-byte file")
        tensors[key] = TensorInfo(dtype, shape, start + begin, start + end)
    at = start
    for key, t in sorted(tensors.items(), key=lambda kv: (kv[1].begin, kv[1].end)):
        if t.begin != at:
            raise ArtifactError(f"{name}: tensor {key!r} starts at byte {t.begin - start} of "
                                f"the data, expected {at - start} (tensors must be contiguous "
                                "without overlap)")
        at = t.end
    if at != size:
        raise ArtifactError(f"{name}: {size - at} bytes after the last tensor")
    return tensors, metadata


def _buffer(path: Path, size: int, name: str) -> np.ndarray:
    """The file's bytes: memory-mapped read-only when large, else read."""
    try:
        if size > MMAP_BYTES:
            return np.memmap(path, dtype=np.uint8, mode="r")
        data = np.frombuffer(path.read_bytes(), np.uint8)
    except OSError as e:
        raise ArtifactError(f"{name}: cannot read: {e.strerror or e}") from None
    if data.size != size:
        raise ArtifactError(f"{name}: changed while being read")
    return data


def tensor_view(buffer: np.ndarray, t: TensorInfo) -> np.ndarray:
    """The tensor ``t`` as a read-only view of the file's bytes."""
    raw = buffer[t.begin:t.end]
    stored = t.dtype.numpy
    if stored.itemsize > 1 and t.dtype.numpy.kind in "biufc":
        stored = stored.newbyteorder("<")
    arr = raw.view(stored).reshape(t.shape)
    arr.flags.writeable = False
    return arr


def read_safetensors(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read a .safetensors file into read-only arrays (memory-mapped when the file is large;
    never unpickles). Raises :class:`ArtifactError` for a malformed file."""
    path = Path(path)
    return read_stored(path, path.name)[0]


def read_stored(path: Path, name: str, limit: TensorLimit | None = None,
                ) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The stored tensors (views of the file) and metadata of an artifact's weights file
    (at most ``limit.count`` tensors)."""
    tensors, metadata = read_header(path, name, limit)
    size = max((t.end for t in tensors.values()), default=0)
    buffer = _buffer(path, size, name) if size else np.zeros(0, np.uint8)
    return {key: tensor_view(buffer, t) for key, t in tensors.items()}, metadata


def real_types(metadata: Mapping[str, str], name: str, stored: int | None = None,
               ) -> dict[str, tuple[DType, tuple[int, ...]]]:
    """The ``coreai.element_types`` metadata: name -> (real dtype, real shape) (of at most
    ``stored`` tensors: the file's)."""
    raw = metadata.get(ELEMENT_TYPES_KEY)
    if raw is None:
        return {}
    what = f"{name}: metadata {ELEMENT_TYPES_KEY!r}"
    # an entry per stored tensor at most (each entry is one object, the table one more)
    table = load_json(raw.encode("utf-8"), what, None if stored is None else (
        stored + 1, f"{what} lists more than the {stored} tensors the file holds"))
    if not isinstance(table, dict):
        raise ArtifactError(f"{name}: metadata {ELEMENT_TYPES_KEY!r} must be an object")
    out: dict[str, tuple[DType, tuple[int, ...]]] = {}
    for key, entry in table.items():
        what = f"{name}: metadata {ELEMENT_TYPES_KEY!r} of tensor {key!r}"
        if not isinstance(entry, dict):
            raise ArtifactError(f"{what} must be an object")
        out[key] = element_type_of(entry, what)
    return out


def decode(stored: Mapping[str, np.ndarray], metadata: Mapping[str, str],
           name: str) -> dict[str, np.ndarray]:
    """The arrays of an artifact's weights file, in their real element types."""
    types = real_types(metadata, name, len(stored))
    unknown = sorted(set(types) - set(stored))
    if unknown:
        raise ArtifactError(f"{name}: metadata {ELEMENT_TYPES_KEY!r} names tensors the file "
                            f"does not hold: {some(unknown)}")
    out: dict[str, np.ndarray] = {}
    for key, arr in stored.items():
        if key not in types:
            out[key] = arr
            continue
        dtype, shape = types[key]
        want_dtype, want_shape = expected_storage(dtype, shape)
        if DType.of(arr.dtype) is not want_dtype or arr.shape != want_shape:
            raise ArtifactError(f"{name}: tensor {key!r} is {arr.dtype}{list(arr.shape)}, "
                                f"but {dtype.value}{list(shape)} is stored as "
                                f"{want_dtype.value}{list(want_shape)}")
        try:
            out[key] = from_stored(arr, dtype, shape)
        except ValueError as e:
            raise ArtifactError(f"{name}: tensor {key!r}: {e}") from None
    return out
