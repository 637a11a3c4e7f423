"""Inlining composite ops: replace ``invoke`` of a composite graph by a copy of its body.

A composite (a graph with a :class:`~coreai_core.Composite` declaration) is kept by default:
the default pipeline optimizes inside it but never dissolves it, so a backend that implements
``rms_norm`` or ``sdpa`` natively still sees the call. :class:`InlineCompositesPass` dissolves
the composites a backend does not know::

    program.optimize([InlineCompositesPass(keep={"sdpa"}), *default_passes()])

A dynamic dimension of the callee takes the caller's size in the copy (the same binding the
``invoke`` type rule uses), so the inlined ops are typed in the caller's symbols. Composite
graphs no ``invoke`` references any more are removed afterwards.

Assumes what the runtime also assumes: an ``invoke`` computes exactly its callee's body on its
operands (a composite's declaration is a name for the backends, not other semantics). Each
inlined call is one copy of the body replacing the call, so nothing runs twice.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from coreai_core._ir import Composite, Dim, Graph, Operation, ProgramData, TensorType, Value
from coreai_core.dialects._control import call_binding
from coreai_core.optimizer._pass import PassStats

__all__ = ["InlineCompositesPass", "inline_composites"]

_MAX_DEPTH = 64  # composites calling composites; deeper means a cycle


class InlineCompositesPass:
    """Inline every composite whose name is not in ``keep`` (``keep`` may be a predicate).

    ``InlineCompositesPass()`` inlines them all; ``InlineCompositesPass(keep={"sdpa"})`` keeps
    ``sdpa`` calls and inlines the rest. Not in the default pipeline: composites are kept
    unless this pass is asked for.
    """

    name = "inline_composites"

    def __init__(self, keep: Collection[str] | Callable[[Composite], bool] = ()) -> None:
        self.keep = keep

    def kept(self, c: Composite) -> bool:
        return self.keep(c) if callable(self.keep) else c.name in self.keep

    def run(self, program: ProgramData) -> PassStats:
        """Inline in every graph; return the invokes removed and the ops added."""
        return inline_composites(program, self.kept)

    def __repr__(self) -> str:
        return f"InlineCompositesPass(keep={self.keep!r})"


def inline_composites(program: ProgramData, kept: Callable[[Composite], bool]) -> PassStats:
    """Inline the composites ``kept`` rejects, in place; drop the composite graphs left unused."""
    stats = PassStats()
    inline = {name for name, g in program.graphs.items()
              if g.composite is not None and not kept(g.composite)}
    if not inline:
        return stats
    for name, g in program.graphs.items():
        if name not in inline:
            _inline_in(g, program, inline, stats)
    used = {op.attributes.get("callee") for g in program.graphs.values() for op in g.walk()
            if op.name == "coreai.invoke"}
    for name in inline - used:
        del program.graphs[name]
    if stats.changed:
        program.invalidate()
    return stats


def _inline_in(g: Graph, program: ProgramData, inline: set[str], stats: PassStats,
               depth: int = 0) -> None:
    if depth > _MAX_DEPTH:
        raise RecursionError(f"composites nest deeper than {_MAX_DEPTH} levels in graph "
                             f"{g.name!r}; a composite probably invokes itself")
    replaced: dict[int, Value] = {}
    out: list[Operation] = []
    for op in g.ops:
        op.operands = [replaced.get(id(v), v) for v in op.operands]
        for region in op.regions.values():
            _inline_in(region, program, inline, stats, depth)
        callee = op.attributes.get("callee")
        if op.name != "coreai.invoke" or callee not in inline:
            out.append(op)
            continue
        body = _inlined_body(program.graphs[callee], op, program)
        # the copy may itself call composites: inline those too
        holder = Graph(g.name, ops=body.ops, output_values=body.output_values, program=program)
        _inline_in(holder, program, inline, stats, depth + 1)
        out.extend(holder.ops)
        stats.removed += 1
        stats.added += len(body.ops)
        named = next((r.name for r in op.results if r.name), None)
        prefix = None if named is None else named.split("#")[0]
        for new in holder.ops:
            for v in new.results:
                # inner names stay readable under the call's name and never collide with the
                # caller's own (a "/" is not part of any generated name)
                v.name = None if v.name is None or prefix is None else f"{prefix}/{v.name}"
        for r, v in zip(op.results, holder.output_values.values(), strict=True):
            replaced[id(r)] = v
            if r.name is not None:
                v.name = r.name
    g.ops = out
    g.output_values = {k: replaced.get(id(v), v) for k, v in g.output_values.items()}
    g.state_outputs = {k: replaced.get(id(v), v) for k, v in g.state_outputs.items()}


def _inlined_body(callee: Graph, call: Operation, program: ProgramData) -> Graph:
    binding = call_binding(callee, call.operands, f"@{callee.name}")
    values = {id(v): a for v, a in zip(callee.inputs.values(), call.operands, strict=True)}
    copy = _copy_ops(callee, values, binding, program, call)
    return Graph(callee.name, ops=copy,
                 output_values={k: values[id(v)] for k, v in callee.output_values.items()})


def _copy_ops(src: Graph, values: dict[int, Value], binding: dict[str, int | Dim],
              program: ProgramData, call: Operation | None) -> list[Operation]:
    ops = []
    for op in src.ops:
        attributes: dict[str, Any] = {
            k: _copy_region(v, binding, program) if isinstance(v, Graph) else v
            for k, v in op.attributes.items()}
        # a copied op keeps its own location; where it has none, the call's location tells
        location = op.location if op.location.is_known or call is None else call.location
        new = Operation(op.name, [values[id(v)] for v in op.operands], attributes, [], location)
        new.results = [Value(_bound(r.type, binding), new, r.index, r.name) for r in op.results]
        for r, n in zip(op.results, new.results, strict=True):
            values[id(r)] = n
        ops.append(new)
    return ops


def _copy_region(region: Graph, binding: dict[str, int | Dim], program: ProgramData) -> Graph:
    copy = Graph(region.name, program=program)
    values: dict[int, Value] = {}
    for k, v in region.inputs.items():
        values[id(v)] = copy.add_input(k, _bound(v.type, binding))
    copy.ops = _copy_ops(region, values, binding, program, None)
    copy.output_values = {k: values[id(v)] for k, v in region.output_values.items()}
    return copy


def _bound(t: TensorType, binding: dict[str, int | Dim]) -> TensorType:
    if t.is_static or not binding:
        return t
    return t.with_shape(tuple(binding.get(d.name, d) if isinstance(d, Dim) else d
                              for d in t.shape))
