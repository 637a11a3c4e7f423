"""Built-in lowerings (compression family): the ``coreai::`` compression ops with Apple's schemas
(:mod:`coreai_torch.compression.ops`, what coreai-opt's ``finalize`` emits) onto the dialect.

The compressed data stays compressed in the program: torch holds palette indices and sparsity
masks one per byte, the program bit-packs them; sub-byte integers held in int8/uint8 (the
``input_dtype`` argument names them) and packed float4 become weights of the 4-bit type. When
only this op reads such a buffer, its weight is converted in place (the program keeps one copy).
``quantize`` divides by the scale (Apple's arithmetic), so it lowers onto elementwise ops rather
than ``coreai.quantize`` (which multiplies by the reciprocal, like torch's own quantize ops).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import ml_dtypes
import numpy as np
import torch

from coreai_core import DType, TensorType, Value
from coreai_core.dialects import coreai
from coreai_core.packing import pack_bits, packed_size, unpack_nibbles
from coreai_torch._table import LoweringSet
from coreai_torch.compression import checks
from coreai_torch.compression.ops import (
    check_dequantize,
    check_quantize,
    check_shift_scale,
    checked_params,
)
from coreai_torch.lowerings._compression_utils import constant_data, converted_constant
from coreai_torch.utils import arg_meta, cast_to, dtype_of, is_sole_reader, normalize_dim

LOWERINGS = LoweringSet("compression")
reg = LOWERINGS.register_torch_lowering

F32 = DType.float32
WIDE_FLOATS = (DType.float16, DType.bfloat16, DType.float32, DType.float64)


def _int_min(dtype: DType) -> int:
    return int(ml_dtypes.iinfo(dtype.numpy).min)


def _shape(name: str) -> list[int]:
    return [int(d) for d in arg_meta(name).shape]


def _reshape(x: Value, shape: list[int]) -> Value:
    return coreai.reshape(x, np.asarray(shape, np.int64))


def _bit_stream(value: Value, name: str, nbits: int) -> Value:
    """The constant ``value`` (one code per element) as an ``nbits``-wide bit stream."""
    count = math.prod(_shape(name))
    target = TensorType((packed_size(count, nbits),), DType.uint8)
    return converted_constant(value, target, lambda a: pack_bits(a.astype(np.uint8), nbits),
                              name, is_sole_reader(name))


def _spread_blocks(param: Value, shape: list[int]) -> tuple[list[int], list[int]]:
    """Shapes interleaving (blocks, block size) per axis, for data of ``shape`` and for a
    per-block ``param``: adding them broadcasts each block's value over its block."""
    inner: list[int] = []
    outer: list[int] = []
    for n, g in zip(shape, param.type.shape):
        assert isinstance(g, int)
        inner += [g, n // g]
        outer += [g, 1]
    return inner, outer


def _blockwise(fn: Callable[[Value, Value], Value], x: Value, param: Value) -> Value:
    """``fn(x, param)`` elementwise with ``param`` per block of ``x`` (same rank, dividing
    sizes)."""
    shape = [int(d) for d in x.type.shape]  # type: ignore[arg-type]
    inner, outer = _spread_blocks(param, shape)
    return _reshape(fn(_reshape(x, inner), _reshape(param, outer)), shape)


# -- lut_to_dense ------------------------------------------------------------------------------

@reg("coreai::lut_to_dense.default")
def coreai_lut_to_dense_default(indices: Value, lut: Value, axis: int) -> Value:
    """lut_to_dense(Tensor indices, Tensor lut, int axis) -> Tensor"""
    checks.check_lut_to_dense(arg_meta("indices"), arg_meta("lut"), axis, constant_data(indices))
    shape = _shape("indices")
    lut_shape = _shape("lut")
    palettes, vector = lut_shape[-2], lut_shape[-1]
    nbits = palettes.bit_length() - 1
    stream = _bit_stream(indices, "indices", nbits)
    if lut.type.element_type is DType.float64:
        lut = cast_to(lut, F32)
    tables = lut_shape[:-1]
    if vector == 1:
        return coreai.lut_to_dense(stream, _reshape(lut, tables), shape=shape)
    # vector palettization: one scalar table per vector lane, sharing the indices; lane v of
    # entry p lands at position p*VECTOR_SIZE + v along ``axis``
    axis = normalize_dim(axis, len(shape))
    lanes = coreai.split(lut, [1] * vector, axis=len(lut_shape) - 1)
    dense = [coreai.expand_dims(coreai.lut_to_dense(stream, _reshape(lane, tables), shape=shape),
                                [axis + 1]) for lane in lanes]
    out_shape = list(shape)
    out_shape[axis] *= vector
    return _reshape(coreai.concat(dense, axis=axis + 1), out_shape)


# -- constexpr_blockwise_shift_scale -----------------------------------------------------------

def _fp4_data(input: Value) -> Value:
    shape = _shape("input")
    shape[-1] *= 2
    target = TensorType(tuple(shape), DType.float4_e2m1fn)
    return converted_constant(
        input, target, lambda a: unpack_nibbles(a.reshape(-1), DType.float4_e2m1fn, shape),
        "packed float4 data", is_sole_reader("input"))


def _sub_byte(value: Value, name: str, dtype: DType) -> Value:
    """A constant sub-byte integer tensor held one per byte in int8/uint8, as ``dtype``."""
    target = TensorType(tuple(_shape(name)), dtype)
    return converted_constant(value, target, lambda a: a.astype(dtype.numpy), name,
                              is_sole_reader(name))


@reg("coreai::constexpr_blockwise_shift_scale.default")
def coreai_constexpr_blockwise_shift_scale_default(
        input: Value, scale: Value, zero_point: Value | None = None,
        minval: Value | None = None, input_dtype: DType | None = None,
        output_dtype: DType | None = None) -> Value:
    """constexpr_blockwise_shift_scale(Tensor input, Tensor scale, Tensor? zero_point=None, Tensor? minval=None, ScalarType? input_dtype=None, ScalarType? output_dtype=None) -> Tensor"""  # noqa: E501
    meta = arg_meta("input")
    scale_meta = arg_meta("scale")
    check_shift_scale(meta, scale_meta, arg_meta("zero_point"), arg_meta("minval"),
                      arg_meta("input_dtype"), arg_meta("output_dtype"), constant_data(input),
                      constant_data(zero_point))
    if (meta.dtype == torch.uint8 and scale_meta.dtype == torch.float8_e8m0fnu) or (
            meta.is_floating_point()):
        # float data: float32(data) * float32(scale), cast once to the output type
        data = _fp4_data(input) if meta.dtype == torch.uint8 else input
        if data.type.element_type in WIDE_FLOATS:  # a float table scaled per channel
            out = _blockwise(coreai.broadcasting_mul, cast_to(data, F32), cast_to(scale, F32))
        else:
            out = coreai.constexpr_blockwise_shift_scale(data, cast_to(scale, F32))
        return cast_to(out, output_dtype or dtype_of(scale_meta.dtype))
    if input_dtype in (DType.int4, DType.uint4):
        input = _sub_byte(input, "input", input_dtype)
        if zero_point is not None:
            zero_point = _sub_byte(zero_point, "zero_point", input_dtype)
    if minval is None:
        return coreai.constexpr_blockwise_shift_scale(input, scale, zero_point)
    assert input_dtype is not None  # checked above
    q_min = np.full(_shape("scale"), _int_min(input_dtype), input.type.element_type.numpy)
    return _blockwise(coreai.broadcasting_add,
                      coreai.constexpr_blockwise_shift_scale(input, scale, q_min), minval)


# -- quantize / dequantize ---------------------------------------------------------------------

def _per_axis(param: Value | None, name: str, axis: int, rank: int) -> Value | None:
    """A per-tensor (one element) or per-channel parameter, broadcastable along ``axis``."""
    if param is None:
        return None
    n = math.prod(_shape(name))
    view = [1] * rank
    if rank:
        view[axis] = n
    return _reshape(param, view if n != 1 or not rank else [1] * rank)


def _clamp(x: Value, lo: float, hi: float) -> Value:
    dtype = x.type.element_type
    return coreai.broadcasting_minimum(
        coreai.broadcasting_maximum(x, coreai.constant(lo, dtype=dtype)),
        coreai.constant(hi, dtype=dtype))


@reg("coreai::quantize.default")
def coreai_quantize_default(input: Value, scale: Value, output_dtype: DType,
                            zero_point: Value | None = None, minval: Value | None = None,
                            axis: int = 0) -> Value:
    """quantize(Tensor input, Tensor scale, ScalarType output_dtype, Tensor? zero_point=None, Tensor? minval=None, int axis=0) -> Tensor"""  # noqa: E501
    meta, scale_meta, zp_meta, mv_meta = (arg_meta(n) for n in ("input", "scale",
                                                                "zero_point", "minval"))
    check_quantize(meta, scale_meta, arg_meta("output_dtype"), zp_meta, mv_meta)
    checked_params("quantize", meta, scale_meta, zp_meta, mv_meta, axis)
    rank = input.type.rank
    axis = normalize_dim(axis, rank) if rank else 0
    s = _per_axis(scale, "scale", axis, rank)
    assert s is not None
    if output_dtype.is_float:
        y = coreai.broadcasting_divide(cast_to(input, F32), cast_to(s, F32))
        hi = float(torch.finfo(output_dtype.torch).max)
        return coreai.cast(_clamp(y, -hi, hi), output_dtype)
    # torch's promotion of input / scale (both dimensioned), then round half to even
    ft = dtype_of(torch.promote_types(arg_meta("input").dtype, arg_meta("scale").dtype))
    x, s = cast_to(input, ft), cast_to(s, ft)
    info = ml_dtypes.iinfo(output_dtype.numpy)
    lo, hi = int(info.min), int(info.max)
    mv = _per_axis(minval, "minval", axis, rank)
    if mv is not None:
        y = coreai.broadcasting_add(coreai.round_(coreai.broadcasting_divide(
            coreai.broadcasting_sub(x, cast_to(mv, ft)), s)), coreai.constant(lo, dtype=ft))
    else:
        y = coreai.round_(coreai.broadcasting_divide(x, s))
        zp = _per_axis(zero_point, "zero_point", axis, rank)
        if zp is not None:
            y = coreai.broadcasting_add(y, cast_to(zp, ft))
    return coreai.cast(_clamp(y, lo, hi), output_dtype)


@reg("coreai::dequantize.default")
def coreai_dequantize_default(input: Value, scale: Value, zero_point: Value | None = None,
                              minval: Value | None = None, axis: int = 0,
                              input_dtype: DType | None = None,
                              output_dtype: DType | None = None) -> Value:
    """dequantize(Tensor input, Tensor scale, Tensor? zero_point=None, Tensor? minval=None, int axis=0, ScalarType? input_dtype=None, ScalarType? output_dtype=None) -> Tensor"""  # noqa: E501
    meta, scale_meta, zp_meta, mv_meta = (arg_meta(n) for n in ("input", "scale",
                                                                "zero_point", "minval"))
    check_dequantize(meta, scale_meta, zp_meta, mv_meta, arg_meta("input_dtype"),
                     arg_meta("output_dtype"), constant_data(input), constant_data(zero_point))
    checked_params("dequantize", meta, scale_meta, zp_meta, mv_meta, axis)
    rank = input.type.rank
    axis = normalize_dim(axis, rank) if rank else 0
    s = _per_axis(scale, "scale", axis, rank)
    assert s is not None
    if arg_meta("input").is_floating_point():
        out = coreai.dequantize(input, cast_to(s, F32))
        return cast_to(out, output_dtype or dtype_of(arg_meta("scale").dtype))
    zp = _per_axis(zero_point, "zero_point", axis, rank)
    if minval is None:
        return coreai.dequantize(input, s, zp)
    assert input_dtype is not None  # checked above
    # per-axis parameters are the dialect's per-block form (sizes 1 or the data's)
    q_min = np.full([d if isinstance(d, int) else 1 for d in s.type.shape],
                    _int_min(input_dtype), np.int64)
    mv = _per_axis(minval, "minval", axis, rank)
    assert mv is not None
    return coreai.broadcasting_add(coreai.dequantize(input, s, q_min), mv)


# -- sparse_to_dense ---------------------------------------------------------------------------

@reg("coreai::sparse_to_dense.default")
def coreai_sparse_to_dense_default(nonzero_data: Value, mask: Value) -> Value:
    """sparse_to_dense(Tensor nonzero_data, Tensor mask) -> Tensor"""
    stream = _bit_stream(mask, "mask", 1)
    return coreai.sparse_to_dense(stream, nonzero_data, shape=_shape("mask"))
