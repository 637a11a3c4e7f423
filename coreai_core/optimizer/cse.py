"""Common-subexpression elimination, identical constants and identical weights included.

Two ops are merged when they have the same name, operands, attributes and result types (the
operands of a commutative binary op in either order). Regions are compared structurally, so
ops with regions merge only when their regions are equal. Impure ops are never merged, nor
random ones (each execution draws new numbers) or ops whose regions or callee contain one.

Weights holding bit-identical data are merged too: every constant referencing a duplicate is
pointed at the first such weight, the duplicate then becomes unreferenced and is dropped.

Assumptions: ops are merged within one graph only (a region's values are its own), and the
first copy comes earlier in that graph, so it is computed before every reader of the second
(the sweep goes in order; a first copy found dead is forgotten). Operands are compared by
identity after substitution, so two ops merge only when they read the very same values.
Merging only removes ops; it never copies one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from coreai_core._ir import Operation, ProgramData, Value, WeightRef, attr_key
from coreai_core._opdef import OPS
from coreai_core.optimizer._context import PassContext
from coreai_core.optimizer._predicates import is_deterministic
from coreai_core.optimizer._rewriter import RewritePass, Rewriter

# Elements sampled from each weight to find candidate duplicates before comparing all bytes.
_SAMPLES = 64


def _bytes(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def _fingerprint(a: np.ndarray) -> tuple[Any, ...]:
    # a.flat with indices reads only the sampled elements, even from a strided view
    picks = np.unique(np.linspace(0, a.size - 1, min(a.size, _SAMPLES)).astype(np.int64))
    return (a.dtype.str, a.shape, _bytes(np.asarray(a.flat[picks])).tobytes())


def duplicate_weights(program: ProgramData) -> dict[str, str]:
    """Map each bound weight whose data duplicates an earlier weight to that weight's name."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for name, data in program.weights.items():
        if data is not None:
            groups.setdefault(_fingerprint(np.asarray(data)), []).append(name)
    canonical: dict[str, str] = {}
    for names in groups.values():
        if len(names) < 2:
            continue  # a unique fingerprint: no need to read (or copy, if strided) the data
        firsts: list[str] = []
        for name in names:
            data = _bytes(np.asarray(program.weights[name]))
            for first in firsts:
                if np.array_equal(data, _bytes(np.asarray(program.weights[first]))):
                    canonical[name] = first
                    break
            else:
                firsts.append(name)
    return canonical


class CSEPass(RewritePass):
    """Merge ops computing the same thing, including identical constants and weights."""

    name = "cse"

    def begin(self, ctx: PassContext) -> None:
        self._canonical = duplicate_weights(ctx.program)
        self._seen: dict[int, dict[Any, Operation]] = {}
        self._deterministic: dict[int, bool] = {}

    def visit(self, op: Operation, rw: Rewriter) -> Sequence[Value] | None:
        if not is_deterministic(op, rw.program, self._deterministic):
            return None
        if op.name == "coreai.constant":
            self._merge_weight(op, rw)
        key = self._key(op)
        seen = self._seen.setdefault(id(rw.graph), {})
        first = seen.get(key)
        if first is None or rw.is_removed(first):  # a first copy found dead is gone
            seen[key] = op
            return None
        return first.results

    def _merge_weight(self, op: Operation, rw: Rewriter) -> None:
        # @dup -> @first when both hold the same bytes (same dtype and shape)
        ref = op.attributes["value"]
        if isinstance(ref, WeightRef) and ref.name in self._canonical:
            first = self._canonical[ref.name]
            op.attributes = {**op.attributes, "value": WeightRef(first)}
            rw.ctx.refs[ref.name] -= 1
            rw.ctx.refs[first] += 1
            rw.ctx.released.add(ref.name)
            rw.stats.rewritten += 1

    @staticmethod
    def _key(op: Operation) -> Any:
        operands = tuple(id(v) for v in op.operands)
        opdef = OPS[op.name]
        if "commutative" in opdef.traits and len(operands) == 2:
            operands = tuple(sorted(operands))
        attributes = tuple(sorted((k, attr_key(v, {})) for k, v in op.attributes.items()))
        return (op.name, operands, attributes, tuple(r.type for r in op.results))
