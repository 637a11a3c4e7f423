"""The pass protocol: what an optimizer pass is, what it reports, and who may watch it."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import attrs

from coreai_core._ir import Operation, ProgramData, Value


@attrs.define
class PassStats:
    """What one pass run did: ops removed, added and rewritten, weights removed and added."""

    removed: int = 0
    added: int = 0
    rewritten: int = 0
    weights_removed: int = 0
    weights_added: int = 0

    @property
    def changed(self) -> bool:
        return any(attrs.astuple(self))

    def __iadd__(self, other: PassStats) -> PassStats:
        for f in attrs.fields(PassStats):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self


@runtime_checkable
class Pass(Protocol):
    """An optimizer pass: a ``name`` and ``run(program)`` editing it in place.

    ``run`` returns the :class:`PassStats` of what it changed (all zero when nothing did) and
    must call ``program.invalidate()`` when it edited a graph.
    """

    name: str

    def run(self, program: ProgramData) -> PassStats: ...


class RewriteObserver(Protocol):
    """Watches the rewrites of one pass run (translation validation bisects with it).

    ``visiting(op)`` is asked before each op is visited: False leaves the op unvisited (a
    budget that stops a pass after a number of visits); ``rewrote(op, new)`` hears of each
    replacement a visit returned.
    """

    def visiting(self, op: Operation) -> bool: ...

    def rewrote(self, op: Operation, new: list[Value]) -> None: ...
