"""Torch custom ops in this project's ``coreaix`` namespace that rebuild compressed weights
from **packed** storage.

Apple's ``coreai::`` compression ops (:mod:`coreai_torch.compression.ops`) keep indices, masks
and 4-bit data unpacked in torch (one element per byte) and cannot be written to a ``.pt2``
with int4 data; these keep the torch model and its ``.pt2`` as small as the program. The
helpers of :mod:`coreai_torch.compression.helpers` use them.

Each op is registered with ``torch.library.custom_op`` (an eager implementation written with
torch ops) and ``register_fake`` (shape and dtype only), so a model that calls it exports with
``torch.export`` and converts onto the matching Core AI dialect op. Importing this module (or
``coreai_torch.compression``, or ``coreai_torch``) registers them.

Storage conventions (shared with :mod:`coreai_core.packing`):

- bit streams (``lut_to_dense`` indices, ``sparse_to_dense`` masks) are 1-d uint8 tensors,
  code ``i`` occupying bits ``i*nbits ..`` of the little-endian stream;
- 4-bit data (``int4``, ``uint4``, ``float4_e2m1fn``) is a 1-d uint8 tensor, two elements per
  byte, element ``2k`` in the low nibble of byte ``k`` (torch has no usable 4-bit dtypes);
- 8-bit data (``int8``, ``uint8``, ``float8_e4m3fn``, ``float8_e5m2``) is a tensor of that dtype.

Scales, offsets and zero points apply per tensor (0-d), per channel (1-d, with ``axis``) or per
block (the data's rank; sizes dividing the data's), as documented in
``coreai_core.dialects._compression``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = [
    "FOUR_BIT", "EIGHT_BIT", "FP4_VALUES", "constexpr_blockwise_shift_scale", "dequantize",
    "lut_to_dense", "quantize", "sparse_to_dense", "unpack_bits", "unpack_nibbles",
]

FOUR_BIT = ("int4", "uint4", "float4_e2m1fn")
EIGHT_BIT = {"int8": torch.int8, "uint8": torch.uint8, "float8_e4m3fn": torch.float8_e4m3fn,
             "float8_e5m2": torch.float8_e5m2}
# The 16 float4_e2m1fn values by code (sign bit 3, two exponent bits, one mantissa bit).
FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
              -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
_QUANT_DTYPES = (torch.int8, torch.uint8, torch.float8_e4m3fn, torch.float8_e5m2)


def _fail(op: str, message: str) -> ValueError:
    return ValueError(f"coreaix::{op}: {message}")


def unpack_bits(packed: Tensor, nbits: int, count: int) -> Tensor:
    """The first ``count`` ``nbits``-wide codes of a uint8 bit stream, as int64."""
    if packed.dtype != torch.uint8 or packed.dim() != 1:
        raise ValueError(f"a bit stream is a 1-d uint8 tensor, got {packed.dtype}"
                         f"{list(packed.shape)}")
    need = (count * nbits + 7) // 8
    if packed.numel() != need:
        raise ValueError(f"{count} codes of {nbits} bits take {need} bytes, got {packed.numel()}")
    shifts = torch.arange(8, device=packed.device)
    bits = (packed.to(torch.int64)[:, None] >> shifts) & 1
    bits = bits.reshape(-1)[:count * nbits].reshape(count, nbits)
    return (bits << torch.arange(nbits, device=packed.device)).sum(1)


def unpack_nibbles(packed: Tensor, dtype: str, count: int) -> Tensor:
    """4-bit elements of a packed uint8 tensor as float32 values (exact)."""
    if packed.dtype != torch.uint8 or packed.shape != ((count + 1) // 2,):
        raise ValueError(f"{count} 4-bit elements take a uint8[{(count + 1) // 2}] tensor, got "
                         f"{packed.dtype}{list(packed.shape)}")
    codes = torch.stack([packed & 0x0F, packed >> 4], 1).reshape(-1)[:count].to(torch.int64)
    if dtype == "int4":
        return torch.where(codes >= 8, codes - 16, codes).to(torch.float32)
    if dtype == "uint4":
        return codes.to(torch.float32)
    return torch.tensor(FP4_VALUES, dtype=torch.float32, device=packed.device)[codes]


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _spread(param: Tensor, shape: tuple[int, ...], axis: int | None, op: str) -> Tensor:
    """``param`` broadcastable against ``shape``: per tensor, per channel or per block."""
    rank = len(shape)
    if axis is not None:
        if not -rank <= axis < rank or param.shape != (shape[axis],):
            raise _fail(op, f"a per-channel parameter along axis {axis} of {list(shape)} must "
                            f"have shape [{shape[axis] if -rank <= axis < rank else '?'}], got "
                            f"{list(param.shape)}")
        view = [1] * rank
        view[axis] = -1
        return param.reshape(view)
    if param.dim() == 0:
        return param
    if param.dim() != rank or any(g == 0 or n % g for n, g in zip(shape, param.shape)):
        raise _fail(op, f"a parameter of shape {list(param.shape)} is neither 0-d (per tensor) "
                        f"nor blocks of {list(shape)} (per block: same rank, dividing sizes)")
    for d, (n, g) in enumerate(zip(shape, param.shape)):
        param = param.repeat_interleave(n // g, dim=d)
    return param


def _values(data: Tensor, dtype: str, shape: list[int], op: str) -> Tensor:
    """The stored elements as float32 values (every supported type converts exactly)."""
    count = math.prod(shape)
    if dtype in FOUR_BIT:
        return unpack_nibbles(data, dtype, count).reshape(shape)
    if dtype not in EIGHT_BIT:
        raise _fail(op, f"unknown data type {dtype!r}; expected one of "
                        f"{[*FOUR_BIT, *EIGHT_BIT]}")
    if data.dtype != EIGHT_BIT[dtype] or list(data.shape) != list(shape):
        raise _fail(op, f"{dtype} data must be a {EIGHT_BIT[dtype]} tensor of shape {shape}, "
                        f"got {data.dtype}{list(data.shape)}")
    return data.to(torch.float32)


# -- lut_to_dense ------------------------------------------------------------------------------

@torch.library.custom_op("coreaix::lut_to_dense", mutates_args=())
def lut_to_dense(indices: Tensor, lut: Tensor, shape: list[int]) -> Tensor:
    """Palettized weight: each element is its group's table entry at its packed index.

    ``lut``: ``(G_0, ..., G_{r-1}, 2**nbits)``, ``G_d`` groups along axis ``d`` of ``shape``;
    ``indices``: the uint8 bit stream of the ``prod(shape)`` row-major ``nbits``-bit indices.
    """
    entries = lut.shape[-1] if lut.dim() else 0
    nbits = entries.bit_length() - 1
    if lut.dim() != len(shape) + 1 or not 1 <= nbits <= 8 or entries != 1 << nbits:
        raise _fail("lut_to_dense", f"lut must have shape (groups per axis of {shape}..., "
                                    f"2**nbits), got {list(lut.shape)}")
    codes = unpack_bits(indices, nbits, math.prod(shape)).reshape(shape)
    index = []
    for d, (n, g) in enumerate(zip(shape, lut.shape[:-1])):
        if g == 0 or n % g:
            raise _fail("lut_to_dense", f"{g} groups do not divide axis {d} of {shape}")
        view = [1] * len(shape)
        view[d] = n
        index.append((torch.arange(n, device=lut.device) // (n // g)).reshape(view))
    return lut[(*index, codes)]


@lut_to_dense.register_fake
def _(indices: Tensor, lut: Tensor, shape: list[int]) -> Tensor:
    return lut.new_empty(shape)


# -- constexpr_blockwise_shift_scale -----------------------------------------------------------

@torch.library.custom_op("coreaix::constexpr_blockwise_shift_scale", mutates_args=())
def constexpr_blockwise_shift_scale(data: Tensor, scale: Tensor, offset: Tensor | None,
                                    dtype: str, shape: list[int]) -> Tensor:
    """Blockwise-quantized weight: ``(data - offset) * scale``, one scale (and offset) per
    block, in the scale's dtype.

    ``dtype`` names the stored element type: ``int4``, ``uint4``, ``float4_e2m1fn`` (packed
    uint8 data) or ``int8``, ``uint8``, ``float8_e4m3fn``, ``float8_e5m2``. ``offset``
    (integer types only) holds the zero points as int8 (signed types) or uint8 values.
    """
    op = "constexpr_blockwise_shift_scale"
    values = _values(data, dtype, shape, op)
    if scale.dim() != len(shape):
        raise _fail(op, f"scale must have the data's rank {len(shape)}, got {list(scale.shape)}")
    ft = _compute_dtype(scale.dtype)
    out = values.to(ft)
    if offset is not None:
        if dtype.startswith("float") or offset.dtype not in (torch.int8, torch.uint8):
            raise _fail(op, f"offset must be an int8/uint8 tensor for integer data, got "
                            f"{offset.dtype} for {dtype}")
        out = out - _spread(offset, tuple(shape), None, op).to(ft)
    return (out * _spread(scale, tuple(shape), None, op).to(ft)).to(scale.dtype)


@constexpr_blockwise_shift_scale.register_fake
def _(data: Tensor, scale: Tensor, offset: Tensor | None, dtype: str,
      shape: list[int]) -> Tensor:
    return scale.new_empty(shape)


# -- quantize / dequantize ---------------------------------------------------------------------

@torch.library.custom_op("coreaix::quantize", mutates_args=())
def quantize(x: Tensor, scale: Tensor, zero_point: Tensor | None, dtype: torch.dtype,
             axis: int | None = None) -> Tensor:
    """Affine quantization: integers ``clamp(round(x * (1 / scale)) + zero_point)``, float8
    ``x * (1 / scale)`` rounded and saturated. Per tensor, per channel (``axis``), per block.
    """
    if dtype not in _QUANT_DTYPES:
        raise _fail("quantize", f"dtype must be one of {list(_QUANT_DTYPES)}, got {dtype}")
    ft = _compute_dtype(x.dtype)
    s = _spread(scale, tuple(x.shape), axis, "quantize").to(ft)
    y = x.to(ft) * (1 / s)
    if dtype.is_floating_point:
        if zero_point is not None:
            raise _fail("quantize", f"quantizing to {dtype} takes no zero point")
        hi = torch.finfo(dtype).max
        return y.clamp(-hi, hi).to(dtype)
    y = torch.round(y)
    if zero_point is not None:
        y = y + _spread(zero_point, tuple(x.shape), axis, "quantize").to(ft)
    info = torch.iinfo(dtype)
    return y.clamp(info.min, info.max).to(dtype)


@quantize.register_fake
def _(x: Tensor, scale: Tensor, zero_point: Tensor | None, dtype: torch.dtype,
      axis: int | None = None) -> Tensor:
    return x.new_empty(x.shape, dtype=dtype)


@torch.library.custom_op("coreaix::dequantize", mutates_args=())
def dequantize(x: Tensor, scale: Tensor, zero_point: Tensor | None,
               axis: int | None = None) -> Tensor:
    """``(x - zero_point) * scale`` in the scale's dtype; per tensor, channel or block."""
    ft = _compute_dtype(scale.dtype)
    y = x.to(ft)
    if zero_point is not None:
        y = y - _spread(zero_point, tuple(x.shape), axis, "dequantize").to(ft)
    return (y * _spread(scale, tuple(x.shape), axis, "dequantize").to(ft)).to(scale.dtype)


@dequantize.register_fake
def _(x: Tensor, scale: Tensor, zero_point: Tensor | None, axis: int | None = None) -> Tensor:
    return scale.new_empty(x.shape)


# -- sparse_to_dense ---------------------------------------------------------------------------

@torch.library.custom_op("coreaix::sparse_to_dense", mutates_args=())
def sparse_to_dense(mask: Tensor, nonzero_data: Tensor, shape: list[int]) -> Tensor:
    """Sparse weight: ``nonzero_data`` at the positions whose bit is set in the 1-bit ``mask``
    stream (row-major over ``shape``), zero elsewhere."""
    n = math.prod(shape)
    where = unpack_bits(mask, 1, n).to(torch.bool)
    if int(where.sum()) != nonzero_data.numel() or nonzero_data.dim() != 1:
        raise _fail("sparse_to_dense", f"the mask sets {int(where.sum())} positions but "
                                       f"nonzero_data has shape {list(nonzero_data.shape)}")
    out = nonzero_data.new_zeros(n)
    out[where] = nonzero_data
    return out.reshape(shape)


@sparse_to_dense.register_fake
def _(mask: Tensor, nonzero_data: Tensor, shape: list[int]) -> Tensor:
    return nonzero_data.new_empty(shape)
