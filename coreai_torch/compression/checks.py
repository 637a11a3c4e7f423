"""The argument checks of the ``torch.ops.coreai.*`` compression ops, shared by their eager
implementations (:mod:`.ops`) and their lowerings (``coreai_torch/lowerings/compression.py``),
so a call eager refuses is refused by the converter with the same message, and data eager
accepts means the same thing once converted.

The structural checks read only dtypes and shapes, so they run on real tensors (eager) and on
the fake tensors an exported program carries (conversion). The range checks read data: a
tensor in eager, a constant's numpy array in conversion. Sub-byte integers (``torch.int4``,
``uint4``, ...) are held one per byte in int8/uint8; a held value outside the logical type's
range would be used as is by eager arithmetic but wrap once bit-packed, so both refuse it.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import torch

__all__ = [
    "LUT_TYPES", "check_float_data_args", "check_in_range", "check_lut_to_dense",
    "check_minval_dtype", "check_minval_input_dtype", "check_one_offset",
    "check_quantize_output", "check_sub_byte_data", "check_zero_point_dtype",
    "fail", "int_range", "is_sub_byte", "lut_palettes",
]

LUT_TYPES = (torch.uint8, torch.int8, torch.float8_e5m2, torch.float8_e4m3fn, torch.bfloat16,
             torch.float16, torch.float32)
_INT_NAME = re.compile(r"(u?)int(\d+)")


def fail(op: str, message: str) -> ValueError:
    """The error of compression op ``op``: ``coreai::<op>: <message>``."""
    return ValueError(f"coreai::{op}: {message}")


def int_range(dtype: torch.dtype) -> tuple[int, int]:
    """``(q_min, q_max)`` of an integer dtype, sub-byte ones (``torch.int4``, ...) included."""
    m = _INT_NAME.fullmatch(str(dtype).removeprefix("torch."))
    if m is None:
        raise TypeError(f"{dtype} is not an integer dtype")
    unsigned, bits = m.group(1) == "u", int(m.group(2))
    return (0, (1 << bits) - 1) if unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def is_sub_byte(dtype: torch.dtype | None) -> bool:
    """Whether ``dtype`` is an integer type narrower than a byte (torch has no kernels)."""
    m = _INT_NAME.fullmatch(str(dtype).removeprefix("torch.")) if dtype is not None else None
    return m is not None and int(m.group(2)) < 8


def _extremes(data: Any) -> tuple[int, int] | None:
    """(min, max) of an integer tensor or array; None when empty."""
    if isinstance(data, torch.Tensor):
        if data.numel() == 0:
            return None
        return int(data.min()), int(data.max())
    array = np.asarray(data)
    if array.size == 0:
        return None
    return int(array.min()), int(array.max())


def check_in_range(op: str, what: str, data: Any, dtype: torch.dtype) -> None:
    """``data`` (held in a wider integer type) lies in ``dtype``'s range."""
    found = _extremes(data)
    lo, hi = int_range(dtype)
    if found is not None and (found[0] < lo or found[1] > hi):
        raise fail(op, f"{what} holds values in [{found[0]}, {found[1]}], outside "
                       f"{str(dtype).removeprefix('torch.')}'s range [{lo}, {hi}]; they would "
                       "wrap once packed into that type (clamp or requantize them)")


def check_sub_byte_data(op: str, dtype: torch.dtype | None, data: Any,
                        zero_point: Any) -> None:
    """Data and zero points labelled with a sub-byte ``dtype`` (int4/uint4, held in a wider
    type) must hold values of that type: the packer would wrap anything else."""
    if dtype is None or not is_sub_byte(dtype):
        return
    if data is not None:
        check_in_range(op, "input", data, dtype)
    if zero_point is not None:
        check_in_range(op, "zero_point", zero_point, dtype)


def check_one_offset(op: str, zero_point: Any, minval: Any) -> None:
    if zero_point is not None and minval is not None:
        raise fail(op, "zero_point and minval are mutually exclusive; pass at most one")


