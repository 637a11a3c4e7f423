"""Rotary position embedding, ``RoPE``, with Apple's signature and semantics."""

from __future__ import annotations

import torch

from coreai_torch.composite_ops._base import CompositeModule

__all__ = ["RoPE"]


class RoPE(CompositeModule):
    """Rotate pairs of features of ``input`` (``[batch, ..., seq, embed]``) by position angles.

    ``RoPE(scale=1.0, base=1e4, dims=None, interleaved=False)``: the first ``dims`` features
    rotate (all when None or ``dims >= embed``; an even number >= 2), the rest pass through.
    Pairs are the two halves of the rotated features, or neighbours ``(0, 1), (2, 3), ...``
    when ``interleaved``. Rotating a pair ``(x1, x2)`` by angle ``a`` gives
    ``(x1 cos a - x2 sin a, x1 sin a + x2 cos a)``.

    ``forward(input, cos=None, sin=None, position_ids=None, freqs=None, offset=None)`` takes
    the angles' cosines and sines in this order of precedence:

    1. ``cos`` and ``sin``, broadcastable to ``[batch, ..., seq, dims/2]``. (A full-width
       ``[..., seq, dims]`` pair, as Hugging Face models compute it, is accepted too: its two
       halves apply to the two halves of the rotated features.)
    2. Otherwise angles ``position * freqs[i] * scale``: positions are ``position_ids``
       (``[batch, seq]``, one per token) or ``offset + arange(seq)`` (``offset`` a tensor of
       shape ``[]``, ``[1]``, ``[batch]`` or ``[batch, 1]``; 0 when None), and ``freqs``
       (float32, ``[dims/2]``) defaults to ``base ** (-i / (dims/2))``. Angles are computed in
       float32 and their cosine and sine cast to the input's dtype.
    """

    composite_name = "rope"
    composite_attrs = ("scale", "base", "dims", "interleaved")

    def __init__(self, scale: float = 1.0, base: float = 1e4, dims: int | None = None,
                 interleaved: bool = False, _use_hf_impl: bool = False) -> None:
        super().__init__()
        self.scale = float(scale)
        self.base = float(base)
        self.dims = dims
        self.interleaved = interleaved
        self.version = 1
        self._use_hf_impl = _use_hf_impl

    def rotation_dims(self, embed: int) -> int:
        rotated = embed if self.dims is None or self.dims >= embed else self.dims
        if rotated < 2 or rotated % 2:
            raise ValueError(f"RoPE rotates an even number (>= 2) of features, got {rotated} "
                             f"(dims={self.dims}, embedding size {embed})")
        return rotated

    def forward(self, input: torch.Tensor, cos: torch.Tensor | None = None,
                sin: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                freqs: torch.Tensor | None = None, offset: torch.Tensor | None = None,
                ) -> torch.Tensor:
        rotated = self.rotation_dims(input.shape[-1])
        if cos is None or sin is None:
            cos, sin = self._cos_sin(input, rotated // 2, position_ids, freqs, offset)
        return _rotate(input, cos, sin, rotated, self.interleaved)

    def _cos_sin(self, input: torch.Tensor, half: int, position_ids: torch.Tensor | None,
                 freqs: torch.Tensor | None, offset: torch.Tensor | None,
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        if position_ids is not None:
            positions = position_ids.unsqueeze(1)  # [batch, 1 (heads), seq]
        else:
            steps = torch.arange(input.shape[-2], device=input.device)
            positions = steps if offset is None else offset.reshape(-1, 1, 1) + steps
        if freqs is None:
            exponent = torch.arange(half, dtype=torch.float32, device=input.device) / half
            freqs = 1.0 / torch.pow(self.base, exponent)
        elif freqs.dtype != torch.float32:
            raise TypeError(f"RoPE freqs must be float32, got {freqs.dtype}")
        freqs = freqs * self.scale
        if self._use_hf_impl:  # Hugging Face rounds the frequencies to the input's dtype
            freqs = freqs.to(input.dtype)
        angle = positions.to(torch.float32).unsqueeze(-1) * freqs.to(torch.float32)
        return angle.cos().to(input.dtype), angle.sin().to(input.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotated: int,
            interleaved: bool) -> torch.Tensor:
    def pairs(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if interleaved:
            return t[..., 0:rotated:2], t[..., 1:rotated:2]
        return t[..., :rotated // 2], t[..., rotated // 2:rotated]

    x1, x2 = pairs(x)
    if cos.shape[-1] == rotated:  # full width: each member of a pair has its own cos/sin
        (cos1, cos2), (sin1, sin2) = pairs(cos), pairs(sin)
    else:
        cos1 = cos2 = cos
        sin1 = sin2 = sin
    y1 = x1 * cos1 - x2 * sin1
    y2 = x1 * sin2 + x2 * cos2
    y = torch.stack((y1, y2), dim=-1).flatten(-2) if interleaved else torch.cat((y1, y2), -1)
    if rotated < x.shape[-1]:
        y = torch.cat((y, x[..., rotated:]), dim=-1)
    return y
