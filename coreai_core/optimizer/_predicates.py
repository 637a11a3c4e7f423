"""What the passes ask of an op before they touch it: is it pure, deterministic, heavy?

Each answer is read from the op's definition (its traits, see ``coreai_core._opdef.TRAITS``),
never from a list of names kept here.
"""

from __future__ import annotations

from coreai_core._ir import Graph, Operation, ProgramData, TensorType, Value
from coreai_core._opdef import OPS

# Traits that mark an op as having an effect beyond its results: such ops are never folded,
# merged or deleted. No dialect op has one today; the check keeps the passes honest when one
# (or a custom op) does.
IMPURE_TRAITS = frozenset({"impure", "side_effects"})

# Traits of ops whose results differ from one execution to the next (random draws): such an op
# may be removed when dead, but never folded or merged, and neither may an op whose regions
# or callee contain one.
NONDETERMINISTIC_TRAITS = frozenset({"random"})


def is_pure(op: Operation) -> bool:
    """True when ``op`` only computes its results (ops without a definition are not)."""
    opdef = OPS.get(op.name)
    return opdef is not None and not (opdef.traits & IMPURE_TRAITS)


def is_heavy(op: Operation) -> bool:
    """True for ops a rewrite must never duplicate: a contraction, a factorization or a
    transform (the ``heavy`` trait: ``conv``, ``batch_matmul``, ``invoke``, the FFTs and the
    factorizations), and every op with regions."""
    opdef = OPS.get(op.name)
    return bool(op.regions) or (opdef is not None and "heavy" in opdef.traits)


def is_deterministic(op: Operation, program: ProgramData | None = None,
                     memo: dict[int, bool] | None = None) -> bool:
    """True when ``op`` is pure and gives the same results for the same operands.

    Random ops are not, nor is an op with a random op anywhere in its regions or, for
    ``invoke``, in its callee graph (resolved in ``program``). ``memo`` caches the answer per
    graph across calls of one pass.
    """
    if not is_pure(op):
        return False
    if OPS[op.name].traits & NONDETERMINISTIC_TRAITS:
        return False
    memo = {} if memo is None else memo
    graphs = list(op.regions.values())
    if op.name == "coreai.invoke":
        callee = program.graphs.get(op.attributes["callee"]) if program is not None else None
        if callee is None:
            return False  # unknown callee: assume the worst
        graphs.append(callee)
    return all(_graph_is_deterministic(g, program, memo) for g in graphs)


def _graph_is_deterministic(graph: Graph, program: ProgramData | None,
                            memo: dict[int, bool]) -> bool:
    known = memo.get(id(graph))
    if known is None:
        memo[id(graph)] = True  # a recursive invoke adds nothing new while we look
        known = all(is_deterministic(o, program, memo) for o in graph.ops)
        memo[id(graph)] = known
    return known


def is_constant(v: Value) -> bool:
    """True when ``v`` is the result of a ``coreai.constant``."""
    return v.owner is not None and v.owner.name == "coreai.constant"


def at_most_one_dynamic(t: TensorType) -> bool:
    """A type whose shape is fixed by its element count (at most one unknown dimension)."""
    return sum(1 for d in t.shape if not isinstance(d, int)) <= 1
