"""How many bytes a model's weights or an exported asset take, against float16 and float32.

Used by the compression manifest, the export report and ``benchmarks/bench_llm.py``. A weight's
bytes are its stored bytes: 4-bit data (held by torch one value per int8) counts half a byte,
palettization indices ``log2(palette size)`` bits, and a weight shared by several modules (a
tied ``lm_head``) counts once.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

import attrs
import torch
from torch import nn

__all__ = ["SizeReport", "TensorSize", "asset_bytes", "size_report", "weight_sizes"]

_FOUR_BIT = tuple(getattr(torch, n) for n in ("int4", "uint4") if hasattr(torch, n))


@attrs.frozen
class TensorSize:
    """One weight of a model: its module path, dense shape, storage scheme, bits per element
    (storage over dense elements, tables and scales included) and stored bytes."""

    name: str
    shape: tuple[int, ...]
    scheme: str
    bits: float
    nbytes: int

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "shape": list(self.shape), "scheme": self.scheme,
                "bits": round(self.bits, 4), "bytes": self.nbytes}


@attrs.frozen
class SizeReport:
    """``nbytes`` of stored weights (or of an asset on disk) for ``parameters`` dense weight
    elements, against the same elements held in float16 and float32."""

    nbytes: int
    parameters: int

    @property
    def float16_bytes(self) -> int:
        return 2 * self.parameters

    @property
    def float32_bytes(self) -> int:
        return 4 * self.parameters

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.nbytes / self.parameters if self.parameters else 0.0

    def to_dict(self) -> dict[str, object]:
        return {"bytes": self.nbytes, "parameters": self.parameters,
                "float16_bytes": self.float16_bytes, "float32_bytes": self.float32_bytes,
                "vs_float16": round(self.nbytes / max(self.float16_bytes, 1), 4),
                "vs_float32": round(self.nbytes / max(self.float32_bytes, 1), 4),
                "bits_per_weight": round(self.bits_per_weight, 4)}

    def __str__(self) -> str:
        mib = self.nbytes / 2**20
        return (f"{mib:.1f} MiB for {self.parameters:,} weights "
                f"({self.bits_per_weight:.2f} bits each; "
                f"{self.nbytes / max(self.float16_bytes, 1):.3f}x float16, "
                f"{self.nbytes / max(self.float32_bytes, 1):.3f}x float32)")


def _tensor_bytes(t: torch.Tensor | None, bits: float | None = None) -> int:
    if t is None:
        return 0
    per = bits if bits is not None else 8 * t.element_size()
    return math.ceil(t.numel() * per / 8)


def _compressed(name: str, module: nn.Module) -> TensorSize | None:
    """The storage of a compressed weight module of :mod:`coreai_torch.compression.modules`
    (duck-typed on its buffers: coreai-opt swaps in subclasses of them)."""
    buffers = dict(module.named_buffers(recurse=False))
    if "indices" in buffers and "lut" in buffers:
        lut = buffers["lut"]
        nbits = max(1, math.ceil(math.log2(lut.shape[-2])))
        extra = sum(_tensor_bytes(buffers.get(k)) for k in ("lut", "scale", "zero_point",
                                                            "minval"))
        indices = buffers["indices"]
        shape = tuple(indices.shape)
        stored = _tensor_bytes(indices, nbits) + extra
        return TensorSize(name, shape, f"palettized {nbits}-bit", 8 * stored / indices.numel(),
                          stored)
    if "quantized_data" in buffers:
        data = buffers["quantized_data"]
        dtype = getattr(module, "input_dtype", None) or data.dtype
        shape = tuple(data.shape)
        if _is_fp4(module):  # packed: two float4 values per byte along the last axis
            shape, bits, dtype = (*shape[:-1], 2 * shape[-1]), None, "float4_e2m1fn"
        else:
            bits = 4 if dtype in _FOUR_BIT else None
        stored = (_tensor_bytes(data, bits) + _tensor_bytes(buffers.get("scale"))
                  + _tensor_bytes(buffers.get("minval"))
                  + _tensor_bytes(buffers.get("zero_point"), bits))
        kind = str(dtype).removeprefix("torch.")
        return TensorSize(name, shape, f"quantized {kind}", 8 * stored / math.prod(shape),
                          stored)
    if "nonzero_data" in buffers and "mask" in buffers:
        mask = buffers["mask"]
        stored = _tensor_bytes(buffers["nonzero_data"]) + math.ceil(mask.numel() / 8)
        return TensorSize(name, tuple(mask.shape), "sparse", 8 * stored / mask.numel(), stored)
    return None


def _is_fp4(module: nn.Module) -> bool:
    scale = getattr(module, "scale", None)
    e8m0 = getattr(torch, "float8_e8m0fnu", None)
    return isinstance(scale, torch.Tensor) and e8m0 is not None and scale.dtype == e8m0


def _parametrized(model: nn.Module) -> Iterator[tuple[str, str, nn.Module]]:
    for name, module in model.named_modules():
        plist = getattr(module, "parametrizations", None)
        if plist is None:
            continue
        for tensor_name, chain in plist.items():
            yield name, tensor_name, chain[0]


def weight_sizes(model: nn.Module) -> list[TensorSize]:
    """Every weight of ``model`` (parameters, compressed weight modules and floating-point
    buffers that are not caches), each once, in module order."""
    seen: set[int] = set()
    out: list[TensorSize] = []
    compressed_names: set[str] = set()
    for module_name, tensor_name, weight_module in _parametrized(model):
        full = f"{module_name}.{tensor_name}" if module_name else tensor_name
        compressed_names.add(f"{full}.original" if module_name else full)
        size = _compressed(full, weight_module)
        if size is None or id(weight_module) in seen:
            continue
        seen.add(id(weight_module))
        seen.update(id(b) for b in weight_module.buffers())
        out.append(size)
    for name, module in model.named_modules():
        size = _compressed(name, module)
        if size is not None and id(module) not in seen and "parametrizations" not in name:
            seen.add(id(module))
            seen.update(id(b) for b in module.buffers())
            out.append(size)
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen or p.numel() == 0 or ".parametrizations." in name:
            continue
        seen.add(id(p))
        dtype = str(p.dtype).removeprefix("torch.")
        out.append(TensorSize(name, tuple(p.shape), f"dense {dtype}", 8 * p.element_size(),
                              _tensor_bytes(p)))
    return out


def size_report(model_or_sizes: nn.Module | list[TensorSize],
                parameters: int | None = None) -> SizeReport:
    """The stored bytes of a model's weights against float16/float32 of ``parameters`` dense
    elements (default: the dense elements of those weights)."""
    sizes = (weight_sizes(model_or_sizes) if isinstance(model_or_sizes, nn.Module)
             else model_or_sizes)
    count = sum(math.prod(s.shape) for s in sizes) if parameters is None else parameters
    return SizeReport(sum(s.nbytes for s in sizes), count)


def asset_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes on disk of an asset: a file, or every file under a folder (an artifact, an
    ``.aimodel`` package or a bundle)."""
    root = Path(path)
    if root.is_file():
        return root.stat().st_size
    if not root.exists():
        raise FileNotFoundError(f"asset_bytes: {root} does not exist")
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
