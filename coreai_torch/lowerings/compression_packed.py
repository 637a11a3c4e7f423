"""Built-in lowerings (compression family): this project's packed-storage ``coreaix::`` custom
ops of :mod:`coreai_torch.compression.packed_ops` onto the dialect's compression ops.

The compressed data stays compressed in the program: packed bit streams and 8-bit data are
used as they are; 4-bit data, which torch stores packed two per byte in a uint8 buffer, becomes
a program weight of the 4-bit element type (int4, uint4, float4_e2m1fn). When that buffer is
read by this op only, its weight is retyped in place, so the program keeps one copy.
"""

from __future__ import annotations

from coreai_core import DType, TensorType, Value
from coreai_core.dialects import coreai
from coreai_core.packing import unpack_nibbles
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._compression_utils import converted_constant
from coreai_torch.utils import cast_to, is_sole_reader

LOWERINGS = LoweringSet("compression_packed")
reg = LOWERINGS.register_torch_lowering


def _four_bit_weight(packed: Value, dtype: DType, shape: list[int], sole_reader: bool,
                     ) -> Value:
    """The constant 4-bit tensor held, packed, by the uint8 constant ``packed``."""
    return converted_constant(packed, TensorType(tuple(shape), dtype),
                              lambda data: unpack_nibbles(data.reshape(-1), dtype, shape),
                              f"{dtype} data", sole_reader)


@reg("coreaix::lut_to_dense.default")
def coreaix_lut_to_dense_default(indices: Value, lut: Value, shape: list[int]) -> Value:
    """lut_to_dense(Tensor indices, Tensor lut, int[] shape) -> Tensor"""
    return coreai.lut_to_dense(indices, lut, shape=shape)


@reg("coreaix::constexpr_blockwise_shift_scale.default")
def coreaix_constexpr_blockwise_shift_scale_default(
        data: Value, scale: Value, offset: Value | None, dtype: str, shape: list[int]) -> Value:
    """constexpr_blockwise_shift_scale(Tensor data, Tensor scale, Tensor? offset, str dtype, int[] shape) -> Tensor"""  # noqa: E501
    element = DType.of(dtype)
    if element.bits < 8:  # 4-bit data, packed two per byte in torch
        data = _four_bit_weight(data, element, shape, is_sole_reader("data"))
    if offset is not None:
        offset = cast_to(offset, element)  # int8/uint8 zero points in the data's type
    return coreai.constexpr_blockwise_shift_scale(data, scale, offset)


@reg("coreaix::quantize.default")
def coreaix_quantize_default(x: Value, scale: Value, zero_point: Value | None, dtype: DType,
                            axis: int | None = None) -> Value:
    """quantize(Tensor x, Tensor scale, Tensor? zero_point, ScalarType dtype, int? axis=None) -> Tensor"""  # noqa: E501
    return coreai.quantize(x, scale, zero_point, axis=axis, dtype=dtype)


@reg("coreaix::dequantize.default")
def coreaix_dequantize_default(x: Value, scale: Value, zero_point: Value | None,
                              axis: int | None = None) -> Value:
    """dequantize(Tensor x, Tensor scale, Tensor? zero_point, int? axis=None) -> Tensor"""
    return coreai.dequantize(x, scale, zero_point, axis=axis)


@reg("coreaix::sparse_to_dense.default")
def coreaix_sparse_to_dense_default(mask: Value, nonzero_data: Value, shape: list[int]) -> Value:
    """sparse_to_dense(Tensor mask, Tensor nonzero_data, int[] shape) -> Tensor"""
    return coreai.sparse_to_dense(mask, nonzero_data, shape=shape)
