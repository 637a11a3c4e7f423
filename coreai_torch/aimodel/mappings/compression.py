"""Op mappings (compression family): compressed weights and quantization onto Core
AI's compression ops.

A compressed weight stays compressed in the ``.aimodel``: its packed data becomes a Core AI
constant of the sub-byte element type (see ``_constants``), and one Core AI decompression op
rebuilds the dense tensor when the model runs. Where Core AI's op differs from ours the
mapping adapts it exactly:

- ``lut_to_dense``: our 1-d packed index stream becomes Core AI's ``ui{nbits}`` index tensor
  of the result's shape (same bits, no copy), the table gets Core AI's trailing vector axis
  (``V = 1``); 5- and 7-bit indices, which Core AI lacks, are widened to 6 and 8 bits (the
  table padded with unused entries).
- ``constexpr_blockwise_shift_scale`` and per-block ``dequantize``: ``blockwise_shift_scale``
  with ``offset2 = -0.0`` (adding it changes no value, not even the sign of a zero); a missing
  offset becomes zeros. Core AI's float4/float8 forms take no offset, and float4 only
  float16 scales; otherwise the data is converted exactly (a unit float16 scale), then
  shifted and scaled per block in float32 as ours is.
- ``dequantize``: ``blockwise_shift_scale`` too, per tensor and per channel as blocks that
  span whole axes (Core AI's ``dequantize`` rejects the non-positive scales ours allows).
- ``quantize``: ours multiplies by the reciprocal of the scale (torch's order) where Core AI's
  divides, and the two differ in the last bit now and then, so the product is formed first
  and Core AI's ``quantize`` gets a unit scale (dividing by 1 is exact); a zero point is added
  after rounding (Core AI's offset takes no other element type and no per-block shape).
- ``sparse_to_dense``: ``build_sparse_with_bitmask`` + ``sparse_with_bitmask_to_dense``, the
  1-bit mask stream as a ``ui1`` tensor.

Index streams and masks must be constants (compressed weights): Core AI has no bitcast that
could reinterpret a byte stream computed at run time as sub-byte integers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from coreai_core import DType, Operation, Value
from coreai_core.packing import pack_bits, unpack_bits
from coreai_torch.aimodel._apple import ca, constant
from coreai_torch.aimodel._constants import apple_constant, packed_index_constant
from coreai_torch.aimodel._context import ExportContext, Refused, exported_dtype
from coreai_torch.aimodel.mappings._registry import mapping_decorator, mapping_registry

__all__ = ["MAPPINGS"]

MAPPINGS = mapping_registry(__name__)
mapping = mapping_decorator(MAPPINGS)

# Index widths of Core AI's lut_to_dense, and the width each of ours is stored in.
_LUT_BITS = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 6, 7: 8, 8: 8}
# Element types of Core AI's quantize result and dequantize input.
_QUANTIZED = frozenset({DType.int4, DType.uint4, DType.int8, DType.uint8, DType.float4_e2m1fn,
                        DType.float8_e4m3fn, DType.float8_e5m2})
# Of the scale types ours allows, the one Core AI's blockwise_shift_scale takes for float4
# data directly (it also takes bfloat16, whose float4 form goes the exact float32 way here,
# and float8 scales, which ours lacks).
_FLOAT4_SCALES = frozenset({DType.float16})


def _i32(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.int32)


def _numpy(dtype: DType) -> Any:
    return exported_dtype(dtype).numpy


def _constant_stream(ctx: ExportContext, op: Operation, index: int, what: str) -> np.ndarray:
    try:
        return ctx.constant_array(op.operands[index])
    except Refused as e:
        raise Refused(f"its {what} are computed at run time ({e.reason}); Core AI takes them "
                      "as a sub-byte tensor, which only a constant (a compressed weight) can "
                      "give: it has no bitcast to reinterpret a byte stream") from None


def _spread(x: Any, x_shape: tuple[int, ...], params: list[Any], p_shape: tuple[int, ...],
            axis: int | None, fn: Callable[..., Any]) -> Any:
    """``fn(x, *params)`` with ``params`` (of ``p_shape``) broadcast over ``x`` per tensor,
    per channel (``axis``) or per block, as coreai_core's compression kernels do."""
    if axis is not None:
        shape = [1] * len(x_shape)
        shape[axis] = -1
        return fn(x, *(ca.reshape(p, _i32(shape)) for p in params))
    if not p_shape:
        return fn(x, *params)
    # interleave (blocks, block size) per axis so that each parameter covers its block
    xs = [s for n, g in zip(x_shape, p_shape, strict=True) for s in (g, n // g)]
    ps = [s for g in p_shape for s in (g, 1)]
    out = fn(ca.reshape(x, _i32(xs)), *(ca.reshape(p, _i32(ps)) for p in params))
    return ca.reshape(out, _i32(x_shape))


def _offset(ctx: ExportContext, op: Operation, xs: Sequence[Any], index: int, dtype: DType,
            shape: tuple[int, ...]) -> Any:
    """Operand ``index`` (a zero point/offset, or zeros if absent) in element type ``dtype``,
    which Core AI requires of an offset subtracted from data of that type."""
    if index >= len(op.operands):
        return apple_constant(np.zeros(shape, _numpy(dtype)))
    given = op.operands[index]
    if given.type.element_type is dtype:
        return xs[index]
    try:
        values = ctx.constant_array(given)
    except Refused:
        raise Refused(f"a {given.type.element_type} zero point computed at run time: Core AI "
                      f"takes the data's element type {dtype}") from None
    converted = values.astype(_numpy(dtype))
    if not np.array_equal(converted.astype(np.float64), values.astype(np.float64)):
        raise Refused(f"zero point values do not fit the data's element type {dtype}")
    return apple_constant(converted)


def _offset_is_zero(ctx: ExportContext, op: Operation, index: int) -> bool:
    if index >= len(op.operands):
        return True
    try:
        return not np.any(ctx.constant_array(op.operands[index]))
    except Refused:
        return False


def _float_values(x: Any, dtype: DType, rank: int) -> Any:
    """float4/float8 values as float32, exactly: blockwise_shift_scale with a unit float16
    scale (every float4, float8_e4m3fn and float8_e5m2 value is a float16 value), a cast."""
    ones = (1,) * rank
    halves = ca.blockwise_shift_scale(x, constant(np.ones(ones, np.float16)),
                                      apple_constant(np.zeros(ones, dtype.numpy)),
                                      constant(np.full(ones, -0.0, np.float16)))
    return ca.cast(halves, np.float32)


def _as_float32(x: Any, dtype: DType, rank: int) -> Any:
    if dtype.is_float and dtype.bits <= 8:
        return _float_values(x, dtype, rank)
    return x if exported_dtype(dtype) is DType.float32 else ca.cast(x, np.float32)


def _shift_scale(ctx: ExportContext, op: Operation, xs: Sequence[Any],
                 blocks: tuple[int, ...]) -> Any:
    """``(data - offset) * scale`` through Core AI's blockwise_shift_scale, for the operands
    (data, scale, offset) of ``op``; ``blocks`` is the scale's shape in per-block form."""
    data, scale = op.operands[0], op.operands[1]
    d_type, d_shape = data.type.element_type, ctx.static_shape(data)
    s_type = exported_dtype(scale.type.element_type)
    zero = _offset_is_zero(ctx, op, 2)

    def block(v: Any) -> Any:
        return v if tuple(v.type.shape) == blocks else ca.reshape(v, _i32(blocks))

    x = xs[0] if d_shape else ca.reshape(xs[0], _i32([1]))  # Core AI's data has rank >= 1
    shape = d_shape or (1,)
    direct = not d_type.is_float or (zero and (d_type is not DType.float4_e2m1fn
                                               or s_type in _FLOAT4_SCALES))
    if direct:
        offset = block(_offset(ctx, op, xs, 2, d_type, blocks))
        y = ca.blockwise_shift_scale(x, block(xs[1]), offset,
                                     constant(np.full(blocks, -0.0, s_type.numpy)))
        return y if d_shape else ca.reshape(y, _i32([]))
    # Core AI's float4/float8 forms take no offset (and float4 only float16 scales): convert
    # exactly, then subtract and scale in float32 like our kernel, rounding once
    s32 = block(_as_float32(xs[1], s_type, len(blocks)))
    values = _float_values(x, d_type, len(shape))
    if zero:
        y = _spread(values, shape, [s32], blocks, None, ca.broadcasting_mul)
    else:
        o32 = _as_float32(block(xs[2]), op.operands[2].type.element_type, len(blocks))
        y = _spread(values, shape, [o32, s32], blocks, None,
                    lambda v, o, s: ca.broadcasting_mul(ca.broadcasting_sub(v, o), s))
    y = y if s_type is DType.float32 else ca.cast(y, s_type.numpy.type)
    return y if d_shape else ca.reshape(y, _i32([]))


@mapping("coreai.constexpr_blockwise_shift_scale",
         "blockwise_shift_scale (float4/float8 with an offset, float4 with a float32 scale: "
         "converted, then sub + mul)")
def _blockwise(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [_shift_scale(ctx, op, xs, ctx.static_shape(op.operands[1]))]


@mapping("coreai.dequantize", "blockwise_shift_scale (per tensor/channel: blocks spanning axes)")
def _dequantize(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    # Core AI's dequantize rejects non-positive scales, which ours allows: per tensor and
    # per channel are blocks spanning whole axes of blockwise_shift_scale
    dtype = op.operands[0].type.element_type
    if dtype not in _QUANTIZED:
        raise Refused(f"{dtype} data (Core AI dequantizes int4, uint4, int8, uint8, float8 "
                      "and float4)")
    rank = max(op.operands[0].type.rank, 1)
    blocks = ctx.static_shape(op.operands[1]) or (1,) * rank
    axis = op.attributes.get("axis")
    if axis is not None:
        per_channel = [1] * rank
        per_channel[axis % rank] = blocks[0]
        blocks = tuple(per_channel)
    return [_shift_scale(ctx, op, xs, blocks)]


@mapping("coreai.quantize",
         "broadcasting_mul by 1/scale (+ round_ + zero point) + quantize (unit scale)")
def _quantize(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    dtype: DType = op.attributes["dtype"]
    if dtype not in _QUANTIZED:
        raise Refused(f"quantizing to {dtype} (Core AI quantizes to int4, uint4, int8, uint8, "
                      "float8 and float4)")
    x_val, s_val = op.operands[0], op.operands[1]
    x_shape, s_shape = ctx.static_shape(x_val), ctx.static_shape(s_val)
    axis = op.attributes.get("axis")
    axis = None if axis is None else axis % len(x_shape)

    def f32(v: Any, ours: Value) -> Any:
        return v if exported_dtype(ours.type.element_type) is DType.float32 else ca.cast(
            v, np.float32)

    params = [ca.broadcasting_divide(constant(np.float32(1)), f32(xs[1], s_val))]
    if len(op.operands) > 2:
        params.append(f32(xs[2], op.operands[2]))

    def scaled(x: Any, recip: Any, zero_point: Any = None) -> Any:
        y = ca.broadcasting_mul(x, recip)
        return y if zero_point is None else ca.broadcasting_add(ca.round_(y), zero_point)

    y = _spread(f32(xs[0], x_val), x_shape, params, s_shape, axis, scaled)
    if not x_shape:
        y = ca.reshape(y, _i32([1]))
    # Core AI's quantize: clip(round((y - 0) / 1) + 0); rounding is half to even, a float
    # result saturates at the type's largest finite value, like ours
    q = ca.quantize(y, constant(np.float32(1)), apple_constant(np.zeros((), dtype.numpy)),
                    constant(np.float32(0)), _i32(np.arange(max(len(x_shape), 1))))
    return [q if x_shape else ca.reshape(q, _i32([]))]


@mapping("coreai.lut_to_dense",
         "lut_to_dense (constant indices as ui1..ui8, packed; 5/7 bits widened)")
def _lut_to_dense(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    shape = tuple(op.attributes["shape"])
    stream = _constant_stream(ctx, op, 0, "indices")
    lut_shape = ctx.static_shape(op.operands[1])
    entries = lut_shape[-1]
    nbits = entries.bit_length() - 1
    stored = _LUT_BITS[nbits]
    lut = xs[1]
    if stored != nbits:  # widen: Core AI has no 5- or 7-bit indices
        stream = pack_bits(unpack_bits(stream, nbits, math.prod(shape)), stored)
        unused = np.zeros((*lut_shape[:-1], (1 << stored) - entries),
                          _numpy(op.operands[1].type.element_type))
        lut = ca.concat(np.int32(len(lut_shape) - 1), [lut, constant(unused)])
    index_shape = shape or (1,)  # Core AI's indices have rank >= 1
    groups = lut_shape[:-1] or (1,)
    indices = packed_index_constant(stream, index_shape, stored)
    table = ca.reshape(lut, _i32([*groups, 1 << stored, 1]))  # Core AI's vector axis, V = 1
    dense = ca.lut_to_dense(indices, table, np.int16(0))
    return [dense if shape else ca.reshape(dense, _i32([]))]


@mapping("coreai.sparse_to_dense",
         "build_sparse_with_bitmask + sparse_with_bitmask_to_dense (constant mask as ui1)")
def _sparse_to_dense(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    shape = tuple(op.attributes["shape"])
    stream = _constant_stream(ctx, op, 0, "mask bits")
    n = math.prod(shape)
    count = int(np.unpackbits(stream, count=n, bitorder="little").sum())
    given = ctx.static_shape(op.operands[1])[0]
    if count != given:
        raise Refused(f"the mask sets {count} positions but {given} values are given")
    dtype = _numpy(op.results[0].type.element_type)
    if count == 0:  # nothing to scatter
        return [ca.broadcast_to(constant(np.zeros((), dtype)), _i32(shape))]
    mask = packed_index_constant(stream, shape or (1,), 1)
    dense = ca.sparse_with_bitmask_to_dense(ca.build_sparse_with_bitmask(xs[1], mask))
    return [dense if shape else ca.reshape(dense, _i32([]))]

