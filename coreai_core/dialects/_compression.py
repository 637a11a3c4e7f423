"""Compressed weights and quantization: decompression ops and quantize/dequantize.

A compressed weight stays compressed in the program: its packed data, look-up tables and
scales are constants, and one *decompression* op rebuilds the dense tensor when the program
runs. Ops with the ``decompression`` trait are never constant-folded (folding would store the
dense tensor and undo the compression). Packed bit streams follow
:mod:`coreai_core.packing`: code ``i`` of an ``nbits``-wide stream occupies bits
``i*nbits ..`` of the little-endian stream.

Granularity of ``scale`` (and ``zero_point``/``offset``, which share its shape) relative to
the data ``x``:

- per tensor: ``scale`` is 0-d;
- per channel: ``axis`` is given and ``scale`` is 1-d with ``x.shape[axis]`` entries;
- per block: ``scale`` has ``x``'s rank and each ``x.shape[d]`` is a multiple of
  ``scale.shape[d]``; element ``p`` uses ``scale[p // block]`` with
  ``block[d] = x.shape[d] // scale.shape[d]``.
"""

from __future__ import annotations

import math

from coreai_core._dtypes import DType
from coreai_core._ir import TensorType, Value
from coreai_core._opdef import Ints, builder_names, defop
from coreai_core._shapes import expect, norm_axis

DECOMPRESSION = ("decompression",)
# Element types a blockwise-quantized weight may hold.
QUANTIZED_TYPES = frozenset({DType.int4, DType.uint4, DType.int8, DType.uint8,
                             DType.float4_e2m1fn, DType.float8_e4m3fn, DType.float8_e5m2})


def _static(t: TensorType, what: str) -> tuple[int, ...]:
    expect(t.is_static, f"{what} must have a static shape, got {t}")
    return tuple(d for d in t.shape if isinstance(d, int))  # all of them, once static


def _check_shape_attr(shape: Ints) -> int:
    expect(all(d >= 0 for d in shape), f"shape must hold non-negative sizes, got {list(shape)}")
    return math.prod(shape)


def _blocks(data: tuple[int, ...], params: tuple[int, ...], what: str) -> None:
    expect(len(params) == len(data),
           f"per-block {what} must have the data's rank {len(data)}, got shape {list(params)}")
    for d, (n, g) in enumerate(zip(data, params)):
        expect(g > 0 and n % g == 0,
               f"{what} size {g} along axis {d} does not divide the data size {n}")


def _granularity(x: Value, scale: Value, others: list[Value | None], axis: int | None) -> None:
    """Check scale (and its companions) against ``x`` for the three granularities above."""
    st = scale.type
    if axis is not None:
        ax = norm_axis(axis, x.type.rank)
        expect(st.rank == 1, f"per-channel scale must be 1-d, got {st}")
        if isinstance(st.shape[0], int) and isinstance(x.type.shape[ax], int):
            expect(st.shape[0] == x.type.shape[ax], f"{st} does not match axis {ax} of {x.type}")
    elif st.rank != 0:
        expect(st.rank == x.type.rank, f"scale must be 0-d (per tensor), 1-d with an axis (per "
               f"channel) or of rank {x.type.rank} (per block), got {st}")
        _blocks(_static(x.type, "per-block data"), _static(st, "per-block scale"), "scale")
    for v in others:
        if v is not None:
            expect(v.type.shape == st.shape,
                   f"zero point/offset shape {v.type} must equal the scale's {st}")


@defop(traits=DECOMPRESSION)
def lut_to_dense(indices: Value, lut: Value, shape: Ints) -> TensorType:
    """Palettized weight: ``out[p] = lut[p // group, index[p]]``.

    ``lut`` has shape ``(G_0, ..., G_{r-1}, 2**nbits)`` for an ``r``-d result of ``shape``:
    the result is split into ``G_d`` groups along each axis ``d`` (``G_d`` divides
    ``shape[d]``), each with its own table of ``2**nbits`` values (1 <= nbits <= 8).
    ``indices`` is the uint8 bit stream of the ``prod(shape)`` row-major ``nbits``-bit
    indices.
    """
    n = _check_shape_attr(shape)
    lt = _static(lut.type, "lut")
    expect(len(lt) == len(shape) + 1, f"lut must have rank {len(shape) + 1} (one group axis per "
           f"result axis, then the table), got {lut.type}")
    entries = lt[-1]
    nbits = entries.bit_length() - 1
    expect(1 <= nbits <= 8 and entries == 1 << nbits,
           f"the lut's last axis holds 2**nbits entries (nbits 1..8), got {entries}")
    _blocks(tuple(shape), lt[:-1], "lut group count")
    expect(indices.type.element_type is DType.uint8 and indices.type.rank == 1,
           f"indices must be a 1-d uint8 bit stream, got {indices.type}")
    nbytes = (n * nbits + 7) // 8
    if isinstance(indices.type.shape[0], int):
        expect(indices.type.shape[0] == nbytes,
               f"{n} indices of {nbits} bits take {nbytes} bytes, got {indices.type}")
    return TensorType(tuple(shape), lut.type.element_type)


