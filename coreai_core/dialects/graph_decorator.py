"""``coreai.graph``: a Python function of Values as a graph of the program, called with
``coreai.invoke`` (Apple's decorator form, for composite ops built inside a lowering).

Not an op family (it defines no op): ``coreai_core.dialects.coreai`` re-exports its names.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from coreai_core._builder import current, insertion_point
from coreai_core._ir import Composite, Graph, ProgramData, Value
from coreai_core.dialects._control import invoke

__all__ = ["CompositeDeclaration", "graph"]


def _names(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(str(n) for n in names)


@attrs.frozen
class CompositeDeclaration:
    """A composite's declaration with the names of its inputs and outputs (what Apple's
    ``generate_composite_decl`` builds); ``graph(composite_decl=...)`` takes it."""

    composite: Composite
    input_names: tuple[str, ...] = attrs.field(converter=_names)
    output_names: tuple[str, ...] = attrs.field(converter=_names)


def graph(fn: Callable[..., Any] | None = None, *, no_inline: bool = False,
          composite_decl: CompositeDeclaration | Composite | None = None,
          name: str | None = None) -> Any:
    """Decorator: calling the decorated function with Values (inside an insertion context)
    builds it as a graph of the current program, once per distinct input types, and returns
    the results of a ``coreai.invoke`` of that graph, a list (index ``[0]`` for one result).

    The graph is named ``name`` (default: the composite's name, else the function's), made
    unique; its inputs are named after ``composite_decl.input_names`` or the function's
    parameters, its outputs after ``composite_decl.output_names`` (default ``output``,
    ``output_1``, ...). With ``composite_decl`` the graph is a composite op. ``no_inline`` is
    accepted for Apple's signature: graphs here are kept until an optimizer pass inlines them.
    """
    if fn is None:
        return functools.partial(graph, no_inline=no_inline, composite_decl=composite_decl,
                                 name=name)
    decl = composite_decl
    composite = decl.composite if isinstance(decl, CompositeDeclaration) else decl
    params = list(inspect.signature(fn).parameters)
    # (program id, input types) -> (the program, weakly; its graph): one graph per signature
    built: dict[Any, tuple[weakref.ref[ProgramData], str]] = {}

    @functools.wraps(fn)
    def call(*args: Value) -> list[Value]:
        caller = current().graph
        program = caller.program
        if program is None:
            raise RuntimeError(f"coreai.graph {fn.__name__}: the graph being built belongs to "
                               "no program; build inside Program.graph(...)")
        key = (id(program), tuple(a.type for a in args))
        known = built.get(key)
        if known is None or known[0]() is not program or known[1] not in program.graphs:
            graph_name = _build(program, caller, fn, decl, composite, params, args, name)
            known = built[key] = (weakref.ref(program), graph_name)
        return list(invoke(list(args), callee=known[1]))

    return call


def _build(program: ProgramData, caller: Graph, fn: Callable[..., Any], decl: Any,
           composite: Composite | None, params: Sequence[str], args: Sequence[Value],
           name: str | None) -> str:
    inputs = list(decl.input_names) if isinstance(decl, CompositeDeclaration) else params
    if len(inputs) != len(args):
        raise TypeError(f"coreai.graph {fn.__name__} declares {len(inputs)} inputs "
                        f"{inputs}, called with {len(args)} values")
    base = name or (composite.name if composite is not None else fn.__name__)
    graph_name, i = base, 1
    while graph_name in program.graphs:
        graph_name, i = f"{base}_{i}", i + 1
    g = Graph(graph_name, program=program, composite=composite)
    for n, a in zip(inputs, args, strict=True):
        g.add_input(n, a.type)
    program.add_graph(g, before=caller.name)
    with insertion_point(g):
        results = fn(*g.inputs.values())
        results = [results] if isinstance(results, Value) else list(results)
        names = (list(decl.output_names) if isinstance(decl, CompositeDeclaration)
                 else ["output"] + [f"output_{k}" for k in range(1, len(results))])
        if len(names) != len(results):
            raise TypeError(f"coreai.graph {fn.__name__} declares outputs {names} but returns "
                            f"{len(results)} values")
        g.outputs(dict(zip(names, results, strict=True)))
    return graph_name
