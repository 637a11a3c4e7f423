"""The ``torch.ops.coreai.*`` compression ops, with the schemas of Apple's ``coreai-torch``.

Apple's compression library (``coreai-opt``) finalizes a model into calls of these five ops,
and Apple's converter reads them; the names, argument names, types, defaults and the storage
conventions below are Apple's, so an exported program or ``.pt2`` moves between environments
with either package installed. (This project's packed-storage ops are
:mod:`coreai_torch.compression.packed_ops`, namespace ``coreaix``.)

Storage conventions (nothing is bit-packed on the torch side; the converter packs):

- ``lut_to_dense``: ``indices`` hold one palette index per element (uint8, the weight's shape);
  ``lut`` has rank ``indices.dim() + 2``: ``(G_0, ..., G_{K-1}, NUM_PALETTES, VECTOR_SIZE)``,
  ``G_d`` tables along axis ``d`` (dividing ``indices.shape[d]``); ``VECTOR_SIZE > 1`` places
  each entry's vector along ``axis`` (the output's ``axis`` is ``VECTOR_SIZE`` times longer).
- sub-byte integers (int4, uint4, ...) are held one per byte in int8/uint8 tensors; the
  logical type is the ``input_dtype``/``output_dtype`` argument.
- float4_e2m1fn data is a uint8 tensor with two values per byte along the last axis (element
  ``2k`` in the low nibble), recognized by a ``float8_e8m0fnu`` scale (the MX convention).
- ``sparse_to_dense``: a bool ``mask`` of the weight's shape and the kept values in row-major
  order.

Arithmetic (what the converter reproduces): quantize **divides** by the scale and rounds half
to even; dequantization is ``(q - zero_point) * scale`` or ``(q - q_min) * scale + minval``
in the scale's dtype; float data is dequantized in float32 and cast once.
"""

from __future__ import annotations

import torch
from torch import Tensor

from coreai_torch.compression import checks
from coreai_torch.compression.checks import LUT_TYPES, int_range

__all__ = [
    "FP4_CODE_VALUES", "LUT_TYPES", "check_dequantize", "check_quantize", "check_shift_scale",
    "checked_params", "constexpr_blockwise_shift_scale", "dequantize", "int_range",
    "lut_to_dense", "quantize", "sparse_to_dense", "unpack_fp4",
]

# float4_e2m1fn by code: sign bit 3, two exponent bits, one mantissa bit (OCP MX)
FP4_CODE_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                   -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
_fail = checks.fail