@defop(traits=DECOMPRESSION)
def constexpr_blockwise_shift_scale(data: Value, scale: Value, offset: Value | None = None,
                                    ) -> TensorType:
    """Blockwise dequantization: ``out = (data - offset[p // block]) * scale[p // block]``.

    ``data`` is int4, uint4, int8, uint8, float4_e2m1fn, float8_e4m3fn or float8_e5m2;
    ``scale`` is a float tensor of the data's rank whose sizes divide the data's (the block
    size along axis ``d`` is ``data.shape[d] // scale.shape[d]``); ``offset`` (optional, the
    zero point) has the scale's shape and the data's element type. Computed in the scale's
    type (float32 for float16/bfloat16) and returned in the scale's type.
    """
    dt = data.type.element_type
    expect(dt in QUANTIZED_TYPES, f"data must be one of "
           f"{sorted(d.value for d in QUANTIZED_TYPES)}, got {data.type}")
    expect(scale.type.element_type.is_float and scale.type.element_type.itemsize >= 2,
           f"scale must be float16/bfloat16/float32/float64, got {scale.type}")
    _blocks(_static(data.type, "data"), _static(scale.type, "scale"), "scale")
    if offset is not None:
        expect(offset.type.element_type is dt,
               f"offset must have the data's element type {dt}, got {offset.type}")
        expect(offset.type.shape == scale.type.shape,
               f"offset shape {offset.type} must equal the scale's {scale.type}")
    return data.type.with_dtype(scale.type.element_type)


@defop()
def quantize(x: Value, scale: Value, zero_point: Value | None = None, axis: int | None = None,
             dtype: DType = DType.int8) -> TensorType:
    """Affine quantization per tensor, per channel (``axis``) or per block.

    Integer ``dtype``: ``clamp(round_half_even(x * (1 / scale)) + zero_point)`` to the
    type's range. Like torch, x is multiplied by the float reciprocal of the scale. Float
    ``dtype`` (float8/float4): ``x * (1 / scale)`` rounded to ``dtype``, saturating at its
    largest finite value (no zero point).
    """
    expect(x.type.element_type.is_float, f"quantize expects a float tensor, got {x.type}")
    expect(dtype in QUANTIZED_TYPES or dtype.is_int,
           f"quantized dtype must be an integer, float8 or float4 type, got {dtype}")
    expect(zero_point is None or not dtype.is_float,
           f"quantizing to {dtype} takes no zero point")
    _granularity(x, scale, [zero_point], axis)
    return x.type.with_dtype(dtype)


@defop(traits=DECOMPRESSION)
def dequantize(x: Value, scale: Value, zero_point: Value | None = None, axis: int | None = None,
               ) -> TensorType:
    """``(x - zero_point) * scale`` in the scale's float type, per tensor, per channel
    (``axis``) or per block."""
    expect(x.type.element_type.is_int or x.type.element_type in QUANTIZED_TYPES,
           f"dequantize expects an integer, float8 or float4 tensor, got {x.type}")
    expect(scale.type.element_type.is_float, f"scale must be float, got {scale.type}")
    _granularity(x, scale, [zero_point], axis)
    return x.type.with_dtype(scale.type.element_type)


@defop(traits=DECOMPRESSION)
def sparse_to_dense(mask: Value, nonzero_data: Value, shape: Ints) -> TensorType:
    """Sparse weight: a 1-bit ``mask`` stream over the ``prod(shape)`` row-major positions
    (uint8, see the module docstring) and ``nonzero_data``, the values where the mask is set,
    in order; every other element is zero."""
    n = _check_shape_attr(shape)
    expect(mask.type.element_type is DType.uint8 and mask.type.rank == 1,
           f"mask must be a 1-d uint8 bit stream, got {mask.type}")
    if isinstance(mask.type.shape[0], int):
        expect(mask.type.shape[0] == (n + 7) // 8,
               f"a mask over {n} elements takes {(n + 7) // 8} bytes, got {mask.type}")
    expect(nonzero_data.type.rank == 1, f"nonzero_data must be 1-d, got {nonzero_data.type}")
    if isinstance(nonzero_data.type.shape[0], int):
        expect(nonzero_data.type.shape[0] <= n,
               f"{nonzero_data.type.shape[0]} non-zeros do not fit {n} elements")
    return TensorType(tuple(shape), nonzero_data.type.element_type)


# the builders of the ops defined above (see builder_names)
__all__ = [*builder_names(__name__)]
