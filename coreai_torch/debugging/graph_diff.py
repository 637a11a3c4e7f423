"""Structural differences between two graphs: exported programs, or Core AI programs.

Built on :func:`.graph_match.align`: the diff lists the node pairs, the modified pairs (same
place, different label), the nodes and edges found on one side only, and a summary;
``is_isomorphic`` is True when nothing is unpaired or modified (the two graphs are the same
up to node ids). :func:`op_id_alignment` maps op ids of a program before and after a rewrite
(``optimize()``), the basis of :mod:`.timing_diff`.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, TextIO

import networkx as nx  # type: ignore[import-untyped]
import torch

from coreai_core import Program
from coreai_torch.debugging.graph_match import (
    UNSTABLE_ATTRIBUTES,
    Ambiguity,
    WeightPolicy,
    align,
    exported_program_graph,
    program_graph,
)
from coreai_torch.debugging.utils import entry_graph

__all__ = ["GraphDiff", "GraphDiffSummary", "OpDiffType", "OpIdAlignment",
           "compute_coreai_program_diff", "compute_exported_program_diff", "compute_graph_diff",
           "compute_per_graph_diff", "format_multi_graph_diff", "op_id_alignment", "write_diff"]


class OpDiffType(enum.Enum):
    ALIGNED = "aligned"
    MODIFIED = "modified"
    REMOVED = "removed"
    ADDED = "added"


@dataclass
class GraphDiffSummary:
    source_node_count: int
    target_node_count: int
    source_edge_count: int
    target_edge_count: int
    mapped_node_count: int = 0
    modified_node_count: int = 0
    unmapped_source_node_count: int = 0
    unmapped_target_node_count: int = 0
    unmapped_source_edge_count: int = 0
    unmapped_target_edge_count: int = 0
    ambiguous_node_count: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class GraphDiff:
    is_isomorphic: bool
    source_to_target_mapping: dict[int, int]
    target_to_source_mapping: dict[int, int]
    modified_node_pairs: list[tuple[int, int]]
    unmapped_source_nodes: list[int]
    unmapped_target_nodes: list[int]
    unmapped_source_edges: list[tuple[int, int]]
    unmapped_target_edges: list[tuple[int, int]]
    summary: GraphDiffSummary
    source_graph: nx.DiGraph
    target_graph: nx.DiGraph
    weights: WeightPolicy = WeightPolicy.IGNORE
    ambiguity: Ambiguity = field(default_factory=Ambiguity)
    ignore_attributes: frozenset[str] = UNSTABLE_ATTRIBUTES

    def to_dict(self) -> dict[str, Any]:
        return {"is_isomorphic": self.is_isomorphic, "summary": self.summary.to_dict(),
                "mapping": {str(k): v for k, v in self.source_to_target_mapping.items()},
                "modified": [list(p) for p in self.modified_node_pairs],
                "removed": self.unmapped_source_nodes, "added": self.unmapped_target_nodes,
                "removed_edges": [list(e) for e in self.unmapped_source_edges],
                "added_edges": [list(e) for e in self.unmapped_target_edges],
                "weights": self.weights.value, "ambiguity": self.ambiguity.to_dict()}


def _unmapped_edges(graph: nx.DiGraph, other: nx.DiGraph, mapping: dict[int, int],
                    ) -> list[tuple[int, int]]:
    return [(u, v) for u, v in graph.edges
            if u not in mapping or v not in mapping or not other.has_edge(mapping[u], mapping[v])]


def compute_graph_diff(source_graph: nx.DiGraph, target_graph: nx.DiGraph, *,
                       weights: WeightPolicy = WeightPolicy.IGNORE,
                       ignore_attributes: Collection[str] = UNSTABLE_ATTRIBUTES) -> GraphDiff:
    """The diff of two graphs made by :mod:`.graph_match`'s builders."""
    a = align(source_graph, target_graph, weights, ignore_attributes)
    reverse = {t: s for s, t in a.mapping.items()}
    lost = _unmapped_edges(source_graph, target_graph, a.mapping)
    gained = _unmapped_edges(target_graph, source_graph, reverse)
    summary = GraphDiffSummary(
        source_graph.number_of_nodes(), target_graph.number_of_nodes(),
        source_graph.number_of_edges(), target_graph.number_of_edges(), len(a.mapping),
        len(a.modified), len(a.removed), len(a.added), len(lost), len(gained),
        a.ambiguity.count)
    iso = not (a.removed or a.added or a.modified or lost or gained)
    return GraphDiff(iso, dict(a.mapping), reverse, list(a.modified), list(a.removed),
                     list(a.added), lost, gained, summary, source_graph, target_graph, weights,
                     a.ambiguity, frozenset(ignore_attributes))


def _describe(graph: nx.DiGraph, node: int) -> str:
    d = graph.nodes[node]
    if d["kind"] == "op":
        name = d.get("name")
        return f"{name or '%' + str(node)} {d['op_name']} -> {d['value_type']}"
    return f"{d['kind']} {d['index']!r} {d['value_type']}"


