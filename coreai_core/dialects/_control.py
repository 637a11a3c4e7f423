"""Control flow and calls: if_, while_, invoke, and the graph terminators output / yield_."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from coreai_core._builder import current
from coreai_core._dtypes import DType
from coreai_core._ir import Dim, Graph, TensorType, Value
from coreai_core._opdef import as_value, builder_names, defop
from coreai_core._shapes import expect, fail


def _types(g: Graph) -> list[TensorType]:
    return [v.type for v in g.output_values.values()]


def _expect_inputs(g: Graph, values: Sequence[Value], what: str) -> None:
    got = [v.type for v in values]
    want = [v.type for v in g.inputs.values()]
    expect(got == want, f"{what} takes {[str(t) for t in want]}, got {[str(t) for t in got]}")


@defop(traits=("multi_result", "control"))
def if_(pred: Value, operands: Sequence[Value], then_branch: Graph, else_branch: Graph,
        ) -> list[TensorType]:
    """Run ``then_branch`` or ``else_branch`` on ``operands``; both yield the same types.

    Branches are graphs (or callables building them) whose inputs are ``operands``.
    """
    expect(pred.type.element_type is DType.bool and pred.type.numel in (1, None),
           f"predicate must be a one-element bool tensor, got {pred.type}")
    for name, g in (("then_branch", then_branch), ("else_branch", else_branch)):
        _expect_inputs(g, operands, name)
    expect(_types(then_branch) == _types(else_branch),
           f"branches yield different types: {[str(t) for t in _types(then_branch)]} vs "
           f"{[str(t) for t in _types(else_branch)]}")
    return _types(then_branch)


@defop(traits=("multi_result", "control"))
def while_(init: Sequence[Value], cond: Graph, body: Graph) -> list[TensorType]:
    """Loop: while ``cond(*carried)`` is true, ``carried = body(*carried)``; yields carried."""
    _expect_inputs(cond, init, "cond")
    _expect_inputs(body, init, "body")
    ct = _types(cond)
    expect(len(ct) == 1 and ct[0].element_type is DType.bool and ct[0].numel in (1, None),
           f"cond must yield one bool scalar, got {[str(t) for t in ct]}")
    expect(_types(body) == [v.type for v in init],
           f"body must yield the carried types {[str(v.type) for v in init]}, got "
           f"{[str(t) for t in _types(body)]}")
    return [v.type for v in init]


@defop(traits=("multi_result", "control", "heavy"))
def invoke(args: Sequence[Value], callee: str) -> list[TensorType]:
    """Call entrypoint graph ``callee`` of the same program with ``args``."""
    program = current().graph.program
    if program is None or callee not in program.graphs:
        fail(f"callee @{callee} is not a graph of this program")
    g = program.graphs[callee]
    expect(not g.state_inputs, f"callee @{callee} has state; only stateless graphs are invoked")
    return _call_types(g, args, f"@{callee}")


def _call_types(g: Graph, args: Sequence[Value], what: str) -> list[TensorType]:
    """The result types of calling ``g`` with ``args`` (see :func:`call_binding`)."""
    binding = call_binding(g, args, what)

    def bind(d: int | Dim) -> int | Dim:
        return binding.get(d.name, d) if isinstance(d, Dim) and d.name != "?" else d

    return [t.with_shape(tuple(bind(d) for d in t.shape)) for t in _types(g)]


def call_binding(g: Graph, args: Sequence[Value], what: str = "callee",
                 ) -> dict[str, int | Dim]:
    """The caller's size for each named dynamic dimension of ``g``'s inputs.

    A dynamic dimension of the callee binds to the caller's size (static or dynamic) in that
    place, consistently across inputs (a static one accepts a caller's dynamic size); the
    callee's output types are rewritten with these bindings, so one callee graph serves
    callers with different symbol names or sizes.
    """
    want = [v.type for v in g.inputs.values()]
    got = [v.type for v in args]
    mismatch = f"{what} takes {[str(t) for t in want]}, got {[str(t) for t in got]}"
    expect(len(want) == len(got), mismatch)
    binding: dict[str, int | Dim] = {}
    for w, a in zip(want, got):
        expect(w.element_type == a.element_type and w.rank == a.rank, mismatch)
        for wd, ad in zip(w.shape, a.shape):
            if isinstance(wd, int):
                # a caller's dynamic size may be the callee's static one (checked when run)
                expect(wd == ad or isinstance(ad, Dim), mismatch)
                continue
            if isinstance(ad, int):
                expect(wd.admits(ad), f"{mismatch}: size {ad} is outside {wd}'s bounds")
            if wd.name == "?":
                continue
            bound = binding.setdefault(wd.name, ad)
            # two different static sizes contradict; symbols may be equal at run time (checked
            # then), and the most specific size known is kept: int, named symbol, then "?"
            expect(not (isinstance(bound, int) and isinstance(ad, int) and bound != ad),
                   f"{mismatch}: dimension {wd} is both {bound} and {ad}")
            if _specificity(ad) > _specificity(bound):
                binding[wd.name] = ad
    return binding


def _specificity(d: int | Dim) -> int:
    return 2 if isinstance(d, int) else 0 if d.name == "?" else 1


def output(values: Any = None, /, state: Any = None, **named: Value) -> None:
    """Terminate the current graph: set its named outputs (and updated state)."""
    if isinstance(values, Mapping):
        values = {k: as_value(v) for k, v in values.items()}
    elif values is not None:
        values = [as_value(v) for v in values]
    if state is not None:
        state = {k: as_value(v) for k, v in state.items()}
    current().graph.outputs(values, state=state, **{k: as_value(v) for k, v in named.items()})


def yield_(*values: Value) -> None:
    """Terminate the current region graph with positional results."""
    current().graph.outputs([as_value(v) for v in values])


# the builders of the ops defined above (see builder_names), and the conveniences this module adds
__all__ = [*builder_names(__name__), "output", "yield_"]
