"""Op mappings of control flow and calls, merged into :data:`coreai_torch.aimodel.ops.MAPPINGS`.

Core AI's supported authoring API builds no regions (its ``if``/``while`` exist only in the
unversioned MLIR bindings) and has no ``invoke``, so graphs held by an op are emitted inline
through the exporter's walk (``ExportContext.inline``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import coreai.authoring as ca

from coreai_core import Operation
from coreai_torch.aimodel._context import ExportContext, OpMapping
from coreai_torch.aimodel._emit import i32

__all__ = ["CONTROL_MAPPINGS"]


def _if(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    # Both branches run and the predicate selects each result: exact, as the exported ops have
    # no side effects (an untaken branch's values are discarded, NaN and all; coreai.while,
    # which could run long for nothing, is not exported).
    pred = xs[0]
    if tuple(pred.type.shape) != ():
        pred = ca.reshape(pred, i32([]))
    taken = ctx.inline(op.attributes["then_branch"], xs[1:])
    other = ctx.inline(op.attributes["else_branch"], xs[1:])
    return [ca.broadcasting_where(pred, t, e) for t, e in zip(taken, other, strict=True)]


def _invoke(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return ctx.inline(ctx.program.graphs[op.attributes["callee"]], xs)


CONTROL_MAPPINGS: dict[str, OpMapping] = {
    "coreai.if": OpMapping(_if, "both branches inline + broadcasting_where on the predicate"),
    "coreai.invoke": OpMapping(_invoke, "the callee's ops inline (composites included)"),
}
