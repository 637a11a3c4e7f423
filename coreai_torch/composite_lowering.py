"""Built-in lowerings that emit composite ops (``TorchConverter(composites=True)``).

A composite is a graph of the program that carries a :class:`~coreai_core.Composite`
declaration and is called with ``coreai.invoke``. With ``composites=True`` the converter lowers
the ops listed in :data:`COMPOSITE_OPS` into such a graph instead of flat ops: the built-in
lowering runs unchanged, but inside the composite graph, with the node's tensor operands as the
graph's inputs (named after the schema arguments) and its other arguments as the declaration's
attributes. One graph is built per distinct signature (name, attributes, input types) and shared
by every call. The default (``composites=False``) stays flat.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import torch
import torch.fx

from coreai_core import Composite, Program, Value, current_graph
from coreai_core.dialects import coreai
from coreai_torch._binding import Lowering, NodeValues, call_lowering
from coreai_torch._schema import bind_arguments, schema_args
from coreai_torch.utils import active_context

__all__ = ["COMPOSITE_OPS", "CompositeSpec", "CompositeBuilder"]


@attrs.frozen
class CompositeSpec:
    """How an ATen op becomes a composite: its name, or None when this call stays flat."""

    name: Callable[[dict[str, Any]], str | None]
    version: int = 1


def _gelu_name(args: dict[str, Any]) -> str | None:
    return "gelu_tanh" if args.get("approximate") == "tanh" else None


COMPOSITE_OPS: dict[str, CompositeSpec] = {
    "aten::native_layer_norm.default": CompositeSpec(lambda a: "layer_norm"),
    "aten::gelu.default": CompositeSpec(_gelu_name),
    "aten::scaled_dot_product_attention.default": CompositeSpec(lambda a: "sdpa"),
    "aten::_scaled_dot_product_flash_attention_for_cpu.default": CompositeSpec(lambda a: "sdpa"),
}
"""Qualified ATen names whose built-in lowering emits a composite when asked to."""


class CompositeBuilder:
    """Builds (once per signature) and invokes the composite graphs of one conversion."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._graphs: dict[Any, str] = {}

    def lower(self, qn: str, fn: Lowering, values: NodeValues, node: torch.fx.Node,
              loc: Any) -> Any:
        """Lower ``node`` with ``fn`` inside a composite graph and return the invoke's results;
        ``fn``'s flat result when the op does not become a composite for these arguments."""
        args = bind_arguments(node)
        spec = COMPOSITE_OPS[qn]
        name = spec.name(args)
        if name is None:
            return call_lowering(fn, values, node, loc)
        tensors = {k: v for k, v in args.items() if isinstance(v, torch.fx.Node)}
        operands = {k: values.value(v) for k, v in tensors.items()}
        attributes = {k: _plain(v) for k, v in args.items()
                      if k not in tensors and _plain(v) is not _UNSET}
        decl = Composite(name, spec.version, attributes)
        callee = self.graph_for(decl, operands, fn, node, loc)
        results = coreai.invoke(list(operands.values()), callee=callee)
        multi = isinstance(node.meta.get("val"), (list, tuple))
        return results if multi else results[0]

    def graph_for(self, decl: Composite, operands: dict[str, Value], fn: Lowering,
                  node: torch.fx.Node, loc: Any) -> str:
        key = (decl.name, decl.version, repr(sorted(decl.attributes.items())),
               tuple((k, v.type) for k, v in operands.items()))
        if key in self._graphs:
            return self._graphs[key]
        graph_name = self.unique_name(decl.name)
        caller = _current_graph_name()
        inner = NodeValues()
        ctx = active_context()
        saved = None
        if ctx is not None:  # symbolic sizes are per graph: the composite makes its own
            saved, ctx.sym_values = ctx.sym_values, {}
        try:
            with self.program.graph(graph_name, inputs={k: v.type for k, v in operands.items()},
                                    composite=decl, before=caller) as g:
                shadow, placeholders = _shadow(node)
                for k, p in placeholders.items():
                    inner.bind(p, g[k])
                result = call_lowering(fn, inner, shadow, loc)
                outs = list(result) if isinstance(result, (list, tuple)) else [result]
                names = ["out"] if len(outs) == 1 else [f"out{i}" for i in range(len(outs))]
                g.outputs(dict(zip(names, outs, strict=True)))
        finally:
            if ctx is not None and saved is not None:
                ctx.sym_values = saved
        self._graphs[key] = graph_name
        return graph_name

    def unique_name(self, base: str) -> str:
        name, i = base, 1
        while name in self.program.graphs:
            name = f"{base}_{i}"
            i += 1
        return name


_UNSET = object()


def _plain(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)) and all(x is None or isinstance(x, (bool, int, float, str))
                                            for x in v):
        return list(v)
    if isinstance(v, torch.dtype):
        return str(v).removeprefix("torch.")
    return _UNSET  # symbolic sizes and the like are not declaration attributes


def _shadow(node: torch.fx.Node) -> tuple[torch.fx.Node, dict[str, torch.fx.Node]]:
    """A copy of ``node`` in a scratch FX graph whose tensor arguments are one placeholder per
    schema argument, named after it: ``sdpa(q, q, q)`` gets distinct query/key/value inputs."""
    graph = torch.fx.Graph()
    args = bind_arguments(node)
    replaced: dict[str, torch.fx.Node] = {}
    for k, v in args.items():
        if isinstance(v, torch.fx.Node):
            p = graph.placeholder(k)
            p.meta = dict(v.meta)
            replaced[k] = p
    kwargs: dict[str, Any] = {k: replaced.get(k, v) for k, v in args.items()}
    specs = schema_args(node.target)
    positional = tuple(kwargs[s.name] for s in specs if not s.kwarg_only)
    keywords = {s.schema_name: kwargs[s.name] for s in specs if s.kwarg_only}
    assert callable(node.target)
    copy = graph.call_function(node.target, positional, keywords)
    copy.meta = dict(node.meta)
    return copy, replaced


def _current_graph_name() -> str | None:
    g = current_graph()
    program = g.program
    if program is None:
        return None
    if program.graphs.get(g.name) is g:
        return g.name
    return next(reversed(program.graphs), None)  # in a region: the entrypoint built last