def _is_float_dtype(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype == torch.float4_e2m1fn_x2


def _blocks(param: Tensor, shape: torch.Size | list[int], op: str, what: str) -> Tensor:
    """``param`` (same rank, sizes dividing ``shape``) repeated block-wise up to ``shape``."""
    if param.dim() != len(shape):
        raise _fail(op, f"{what} must have rank {len(shape)} like the data, got shape "
                        f"{list(param.shape)}")
    for d, (n, g) in enumerate(zip(shape, param.shape)):
        if g == 0 or n % g:
            raise _fail(op, f"{what} size {g} along axis {d} does not divide the data's {n} "
                            f"(data shape {list(shape)})")
        if n != g:
            param = param.repeat_interleave(n // g, dim=d)
    return param


def checked_params(op: str, input: Tensor, scale: Tensor, zero_point: Tensor | None,
                    minval: Tensor | None, axis: int,
                    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """``scale``, ``zero_point`` and ``minval`` of ``op`` checked (one offset at most, a
    granularity that fits ``input``) and shaped to broadcast against ``input``."""
    checks.check_one_offset(op, zero_point, minval)
    axis = _check_granularity(op, input, scale, axis,
                              {"zero_point": zero_point, "minval": minval})
    s, zp, mv = (_along(t, axis, input.dim()) for t in (scale, zero_point, minval))
    assert s is not None
    return s, zp, mv


def _along(param: Tensor | None, axis: int, rank: int) -> Tensor | None:
    """A 0-d/1-d per-tensor or per-channel parameter shaped to broadcast along ``axis``."""
    if param is None or param.dim() > 1:
        return param
    view = [1] * rank
    if rank:
        view[axis] = param.numel()
    return param.reshape(view)


def _check_granularity(op: str, x: Tensor, scale: Tensor, axis: int,
                       companions: dict[str, Tensor | None]) -> int:
    if not -max(x.dim(), 1) <= axis < max(x.dim(), 1):
        raise _fail(op, f"axis {axis} is out of range for a {x.dim()}-d input")
    axis = axis % x.dim() if x.dim() else 0
    if scale.dim() > 1 and scale.dim() != x.dim():
        raise _fail(op, f"a scale of more than one dimension must have the input's rank "
                        f"{x.dim()}, got shape {list(scale.shape)}")
    if scale.numel() != 1 and (not x.dim() or scale.numel() != x.shape[axis]):
        raise _fail(op, f"scale has {scale.numel()} elements; expected 1 (per tensor) or "
                        f"{x.shape[axis] if x.dim() else 1} (per channel along axis {axis} of "
                        f"input shape {list(x.shape)})")
    for name, t in companions.items():
        if t is not None and t.shape != scale.shape:
            raise _fail(op, f"{name} shape {list(t.shape)} must equal the scale's "
                            f"{list(scale.shape)}")
    return axis


def unpack_fp4(packed: Tensor) -> Tensor:
    """float32 values of uint8 bytes holding two float4_e2m1fn codes each along the last
    axis (the low nibble first): the last axis doubles."""
    if packed.dtype != torch.uint8:
        raise ValueError(f"packed float4 data is a uint8 tensor, got {packed.dtype}")
    table = torch.tensor(FP4_CODE_VALUES, dtype=torch.float32, device=packed.device)
    codes = torch.stack((packed & 0x0F, packed >> 4), dim=-1).flatten(-2)
    return table[codes.long()]


# -- lut_to_dense ------------------------------------------------------------------------------

@torch.library.custom_op("coreai::lut_to_dense", mutates_args=())
def lut_to_dense(indices: Tensor, lut: Tensor, axis: int) -> Tensor:
    """Palettized weight: each element is its table's entry (a scalar, or a vector laid along
    ``axis``) at its index. See the module docstring for the shapes."""
    checks.check_lut_to_dense(indices, lut, axis, indices)
    if lut.dtype == torch.float64:
        lut = lut.to(torch.float32)
    rank = indices.dim()
    grid = []
    for d, (n, g) in enumerate(zip(indices.shape, lut.shape[:-2])):
        view = [1] * rank
        view[d] = n
        grid.append((torch.arange(n, device=lut.device) // (n // g)).reshape(view))
    picked = lut[(*grid, indices.long())]                    # (*indices.shape, VECTOR_SIZE)
    vector = lut.shape[-1]
    if vector == 1:
        return picked.squeeze(-1)
    axis %= rank
    shape = list(indices.shape)
    shape[axis] *= vector
    return picked.movedim(-1, axis + 1).reshape(shape)


@lut_to_dense.register_fake
def _(indices: Tensor, lut: Tensor, axis: int) -> Tensor:
    shape = list(indices.shape)
    if shape:
        shape[axis % len(shape)] *= lut.shape[-1]
    return lut.new_empty(shape, dtype=torch.float32 if lut.dtype == torch.float64 else lut.dtype)


# -- constexpr_blockwise_shift_scale -----------------------------------------------------------

def is_fp4_data(data: Tensor, scale: Tensor) -> bool:
    """Apple's convention for packed float4_e2m1fn data: uint8 data with an e8m0 scale."""
    return data.dtype == torch.uint8 and scale.dtype == torch.float8_e8m0fnu


@torch.library.custom_op("coreai::constexpr_blockwise_shift_scale", mutates_args=())
def constexpr_blockwise_shift_scale(input: Tensor, scale: Tensor,
                                    zero_point: Tensor | None = None,
                                    minval: Tensor | None = None,
                                    input_dtype: torch.dtype | None = None,
                                    output_dtype: torch.dtype | None = None) -> Tensor:
    """Blockwise dequantization of a constant weight (``scale`` of the data's rank).

    Integers: ``scale * (input - zero_point)``, ``scale * (input - q_min) + minval`` (q_min of
    ``input_dtype``, which names sub-byte types held in int8/uint8) or ``scale * input``, in
    the scale's dtype. Floats (float8, or packed float4 with an e8m0 scale):
    ``float32(input) * float32(scale)`` cast to ``output_dtype`` (default: the scale's dtype).
    """
    op = "constexpr_blockwise_shift_scale"
    check_shift_scale(input, scale, zero_point, minval, input_dtype, output_dtype, input,
                      zero_point)
    fp4 = is_fp4_data(input, scale)
    if fp4 or input.is_floating_point():
        values = unpack_fp4(input) if fp4 else input.to(torch.float32)
        out = values * _blocks(scale.to(torch.float32), values.shape, op, "scale")
        return out.to(output_dtype or scale.dtype)
    shape = input.shape
    s = _blocks(scale, shape, op, "scale")
    q = input.to(scale.dtype)
    if zero_point is not None:
        return (q - _blocks(zero_point, shape, op, "zero_point")) * s
    if minval is not None:
        assert input_dtype is not None
        return (q - int_range(input_dtype)[0]) * s + _blocks(minval, shape, op, "minval")
    return q * s


def check_shift_scale(input: Tensor, scale: Tensor, zero_point: Tensor | None,
                      minval: Tensor | None, input_dtype: torch.dtype | None,
                      output_dtype: torch.dtype | None, input_data: object = None,
                      zero_point_data: object = None) -> None:
    """Every refusal of ``constexpr_blockwise_shift_scale`` (eager and the converter's):
    ``input_data``/``zero_point_data`` are the values when known (tensors or arrays)."""
    op = "constexpr_blockwise_shift_scale"
    checks.check_one_offset(op, zero_point, minval)
    if is_fp4_data(input, scale) or input.is_floating_point():
        checks.check_float_data_args(op, scale, zero_point, minval, output_dtype)
        return
    if zero_point is not None:
        checks.check_zero_point_dtype(op, input, zero_point)
    if minval is not None:
        checks.check_minval_input_dtype(op, input_dtype)
        checks.check_minval_dtype(op, minval, scale.dtype, "scale")
    checks.check_sub_byte_data(op, input_dtype, input_data, zero_point_data)


@constexpr_blockwise_shift_scale.register_fake
def _(input: Tensor, scale: Tensor, zero_point: Tensor | None = None,
      minval: Tensor | None = None, input_dtype: torch.dtype | None = None,
      output_dtype: torch.dtype | None = None) -> Tensor:
    fp4 = is_fp4_data(input, scale)
    shape = list(input.shape)
    if fp4:
        shape[-1] *= 2
    dtype = (output_dtype or scale.dtype) if fp4 or input.is_floating_point() else scale.dtype
    return input.new_empty(shape, dtype=dtype)


# -- quantize / dequantize ---------------------------------------------------------------------

@torch.library.custom_op("coreai::quantize", mutates_args=())
def quantize(input: Tensor, scale: Tensor, output_dtype: torch.dtype,
             zero_point: Tensor | None = None, minval: Tensor | None = None,
             axis: int = 0) -> Tensor:
    """Quantize ``input`` per tensor (one scale) or per channel along ``axis``.

    Integers: ``clamp(round(input / scale) + zero_point, q_min, q_max)`` or
    ``clamp(round((input - minval) / scale) + q_min, q_min, q_max)`` (round half to even,
    a true division); floats: ``float32(input) / float32(scale)`` saturated to the type's
    finite range and cast.
    """
    op = "quantize"
    check_quantize(input, scale, output_dtype, zero_point, minval)
    s, zp, mv = checked_params(op, input, scale, zero_point, minval, axis)
    if _is_float_dtype(output_dtype):
        info = torch.finfo(output_dtype)
        y = input.to(torch.float32) / s.to(torch.float32)
        return y.clamp(info.min, info.max).to(output_dtype)
    lo, hi = int_range(output_dtype)
    if mv is not None:
        y = torch.round((input - mv) / s) + lo
    else:
        y = torch.round(input / s)
        if zp is not None:
            y = y + zp
    return y.clamp(lo, hi).to(output_dtype)


def check_quantize(input: Tensor, scale: Tensor, output_dtype: torch.dtype,
                   zero_point: Tensor | None, minval: Tensor | None) -> None:
    """The refusals of ``quantize`` that do not depend on the granularity (eager and the
    converter's)."""
    op = "quantize"
    checks.check_one_offset(op, zero_point, minval)
    if _is_float_dtype(output_dtype):
        if zero_point is not None or minval is not None:
            raise _fail(op, f"quantizing to {output_dtype} takes no zero_point or minval")
        return
    checks.check_quantize_output(op, output_dtype)
    if minval is not None:
        checks.check_minval_dtype(op, minval, input.dtype, "input")


@quantize.register_fake
def _(input: Tensor, scale: Tensor, output_dtype: torch.dtype,
      zero_point: Tensor | None = None, minval: Tensor | None = None,
      axis: int = 0) -> Tensor:
    return input.new_empty(input.shape, dtype=output_dtype)


@torch.library.custom_op("coreai::dequantize", mutates_args=())
def dequantize(input: Tensor, scale: Tensor, zero_point: Tensor | None = None,
               minval: Tensor | None = None, axis: int = 0,
               input_dtype: torch.dtype | None = None,
               output_dtype: torch.dtype | None = None) -> Tensor:
    """Dequantize per tensor or per channel along ``axis``: integers
    ``(input - zero_point) * scale`` or ``(input - q_min) * scale + minval`` in the scale's
    dtype (``output_dtype`` is ignored, as in Apple's package); floats
    ``float32(input) * float32(scale)`` cast to ``output_dtype`` (default the scale's)."""
    op = "dequantize"
    check_dequantize(input, scale, zero_point, minval, input_dtype, output_dtype, input,
                     zero_point)
    s, zp, mv = checked_params(op, input, scale, zero_point, minval, axis)
    if input.is_floating_point():
        y = input.to(torch.float32) * s.to(torch.float32)
        return y.to(output_dtype or scale.dtype)
    q = input.to(scale.dtype)
    if zp is not None:
        return (q - zp) * s
    if mv is not None:
        assert input_dtype is not None
        return (q - int_range(input_dtype)[0]) * s + mv
    return q * s


def check_dequantize(input: Tensor, scale: Tensor, zero_point: Tensor | None,
                     minval: Tensor | None, input_dtype: torch.dtype | None,
                     output_dtype: torch.dtype | None, input_data: object = None,
                     zero_point_data: object = None) -> None:
    """The refusals of ``dequantize`` that do not depend on the granularity (eager and the
    converter's); the data, when known, must fit a sub-byte ``input_dtype``."""
    op = "dequantize"
    checks.check_one_offset(op, zero_point, minval)
    if input.is_floating_point():
        checks.check_float_data_args(op, scale, zero_point, minval, output_dtype)
        return
    if minval is not None:
        checks.check_minval_input_dtype(op, input_dtype)
    checks.check_sub_byte_data(op, input_dtype, input_data, zero_point_data)


@dequantize.register_fake
def _(input: Tensor, scale: Tensor, zero_point: Tensor | None = None,
      minval: Tensor | None = None, axis: int = 0, input_dtype: torch.dtype | None = None,
      output_dtype: torch.dtype | None = None) -> Tensor:
    dtype = (output_dtype or scale.dtype) if input.is_floating_point() else scale.dtype
    return input.new_empty(input.shape, dtype=dtype)


# -- sparse_to_dense ---------------------------------------------------------------------------

@torch.library.custom_op("coreai::sparse_to_dense", mutates_args=())
def sparse_to_dense(nonzero_data: Tensor, mask: Tensor) -> Tensor:
    """Sparse weight of ``mask``'s shape: ``nonzero_data`` (1-d, row-major order) where the
    mask is set, zero elsewhere. The mask is bool (or 0/1 values of another dtype)."""
    op = "sparse_to_dense"
    if nonzero_data.dim() != 1:
        raise _fail(op, f"nonzero_data must be 1-d, got shape {list(nonzero_data.shape)}")
    where = mask.to(torch.bool)
    if mask.dtype != torch.bool and not torch.equal(where.to(mask.dtype), mask):
        raise _fail(op, "the mask must hold only 0 and 1")
    if int(where.sum()) != nonzero_data.numel():
        raise _fail(op, f"the mask sets {int(where.sum())} positions but nonzero_data has "
                        f"{nonzero_data.numel()} values")
    out = nonzero_data.new_zeros(mask.shape)
    out[where] = nonzero_data
    return out


@sparse_to_dense.register_fake
def _(nonzero_data: Tensor, mask: Tensor) -> Tensor:
    return nonzero_data.new_empty(mask.shape)
