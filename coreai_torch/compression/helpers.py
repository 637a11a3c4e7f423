"""Compress an ``nn.Module``'s Linear, Conv and Embedding weights in place.

Each helper replaces a module's ``weight`` parameter by compressed buffers (registered on the
module, so they are in its ``state_dict`` and the exported program) and turns ``weight`` into
a property that rebuilds the dense tensor through a ``torch.ops.coreai`` custom op. The
module keeps its class behaviour (its class becomes a subclass of the original, e.g.
``PalettizedLinear(nn.Linear)``), so ``forward`` is unchanged and ``torch.export`` records
the custom op, which the converter lowers onto the matching dialect op.

The weight stored in the program is then the compressed one; running the converted program
rebuilds each dense weight when it is needed and frees it after its last use.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

from coreai_core.packing import pack_bits
from coreai_torch.compression import packed_ops as ops

__all__ = ["COMPRESSIBLE", "compressed_size", "palettize", "prune", "quantize_weights"]

COMPRESSIBLE = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Embedding)
_INT_RANGES = {"int4": (-8, 7), "uint4": (0, 15), "int8": (-128, 127), "uint8": (0, 255)}
_FLOAT_MAX = {"float4_e2m1fn": 6.0, "float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}


class _CompressedWeight:
    """Mixin: ``weight`` is rebuilt from the module's compressed buffers on every access."""

    _decompress: Callable[[Any], torch.Tensor]

    @property
    def weight(self) -> torch.Tensor:
        return type(self)._decompress(self)


@functools.cache
def _compressed_class(base: Any, kind: str, decompress: Callable) -> type:
    return type(f"{kind}{base.__name__}", (_CompressedWeight, base),
                {"_decompress": staticmethod(decompress), "__module__": __name__})


def _targets(model: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    for name, module in model.named_modules():
        if isinstance(module, COMPRESSIBLE) and not isinstance(module, _CompressedWeight):
            yield name, module


def _install(module: nn.Module, kind: str, buffers: dict[str, torch.Tensor | None],
             decompress: Callable[[nn.Module], torch.Tensor], **attrs: Any) -> None:
    del module.weight  # the parameter; ``weight`` becomes the class property
    for key, value in buffers.items():
        module.register_buffer(key, value)
    for key, value in attrs.items():
        setattr(module, key, value)
    base: Any = type(module)  # classes are hashable; mypy reads Module.__hash__ as an instance's
    module.__class__ = _compressed_class(base, kind, decompress)


def _weight(module: nn.Module) -> torch.Tensor:
    weight = module.weight
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"{type(module).__name__}.weight is not a tensor")
    return weight.detach()


# -- palettization -----------------------------------------------------------------------------

def _kmeans_1d(values: torch.Tensor, k: int, iterations: int = 12) -> torch.Tensor:
    """Lloyd's k-means on each row of ``values`` (groups, n), in 1-d via sorted centroids.

    Returns the centroids (groups, k), sorted; starts from evenly spaced quantiles.
    """
    q = torch.linspace(0, 1, k, dtype=torch.float64)
    centroids = torch.quantile(values.to(torch.float64), q, dim=1).T.contiguous()
    data = values.to(torch.float64)
    for _ in range(iterations):
        labels = _nearest(data, centroids)
        sums = torch.zeros_like(centroids).scatter_add_(1, labels, data)
        counts = torch.zeros_like(centroids).scatter_add_(1, labels, torch.ones_like(data))
        centroids = torch.where(counts > 0, sums / counts.clamp(min=1), centroids)
        centroids = centroids.sort(dim=1).values
    return centroids


