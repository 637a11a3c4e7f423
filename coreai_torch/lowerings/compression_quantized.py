"""Built-in lowerings (compression family): the ``quantized_decomposed::`` ops that torch's PT2E
quantization flow (``prepare_pt2e`` / ``convert_pt2e``) leaves in an exported program.

Each lowering follows the arithmetic of torch's reference implementation
(``torch/ao/quantization/fx/_decomposed.py``) operation by operation, in the same dtypes, so
results match bit for bit: quantization multiplies by the reciprocal of the scale computed in
double precision for Python/``.item()`` scales; dequantization is ``(q - zero_point) * scale``
and becomes one ``coreai.dequantize`` op, which constant folding never expands (a quantized
weight stays int8 in the program).
"""

from __future__ import annotations

import numpy as np

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.utils import cast_to, normalize_dim

LOWERINGS = LoweringSet("compression_quantized")
reg = LOWERINGS.register_torch_lowering

F32, F64 = DType.float32, DType.float64


def _scalar(v: Value | float | int, dtype: DType) -> Value:
    """A Python number or a one-element tensor (``.item()`` in torch) as a 0-d ``dtype``."""
    if isinstance(v, Value):
        return cast_to(coreai.reshape(v, np.zeros(0, np.int64)), dtype)
    return coreai.constant(v, dtype=dtype)


def _clamp(x: Value, lo: Value, hi: Value) -> Value:
    return coreai.broadcasting_minimum(coreai.broadcasting_maximum(x, lo), hi)


def _per_tensor_quantize(x: Value, inv_scale: Value, zero_point: Value, quant_min: Value,
                         quant_max: Value, dtype: DType) -> Value:
    # clamp(round(x * inv_scale) + zero_point, quant_min, quant_max).to(dtype), in float32
    y = coreai.round_(coreai.broadcasting_mul(cast_to(x, F32), inv_scale))
    y = coreai.broadcasting_add(y, zero_point)
    return coreai.cast(_clamp(y, quant_min, quant_max), dtype)


def _inverse(scale: Value | float) -> Value:
    """float32(1.0 / scale), the division done in double like Python's ``1.0 / scale``."""
    if isinstance(scale, Value):
        return cast_to(coreai.broadcasting_divide(coreai.constant(1.0, dtype=F64),
                                                  _scalar(scale, F64)), F32)
    return coreai.constant(1.0 / scale, dtype=F32)


@reg("quantized_decomposed::quantize_per_tensor.default")
@reg("quantized_decomposed::quantize_per_tensor.tensor")
@reg("quantized_decomposed::quantize_per_tensor.tensor2")
def quantized_decomposed_quantize_per_tensor(input: Value, scale: Value | float,
                                             zero_point: Value | int, quant_min: Value | int,
                                             quant_max: Value | int, dtype: DType) -> Value:
    """quantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype) -> Tensor; .tensor/.tensor2 take tensors"""  # noqa: E501
    return _per_tensor_quantize(input, _inverse(scale), _scalar(zero_point, F32),
                                _scalar(quant_min, F32), _scalar(quant_max, F32), dtype)


@reg("quantized_decomposed::dequantize_per_tensor.default")
@reg("quantized_decomposed::dequantize_per_tensor.tensor")
@reg("quantized_decomposed::dequantize_per_tensor.tensor2")
def quantized_decomposed_dequantize_per_tensor(
        input: Value, scale: Value | float, zero_point: Value | int, quant_min: Value | int,
        quant_max: Value | int, dtype: DType, out_dtype: DType | None = None) -> Value:
    """dequantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor; .tensor/.tensor2 take tensors"""  # noqa: E501
    out = out_dtype or F32
    if out in (F32, F64):
        return coreai.dequantize(input, _scalar(scale, out), _scalar(zero_point, out))
    # (input.to(out) - zero_point) * scale for float16/bfloat16: torch applies the Python
    # numbers in float32 (its CPU opmath) and rounds each result to ``out``
    y = cast_to(cast_to(input, out), F32)
    y = cast_to(coreai.broadcasting_sub(y, _scalar(zero_point, F32)), out)
    return cast_to(coreai.broadcasting_mul(cast_to(y, F32), _scalar(scale, F32)), out)