def lut_palettes(op: str, indices: torch.Tensor, lut: torch.Tensor) -> int:
    """The palette count of a ``lut_to_dense`` call (its table's shape checked)."""
    if lut.dim() != indices.dim() + 2:
        raise fail(op, f"lut must have rank {indices.dim() + 2} (indices' rank + 2), got "
                       f"shape {list(lut.shape)}")
    palettes = int(lut.shape[-2])
    if palettes < 2 or palettes & (palettes - 1) or palettes > 256:
        raise fail(op, f"lut.shape[-2] is the palette count 2**nbits (nbits 1..8), got "
                       f"{palettes}")
    return palettes


def _indices_error(op: str, palettes: int, dtype: torch.dtype) -> ValueError:
    return fail(op, f"indices must be integers in [0, {palettes}), got {dtype}")


def check_lut_to_dense(indices: torch.Tensor, lut: torch.Tensor, axis: int,
                       index_data: Any = None) -> int:
    """Every refusal of ``lut_to_dense``; ``index_data`` (the indices' values, when known)
    must lie in ``[0, palettes)``. Returns the palette count."""
    op = "lut_to_dense"
    palettes = lut_palettes(op, indices, lut)
    if indices.is_floating_point() or indices.is_complex():
        raise _indices_error(op, palettes, indices.dtype)
    found = _extremes(index_data) if index_data is not None else None
    if found is not None and (found[0] < 0 or found[1] >= palettes):
        raise _indices_error(op, palettes, indices.dtype)
    if lut.dtype not in (*LUT_TYPES, torch.float64):
        raise fail(op, f"lut dtype {lut.dtype} is not one of {list(LUT_TYPES)}")
    rank = indices.dim()
    if not -max(rank, 1) <= axis < max(rank, 1):
        raise fail(op, f"axis {axis} is out of range for {rank}-d indices")
    for d, (n, g) in enumerate(zip(indices.shape, lut.shape[:-2])):
        if g == 0 or n % g:
            raise fail(op, f"{g} tables along axis {d} do not divide the indices' {n}")
    return palettes


def check_float_data_args(op: str, scale: torch.Tensor, zero_point: Any, minval: Any,
                          output_dtype: torch.dtype | None) -> None:
    """Float (and packed float4) data take no offset, and an e8m0 scale needs an output
    type."""
    if zero_point is not None or minval is not None:
        raise fail(op, "float data takes no zero_point or minval")
    if scale.dtype == torch.float8_e8m0fnu and output_dtype is None:
        raise fail(op, "output_dtype is required with a float8_e8m0fnu scale")


def check_zero_point_dtype(op: str, input: torch.Tensor, zero_point: torch.Tensor) -> None:
    if zero_point.dtype != input.dtype:
        raise fail(op, f"zero_point dtype {zero_point.dtype} must be the input's {input.dtype}")


def check_minval_input_dtype(op: str, input_dtype: torch.dtype | None) -> None:
    """``minval`` needs ``input_dtype`` (the logical integer type) to know q_min."""
    if input_dtype is None:
        raise fail(op, "minval needs input_dtype (the logical integer type, e.g. torch.int4 "
                       "for int4 data held in int8) to know q_min")


def check_minval_dtype(op: str, minval: torch.Tensor, expected: torch.dtype, of: str) -> None:
    if minval.dtype != expected:
        raise fail(op, f"minval dtype {minval.dtype} must be the {of}'s {expected}")


def check_quantize_output(op: str, output_dtype: torch.dtype) -> None:
    """torch cannot compute sub-byte integer tensors, so eager cannot quantize to them."""
    if is_sub_byte(output_dtype):
        raise fail(op, f"torch cannot compute {output_dtype} tensors (it has no kernels for "
                       "sub-byte integers); quantize activations to int8/uint8")
