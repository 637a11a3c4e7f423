"""Constant folding: evaluate ops whose operands are all constants with the runtime kernels.

The runtime's kernels are the single source of op semantics, so a folded value is exactly
what ``run()`` would have computed: folding uses the runtime given to the pass (``optimize(...,
runtime=rt)`` passes it on), the default runtime when none is, so a kernel registered on ``rt``
is the one that folds. An op is folded only when

- it is pure and not random, has no regions and is neither a control op nor a
  ``decompression`` op (a compressed weight stays compressed: folding would store its dense
  expansion);
- every operand is a constant with bound data, and its result types are static;
- its results are small (at most ``max_elements`` elements in total), or they are no larger
  than the weights they are computed from *and* those weights have no other reader, so the
  source weights disappear and nothing is duplicated (e.g. ``transpose(@fc.weight)``).

Folded results with more than ``INLINE_LIMIT`` elements are stored as program weights named
after their source weight (``fc.weight.transpose``). An op whose kernel raises (e.g. an
integer division by zero) is left alone, so the error still surfaces when the program runs.

A fold replaces an op by constants only, so it never copies an op. A multi-result op folds
into one constant per result, and only when the kernel returns that many results of exactly
the declared types. "No other reader" counts the readers the sweep has not reached yet
(:meth:`~coreai_core.optimizer.Rewriter.exclusive_weight`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from coreai_core._builder import INLINE_LIMIT
from coreai_core._ir import Operation, Value
from coreai_core._opdef import OPS
from coreai_core.optimizer._predicates import is_deterministic
from coreai_core.optimizer._rewriter import RewritePass, Rewriter
from coreai_core.runtime import Runtime, evaluate_op

DEFAULT_MAX_ELEMENTS = 1 << 16
# Control ops run regions; decompression ops would turn a compressed weight into a dense one.
_NEVER_FOLDED = frozenset({"control", "decompression"})


class ConstantFoldingPass(RewritePass):
    """Replace ops computing from constants only by the constants they compute.

    ``max_elements`` bounds the total number of result elements of a fold that would keep its
    source weights alive (see the module docstring). ``runtime`` evaluates the ops (the
    default runtime when None).
    """

    name = "constant_folding"

    def __init__(self, max_elements: int = DEFAULT_MAX_ELEMENTS, *,
                 runtime: Runtime | None = None) -> None:
        self.max_elements = max_elements
        self.runtime = runtime

    def __repr__(self) -> str:
        shown = "" if self.runtime is None else f", runtime={self.runtime!r}"
        return f"ConstantFoldingPass(max_elements={self.max_elements}{shown})"

    def visit(self, op: Operation, rw: Rewriter) -> Sequence[Value] | None:
        if op.name == "coreai.constant" or not op.operands or op.regions \
                or not is_deterministic(op):
            return None
        if OPS[op.name].traits & _NEVER_FOLDED:
            return None
        if not all(r.type.is_static for r in op.results):
            return None
        arrays = [rw.const(v) for v in op.operands]
        if any(a is None for a in arrays):
            return None
        if not self._worth_folding(op, rw):
            return None
        results = _evaluate(op, arrays, self.runtime)
        if results is None:
            return None
        hint = next((n for n in map(rw.weight_name, op.operands) if n is not None), "folded")
        hint = f"{hint}.{op.name.removeprefix('coreai.')}"
        return [rw.constant(a, hint, op.location) for a in results]

    def _worth_folding(self, op: Operation, rw: Rewriter) -> bool:
        size = sum(r.type.numel or 0 for r in op.results)
        if size <= self.max_elements:
            return True
        # Large result: fold only when it replaces weights read by this op alone.
        freed = 0
        for v in set(op.operands):
            name = rw.exclusive_weight(v, op)
            if name is not None:
                freed += v.type.numel or 0
        return size <= freed


def _evaluate(op: Operation, arrays: list, runtime: Runtime | None,
              ) -> list[np.ndarray] | None:
    try:
        with np.errstate(all="ignore"):
            out = evaluate_op(op, arrays, runtime=runtime)
    except Exception:  # the program raises the same error when run; do not fold it away
        return None
    results = [out] if isinstance(out, np.ndarray) else list(out)
    if len(results) != len(op.results):
        return None
    checked = []
    for r, a in zip(op.results, results):
        a = np.asarray(a)
        if a.shape != r.type.shape or a.dtype != r.type.element_type.numpy:
            return None  # a kernel/type-rule disagreement is the runtime's bug, not ours
        # small results are copied so an inline constant never aliases a weight's buffer
        checked.append(np.array(a) if a.size <= INLINE_LIMIT else a)
    return checked
