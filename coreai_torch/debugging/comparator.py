"""Compare torch with Core AI node by node.

A :class:`Comparator` pairs the nodes of two graphs through an id map (FX node name -> op id)
and checks each pair's values. :meth:`Comparator.compare_with_tolerance` on an exported
program and this project's converted program is :func:`coreai_torch.verify.find_first_divergence`
(every intermediate that maps to an FX node, composites and externalized modules looked into)
reported as Apple's result: ``failed_nodes`` holds the failing ``(source, target)`` pairs in
graph order, the first divergence first. :meth:`Comparator.compare` runs a check of yours.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
import torch

from coreai_core import Program
from coreai_torch.debugging.graph import (
    ComputationGraph,
    create_graph_from_coreai_program,
    create_graph_from_exported_program,
)
from coreai_torch.debugging.inspector import (
    CachingInspector,
    Inspector,
    RuntimeInspector,
    TorchFXInspector,
)
from coreai_torch.debugging.search_strategy import SearchStrategy
from coreai_torch.debugging.utils import (
    entry_graph,
    needs_device_runtime,
    op_kind,
    unwrap_inputs,
)
from coreai_torch.verify import compare as compare_arrays
from coreai_torch.verify import find_first_divergence

__all__ = ["Comparator", "DebugGraph", "TSourceGraph", "TSourceNode", "TTargetGraph",
           "TTargetNode", "create_comparator_for_programs", "torch_to_op_ids"]

logger = logging.getLogger(__name__)

TSourceNode = TypeVar("TSourceNode")
TSourceGraph = TypeVar("TSourceGraph")
TTargetNode = TypeVar("TTargetNode")
TTargetGraph = TypeVar("TTargetGraph")
# ops that move data without computing: a mismatch there repeats one of their input
DEFAULT_EXCLUDED = frozenset({"aten.permute", "aten.view", "aten.transpose", "aten.reshape"})
Arrays = list[np.ndarray | None] | None


class DebugGraph(Generic[TSourceNode, TSourceGraph]):
    """A graph and the inspector that reads its values."""

    def __init__(self, graph: ComputationGraph[TSourceNode, TSourceGraph], inspector: Inspector):
        self.graph = graph
        self.inspector = inspector


def torch_to_op_ids(program: Program, entry_point: str = "main") -> dict[str, int]:
    """FX node name -> id of the first op whose result carries it (the converter names op
    results after the FX node they compute; ``name#k`` for output ``k``)."""
    graph = entry_graph(program, entry_point)
    out: dict[str, int] = {}
    for i, op in enumerate(graph.ops):
        for r in op.results:
            if r.name:
                out.setdefault(r.name.split("#")[0], i)
    return out


class Comparator(Generic[TSourceNode, TSourceGraph, TTargetNode, TTargetGraph]):
    """Pairs source and target nodes by ``id_map`` and compares their values.

    Every pair is compared: one run of each side yields all values, so ``strategy`` (taken
    for Apple's signature) does not narrow the search; ``show_progress`` is likewise taken
    and quiet."""

    class Status(enum.Enum):
        PASS = 1
        FAIL = 2
        UNKNOWN = 3
        NO_TARGET_VALUE = 4
        EXCLUDED = 5
        NOT_MAPPED = 6
        SHAPE_AMBIGUOUS = 7

    @dataclass
    class BatchResult:
        pass_count: int
        fail_count: int
        unknown_count: int
        statuses: list[tuple[Any, Any, Comparator.Status, float | None]]
        shape_ambiguous_count: int = 0

    @dataclass
    class Result:
        """Every pair's status and largest difference, and the failing pairs (graph order)."""

        failed_nodes: list[tuple[Any, Any]]
        unknown_nodes: list[tuple[Any, Any]]
        op_statuses: list[tuple[Any, Any, Comparator.Status, float | None]]
        explanations: dict[Any, Any] = field(default_factory=dict)

        @property
        def compared(self) -> int:
            return sum(s in (Comparator.Status.PASS, Comparator.Status.FAIL)
                       for _, _, s, _ in self.op_statuses)

        @property
        def pass_count(self) -> int:
            return sum(s is Comparator.Status.PASS for _, _, s, _ in self.op_statuses)

        @property
        def verified_fraction(self) -> float:
            return self.pass_count / len(self.op_statuses) if self.op_statuses else 0.0

        def nodes_with_status(self, *statuses: Comparator.Status) -> list[tuple[Any, Any]]:
            return [(s, t) for s, t, st, _ in self.op_statuses if st in statuses]

        @property
        def reportable_nodes(self) -> list[tuple[Any, Any]]:
            """The failing and unreadable pairs."""
            return self.nodes_with_status(Comparator.Status.FAIL, Comparator.Status.UNKNOWN,
                                          Comparator.Status.NO_TARGET_VALUE)

        def max_diff_for(self, source_node: Any) -> float | None:
            return next((d for s, _, _, d in self.op_statuses if s is source_node), None)

        def to_dict(self) -> dict[str, Any]:
            return {"compared": self.compared, "passed": self.pass_count,
                    "failed": [[str(s), str(t)] for s, t in self.failed_nodes],
                    "statuses": [[str(s), str(t), st.name, d]
                                 for s, t, st, d in self.op_statuses]}

    def __init__(self, source: DebugGraph[TSourceNode, TSourceGraph],
                 target: DebugGraph[TTargetNode, TTargetGraph],
                 id_map: dict[int | str, int | str],
                 strategy: SearchStrategy[TSourceNode, TSourceGraph] | None = None,
                 show_progress: bool = True, exclude_ops: frozenset[str] = DEFAULT_EXCLUDED):
        self.source = source
        self.target = target
        self.id_map = id_map
        self.strategy = strategy
        self.show_progress = show_progress
        self.exclude_ops = frozenset(op_kind(k) for k in exclude_ops)

    def _excluded(self, node: ComputationGraph.Node) -> bool:
        target = getattr(node.original_node, "target", None)
        return target is not None and op_kind(str(target)) in self.exclude_ops

    def _target_node(self, source_id: Any) -> ComputationGraph.Node | None:
        target_id = self.id_map.get(source_id)
        if target_id is None:
            return None
        try:
            return self.target.graph.get_node_by_id(target_id)
        except KeyError:
            return None

    def _result(self, statuses: list[tuple[Any, Any, Comparator.Status, float | None]],
                ) -> Comparator.Result:
        failed = [(s, t) for s, t, st, _ in statuses if st is Comparator.Status.FAIL]
        unknown = [(s, t) for s, t, st, _ in statuses
                   if st in (Comparator.Status.UNKNOWN, Comparator.Status.NO_TARGET_VALUE)]
        return Comparator.Result(failed, unknown, statuses)

    async def compare(self, check_fn: Callable[[Any, Any, Arrays, Arrays], Comparator.Status],
                      inputs: Any) -> Comparator.Result:
        """``check_fn(source_node, target_node, source_values, target_values)`` for every
        mapped pair; returns each pair's status."""
        pairs: list[tuple[ComputationGraph.Node, ComputationGraph.Node]] = []
        statuses: list[tuple[Any, Any, Comparator.Status, float | None]] = []
        for node in self.source.graph.get_nodes():
            target = self._target_node(node.op_id)
            if self._excluded(node):
                statuses.append((node, target, Comparator.Status.EXCLUDED, None))
            elif target is None:
                statuses.append((node, None, Comparator.Status.NOT_MAPPED, None))
            else:
                pairs.append((node, target))
        source_values = await self.source.inspector.get_intermediates_for_ops(
            [s.op_id for s, _ in pairs], inputs)
        target_values = await self.target.inspector.get_intermediates_for_ops(
            [t.op_id for _, t in pairs], inputs)
        for s, t in pairs:
            got = target_values.get(t.op_id)
            status = (Comparator.Status.NO_TARGET_VALUE if got is None
                      else check_fn(s, t, source_values.get(s.op_id), got))
            statuses.append((s, t, status, _max_diff(source_values.get(s.op_id), got)))
        order = {n.op_id: i for i, n in enumerate(self.source.graph.get_nodes())}
        statuses.sort(key=lambda x: order.get(x[0].op_id, 0))
        return self._result(statuses)

    async def compare_with_tolerance(self, inputs: Any, rtol: float = 1e-05, atol: float = 0.001,
                                     exclude_multi_output: bool = False) -> Comparator.Result:
        """Compare every pair within ``atol + rtol * |torch|`` (NaN matches NaN)."""
        ep = self.source.graph.original_graph
        program = self.target.graph.original_graph
        if isinstance(ep, torch.export.ExportedProgram) and isinstance(program, Program):
            return self._from_divergence(ep, program, inputs, rtol, atol, exclude_multi_output)

        def within(s: Any, t: Any, want: Arrays, got: Arrays) -> Comparator.Status:
            if want is None or got is None:
                return Comparator.Status.UNKNOWN
            if exclude_multi_output and len(want) > 1:
                return Comparator.Status.EXCLUDED
            ok = all(a is not None and b is not None
                     and compare_arrays("", b, a, rtol, atol).passed
                     for a, b in zip(want, got, strict=False))
            return Comparator.Status.PASS if ok else Comparator.Status.FAIL

        return await self.compare(within, inputs)

    def _from_divergence(self, ep: torch.export.ExportedProgram, program: Program, inputs: Any,
                         rtol: float, atol: float, exclude_multi_output: bool,
                         ) -> Comparator.Result:
        entry = getattr(self.target.inspector, "entry_point", "main")
        report = find_first_divergence(ep, program, unwrap_inputs(inputs), rtol=rtol,
                                       atol=atol, entrypoint=entry)
        statuses: list[tuple[Any, Any, Comparator.Status, float | None]] = []
        seen = set()
        for row in report.nodes:
            name = row.node.split("#")[0]
            try:
                source = self.source.graph.get_node_by_id(name)
            except KeyError:
                continue  # a value inside an externalized module: no node of this graph
            target = self._target_node(name)
            if self._excluded(source) or (exclude_multi_output and "#" in row.node):
                status = Comparator.Status.EXCLUDED
            else:
                status = Comparator.Status.PASS if row.passed else Comparator.Status.FAIL
            seen.add(name)
            statuses.append((source, target, status, row.max_abs))
        for node in self.source.graph.get_nodes():
            if node.op_id not in seen:
                statuses.append((node, self._target_node(node.op_id),
                                 Comparator.Status.NOT_MAPPED, None))
        order = {n.op_id: i for i, n in enumerate(self.source.graph.get_nodes())}
        statuses.sort(key=lambda x: order[x[0].op_id])
        return self._result(statuses)


def _max_diff(want: Arrays, got: Arrays) -> float | None:
    if not want or not got:
        return None
    diffs = [compare_arrays("", b, a, 0.0, 0.0).max_abs
             for a, b in zip(want, got, strict=False) if a is not None and b is not None]
    return max(diffs) if diffs else None


async def create_comparator_for_programs(
        source_program: torch.export.ExportedProgram, target_program: Program,
        target_entry_point: str, strategy: SearchStrategy[Any, Any] | None = None,
        use_caching: bool = True, exclude_ops: frozenset[str] = DEFAULT_EXCLUDED,
        specialization_options: Any = None) -> Comparator[Any, Any, Any, Any]:
    """A comparator of an exported program (torch) with its converted program (this
    project's runtime), nodes paired by the FX node names the converter kept."""
    if specialization_options is not None:
        raise needs_device_runtime("create_comparator_for_programs(specialization_options"
                                   "=...) (compiling for a device)")
    if not isinstance(target_program, Program):
        raise TypeError("create_comparator_for_programs: target_program is this project's "
                        f"Program (TorchConverter().to_coreai()), got "
                        f"{type(target_program).__name__}")
    source_inspector: Inspector = TorchFXInspector(source_program)
    target_inspector: Inspector = RuntimeInspector(target_program, target_entry_point)
    if use_caching:
        source_inspector = CachingInspector(source_inspector)
    source = DebugGraph(create_graph_from_exported_program(source_program), source_inspector)
    target = DebugGraph(create_graph_from_coreai_program(target_program, target_entry_point),
                        target_inspector)
    id_map: dict[int | str, int | str] = {
        k: v for k, v in torch_to_op_ids(target_program, target_entry_point).items()}
    return Comparator(source, target, id_map, strategy, exclude_ops=exclude_ops)