def _channel(v: Value, axis: int, rank: int) -> Value:
    """A per-channel vector shaped to broadcast along ``axis`` of a rank-``rank`` tensor."""
    others = [d for d in range(rank) if d != axis]
    return coreai.expand_dims(v, others) if others else v


@reg("quantized_decomposed::quantize_per_channel.default")
def quantized_decomposed_quantize_per_channel_default(
        input: Value, scales: Value, zero_points: Value, axis: int, quant_min: int,
        quant_max: int, dtype: DType) -> Value:
    """quantize_per_channel(Tensor input, Tensor scales, Tensor zero_points, int axis, int quant_min, int quant_max, ScalarType dtype) -> Tensor"""  # noqa: E501
    rank = input.type.rank
    axis = normalize_dim(axis, rank)
    sd = scales.type.element_type
    ft = F64 if sd is F64 else F32  # float32 input times the scales' reciprocal, promoted
    inv = coreai.broadcasting_divide(coreai.constant(1.0, dtype=sd), scales)
    y = coreai.broadcasting_mul(cast_to(input, ft), cast_to(_channel(inv, axis, rank), ft))
    y = coreai.broadcasting_add(coreai.round_(y),
                                cast_to(_channel(zero_points, axis, rank), ft))
    lo, hi = coreai.constant(quant_min, dtype=ft), coreai.constant(quant_max, dtype=ft)
    return coreai.cast(_clamp(y, lo, hi), dtype)


@reg("quantized_decomposed::dequantize_per_channel.default")
def quantized_decomposed_dequantize_per_channel_default(
        input: Value, scales: Value, zero_points: Value | None, axis: int, quant_min: int,
        quant_max: int, dtype: DType, out_dtype: DType | None = None) -> Value:
    """dequantize_per_channel(Tensor input, Tensor scales, Tensor? zero_points, int axis, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor"""  # noqa: E501
    # (input - zero_points) * scales in the scales' dtype (exact integer difference), then out
    axis = normalize_dim(axis, input.type.rank)
    y = coreai.dequantize(input, scales, zero_points, axis=axis)
    return cast_to(y, out_dtype or F32)


@reg("quantized_decomposed::choose_qparams.tensor")
def quantized_decomposed_choose_qparams_tensor(input: Value, quant_min: int, quant_max: int,
                                               eps: float, dtype: DType) -> tuple[Value, Value]:
    """choose_qparams.tensor(Tensor input, int quant_min, int quant_max, float eps, ScalarType dtype) -> (Tensor, Tensor)"""  # noqa: E501
    # torch's determine_qparams for per_tensor_affine: the range and its quotient in the
    # input's dtype (float16/bfloat16 round the scale there), then float32 from the max with
    # eps (a float32 tensor) on
    ft = input.type.element_type
    zero = coreai.constant(0.0, dtype=ft)
    min_neg = coreai.broadcasting_minimum(coreai.reduce_min(input), zero)
    max_pos = coreai.broadcasting_maximum(coreai.reduce_max(input), zero)
    scale = coreai.broadcasting_divide(coreai.broadcasting_sub(max_pos, min_neg),
                                       coreai.constant(float(quant_max - quant_min), dtype=ft))
    scale = coreai.broadcasting_maximum(cast_to(scale, F32), coreai.constant([eps], dtype=F32))
    min_neg = cast_to(min_neg, F32)
    shift = coreai.cast(coreai.round_(coreai.broadcasting_divide(min_neg, scale)), DType.int32)
    zp = coreai.broadcasting_sub(coreai.constant(quant_min, dtype=DType.int32), shift)
    zp = _clamp(zp, coreai.constant(quant_min, dtype=DType.int32),
                coreai.constant(quant_max, dtype=DType.int32))
    return cast_to(scale, F64), cast_to(zp, DType.int64)
