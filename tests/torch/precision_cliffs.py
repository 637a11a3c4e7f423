"""Small torch modules that are right in float32 and break when a device computes in float16.

Each case is ``(module, inputs, op, kind)``: the op kind the precision report must name first
and the problem it must find there. Why each breaks (float16's largest finite value is 65504,
its smallest normal 6.1e-5):

- ``logsumexp``: ``log(exp(x).sum())`` over 32 channels at x in [8, 12]: exp(x) > 65504 for
  x > 11.09, and the sum of 32 values of exp(8) = 2981 is 95000.
- ``log_softmax``: ``log(softmax(x))`` with a dominant logit of 50: the other probabilities,
  about exp(-50) = 2e-22, are zero in float16 and their log is -inf.
- ``softplus``: ``F.softplus`` on [10, 20]: its lowering computes log1p(exp(x)) below the
  threshold 20, and exp(x) > 65504 for x > 11.09.
- ``rms_norm``/``layer_norm``: activations of about 3e4 (float16 holds them) whose squares,
  about 1e9, do not fit.
- ``layer_norm_1e5``: activations of 1e5 do not fit float16 at all: the input is where it
  breaks; keeping its users in float32 fixes it (they read the float32 input).
- ``attention``: logits of about 300, where float16's spacing is 0.25: softmax weights carry
  errors of about exp(0.125) - 1 = 13%.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class NaiveLogSumExp(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(torch.exp(x).sum(dim=1))


class LogOfSoftmax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(torch.softmax(x, dim=1))


class Softplus(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softplus(x)


class Norm(nn.Module):
    def __init__(self, kind: type[nn.Module]) -> None:
        super().__init__()
        self.norm = kind(32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


class Attention(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v


def cliffs() -> dict[str, tuple[nn.Module, tuple[torch.Tensor, ...], str, str]]:
    """The cases by name (fresh modules and inputs, seeded)."""
    g = torch.Generator().manual_seed(0)
    activations = (3e4 * torch.randn(4, 32, generator=g)).clamp(-6e4, 6e4)
    dominant = torch.cat([torch.full((4, 1), 50.0), torch.randn(4, 31, generator=g)], dim=1)
    q = torch.full((1, 8, 16), 300 ** 0.5 / 4)  # q . q = 300
    return {
        "logsumexp": (NaiveLogSumExp(), (8 + 4 * torch.rand(4, 32, generator=g),),
                      "coreai.exp", "overflow"),
        "log_softmax": (LogOfSoftmax(), (dominant,), "coreai.softmax", "underflow"),
        "softplus": (Softplus(), (10 + 10 * torch.rand(4, 32, generator=g),),
                     "coreai.exp", "overflow"),
        "rms_norm": (Norm(nn.RMSNorm), (activations,), "coreai.broadcasting_pow", "overflow"),
        "layer_norm": (Norm(nn.LayerNorm), (activations,), "coreai.broadcasting_mul",
                       "overflow"),
        "layer_norm_1e5": (Norm(nn.LayerNorm), (1e5 * torch.randn(4, 32, generator=g),),
                           "input", "overflow"),
        "attention": (Attention(), (q, q + 0.1 * torch.randn(1, 8, 16, generator=g),
                                    torch.randn(1, 8, 16, generator=g)),
                      "coreai.softmax", "error"),
    }


def numpy_inputs(inputs: tuple[torch.Tensor, ...]) -> list[Any]:
    return [t.numpy() for t in inputs]
