"""Program-wide walks the passes share: every graph, weight references, op counts."""

from __future__ import annotations

from collections import Counter

from coreai_core._ir import Graph, ProgramData, WeightRef


def all_graphs(program: ProgramData) -> list[Graph]:
    """Every graph of ``program``: entrypoints and, recursively, the regions of their ops."""
    out: list[Graph] = []

    def visit(g: Graph) -> None:
        out.append(g)
        for op in g.ops:
            for region in op.regions.values():
                visit(region)

    for g in program.graphs.values():
        visit(g)
    return out


def weight_refs(program: ProgramData) -> Counter[str]:
    """How many constant ops (in all graphs and regions) reference each weight."""
    refs: Counter[str] = Counter()
    for g in all_graphs(program):
        for op in g.ops:
            if op.name == "coreai.constant" and isinstance(op.attributes["value"], WeightRef):
                refs[op.attributes["value"].name] += 1
    return refs


def count_ops(program: ProgramData) -> int:
    """How many ops ``program`` has, in all graphs and regions."""
    return sum(len(g.ops) for g in all_graphs(program))


def drop_unreferenced_weights(program: ProgramData, refs: Counter[str]) -> int:
    """Delete the weights that no constant references; return how many."""
    dropped = 0
    for name in list(program.weights):
        if refs.get(name, 0) <= 0:
            del program.weights[name]
            program.weight_types.pop(name, None)
            dropped += 1
    return dropped


def weight_hint(name: str, suffix: str) -> str:
    """A readable name for a weight derived from ``name`` (``conv.weight`` -> ``conv.bias``)."""
    if suffix == "bias" and name.endswith("weight"):
        return name[: -len("weight")] + "bias"
    return f"{name}.{suffix}"
