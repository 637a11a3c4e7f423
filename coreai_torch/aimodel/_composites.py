"""Composite graphs exported as Core AI composite functions, invoked where we invoke them.

Core AI declares a composite on a ``coreai.graph`` op: its ``composite_decl`` attribute,
``#coreai.composite_declaration<"name" = {attributes}>``, holds the op's name and a dictionary
of constant attributes, and the graph's body is the decomposition. The graph must be
``noinline`` (Core AI's lowering refuses a composite without it and inlines it itself where
no native implementation exists, as its interpreter does). Callers reach it with
``coreai.invoke``. Our :class:`~coreai_core.Composite` maps onto that when
:func:`unmapped_reason` finds nothing in the way; otherwise its invokes are inlined.

Apple's supported facade (``coreai.authoring``) takes the declaration only as a raw MLIR
attribute, and its ``graph`` decorator names inputs after Python parameters and inserts where
the builders are, while a composite is declared at the start of the module when its first
caller is being emitted. So this module (and only this one, for composites) uses Apple's raw,
unversioned layer (``coreai._compiler``): the attribute builders, the graph op with its
declaration, its ``invoke``, an insertion point and the seam between facade and raw values.
Bodies are emitted by the exporter's walk with the facade's builders.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from coreai_core import Composite, Graph, Value
from coreai_torch.aimodel._apple import ca, from_raw, to_raw
from coreai_torch.aimodel._apple import raw_coreai as apple_raw
from coreai_torch.aimodel._apple import raw_ir as apple_ir
from coreai_torch.aimodel._context import ExportContext, Refused

__all__ = ["APPLE_COMPOSITE_NAMES", "CompositeFunctions", "declaration_attribute",
           "unmapped_reason"]

_LOG = logging.getLogger("coreai_torch.aimodel")

# Composite names Core AI's compiler gives a meaning of its own (their own operands and
# attributes); a composite of ours with such a name would not mean what its body says.
APPLE_COMPOSITE_NAMES = frozenset({"batch_norm", "rope_cached_cos_sin_gather"})
# Attribute names Core AI's compiler rewrites (NormalizeCompositeOpAttrs).
_APPLE_ATTRIBUTE_NAMES = frozenset({"op_attrs", "op_attributes"})
_INT64 = (-(2**63), 2**63 - 1)

# Emits a graph's ops on Apple values standing for its inputs; returns its outputs' values.
EmitBody = Callable[[Graph, Sequence[Any]], list[Any]]


def _attribute(value: Any, where: str) -> Any:
    """The MLIR attribute of one composite attribute value (our kinds: see Composite)."""
    if value is None:
        return apple_ir.UnitAttr.get()
    if isinstance(value, bool):
        return apple_ir.BoolAttr.get(value)
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise Refused(f"attribute {where} = {value} does not fit a 64-bit integer")
        return apple_ir.IntegerAttr.get(apple_ir.IntegerType.get_signless(64), value)
    if isinstance(value, float):
        return apple_ir.FloatAttr.get_f64(value)
    if isinstance(value, str):
        return apple_ir.StringAttr.get(value)
    return apple_ir.ArrayAttr.get([_attribute(v, f"{where}[{i}]") for i, v in enumerate(value)])


def declaration_attribute(decl: Composite) -> Any:
    """Core AI's ``#coreai.composite_declaration`` of ``decl`` (needs an active MLIR context).

    Raises :class:`Refused` when an attribute value has no exact MLIR counterpart.
    """
    attributes = apple_ir.DictAttr.get({k: _attribute(v, repr(k))
                                        for k, v in decl.attributes.items()})
    name = apple_ir.StringAttr.get(decl.name)
    return apple_ir.Attribute.parse(f"#coreai.composite_declaration<{name} = {attributes}>")


def unmapped_reason(graph: Graph) -> str | None:
    """Why ``graph``'s composite declaration cannot become Core AI's (None if it can).

    Core AI's declaration is a name and attributes; our version has no place in it, so only
    the default version 1 maps (another one would reach Core AI as version 1's op).
    """
    decl = graph.composite
    if decl is None:
        return "the graph is not a composite"
    if decl.version != 1:
        return (f"Core AI's composite declaration has no version (only a name and "
                f"attributes); version {decl.version} of {decl.name!r} would read as version 1")
    if decl.name in APPLE_COMPOSITE_NAMES:
        return (f"Core AI's compiler gives composite {decl.name!r} a meaning of its own "
                "(its operands and attributes), which this graph's body need not follow")
    reserved = sorted(_APPLE_ATTRIBUTE_NAMES & set(decl.attributes))
    if reserved:
        return f"attribute(s) {reserved} are rewritten by Core AI's compiler"
    for value in [*graph.inputs.values(), *graph.output_values.values()]:
        if value.type.static_shape is None:
            return f"dynamic signature ({value.type}): Core AI functions are exported static"
    return None


def _raw_type(value: Value) -> Any:
    apple = ca.TensorType(ExportContext.static_shape(value), ExportContext.apple_dtype(value))
    return to_raw(apple)  # the facade-to-raw seam (see the module doc)


def _declaration(graph: Graph) -> tuple[Any, list[Any], list[Any]]:
    """``graph``'s Core AI declaration and its raw input and result types, or :class:`Refused`
    saying why it does not map."""
    reason = unmapped_reason(graph)
    if reason is not None or graph.composite is None:
        raise Refused(reason or "the graph is not a composite")
    return (declaration_attribute(graph.composite),
            [_raw_type(v) for v in graph.inputs.values()],
            [_raw_type(v) for v in graph.output_values.values()])


class CompositeFunctions:
    """The composite graphs of one export, each declared as a Core AI composite function on
    its first invoke (at the start of ``module``), then invoked at every call site.

    A function is named like its graph unless one of ``entrypoints`` (the module's other
    graphs) has that name. ``emit`` is the exporter's walk, which emits a graph's ops where
    the builders insert: the body of a composite function, or the callee itself in place of
    the invoke for graphs that are not composites or whose declaration does not map (the
    reason is logged on the ``coreai_torch.aimodel`` logger, once per graph).
    """

    def __init__(self, module: ca.Module, emit: EmitBody, entrypoints: Sequence[str]) -> None:
        self.module = module
        self.emit = emit
        self.taken = set(entrypoints)  # symbol names of the module's other graphs
        self.declared: dict[str, Any] = {}  # graph name -> Apple graph op
        self.inlined: dict[str, str] = {}  # graph name -> why its invokes are inlined

    def invoke(self, graph: Graph, args: Sequence[Any]) -> list[Any]:
        """Apple values of ``graph``'s outputs, invoked (or inlined) on ``args``."""
        function = self.declared.get(graph.name)
        if function is None and graph.composite is not None and graph.name not in self.inlined:
            function = self._declare(graph)
        if function is None:
            return self.emit(graph, args)
        results = function(*[to_raw(a) for a in args])  # emits coreai.invoke
        return [from_raw(r) for r in results]

    def _declare(self, graph: Graph) -> Any:
        try:
            decl, inputs, results = _declaration(graph)
        except Refused as e:
            self.inlined[graph.name] = e.reason
            _LOG.info("composite graph %r is inlined where invoked: %s", graph.name, e.reason)
            return None
        symbol = graph.name
        while symbol in self.taken:  # a composite also exported as an entrypoint
            symbol += "_composite"
        self.taken.add(symbol)
        function = apple_raw.GraphOp(
            symbol, input_types=inputs, result_types=results,
            input_names=list(graph.inputs), result_names=list(graph.output_values),
            private=True, no_inline=True, composite_decl=decl,
            # Apple's facade keeps the module's block private; composites go first
            ip=apple_ir.InsertionPoint.at_block_begin(self.module._body))
        self.declared[graph.name] = function  # before the body: a call back to it is invoked
        with function.block:
            params = [from_raw(a) for a in function.arguments]
            apple_raw.OutputOp([to_raw(o) for o in self.emit(graph, params)])
        return function