def _nearest(data: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """Index of the nearest (sorted) centroid for each value, row by row."""
    mids = (centroids[:, 1:] + centroids[:, :-1]) / 2
    return torch.searchsorted(mids.contiguous(), data.contiguous())


def _palettize_module(module: nn.Module, nbits: int, group_size: int | None) -> None:
    w = _weight(module)
    shape = list(w.shape)
    out_channels = shape[0]
    size = out_channels if group_size is None or out_channels % group_size else group_size
    groups = out_channels // size
    rows = w.reshape(groups, -1)
    lut = _kmeans_1d(rows, 1 << nbits)
    codes = _nearest(rows.to(torch.float64), lut)
    packed = torch.from_numpy(pack_bits(codes.numpy().astype(np.uint8), nbits))
    lut_shape = [groups, *([1] * (len(shape) - 1)), 1 << nbits]

    _install(module, "Palettized", {"weight_indices": packed,
                                    "weight_lut": lut.to(w.dtype).reshape(lut_shape)},
             _lut_weight, weight_shape=shape)


def _lut_weight(m: nn.Module) -> torch.Tensor:
    return torch.ops.coreaix.lut_to_dense(m.weight_indices, m.weight_lut, m.weight_shape)


def palettize(model: nn.Module, nbits: int, group_size: int | None = None) -> nn.Module:
    """Palettize the weights of ``model``'s Linear, Conv and Embedding modules in place.

    Each weight is clustered (1-d k-means) into ``2**nbits`` values (``1 <= nbits <= 8``);
    every ``group_size`` output channels share one table (``None``, or a size that does not
    divide a weight's output channels: one table for that weight).
    The weight is stored as ``nbits``-bit packed indices plus the tables and rebuilt by
    ``torch.ops.coreaix.lut_to_dense``. Returns ``model``.
    """
    if not isinstance(nbits, int) or not 1 <= nbits <= 8:
        raise ValueError(f"nbits must be an int from 1 to 8, got {nbits!r}")
    if group_size is not None and (not isinstance(group_size, int) or group_size <= 0):
        raise ValueError(f"group_size must be a positive int or None, got {group_size!r}")
    for _, module in list(_targets(model)):
        _palettize_module(module, nbits, group_size)
    return model


# -- blockwise quantization --------------------------------------------------------------------

def _block_shape(shape: list[int], block_size: int) -> list[int]:
    """Scale shape: one scale per output channel and block of ``block_size`` along axis 1
    (the whole axis when ``block_size`` does not divide it)."""
    if len(shape) < 2:
        return [shape[0]] if shape else []
    blocks = shape[1] // block_size if block_size > 0 and shape[1] % block_size == 0 else 1
    return [shape[0], blocks, *([1] * (len(shape) - 2))]


def _expand(param: torch.Tensor, shape: list[int]) -> torch.Tensor:
    for d, (n, g) in enumerate(zip(shape, param.shape)):
        param = param.repeat_interleave(n // g, dim=d)
    return param


def _block_reduce(w: torch.Tensor, scale_shape: list[int], fn: str) -> torch.Tensor:
    inter = []
    for n, g in zip(w.shape, scale_shape):
        inter += [g, n // g]
    blocked = w.reshape(inter)
    axes = tuple(range(1, len(inter), 2))
    return getattr(blocked, fn)(dim=axes).reshape(scale_shape) if axes else blocked


def _fp4_codes(x: torch.Tensor) -> torch.Tensor:
    table = torch.tensor(ops.FP4_VALUES, dtype=torch.float32)
    codes = (x.reshape(-1, 1).to(torch.float32) - table).abs().argmin(dim=1)
    return codes.reshape(x.shape)


def _pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    flat = (codes.reshape(-1) & 0x0F).to(torch.uint8)
    if flat.numel() % 2:
        flat = torch.cat([flat, flat.new_zeros(1)])
    return flat[0::2] | (flat[1::2] << 4)


def _quantize_module(module: nn.Module, dtype: str, block_size: int) -> None:
    w = _weight(module)
    shape = list(w.shape)
    sshape = _block_shape(shape, block_size)
    wf = w.to(torch.float32)
    offset = None
    if dtype in _FLOAT_MAX:
        amax = _block_reduce(wf.abs(), sshape, "amax")
        scale = torch.where(amax > 0, amax / _FLOAT_MAX[dtype], torch.ones_like(amax))
        scaled = wf / _expand(scale, shape)
        data = (_pack_nibbles(_fp4_codes(scaled)) if dtype == "float4_e2m1fn"
                else scaled.to(ops.EIGHT_BIT[dtype]))
    elif dtype in _INT_RANGES:
        lo, hi = _INT_RANGES[dtype]
        if dtype.startswith("u"):  # asymmetric: offset = zero point
            wmin = _block_reduce(wf, sshape, "amin").clamp(max=0)
            wmax = _block_reduce(wf, sshape, "amax").clamp(min=0)
            scale = torch.where(wmax > wmin, (wmax - wmin) / (hi - lo), torch.ones_like(wmax))
            offset = torch.round(-wmin / scale).clamp(lo, hi)
            q = torch.round(wf / _expand(scale, shape)) + _expand(offset, shape)
            offset = offset.to(torch.uint8)
        else:  # symmetric
            amax = _block_reduce(wf.abs(), sshape, "amax")
            scale = torch.where(amax > 0, amax / hi, torch.ones_like(amax))
            q = torch.round(wf / _expand(scale, shape))
        q = q.clamp(lo, hi).to(torch.int64)
        data = _pack_nibbles(q) if dtype in ops.FOUR_BIT else q.to(ops.EIGHT_BIT[dtype])
    else:
        raise ValueError(f"unsupported dtype {dtype!r}; expected one of "
                         f"{[*_INT_RANGES, *_FLOAT_MAX]}")

    _install(module, "Quantized", {"weight_data": data, "weight_scale": scale.to(w.dtype),
                                   "weight_offset": offset},
             _blockwise_weight, weight_dtype=dtype, weight_shape=shape)


def _blockwise_weight(m: nn.Module) -> torch.Tensor:
    return torch.ops.coreaix.constexpr_blockwise_shift_scale(
        m.weight_data, m.weight_scale, m.weight_offset, m.weight_dtype, m.weight_shape)


def quantize_weights(model: nn.Module, dtype: str = "int4", block_size: int = 32) -> nn.Module:
    """Quantize the weights of ``model``'s Linear, Conv and Embedding modules in place.

    ``dtype``: ``int4``/``int8`` (symmetric), ``uint4``/``uint8`` (asymmetric, with a zero
    point), ``float4_e2m1fn``, ``float8_e4m3fn`` or ``float8_e5m2``. Each output channel gets
    one scale per block of ``block_size`` input channels (per channel when ``block_size``
    does not divide them). The weight is rebuilt by
    ``torch.ops.coreaix.constexpr_blockwise_shift_scale``. Returns ``model``.
    """
    for _, module in list(_targets(model)):
        _quantize_module(module, dtype, block_size)
    return model


# -- pruning -----------------------------------------------------------------------------------

def _prune_module(module: nn.Module, sparsity: float) -> None:
    w = _weight(module)
    flat = w.reshape(-1)
    keep = flat.numel() - round(sparsity * flat.numel())
    mask = torch.zeros(flat.numel(), dtype=torch.bool)
    if keep > 0:
        mask[flat.abs().topk(keep, sorted=False).indices] = True
    packed = torch.from_numpy(pack_bits(mask.numpy().astype(np.uint8), 1))

    _install(module, "Pruned", {"weight_mask": packed, "weight_values": flat[mask].clone()},
             _sparse_weight, weight_shape=list(w.shape))


def _sparse_weight(m: nn.Module) -> torch.Tensor:
    return torch.ops.coreaix.sparse_to_dense(m.weight_mask, m.weight_values, m.weight_shape)


def prune(model: nn.Module, sparsity: float) -> nn.Module:
    """Zero the smallest-magnitude ``sparsity`` fraction of each Linear, Conv and Embedding
    weight of ``model``, in place, storing a 1-bit mask plus the kept values (rebuilt by
    ``torch.ops.coreaix.sparse_to_dense``). Returns ``model``."""
    if not 0.0 <= sparsity <= 1.0:
        raise ValueError(f"sparsity must be in [0, 1], got {sparsity!r}")
    for _, module in list(_targets(model)):
        _prune_module(module, sparsity)
    return model


def compressed_size(model: nn.Module) -> int:
    """Bytes of ``model``'s parameters and buffers (compressed weights count packed)."""
    tensors = {id(t): t for t in [*model.parameters(), *model.buffers()]}
    return sum(t.numel() * t.element_size() for t in tensors.values())


