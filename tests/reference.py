"""Reference values where torch's CPU result depends on the machine's vector unit.

The runtime returns the mathematically correct value. Where torch's answer differs between
instruction sets (AVX-512 vs AVX2 kernels), tests compare against the functions here, which
call torch and then put the correct value where torch is known to vary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """``F.gelu`` with gelu(+inf) = +inf.

    torch's exact gelu returns NaN for +inf in float32/bfloat16 from its AVX-512 kernel on
    tensors of two or more elements, and +inf from its AVX2 kernel, for one element and in
    float16/float64. The limit of x * Phi(x) as x -> +inf is +inf.
    """
    out = F.gelu(x, approximate=approximate)
    if x.is_floating_point():
        out = torch.where(x == float("inf"), torch.full_like(out, float("inf")), out)
    return out
