"""Op mappings (control family): control flow and calls.

``if`` and ``while`` become Core AI's ``if``/``while`` ops, whose regions hold the branches or
the condition and body. Apple's supported facade (``coreai.authoring``) builds no regions, so
this module uses its raw layer (``coreai._compiler``, unversioned) for those two ops and their
terminators, and the seam between facade and raw values (``_to_mlir``/``_from_mlir``); the
region bodies are emitted by the exporter's walk (``ExportContext.inline``) with the facade's
builders. ``invoke`` goes through ``ExportContext.invoke``: a composite whose declaration maps
becomes an invoke of a Core AI composite function (``_composites.py``), any other callee is
inlined.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coreai_core import Operation
from coreai_torch.aimodel._apple import ca, from_raw, raw_ir, to_raw
from coreai_torch.aimodel._apple import raw_control_flow as apple_cf
from coreai_torch.aimodel._context import ExportContext
from coreai_torch.aimodel._emit import i32
from coreai_torch.aimodel.mappings._registry import mapping_decorator, mapping_registry

__all__ = ["MAPPINGS"]

MAPPINGS = mapping_registry(__name__)
mapping = mapping_decorator(MAPPINGS)


def _raw(value: Any) -> Any:
    return to_raw(value)  # the facade-to-raw seam (see the module doc)


def _facade(results: Any) -> list[Any]:
    """The facade values of raw values (a raw op's single result comes back bare)."""
    items = [results] if isinstance(results, raw_ir.Value) else list(results)
    return [from_raw(r) for r in items]


def _flag(value: Any) -> Any:
    """A one-element boolean as the 0-d predicate Core AI's regions branch on."""
    return value if tuple(value.type.shape) == () else ca.reshape(value, i32([]))


def _result_types(ctx: ExportContext, op: Operation) -> list[Any]:
    return [_raw(ca.TensorType(ctx.static_shape(r), ctx.apple_dtype(r))) for r in op.results]


@mapping("coreai.if", "if (the branches in its regions)")
def _if(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    # (results, [then, else] block builders); Apple's decorator hides that type
    built: Any = apple_cf.if_(results=_result_types(ctx, op), condition=_raw(_flag(xs[0])))
    results, (then_block, else_block) = built
    for block, name in ((then_block, "then_branch"), (else_block, "else_branch")):
        with block:  # a branch reads the if's operands from the enclosing graph
            apple_cf.yield_([_raw(v) for v in ctx.inline(op.attributes[name], xs[1:])])
    return _facade(results)


@mapping("coreai.while", "while_ (cond and body in its regions)")
def _while(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    # the condition region decides on the carried values and passes them on, to the body
    # (true) or out as the results (false); the body yields the next carried values
    built: Any = apple_cf.while_(results=_result_types(ctx, op), inits=[_raw(x) for x in xs])
    results, (cond_block, body_block) = built
    with cond_block:
        carried = _facade(cond_block.arguments)
        (proceed,) = ctx.inline(op.attributes["cond"], carried)
        apple_cf.condition(_raw(_flag(proceed)), *[_raw(v) for v in carried])
    with body_block:
        carried = _facade(body_block.arguments)
        apple_cf.yield_([_raw(v) for v in ctx.inline(op.attributes["body"], carried)])
    return _facade(results)


@mapping("coreai.invoke",
         "invoke of a Core AI composite function (a composite whose declaration maps), else the "
         "callee's ops inline")
def _invoke(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return ctx.invoke(ctx.program.graphs[op.attributes["callee"]], xs)

