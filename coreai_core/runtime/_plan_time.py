"""Weight work a plan does once, when it is built, instead of on every run.

A compressed weight is a decompression op (``constexpr_blockwise_shift_scale``,
``lut_to_dense``, ...) over constants, usually followed by a transpose into the layout of the
matmul that reads it. Run as steps, the weight would be rebuilt on every call: for a decode
loop, every token. Here:

- an op with the ``decompression`` trait, or a layout op (transpose, reshape, ...), whose
  operands are all planned constants is computed while planning and becomes a constant of the
  plan (the program itself stays compressed: its saved form, its ``.aimodel`` and the optimizer
  never see the dense weight);
- a ``batch_matmul`` of float16/bfloat16 operands whose right operand is a planned constant
  keeps a float32 copy of that weight: the built-in kernel computes half products in float32
  and would widen the weight on every call.

The dense weights and float32 copies are held for the plan's life: the memory of a dense
float32 model, the price of not decompressing per step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from coreai_core._ir import Operation
from coreai_core.runtime.kernels import nn as _nn
from coreai_core.runtime.kernels._windows import HALF

__all__ = ["LAYOUT_OPS", "folds_at_plan_time", "widened_half_matmul"]

# ops that only re-lay their operand out (views or small copies): folded after a
# decompression so that the matmul reads the planned weight directly
LAYOUT_OPS = frozenset({"coreai.transpose", "coreai.reshape", "coreai.expand_dims",
                        "coreai.shrink_dims"})


def folds_at_plan_time(op: Operation, opdef: Any, ins: Sequence[int],
                       constant_slots: set[int]) -> bool:
    """Whether ``op`` is computed while planning: a decompression or layout op with one
    result whose operands are all planned constants."""
    if opdef is None or not ins or len(op.results) != 1:
        return False
    if "decompression" not in opdef.traits and op.name not in LAYOUT_OPS:
        return False
    return all(s in constant_slots for s in ins)


def widened_half_matmul(op: Operation, fn: Callable[..., Any], ins: Sequence[int],
                        template: Sequence[Any], constant_slots: set[int],
                        ) -> Callable[..., np.ndarray] | None:
    """The built-in half ``batch_matmul`` with its constant right operand widened to float32
    once (the kernel's arithmetic: float32 products, one rounding to the half type), or None
    when the op is not one."""
    if (op.name != "coreai.batch_matmul" or fn is not _nn.batch_matmul or len(ins) != 2
            or ins[1] not in constant_slots):
        return None
    rhs = template[ins[1]]
    if not isinstance(rhs, np.ndarray) or rhs.dtype not in HALF or rhs.ndim < 2:
        return None
    wide = rhs.astype(np.float32)  # keeps a transposed weight's layout (order "K")
    wide.flags.writeable = False
    half = rhs.dtype

    def batch_matmul_widened(lhs: np.ndarray, _rhs: np.ndarray) -> np.ndarray:
        if lhs.dtype != half:
            return fn(lhs, _rhs)
        return _nn.batch_matmul(lhs.astype(np.float32), wide).astype(half, copy=False)

    return batch_matmul_widened
