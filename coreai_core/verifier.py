"""The verifier: re-checks every op against its definition and every graph's wiring."""

from __future__ import annotations

from coreai_core._builder import insertion_point
from coreai_core._ir import Graph, Operation, ProgramData, Value
from coreai_core._opdef import OPS, normalize_attr
from coreai_core.errors import TypeRuleError, VerificationError

__all__ = ["verify", "verify_graph"]


def verify(program: ProgramData) -> None:
    """Raise :class:`VerificationError` listing every problem in ``program``."""
    problems: list[str] = []
    for name, t in program.weight_types.items():
        data = program.weights.get(name)
        if data is not None and (
                tuple(data.shape) != t.shape or data.dtype != t.element_type.numpy):
            problems.append(f"weight @{name}: data {data.dtype}{list(data.shape)} != type {t}")
    for g in program.graphs.values():
        problems.extend(verify_graph(g))
    for name in program.state_names:
        if name not in program.initial_state:
            problems.append(f"state {name!r} has no initial value")
    if problems:
        raise VerificationError(problems)


def _where(op: Operation, graph: Graph) -> str:
    loc = f" at {op.location}" if op.location.is_known else ""
    return f"{op.name} (op in graph @{graph.name}){loc}"


def verify_graph(graph: Graph) -> list[str]:
    """Problems found in ``graph`` (empty when it is well formed)."""
    problems: list[str] = []
    defined: set[int] = {id(v) for v in graph.inputs.values()}
    defined |= {id(v) for v in graph.state_inputs.values()}
    with insertion_point(graph):
        for op in graph.ops:
            problems.extend(_verify_op(op, graph, defined))
            defined.update(id(r) for r in op.results)
    for kind, outs in (("output", graph.output_values), ("state output", graph.state_outputs)):
        for name, v in outs.items():
            if id(v) not in defined:
                problems.append(f"graph @{graph.name}: {kind} {name!r} uses a value not defined "
                                "in this graph")
    for name, v in graph.state_outputs.items():
        if name in graph.state_inputs and v.type != graph.state_inputs[name].type:
            problems.append(f"graph @{graph.name}: state {name!r} is updated with {v.type}, "
                            f"declared {graph.state_inputs[name].type}")
    return problems


def _verify_op(op: Operation, graph: Graph, defined: set[int]) -> list[str]:
    where = _where(op, graph)
    opdef = OPS.get(op.name)
    if opdef is None:
        return [f"{where}: unknown op (no definition registered)"]
    problems = []
    for i, v in enumerate(op.operands):
        if not isinstance(v, Value) or id(v) not in defined:
            problems.append(f"{where}: operand {i} is used before it is defined")
    for i, r in enumerate(op.results):
        if r.owner is not op or r.index != i:
            problems.append(f"{where}: result {i} is not owned by the op")
    expected = {p.name for p in opdef.attributes}
    if set(op.attributes) != expected:
        problems.append(f"{where}: attributes {sorted(op.attributes)} != {sorted(expected)}")
        return problems
    for region in op.regions.values():
        problems.extend(verify_graph(region))
    try:
        for p in opdef.attributes:
            if p.role == "attr" and p.kind != "array" and not _canonical(
                    op.attributes[p.name], normalize_attr(p, op.attributes[p.name], op.name)):
                problems.append(f"{where}: attribute {p.name!r} is not in canonical form")
        inferred = opdef.infer(opdef.split_operands(op.operands), op.attributes)
    except TypeRuleError as e:
        return [*problems, f"{where}: {e.message}"]
    got = [r.type for r in op.results]
    if got != inferred:
        problems.append(f"{where}: result types {[str(t) for t in got]} differ from the op's "
                        f"rule {[str(t) for t in inferred]}")
    return problems


def _canonical(value: object, normalized: object) -> bool:
    """``value == normalized`` (a list is not a tuple), except that NaN floats compare equal:
    a NaN attribute, e.g. a pad value, is canonical."""
    if isinstance(normalized, tuple):
        return isinstance(value, tuple) and len(value) == len(normalized) and all(
            map(_canonical, value, normalized))
    if isinstance(normalized, float) and normalized != normalized:
        return isinstance(value, float) and value != value
    return bool(value == normalized)
