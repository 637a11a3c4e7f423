"""RMS normalization: ``RMSNormImpl`` (the composite, input and scale as arguments) and
``RMSNorm`` (a wrapper owning the scale), with Apple's signatures."""

from __future__ import annotations

import torch

from coreai_torch.composite_ops._base import CompositeModule

__all__ = ["RMSNorm", "RMSNormImpl"]


class RMSNormImpl(CompositeModule):
    """``input / sqrt(mean(input**2, -1) + eps) * scale``: the ``rms_norm`` composite.

    ``forward(input, scale)`` takes the scale as an argument so that it is an input of the
    composite, not a constant inside it. The mean of squares is computed in float32 (a float16
    square overflows at 256); the normalized input is cast back to the input's dtype before
    the scale is applied, except for a float32 scale on a narrower input, which multiplies in
    float32 and casts the product (Gemma's convention).
    """

    composite_name = "rms_norm"
    composite_attrs = ("axes", "eps")

    def __init__(self, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.axes = -1
        self.version = 1

    def forward(self, input: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        wide = input.to(torch.float32)
        inv_rms = torch.rsqrt((wide * wide).mean(self.axes, keepdim=True) + self.eps)
        normalized = input * inv_rms
        if scale.dtype == torch.float32 and input.dtype != torch.float32:
            return (normalized * scale).to(input.dtype)
        return normalized.to(input.dtype) * scale


class RMSNorm(CompositeModule):
    """RMS normalization over the last dimension with a learnable scale (initialized to 1).

    The scale has shape ``(dim,)``, or ``(n_heads, 1, dim)`` to normalize fused query and key
    heads at once. ``forward(x)`` calls :class:`RMSNormImpl` with it, so externalizing
    ``RMSNormImpl`` gives the ``rms_norm`` composite with the scale as an input; externalizing
    ``RMSNorm`` itself gives one with the scale as the composite's weight argument.
    """

    composite_name = "rms_norm"
    composite_attrs = ("axes", "eps")

    def __init__(self, dim: int, eps: float = 1e-5, n_heads: int | None = None) -> None:
        super().__init__()
        shape = (dim,) if n_heads is None else (n_heads, 1, dim)
        self.weight = torch.nn.Parameter(torch.ones(shape))
        self.rmsnorm_impl = RMSNormImpl(eps=eps)

    @property
    def eps(self) -> float:
        return self.rmsnorm_impl.eps

    @property
    def axes(self) -> int:
        return self.rmsnorm_impl.axes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rmsnorm_impl(x, self.weight)