def _diff_lines(diff: GraphDiff, source_graph: nx.DiGraph, target_graph: nx.DiGraph,
                indent_size: int, max_items: int | None) -> list[str]:
    pad = " " * indent_size
    s = diff.summary
    lines = [f"graphs {'isomorphic' if diff.is_isomorphic else 'differ'}: "
             f"{s.source_node_count} -> {s.target_node_count} nodes, "
             f"{s.mapped_node_count} paired, {s.modified_node_count} modified, "
             f"{s.unmapped_source_node_count} removed, {s.unmapped_target_node_count} added, "
             f"{s.unmapped_source_edge_count} edges removed, "
             f"{s.unmapped_target_edge_count} edges added"]

    def section(title: str, items: list[str]) -> None:
        if not items:
            return
        lines.append(f"{pad}{title} ({len(items)}):")
        shown = items if max_items is None else items[:max_items]
        lines.extend(f"{pad * 2}{x}" for x in shown)
        if len(shown) < len(items):
            lines.append(f"{pad * 2}... {len(items) - len(shown)} more")

    section("modified", [f"{_describe(source_graph, a)}  =>  {_describe(target_graph, b)}"
                         for a, b in diff.modified_node_pairs])
    section("removed", [_describe(source_graph, n) for n in diff.unmapped_source_nodes])
    section("added", [_describe(target_graph, n) for n in diff.unmapped_target_nodes])
    return lines


def write_diff(diff: GraphDiff, source_graph: nx.DiGraph, target_graph: nx.DiGraph, *,
               output: TextIO | None = None, indent_size: int = 2,
               max_items: int | None = None) -> None:
    """Print the diff: a summary line, then the modified, removed and added nodes."""
    out = output or sys.stdout
    out.write("\n".join(_diff_lines(diff, source_graph, target_graph, indent_size, max_items))
              + "\n")


def compute_coreai_program_diff(source_program: Program, target_program: Program, *,
                                entry_point: str | None = "main",
                                weights: WeightPolicy = WeightPolicy.IGNORE,
                                ignore_attributes: Collection[str] = UNSTABLE_ATTRIBUTES,
                                ) -> GraphDiff:
    """The diff of one graph of two Core AI programs (the only graph when ``entry_point`` is
    None)."""
    name = entry_graph(source_program, entry_point).name
    return compute_graph_diff(program_graph(source_program, name),
                              program_graph(target_program, name), weights=weights,
                              ignore_attributes=ignore_attributes)


def compute_per_graph_diff(source_program: Program, target_program: Program, *,
                           weights: WeightPolicy = WeightPolicy.IGNORE,
                           ignore_attributes: Collection[str] = UNSTABLE_ATTRIBUTES,
                           ) -> list[tuple[str, GraphDiff | None]]:
    """The diff of every graph by name (None for a graph only one program has)."""
    names = list(dict.fromkeys([*source_program.graphs, *target_program.graphs]))
    out: list[tuple[str, GraphDiff | None]] = []
    for name in names:
        if name in source_program.graphs and name in target_program.graphs:
            out.append((name, compute_coreai_program_diff(
                source_program, target_program, entry_point=name, weights=weights,
                ignore_attributes=ignore_attributes)))
        else:
            out.append((name, None))
    return out


def format_multi_graph_diff(results: list[tuple[str, GraphDiff | None]], *,
                            indent_size: int = 2, max_items: int | None = None) -> str:
    """:func:`compute_per_graph_diff`'s result as text, one section per graph."""
    lines = []
    for name, diff in results:
        if diff is None:
            lines.append(f"@{name}: in one program only")
            continue
        body = _diff_lines(diff, diff.source_graph, diff.target_graph, indent_size, max_items)
        lines.append(f"@{name}: {body[0]}")
        lines.extend(" " * indent_size + x for x in body[1:])
    return "\n".join(lines)


def compute_exported_program_diff(source_program: torch.export.ExportedProgram,
                                  target_program: torch.export.ExportedProgram, *,
                                  ignore_attributes: Collection[str] = UNSTABLE_ATTRIBUTES,
                                  ) -> GraphDiff:
    """The diff of two exported programs' FX graphs."""
    return compute_graph_diff(exported_program_graph(source_program),
                              exported_program_graph(target_program),
                              ignore_attributes=ignore_attributes)


@dataclass
class OpIdAlignment:
    """Op id before -> op id after, and the ops modified, removed and added."""

    mapping: dict[int, int] = field(default_factory=dict)
    modified: set[int] = field(default_factory=set)
    removed: list[int] = field(default_factory=list)
    added: list[int] = field(default_factory=list)
    identical: bool = False
    ambiguity: Ambiguity = field(default_factory=Ambiguity)

    def to_dict(self) -> dict[str, Any]:
        return {"mapping": {str(k): v for k, v in self.mapping.items()},
                "modified": sorted(self.modified), "removed": self.removed,
                "added": self.added, "identical": self.identical,
                "ambiguity": self.ambiguity.to_dict()}


def op_id_alignment(before: Program, after: Program, entry_point: str = "main", *,
                    weights: WeightPolicy = WeightPolicy.IGNORE,
                    ignore_attributes: Collection[str] = UNSTABLE_ATTRIBUTES) -> OpIdAlignment:
    """How the ops of ``entry_point`` moved from ``before`` to ``after`` (op ids)."""
    sg, tg = program_graph(before, entry_point), program_graph(after, entry_point)
    a = align(sg, tg, weights, ignore_attributes)

    def is_op(g: nx.DiGraph, n: int) -> bool:
        return bool(g.nodes[n]["kind"] == "op")

    mapping = {s: t for s, t in a.mapping.items() if is_op(sg, s) and is_op(tg, t)}
    modified = {s for s, _ in a.modified if is_op(sg, s)}
    removed = [n for n in a.removed if is_op(sg, n)]
    added = [n for n in a.added if is_op(tg, n)]
    return OpIdAlignment(mapping, modified, removed, added,
                         not (modified or removed or added), a.ambiguity)
