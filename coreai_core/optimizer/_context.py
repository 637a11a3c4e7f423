"""Program-wide bookkeeping of one pass run: statistics and weight reference counts."""

from __future__ import annotations

from coreai_core._ir import Operation, ProgramData, WeightRef
from coreai_core.optimizer._pass import PassStats, RewriteObserver
from coreai_core.optimizer._program_walk import weight_refs


class PassContext:
    """Program-wide bookkeeping of one pass run: statistics and weight reference counts."""

    def __init__(self, program: ProgramData, observer: RewriteObserver | None = None) -> None:
        self.program = program
        self.observer = observer
        self.stats = PassStats()
        self.refs = weight_refs(program)
        self.released: set[str] = set()
        self.created: set[str] = set()
        # weight made from another one's data -> that weight (Rewriter.derived_constant)
        self.derived_from: dict[str, str] = {}
        # the constant op that references a weight created in this run
        self.created_by: dict[str, Operation] = {}

    def finish(self) -> PassStats:
        """Drop weights this run made unreferenced; invalidate run plans if anything changed.

        A weight derived from a dropped one takes over its name (and its place in the
        program's weights), so a folded ``conv.weight`` is still called ``conv.weight``.
        """
        dropped = [name for name in sorted(self.released)
                   if name in self.program.weights and self.refs.get(name, 0) <= 0]
        for name in self._adopt_names(set(dropped)):
            dropped.remove(name)
        for name in dropped:
            del self.program.weights[name]
            self.program.weight_types.pop(name, None)
            if name in self.created:  # made and dropped again: no net change
                self.stats.weights_added -= 1
            else:
                self.stats.weights_removed += 1
        if self.stats.changed:
            self.program.invalidate()
        return self.stats

    def _adopt_names(self, dropped: set[str]) -> list[str]:
        """Move each live derived weight into the name of the dropped weight it came from."""
        adopted: list[str] = []
        for new, source in self.derived_from.items():
            root = source
            while root in self.derived_from and root in dropped:  # a chain of folds
                root = self.derived_from[root]
            op = self.created_by.get(new)
            if root not in dropped or root in adopted or self.refs.get(new, 0) <= 0 \
                    or op is None:
                continue
            # the source is unreferenced: its slot (and name) can hold the new data
            self.program.weights[root] = self.program.weights.pop(new)
            self.program.weight_types[root] = self.program.weight_types.pop(new)
            op.attributes = {**op.attributes, "value": WeightRef(root)}
            self.refs[root], self.refs[new] = self.refs[new], 0
            self.stats.weights_added -= 1  # a replacement, not an addition and a removal
            adopted.append(root)
        return adopted
