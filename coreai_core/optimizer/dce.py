"""Dead-code elimination: drop pure ops whose results nothing uses, then unused weights.

A graph's outputs and state outputs are its roots; an op is live if it is impure or one of its
results is used by a live op. Regions of live ops are cleaned the same way (region inputs and
outputs are their op's interface and stay). Graph inputs are never removed: they are the
program's signature.

Assumes that an op without an effect trait (``impure``, ``side_effects``) has no effect beyond
its results; ops without a definition count as impure and stay.
"""

from __future__ import annotations

from coreai_core._ir import Graph, ProgramData
from coreai_core.optimizer._pass import PassStats
from coreai_core.optimizer._predicates import is_pure
from coreai_core.optimizer._program_walk import drop_unreferenced_weights, weight_refs


def eliminate_dead_ops(graph: Graph) -> int:
    """Remove dead ops from ``graph`` and its live regions; return how many were removed."""
    live: set[int] = {id(v) for v in (*graph.output_values.values(),
                                      *graph.state_outputs.values())}
    kept = []
    removed = 0
    for op in reversed(graph.ops):
        if is_pure(op) and not any(id(r) in live for r in op.results):
            removed += 1 + sum(1 for r in op.regions.values() for _ in r.walk())
            continue
        kept.append(op)
        live.update(id(v) for v in op.operands)
        for region in op.regions.values():
            removed += eliminate_dead_ops(region)
    if removed:
        kept.reverse()
        graph.ops = kept
    return removed


class DCEPass:
    """Remove dead ops (also inside regions) and weights no constant references."""

    name = "dce"

    def run(self, program: ProgramData) -> PassStats:
        """Run on every entrypoint; return the ops and weights removed."""
        stats = PassStats()
        for g in program.graphs.values():
            stats.removed += eliminate_dead_ops(g)
        stats.weights_removed = drop_unreferenced_weights(program, weight_refs(program))
        if stats.changed:
            program.invalidate()
        return stats

    def __repr__(self) -> str:
        return "DCEPass()"
