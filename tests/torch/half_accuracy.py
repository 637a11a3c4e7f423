"""Half-precision accuracy of a converted op against torch's own: the measure shared by
``test_op_db_half.py`` and ``benchmarks/bench_fp16_accuracy.py``.

A float16/bfloat16 result is judged by its error against the exact answer for the same
half-precision inputs: the op computed in float64 (``widened``), rounded once to the result's
dtype. The error of an output is its largest elementwise relative error in units of the
dtype's epsilon (half-precision ulps), with a floor of ``eps * max|exact|`` under the
denominator so that values near zero in an output of large values (cancellation in a sum,
a normalized row's zero crossing) count by the output's scale; non-finite values count as
exact only where the exact answer is the same non-finite value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

HALF_DTYPES = (torch.float16, torch.bfloat16)


def widened(args: Sequence[Any], kwargs: dict[str, Any], dtype: torch.dtype,
            ) -> tuple[list[Any], dict[str, Any]]:
    """``args``/``kwargs`` with their float32 and half tensors cast to ``dtype``."""
    def up(a: Any) -> Any:
        if isinstance(a, torch.Tensor) and a.dtype in (torch.float32, *HALF_DTYPES):
            return a.to(dtype)
        return a

    return [up(a) for a in args], {k: up(v) for k, v in kwargs.items()}


def ulp_error(got: np.ndarray, exact: np.ndarray, dtype: torch.dtype) -> float:
    """Largest relative error of ``got`` against ``exact`` in units of ``dtype``'s epsilon."""
    info = torch.finfo(dtype)
    got = np.asarray(got, dtype=np.float64)
    exact = np.asarray(exact, dtype=np.float64)
    if got.shape != exact.shape:
        return float("inf")
    if got.size == 0:
        return 0.0
    same = (np.isnan(got) & np.isnan(exact)) | (np.isinf(exact) & (got == exact))
    finite = np.isfinite(got) & np.isfinite(exact)
    scale = np.abs(exact[np.isfinite(exact)]).max(initial=0.0)
    floor = max(info.eps * scale, info.smallest_normal)
    with np.errstate(invalid="ignore", over="ignore"):
        rel = np.abs(got - exact) / np.maximum(np.abs(exact), floor)
    err = np.where(same, 0.0, np.where(finite, rel, np.inf))
    return float(err.max()) / info.eps


def exact_result(out: torch.Tensor, dtype: torch.dtype) -> np.ndarray:
    """The float64 answer rounded once to ``dtype`` (the best a half result can be), as
    float64."""
    return out.detach().to(dtype).to(torch.float64).numpy()
