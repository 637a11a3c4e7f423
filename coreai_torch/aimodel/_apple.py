"""The one door to Apple's Core AI package (``coreai-core``, module ``coreai``).

Every other module of coreai_torch takes Apple's names from here (a test checks that none
imports ``coreai`` itself), so a new release of Apple's package is adapted in this file.

Apple's package has a supported, versioned facade (``coreai.authoring`` to build a model,
``coreai.runtime`` to run one) and a raw layer (``coreai._compiler``: the MLIR bindings) that
Apple documents as unversioned: it may change with any release. The facade cannot express
everything the exporter needs (graphs whose arguments are state handles, composite
declarations, regions of ``if``/``while``, packed sub-byte constants), so the raw layer is
used for those, and only through the names below. :data:`TESTED_VERSIONS` lists the releases
the exporter is tested with; ``pyproject.toml`` bounds the ``coreai-core`` requirement to them.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import threading
import warnings
from pathlib import Path
from typing import Any

try:
    import coreai.authoring as ca
except ImportError as e:
    # imported here: the isolated interpreter's child process imports this file alone (see
    # _interpreter.py), without coreai_torch and torch
    from coreai_torch.errors import MissingExtraError

    raise MissingExtraError(
        "exporting to .aimodel needs Apple's Core AI Python package (coreai-core), which is "
        "not installed: pip install 'coreai-torch[coreai]'") from e

import coreai._compiler.dialects.coreai.control_flow_ops as raw_control_flow
import coreai.authoring.asset as _asset_writer
import coreai.runtime as apple_runtime  # the interpreter: AIModel, IntermediateLogger, Profiler
from coreai._compiler import ir as raw_ir
from coreai._compiler._mlir_libs._coreaiIR._bindings.mlir.dialects.coreai import (
    create_elements_attr as raw_elements_attr,
)
from coreai._compiler.dialects import coreai as raw_coreai
from coreai._compiler.dialects._coreai_ops_gen import ConstantOp as RawConstantOp
from coreai.authoring.constant import constant
from coreai.runtime import NDArray

__all__ = [
    "TESTED_VERSIONS", "NDArray", "RawConstantOp", "apple_runtime", "ca", "constant", "from_raw",
    "installed_version", "raw_control_flow", "raw_coreai", "raw_elements_attr", "raw_ir",
    "read_custom_metadata", "save_program_asset", "to_raw", "write_custom_metadata",
]

# coreai-core releases the exporter and the interpreter runs are tested with
TESTED_VERSIONS = ("1.0.0b3",)


def installed_version() -> str:
    """The installed ``coreai-core`` release (``"unknown"`` outside a pip install)."""
    try:
        return importlib.metadata.version("coreai-core")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def write_custom_metadata(path: Path, key: str, value: Any) -> None:
    """Store ``value`` (JSON data) under ``key`` in the asset's ``metadata.json``.

    It is stored as JSON text: coreai-core 1.0.0b3 reads a stored number 1 back as ``True``.
    """
    text = json.dumps(value)
    ca.AIModelAsset.load(path).update_metadata(lambda m: m.set_custom(key, text))


def read_custom_metadata(path: Path, key: str) -> Any:
    """What :func:`write_custom_metadata` stored under ``key`` (None if nothing)."""
    metadata: Any = ca.AIModelAsset.load(path).metadata
    # the stub calls it custom_metadata; 1.0.0b3 has creator_defined_metadata
    found = metadata.creator_defined_metadata.get(key)
    return None if found is None else json.loads(found)


# the bytecode writer is swapped for the duration of one save: one save at a time
_SAVE_LOCK = threading.Lock()
_COPY_CHUNK = 1 << 24


def save_program_asset(module: Any, path: Path, *, through_memory: bool) -> None:
    """Apple's ``AIProgram(module).save_asset(path)``; with ``through_memory`` (on Linux) the
    bytecode is serialized into an anonymous in-memory file, then copied to ``path`` by
    Python. Apple's writer writes the bytecode from native code, and a failed write (a full
    disk) makes LLVM end the process ("LLVM ERROR: IO failure"); copied by Python it is an
    ``OSError``, which Apple's ``save_asset`` turns into a ``RuntimeError`` after removing
    what it wrote. The cost is memory: the asset's bytecode is held once more while it is
    written."""
    if not through_memory or not hasattr(os, "memfd_create") \
            or not os.path.isdir("/proc/self/fd"):
        ca.AIProgram(module).save_asset(path)
        return
    real = _asset_writer._serialize_module_to_bytecode

    def via_memory(mlir_module: Any, target: Path, dialect_version: int) -> None:
        fd = os.memfd_create("coreai-torch-bytecode")
        try:
            real(mlir_module, Path(f"/proc/self/fd/{fd}"), dialect_version)
            _copy_out(fd, target)
        finally:
            os.close(fd)

    with _SAVE_LOCK:
        setattr(_asset_writer, "_serialize_module_to_bytecode", via_memory)  # noqa: B010
        try:
            ca.AIProgram(module).save_asset(path)
        finally:
            setattr(_asset_writer, "_serialize_module_to_bytecode", real)  # noqa: B010


def _copy_out(source: int, target: Path) -> None:
    size = os.fstat(source).st_size
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        done = 0
        while done < size:
            chunk = os.pread(source, min(_COPY_CHUNK, size - done), done)
            view = memoryview(chunk)
            while view:
                view = view[os.write(out, view):]
            done += len(chunk)
    except BaseException:
        with contextlib.suppress(OSError):
            os.ftruncate(out, 0)  # give the space back at once
        raise
    finally:
        os.close(out)


def to_raw(value: Any) -> Any:
    """The raw MLIR value (or type) behind a facade value (or type)."""
    return value._to_mlir()


def from_raw(value: Any) -> Any:
    """The facade value of a raw MLIR value."""
    return ca.Value._from_mlir(value)


if installed_version() not in (*TESTED_VERSIONS, "unknown"):
    warnings.warn(
        f"coreai-core {installed_version()} is installed; coreai_torch.aimodel is tested with "
        f"{', '.join(TESTED_VERSIONS)} and uses Apple's unversioned raw layer, so export may "
        "fail or differ: pip install 'coreai-torch[coreai]' installs a tested release",
        stacklevel=2)
