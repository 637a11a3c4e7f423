"""Reference values where torch's CPU result depends on the machine's vector unit.

The runtime returns the mathematically correct value. Where torch's answer differs between
instruction sets (AVX-512 vs AVX2 kernels), or is NaN where the function has a limit, tests
compare against the functions here, which call torch and then put the correct value where
torch is known to vary or to be wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F


def _limits(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out`` with +inf at x = +inf and -0.0 at x = -inf: the limits of x * f(x) for a
    sigmoid-like f (f -> 1 at +inf, f -> 0 faster than 1/x at -inf)."""
    if not x.is_floating_point():
        return out
    out = torch.where(x == float("inf"), torch.full_like(out, float("inf")), out)
    return torch.where(x == float("-inf"), torch.full_like(out, -0.0), out)


def gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """``F.gelu`` with gelu(+inf) = +inf and gelu(-inf) = -0.0.

    torch's exact gelu returns NaN for +inf in float32/bfloat16 from its AVX-512 kernel on
    tensors of two or more elements, and +inf from its AVX2 kernel, for one element and in
    float16/float64. The limit of x * Phi(x) is +inf as x -> +inf and -0.0 as x -> -inf,
    where torch computes -inf * 0 = NaN (both forms).
    """
    return _limits(x, F.gelu(x, approximate=approximate))


def silu(x: torch.Tensor) -> torch.Tensor:
    """``F.silu`` with silu(-inf) = -0.0, the limit of x * sigmoid(x) (torch: NaN)."""
    return _limits(x, F.silu(x))


def with_inf_limits(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``fn(x, dim, ...)`` (softmax, log_softmax) with the limit in rows along ``dim`` that
    hold exactly one +inf and no NaN: the value with that entry at float64's largest finite
    number, computed in float64 (torch gives NaN there, from inf - inf)."""

    def reference(x: torch.Tensor, dim: int, *args: Any, **kwargs: Any) -> torch.Tensor:
        out = fn(x, dim, *args, **kwargs)
        if not x.is_floating_point() or x.numel() == 0:
            return out
        is_inf = x == float("inf")
        one = (is_inf.sum(dim, keepdim=True) == 1) & ~x.isnan().any(dim, keepdim=True)
        if not one.any():
            return out
        big = torch.where(is_inf, torch.finfo(torch.float64).max, x.double())
        limit = fn(big, dim, *args, **kwargs).to(out.dtype)
        return torch.where(one.expand_as(x), limit, out)

    return reference


def zero_at_minus_inf(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``fn`` (x * f(x) with f -> 0 at -inf: mish, hardswish) with its limit -0.0 at -inf,
    where torch computes -inf * 0 = NaN."""

    def reference(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        out = fn(x, *args, **kwargs)
        if not x.is_floating_point():
            return out
        return torch.where(x == float("-inf"), torch.full_like(out, -0.0), out)

    return reference
