"""Weight and activation modules that call the ``torch.ops.coreai.*`` compression ops.

These are the modules Apple's ``coreai-opt`` swaps into a model in
``finalize(backend=ExportBackend.CoreAI)`` (imported from ``coreai_torch._compression``): each
holds compressed data as buffers and rebuilds the dense weight (or quantizes/dequantizes an
activation) with one op of :mod:`coreai_torch.compression.ops`. Weight modules take no input;
:func:`wrap_for_parametrization` makes one usable as a ``torch.nn.utils.parametrize``
parametrization (which passes, and here ignores, the original weight).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from coreai_torch.compression import ops  # noqa: F401  (registers torch.ops.coreai.*)

__all__ = [
    "ActivationDequantizeModule", "ActivationQuantizeModule", "PalettizeModule",
    "ScaledPalettizeModule", "SparseModule", "WeightDequantizeModule", "wrap_for_parametrization",
]


class PalettizeModule(nn.Module):
    """A palettized weight: ``lut_to_dense(indices, lut, vector_axis)``.

    ``indices``: one palette index per element (uint8); ``lut``: ``(G..., NUM_PALETTES,
    VECTOR_SIZE)``; ``vector_axis``: where vectors (VECTOR_SIZE > 1) are laid (default 0).
    """

    def __init__(self, indices: Tensor, lut: Tensor, vector_axis: int | None = None) -> None:
        super().__init__()
        self.register_buffer("indices", indices)
        self.register_buffer("lut", lut)
        self.vector_axis = vector_axis or 0

    def forward(self) -> Tensor:
        return torch.ops.coreai.lut_to_dense(self.indices, self.lut, self.vector_axis)


class ScaledPalettizeModule(nn.Module):
    """A palettized weight then scaled (and shifted) block-wise: ``lut_to_dense`` followed by
    ``constexpr_blockwise_shift_scale`` (quantized tables and/or per-channel scales)."""

    def __init__(self, indices: Tensor, lut: Tensor, scale: Tensor,
                 vector_axis: int | None = None, zero_point: Tensor | None = None,
                 minval: Tensor | None = None, input_dtype: torch.dtype | None = None,
                 output_dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.register_buffer("indices", indices)
        self.register_buffer("lut", lut)
        self.vector_axis = vector_axis or 0
        self.register_buffer("scale", scale)
        self.register_buffer("zero_point", zero_point)
        self.register_buffer("minval", minval)
        self.input_dtype = input_dtype
        self.output_dtype = output_dtype

    def forward(self) -> Tensor:
        dense = torch.ops.coreai.lut_to_dense(self.indices, self.lut, self.vector_axis)
        return torch.ops.coreai.constexpr_blockwise_shift_scale(
            dense, self.scale, zero_point=self.zero_point, minval=self.minval,
            input_dtype=self.input_dtype, output_dtype=self.output_dtype)


class WeightDequantizeModule(nn.Module):
    """A quantized weight: ``constexpr_blockwise_shift_scale(quantized_data, scale, ...)``.

    ``quantized_data`` may be a :class:`~coreai_torch.compression.subbyte.Float4Tensor`
    (packed float4 with an e8m0 scale); ``input_dtype`` names sub-byte integer types held in
    int8/uint8 (e.g. ``torch.int4``).
    """

    def __init__(self, quantized_data: Tensor, scale: Tensor, zero_point: Tensor | None = None,
                 minval: Tensor | None = None, input_dtype: torch.dtype | None = None,
                 output_dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.register_buffer("quantized_data", quantized_data)
        self.register_buffer("scale", scale)
        self.register_buffer("zero_point", zero_point)
        self.register_buffer("minval", minval)
        self.input_dtype = input_dtype
        self.output_dtype = output_dtype

    def forward(self) -> Tensor:
        return torch.ops.coreai.constexpr_blockwise_shift_scale(
            self.quantized_data, self.scale, zero_point=self.zero_point, minval=self.minval,
            input_dtype=self.input_dtype, output_dtype=self.output_dtype)


class ActivationQuantizeModule(nn.Module):
    """``quantize(x, scale, output_dtype, zero_point, minval, axis)`` of an activation."""

    def __init__(self, scale: Tensor, output_dtype: torch.dtype,
                 zero_point: Tensor | None = None, minval: Tensor | None = None,
                 axis: int = 0) -> None:
        super().__init__()
        self.register_buffer("scale", scale)
        self.register_buffer("zero_point", zero_point)
        self.register_buffer("minval", minval)
        self.output_dtype = output_dtype
        self.axis = axis

    def forward(self, x: Tensor) -> Tensor:
        return torch.ops.coreai.quantize(x, self.scale, self.output_dtype,
                                         zero_point=self.zero_point, minval=self.minval,
                                         axis=self.axis)


class ActivationDequantizeModule(nn.Module):
    """``dequantize(x, scale, zero_point, minval, axis, input_dtype, output_dtype)``."""

    def __init__(self, scale: Tensor, zero_point: Tensor | None = None,
                 minval: Tensor | None = None, axis: int = 0,
                 input_dtype: torch.dtype | None = None,
                 output_dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.register_buffer("scale", scale)
        self.register_buffer("zero_point", zero_point)
        self.register_buffer("minval", minval)
        self.axis = axis
        self.input_dtype = input_dtype
        self.output_dtype = output_dtype

    def forward(self, x: Tensor) -> Tensor:
        return torch.ops.coreai.dequantize(x, self.scale, zero_point=self.zero_point,
                                           minval=self.minval, axis=self.axis,
                                           input_dtype=self.input_dtype,
                                           output_dtype=self.output_dtype)


class SparseModule(nn.Module):
    """A sparse weight: ``sparse_to_dense(nonzero_data, mask)`` (a bool mask of the weight's
    shape and the kept values in row-major order)."""

    def __init__(self, nonzero_data: Tensor, mask: Tensor) -> None:
        super().__init__()
        self.register_buffer("nonzero_data", nonzero_data)
        self.register_buffer("mask", mask)

    def forward(self) -> Tensor:
        return torch.ops.coreai.sparse_to_dense(self.nonzero_data, self.mask)


def wrap_for_parametrization(module_class: type[nn.Module]) -> type[nn.Module]:
    """A subclass of the weight module ``module_class`` whose ``forward`` takes (and ignores)
    the original weight, as ``torch.nn.utils.parametrize`` passes it; named
    ``<module_class>Parametrization``."""

    def forward(self: Any, _original: Any = None) -> Tensor:
        return module_class.forward(self)

    return type(f"{module_class.__name__}Parametrization", (module_class,),
                {"forward": forward, "__module__": module_class.__module__,
                 "__doc__": f"{module_class.__name__} as a parametrization."})
