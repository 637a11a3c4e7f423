"""nn.Modules that stand for composite ops, ready to be externalized.

Each module computes its op in plain torch (so the model runs and exports as usual) and
declares ``composite_name`` and ``composite_attributes()``; externalized with
``add_pytorch_module(..., externalize_modules=[RMSNorm, ...])``, each becomes a composite graph
of that name, carrying those attributes::

    converter.add_pytorch_module(model, export_fn, externalize_modules=[RMSNorm, SDPA])
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["GatherMM", "RMSNorm", "RoPE", "SDPA"]


class RMSNorm(torch.nn.Module):
    """``x / sqrt(mean(x**2, -1) + eps) * weight``, computed in float32 and cast back."""

    composite_name = "rms_norm"

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def composite_attributes(self) -> dict[str, Any]:
        return {"eps": self.eps}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class RoPE(torch.nn.Module):
    """Rotary position embedding of ``x`` (``[..., seq, head_dim]``) by ``cos``/``sin``
    (``[..., seq, head_dim]``), rotating the two halves of the last dimension."""

    composite_name = "rope"

    def composite_attributes(self) -> dict[str, Any]:
        return {"layout": "half"}

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin


class SDPA(torch.nn.Module):
    """Scaled dot-product attention (``is_causal`` and ``scale`` fixed per instance)."""

    composite_name = "sdpa"

    def __init__(self, is_causal: bool = False, scale: float | None = None) -> None:
        super().__init__()
        self.is_causal = is_causal
        self.scale = scale

    def composite_attributes(self) -> dict[str, Any]:
        return {"is_causal": self.is_causal, "scale": self.scale}

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.is_causal,
                                              scale=self.scale)


class GatherMM(torch.nn.Module):
    """``x @ weight[index]``: each row of ``x`` (``[n, k]``) multiplied by the matrix its
    ``index`` (``[n]``) selects from the stack ``weight`` (``[e, k, m]``), as in mixture of
    experts."""

    composite_name = "gather_mm"

    def __init__(self, num_experts: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(num_experts, in_features, out_features)
                                         / in_features ** 0.5)

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.bmm(x.unsqueeze(1), self.weight[index]).squeeze(1)
