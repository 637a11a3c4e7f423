"""How a search walks a graph to find the first failing node.

A strategy hands out batches of nodes to check (:meth:`SearchStrategy.next_batch`), is told
each node's result (:meth:`SearchStrategy.update`) and ends with the failing nodes it found
first (:meth:`SearchStrategy.get_problematic_operations`).

- :class:`ExhaustiveStrategy` checks every node; the problematic ones are the failing nodes
  none of whose predecessors fails (where a failure starts).
- :class:`LevelOrderStrategy` checks whole depth levels (see :mod:`.graph`), a level chosen by
  its ``level_selector`` among those still in question: ``top_down`` from the inputs,
  ``bottom_up`` from the outputs, ``bisection`` halving the range, ``auto`` bisection for deep
  graphs. A failing level moves the search to shallower levels, a passing one to deeper
  levels, so the search assumes what NaN and inf do: a bad value reaches every later level.
  The result is the failing nodes of the shallowest failing level it checked.
"""

from __future__ import annotations

import enum
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from coreai_torch.debugging.graph import TOP_SCOPE, ComputationGraph

__all__ = ["ExhaustiveStrategy", "LevelOrderStrategy", "SearchStrategy", "TGraph", "TNode"]

logger = logging.getLogger(__name__)

TNode = TypeVar("TNode")
TGraph = TypeVar("TGraph")
Node = ComputationGraph.Node
# graphs deeper than this are bisected by ``auto``
AUTO_BISECTION_DEPTH = 8


class SearchStrategy(ABC, Generic[TNode, TGraph]):
    """The protocol of a search: batches out, results in, the first failures at the end."""

    class ValidationResult(enum.Enum):
        PASS = 1
        FAIL = 2
        UNKNOWN = 3
        SKIPPED = 4

    @dataclass
    class CategorizedResults:
        failed: list[ComputationGraph.Node]
        passed: list[ComputationGraph.Node]
        unknown: list[ComputationGraph.Node]
        skipped: list[ComputationGraph.Node] = field(default_factory=list)

    graph: ComputationGraph[TNode, TGraph]
    results: dict[ComputationGraph.OpID, SearchStrategy.ValidationResult]

    def _start(self, graph: ComputationGraph[TNode, TGraph]) -> None:
        self.graph = graph
        self.results = {}

    @abstractmethod
    def reset(self) -> None:
        """Forget every result: the search starts over."""

    @abstractmethod
    def next_batch(self) -> list[ComputationGraph.Node]:
        """The nodes to check next; empty when the search is over."""

    async def update(self, results: list[tuple[ComputationGraph.Node,
                                               SearchStrategy.ValidationResult]]) -> None:
        """Record the results of a batch."""
        for node, result in results:
            self.results[node.op_id] = result

    def categorized(self) -> SearchStrategy.CategorizedResults:
        out = SearchStrategy.CategorizedResults([], [], [], [])
        lists = {self.ValidationResult.FAIL: out.failed, self.ValidationResult.PASS: out.passed,
                 self.ValidationResult.UNKNOWN: out.unknown,
                 self.ValidationResult.SKIPPED: out.skipped}
        for node in self.graph.get_nodes():
            if node.op_id in self.results:
                lists[self.results[node.op_id]].append(node)
        return out

    def _first_failures(self, failed: list[ComputationGraph.Node]) -> list[ComputationGraph.Node]:
        bad = {n.op_id for n in failed}
        return [n for n in failed if not any(p in bad for p in n.predecessors)]

    def get_problematic_operations(self) -> list[ComputationGraph.Node]:
        """The failing nodes where a failure starts, in graph order."""
        return self._first_failures(self.categorized().failed)

    def get_unknown_operations(self) -> list[ComputationGraph.Node]:
        """The checked nodes whose values could not be read."""
        return self.categorized().unknown


class ExhaustiveStrategy(SearchStrategy[TNode, TGraph]):
    """Check every node, in one batch."""

    def __init__(self, graph: ComputationGraph[TNode, TGraph]):
        self._start(graph)
        self._handed_out = False

    def reset(self) -> None:
        self._start(self.graph)
        self._handed_out = False

    def next_batch(self) -> list[ComputationGraph.Node]:
        if self._handed_out:
            return []
        self._handed_out = True
        return self.graph.get_nodes()

    async def update(self, results: list[tuple[ComputationGraph.Node,
                                               SearchStrategy.ValidationResult]]) -> None:
        await super().update(results)

    def get_problematic_operations(self) -> list[ComputationGraph.Node]:
        return super().get_problematic_operations()

    def get_unknown_operations(self) -> list[ComputationGraph.Node]:
        return super().get_unknown_operations()


