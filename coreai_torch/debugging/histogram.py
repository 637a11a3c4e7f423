"""How many ops of each kind a program has, composites counted inside and as calls.

:func:`operation_histogram` counts the ops of every entry graph (nested regions included);
each composite that entry graphs ``coreai.invoke`` is a :class:`CompositeHistogram` (its own
ops' counts, and how often it is called). ``write_summary(folded=True)`` counts a call as
one op; unfolded, a call counts as the composite's ops.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any, TextIO

from coreai_core import Graph, Program
from coreai_torch.debugging.table_writer import write_table

__all__ = ["CompositeHistogram", "OperationHistogram", "operation_histogram"]

INVOKE = "coreai.invoke"


@dataclass(frozen=True)
class CompositeHistogram:
    """A composite: its label (op name), graph symbol, calls, and the ops of its graph."""

    label: str
    symbol: str
    invocations: int
    histogram: OperationHistogram

    @property
    def size(self) -> int:
        return self.histogram.size

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "symbol": self.symbol, "invocations": self.invocations,
                "histogram": self.histogram.to_dict()}


@dataclass(frozen=True)
class OperationHistogram:
    """Op name -> count, and the composites called."""

    counts: dict[str, int]
    composites: tuple[CompositeHistogram, ...]

    @property
    def size(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "composites": [c.to_dict() for c in self.composites]}

    def unfolded(self) -> Counter[str]:
        """The counts with every composite call replaced by the composite's ops."""
        out = Counter(self.counts)
        for c in self.composites:
            out[INVOKE] -= c.invocations
            for name, n in c.histogram.unfolded().items():
                out[name] += n * c.invocations
        return Counter({k: v for k, v in out.items() if v > 0})

    def write_summary(self, output: TextIO | None = None, *, folded: bool = False) -> None:
        counts = Counter(self.counts) if folded else self.unfolded()
        rows = [(name, n) for name, n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))]
        write_table(output or sys.stdout, ["op", "count"], rows,
                    title=f"{sum(counts.values())} ops"
                    + (f", {len(self.composites)} composites called" if self.composites else ""))
        for c in self.composites:
            (output or sys.stdout).write(f"  composite {c.label} (@{c.symbol}): "
                                         f"{c.invocations} calls, {c.size} ops each\n")


def _histogram(program: Program, graph: Graph, seen: tuple[str, ...]) -> OperationHistogram:
    counts: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    for op in graph.walk():
        counts[op.name] += 1
        callee = op.attributes.get("callee") if op.name == INVOKE else None
        if isinstance(callee, str) and callee in program.composites and callee not in seen:
            calls[callee] += 1
    composites = tuple(
        CompositeHistogram(program.graphs[name].composite.name,  # type: ignore[union-attr]
                           name, n, _histogram(program, program.graphs[name], (*seen, name)))
        for name, n in calls.items())
    return OperationHistogram(dict(counts), composites)


def operation_histogram(program: Program) -> OperationHistogram:
    """The op counts of ``program``'s entry graphs (see the module docstring)."""
    counts: Counter[str] = Counter()
    calls: dict[str, CompositeHistogram] = {}
    for name, graph in program.graphs.items():
        if name in program.composites:
            continue
        h = _histogram(program, graph, ())
        counts.update(h.counts)
        for c in h.composites:
            prior = calls.get(c.symbol)
            calls[c.symbol] = (c if prior is None else CompositeHistogram(
                c.label, c.symbol, prior.invocations + c.invocations, c.histogram))
    return OperationHistogram(dict(counts), tuple(calls.values()))
