"""Saving and loading programs, and binding weights from state dicts and weight files.

An artifact is a folder (layout, guarantees and limits: docs/saving.md)::

    model.coreai/
      manifest.json              format, writer, the current revision, its files' SHA-256
      rev-<16 hex digits>/       one revision, never modified once written
        program.coreai           the text form (large weight data elided)
        weights.safetensors      every bound weight, by name

:func:`save` is atomic (it writes a new revision, then replaces ``manifest.json``) and never
deletes what the project did not write. Loading never unpickles; every file is checked
against the manifest (regular, same size and SHA-256, nothing extra in the revision) and the
weights against the program text before anything is returned; problems raise
:class:`ArtifactError` naming the file. Weights files larger than ``MMAP_BYTES`` are
memory-mapped read-only rather than read into memory.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from coreai_core import _artifact_read as current
from coreai_core._artifact_read import FORMAT, FORMAT_VERSION
from coreai_core._artifact_v1 import load_v1
from coreai_core._artifact_write import save
from coreai_core._dtypes import DType
from coreai_core._ir import ProgramData
from coreai_core._safetensors_io import MMAP_BYTES, TensorLimit, read_safetensors, read_stored
from coreai_core._text_parser import DEFAULT_MAX_BYTES

__all__ = ["FORMAT", "FORMAT_VERSION", "MMAP_BYTES", "bind_weights", "load_into",
           "read_safetensors", "save"]


def load_into(program: ProgramData, path: str | os.PathLike[str], *,
              max_bytes: int | None = DEFAULT_MAX_BYTES) -> None:
    """Load the artifact folder ``path`` (format 2, or format 1 of coreai-torch 0.1.0) into
    the empty ``program`` (``coreai_core.load`` makes it), checking it completely first.
    ``max_bytes`` bounds the tensor data the program text may make the parser allocate (see
    ``coreai_core.parse``; weights are memory-mapped and not counted).

    Raises :class:`ArtifactError` naming the file for a missing, extra, truncated, modified
    or malformed file, a symlink, or a manifest of an unknown format.
    """
    root = current.artifact_root(path)
    raw = current.raw_manifest(root)
    if isinstance(raw, dict) and raw.get("format") == FORMAT and raw.get("version") == 1:
        load_v1(program, root, raw, max_bytes=max_bytes)
    else:
        current.load_into(program, root, raw, max_bytes=max_bytes)


# ============================================================================== binding

def _to_numpy(value: Any) -> np.ndarray:
    if type(value).__module__.startswith("torch"):
        # torch is imported only when torch is asked for: importing coreai_core never loads it
        import torch

        t = value.detach().cpu()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(DType.bfloat16.numpy)
        return t.numpy()
    return np.asarray(value)


def _source_arrays(source: Any, limit: TensorLimit | None) -> Mapping[str, Any]:
    if isinstance(source, Mapping):
        return source
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as npz:
                return {k: npz[k] for k in npz.files}
        if path.suffix == ".safetensors":
            return read_stored(path, path.name, limit)[0]
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
    declared = len(program.weight_types)
    # strict: a file of more tensors than weights names an unknown one, whatever it holds
    limit = TensorLimit(declared, f"the program declares {declared} weights") if strict \
        else None
    arrays = _source_arrays(source, limit)
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
        more = f"\n  and {len(problems) - _SHOWN} more problems" if len(problems) > _SHOWN \
            else ""
        raise ValueError("cannot bind weights:\n  " + "\n  ".join(problems[:_SHOWN]) + more)
    program.weights.update(bound)
    program.invalidate()


_SHOWN = 10  # problems listed in a bind_weights error


def _suggest(name: str, candidates: Any) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=3)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
