"""Numpy kernels of the compression ops: decompression of palettized, blockwise-quantized
and sparse weights, and quantize/dequantize.

Per-block parameters are applied through a reshape of the data into (blocks, block size)
pairs of axes, so a scale is broadcast over its block without materializing a dense copy.
Float16/bfloat16 scales compute in float32 and round once to their type.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np

from coreai_core._dtypes import DType
from coreai_core.packing import unpack_bits
from coreai_core.runtime.kernels._registry import KernelSet
from coreai_core.runtime.kernels._windows import acc_dtype

KERNELS = KernelSet("compression")
kernel = KERNELS.register

Ints = Sequence[int]


def _blocked(x: np.ndarray, params: np.ndarray) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shapes that interleave (blocks, block size) per axis for ``x`` and for ``params``."""
    xs: list[int] = []
    ps: list[int] = []
    for n, g in zip(x.shape, params.shape, strict=True):
        xs += [g, n // g]
        ps += [g, 1]
    return tuple(xs), tuple(ps)


def _apply(x: np.ndarray, fn: Callable[..., np.ndarray], params: list[np.ndarray | None],
           axis: int | None) -> np.ndarray:
    """``fn(x, *params)`` with the params broadcast per tensor, per channel or per block."""
    present = [p for p in params if p is not None]
    ref = present[0]
    if axis is not None:
        shape = [1] * x.ndim
        shape[axis % x.ndim] = -1
        return fn(x, *(None if p is None else p.reshape(shape) for p in params))
    if ref.ndim == 0:
        return fn(x, *params)
    xs, ps = _blocked(x, ref)
    out = fn(x.reshape(xs), *(None if p is None else p.reshape(ps) for p in params))
    return out.reshape(x.shape)


def _qrange(dtype: DType) -> tuple[float, float]:
    if dtype.is_float:
        hi = float(ml_dtypes.finfo(dtype.numpy).max)
        return -hi, hi
    info = ml_dtypes.iinfo(dtype.numpy)
    return float(info.min), float(info.max)


@kernel("coreai.quantize")
def quantize(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None, *,
             axis: int | None = None, dtype: DType = DType.int8) -> np.ndarray:
    """Integers: clamp(round_half_even(x * (1 / scale)) + zero_point); floats: saturating
    rounding of x * (1 / scale). Torch's order: multiply by the float reciprocal."""
    ft = acc_dtype(x.dtype)
    lo, hi = _qrange(dtype)

    def q(v: np.ndarray, s: np.ndarray, z: np.ndarray | None) -> np.ndarray:
        y = v.astype(ft) * (ft.type(1) / s.astype(ft)).astype(ft)
        if not dtype.is_float:
            y = np.rint(y)
            if z is not None:
                y = y + z.astype(ft)
        return np.clip(y, lo, hi)

    with np.errstate(all="ignore"):
        return _apply(x, q, [scale, zero_point], axis).astype(dtype.numpy)


def _dequant(x: np.ndarray, scale: np.ndarray, offset: np.ndarray | None,
             axis: int | None) -> np.ndarray:
    ft = acc_dtype(scale.dtype)

    def dq(v: np.ndarray, s: np.ndarray, z: np.ndarray | None) -> np.ndarray:
        y = v.astype(ft)
        if z is not None:
            y = y - z.astype(ft)
        return y * s.astype(ft)

    return _apply(x, dq, [scale, offset], axis).astype(scale.dtype, copy=False)


@kernel("coreai.dequantize")
def dequantize(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None, *,
               axis: int | None = None) -> np.ndarray:
    """(x - zero_point) * scale in the scale's float type."""
    return _dequant(x, scale, zero_point, axis)


@kernel("coreai.constexpr_blockwise_shift_scale")
def constexpr_blockwise_shift_scale(data: np.ndarray, scale: np.ndarray,
                                    offset: np.ndarray | None) -> np.ndarray:
    """(data - offset) * scale, each block of data with its own scale and offset."""
    return _dequant(data, scale, offset, None)


@kernel("coreai.lut_to_dense")
def lut_to_dense(indices: np.ndarray, lut: np.ndarray, *, shape: Ints) -> np.ndarray:
    """Look each unpacked index up in the table of its group."""
    nbits = lut.shape[-1].bit_length() - 1
    codes = unpack_bits(indices, nbits, math.prod(shape)).reshape(tuple(shape))
    groups = []
    for d, (n, g) in enumerate(zip(shape, lut.shape[:-1], strict=True)):
        index_shape = [1] * len(shape)
        index_shape[d] = n
        groups.append((np.arange(n) // (n // g)).reshape(index_shape))
    return lut[(*groups, codes)]


@kernel("coreai.sparse_to_dense")
def sparse_to_dense(mask: np.ndarray, nonzero_data: np.ndarray, *, shape: Ints) -> np.ndarray:
    """Scatter the non-zeros to the positions whose mask bit is set."""
    n = math.prod(shape)
    where = np.unpackbits(mask, count=n, bitorder="little").view(np.bool_)
    count = int(np.count_nonzero(where))
    if count != nonzero_data.size:
        raise ValueError(f"sparse_to_dense: the mask sets {count} positions but "
                         f"{nonzero_data.size} non-zero values are given")
    out = np.zeros(n, nonzero_data.dtype)
    out[where] = nonzero_data
    return out.reshape(tuple(shape))
