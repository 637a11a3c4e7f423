"""The graph the search tools walk: nodes with ids, edges, depths and scopes.

:func:`create_graph_from_exported_program` makes one node per ``call_function`` FX node (id:
the node's name); :func:`create_graph_from_coreai_program` one node per op of a program's
graph (id: its position, see :mod:`.utils`). A node's depth is the length of the longest path
to it from a node without predecessors, so every node's inputs lie at smaller depths.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Generic, TypeVar

import torch
import torch.fx

from coreai_core import Program
from coreai_torch.debugging.utils import entry_graph, operation_ids

__all__ = ["ComputationGraph", "TGraph", "TNode", "create_graph_from_coreai_program",
           "create_graph_from_exported_program"]

TNode = TypeVar("TNode")
TGraph = TypeVar("TGraph")
TOP_SCOPE: tuple[int | None, int] = (None, 0)


class ComputationGraph(Generic[TNode, TGraph]):
    """Nodes in execution order with their predecessors, successors, depths and scopes."""

    OpID = int | str

    class Scope:
        """A region of the graph: ``(parent op id or None, region index)`` and its depth."""

        def __init__(self, scope_id: tuple[int | None, int], nesting_depth: int = 0):
            self.scope_id = scope_id
            self.nesting_depth = nesting_depth

        def __repr__(self) -> str:
            return f"Scope({self.scope_id}, depth={self.nesting_depth})"

    class Node:
        """One op or FX node: its id, the object it stands for, and its neighbours' ids."""

        def __init__(self, op_id: ComputationGraph.OpID, original_node: Any = None,
                     predecessors: list[ComputationGraph.OpID,] | None = None,
                     successors: list[ComputationGraph.OpID,] | None = None, depth: int = 0,
                     scope: ComputationGraph.Scope | None = None, sequence_index: int = 0):
            self.op_id = op_id
            self.original_node = original_node
            self.predecessors = list(predecessors or [])
            self.successors = list(successors or [])
            self.depth = depth
            self.scope = scope or ComputationGraph.Scope(TOP_SCOPE)
            self.sequence_index = sequence_index

        @property
        def scope_id(self) -> tuple[int | None, int]:
            return self.scope.scope_id

        @property
        def nesting_depth(self) -> int:
            return self.scope.nesting_depth

        def __repr__(self) -> str:
            return describe_node(self)

    def __init__(self, nodes: list[Node], original_graph: Any = None,
                 calculate_depths: bool = True):
        self.original_graph = original_graph
        self._nodes = list(nodes)
        self._by_id = {n.op_id: n for n in self._nodes}
        if len(self._by_id) != len(self._nodes):
            raise ValueError("ComputationGraph: node ids must be unique")
        if calculate_depths:
            for node in self._nodes:  # execution order: predecessors come first
                node.depth = max((self._by_id[p].depth + 1 for p in node.predecessors
                                  if p in self._by_id), default=0)

    def get_nodes(self) -> list[Node]:
        return list(self._nodes)

    def get_node_by_id(self, op_id: OpID) -> Node:
        try:
            return self._by_id[op_id]
        except KeyError:
            raise KeyError(f"no node with id {op_id!r} in the graph") from None

    def get_op_ids(self) -> list[OpID,]:
        return [n.op_id for n in self._nodes]

    def get_nodes_by_depth(self) -> dict[int, list[Node]]:
        levels: dict[int, list[ComputationGraph.Node]] = defaultdict(list)
        for n in self._nodes:
            levels[n.depth].append(n)
        return dict(sorted(levels.items()))

    def get_max_depth(self) -> int:
        return max((n.depth for n in self._nodes), default=0)

    def get_nodes_at_depth(self, depth: int) -> list[Node]:
        return [n for n in self._nodes if n.depth == depth]

    def get_subgraph(self, start_idx: int, end_idx: int) -> list[Node]:
        """The nodes at positions ``start_idx`` up to (excluding) ``end_idx``."""
        return self._nodes[start_idx:end_idx]

    def get_nodes_in_scope(self, scope_id: tuple[int | None, int]) -> list[Node]:
        return [n for n in self._nodes if n.scope_id == scope_id]

    def get_scopes(self) -> list[tuple[int | None, int]]:
        return list(dict.fromkeys(n.scope_id for n in self._nodes))

    def get_scope_hierarchy(self) -> dict[int, list[tuple[int | None, int]]]:
        out: dict[int, list[tuple[int | None, int]]] = defaultdict(list)
        for n in self._nodes:
            if n.scope_id not in out[n.nesting_depth]:
                out[n.nesting_depth].append(n.scope_id)
        return dict(out)

    def get_nested_nodes(self, parent_node: Node) -> list[Node]:
        """The nodes inside ``parent_node``'s regions."""
        return [n for n in self._nodes if n.scope_id[0] == parent_node.op_id]

    def __len__(self) -> int:
        return len(self._nodes)


def describe_node(node: ComputationGraph.Node) -> str:
    """A node as a reader wants it: FX node name and target, or op id, op name and line."""
    original = node.original_node
    if isinstance(original, torch.fx.Node):
        return f"{original.name} ({original.target})"
    name = getattr(original, "name", None)
    if name is None:
        return str(node.op_id)
    loc = getattr(original, "location", None)
    where = f" at {loc.file}:{loc.line}" if loc is not None and loc.file else ""
    return f"%{node.op_id} {name}{where}"


def create_graph_from_coreai_program(module: Program, entry_point: str,
                                     ) -> ComputationGraph[Any, Program]:
    """The graph of ``module``'s (a :class:`coreai_core.Program`) entry point ``entry_point``:
    one node per op, with the op as its ``original_node``."""
    graph = entry_graph(module, entry_point)
    ids = operation_ids(graph)
    producer = {r: ids[op] for op in graph.ops for r in op.results}
    nodes = []
    for op, i in ids.items():
        preds: list[ComputationGraph.OpID] = list(
            dict.fromkeys(producer[v] for v in op.operands if v in producer))
        nodes.append(ComputationGraph.Node(i, op, preds, sequence_index=i))
    by_id = {n.op_id: n for n in nodes}
    for n in nodes:
        for p in n.predecessors:
            by_id[p].successors.append(n.op_id)
    return ComputationGraph(nodes, module)


def create_graph_from_exported_program(program: torch.export.ExportedProgram,
                                       ) -> ComputationGraph[Any, Any]:
    """The graph of an exported program: one node per ``call_function`` FX node."""
    fx_nodes = [n for n in program.graph.nodes if n.op == "call_function"]
    names = {n.name for n in fx_nodes}
    nodes = [ComputationGraph.Node(
        n.name, n, [a.name for a in n.all_input_nodes if a.name in names],
        [u.name for u in n.users if u.name in names], sequence_index=i)
        for i, n in enumerate(fx_nodes)]
    return ComputationGraph(nodes, program)