class LevelOrderStrategy(SearchStrategy[TNode, TGraph]):
    """Check depth levels in the order ``level_selector`` picks (an index into the levels
    still in question), ``batch_size`` nodes at a time."""

    def __init__(self, graph: ComputationGraph[TNode, TGraph],
                 level_selector: Callable[[list[list[ComputationGraph.Node]]], int],
                 batch_size: int = 10, initial_scope_id: tuple[int | None, int] | None = None):
        self._start(graph)
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = batch_size
        self.level_selector = level_selector
        scope = initial_scope_id if initial_scope_id is not None else TOP_SCOPE
        by_depth: dict[int, list[ComputationGraph.Node]] = {}
        for node in graph.get_nodes_in_scope(scope):
            by_depth.setdefault(node.depth, []).append(node)
        self._levels = [by_depth[d] for d in sorted(by_depth)]
        self.reset()

    def reset(self) -> None:
        self._start(self.graph)
        self._candidates = list(range(len(self._levels)))  # level indices still in question
        self._current: int | None = None
        self._pending: list[ComputationGraph.Node] = []
        self._first_failing: int | None = None

    @staticmethod
    def top_down(graph: ComputationGraph[TNode, TGraph], batch_size: int = 10,
                 initial_scope_id: tuple[int | None, int] | None = None,
                 ) -> LevelOrderStrategy[TNode, TGraph]:
        return LevelOrderStrategy(graph, lambda levels: 0, batch_size, initial_scope_id)

    @staticmethod
    def bottom_up(graph: ComputationGraph[TNode, TGraph], batch_size: int = 10,
                  initial_scope_id: tuple[int | None, int] | None = None,
                  ) -> LevelOrderStrategy[TNode, TGraph]:
        return LevelOrderStrategy(graph, lambda levels: len(levels) - 1, batch_size,
                                  initial_scope_id)

    @staticmethod
    def bisection(graph: ComputationGraph[TNode, TGraph], batch_size: int = 10,
                  initial_scope_id: tuple[int | None, int] | None = None,
                  ) -> LevelOrderStrategy[TNode, TGraph]:
        return LevelOrderStrategy(graph, lambda levels: (len(levels) - 1) // 2, batch_size,
                                  initial_scope_id)

    @staticmethod
    def auto(graph: ComputationGraph[TNode, TGraph], batch_size: int = 10,
             initial_scope_id: tuple[int | None, int] | None = None,
             ) -> LevelOrderStrategy[TNode, TGraph]:
        if graph.get_max_depth() + 1 > AUTO_BISECTION_DEPTH:
            return LevelOrderStrategy.bisection(graph, batch_size, initial_scope_id)
        return LevelOrderStrategy.top_down(graph, batch_size, initial_scope_id)

    def next_batch(self) -> list[ComputationGraph.Node]:
        if not self._pending and self._current is None and self._candidates:
            pick = self.level_selector([self._levels[i] for i in self._candidates])
            if not 0 <= pick < len(self._candidates):
                raise IndexError(f"level_selector chose level {pick} of "
                                 f"{len(self._candidates)}")
            self._current = self._candidates[pick]
            self._pending = list(self._levels[self._current])
        batch, self._pending = self._pending[:self.batch_size], self._pending[self.batch_size:]
        return batch

    async def update(self, results: list[tuple[ComputationGraph.Node,
                                               SearchStrategy.ValidationResult]]) -> None:
        await super().update(results)
        if self._current is None or self._pending:
            return
        level = self._current
        failed = any(self.results.get(n.op_id) is self.ValidationResult.FAIL
                     for n in self._levels[level])
        if failed:
            self._first_failing = level
            self._candidates = [i for i in self._candidates if i < level]
        else:
            self._candidates = [i for i in self._candidates if i > level]
        logger.debug("level %d %s; %d levels left", level, "fails" if failed else "passes",
                     len(self._candidates))
        self._current = None

    def get_problematic_operations(self) -> list[ComputationGraph.Node]:
        if self._first_failing is None:
            return []
        return self._first_failures([
            n for n in self._levels[self._first_failing]
            if self.results.get(n.op_id) is self.ValidationResult.FAIL])

    def get_unknown_operations(self) -> list[ComputationGraph.Node]:
        return super().get_unknown_operations()
