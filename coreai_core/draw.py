"""Pictures of programs: Graphviz dot and Mermaid text, optional SVG rendering.

Ops are labelled with their name and result types. Large programs can be collapsed by
module path: with ``collapse=k`` every group of ops whose location shares the first ``k``
components of the nn.Module path is drawn as one node ("layers.0 (37 ops)").
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator

import attrs

from coreai_core._ir import Graph, Operation, ProgramData

__all__ = ["render_svg", "to_dot", "to_mermaid"]


@attrs.frozen
class _Node:
    key: str
    label: str
    group: str | None


def _group(op: Operation, collapse: int | None) -> str | None:
    path = op.location.module_path
    if not path or collapse is None:
        return None
    return ".".join(path.split(".")[:collapse])


def _nodes_and_edges(graph: Graph, collapse: int | None,
                     ) -> tuple[list[_Node], list[tuple[str, str, str]]]:
    owner: dict[int, str] = {}
    nodes: list[_Node] = []
    counts: dict[str, int] = {}
    for name, v in {**graph.inputs, **graph.state_inputs}.items():
        key = f"in_{len(nodes)}"
        nodes.append(_Node(key, f"{name}\\n{v.type}", None))
        owner[id(v)] = key
    group_keys: dict[str, str] = {}
    for i, op in enumerate(graph.ops):
        group = _group(op, collapse)
        if group is not None:
            counts[group] = counts.get(group, 0) + 1
            if group not in group_keys:
                group_keys[group] = f"grp_{len(group_keys)}"
                nodes.append(_Node(group_keys[group], group, None))
            key = group_keys[group]
        else:
            key = f"op_{i}"
            types = ", ".join(str(r.type) for r in op.results)
            nodes.append(_Node(key, f"{op.name.removeprefix('coreai.')}\\n{types}",
                               op.location.module_path))
        for r in op.results:
            owner[id(r)] = key
    nodes = [attrs.evolve(n, label=f"{n.label} ({counts[n.label]} ops)")
             if n.key.startswith("grp_") else n for n in nodes]
    edges: set[tuple[str, str, str]] = set()
    for i, op in enumerate(graph.ops):
        group = _group(op, collapse)
        dst = group_keys[group] if group is not None else f"op_{i}"
        for v in op.operands:
            src = owner.get(id(v))
            if src is not None and src != dst:
                edges.add((src, dst, ""))
    for name, v in {**graph.output_values, **graph.state_outputs}.items():
        key = f"out_{name}"
        nodes.append(_Node(key, f"{name}\\n{v.type}", None))
        if id(v) in owner:
            edges.add((owner[id(v)], key, ""))
    return nodes, sorted(edges)


def _graphs(program: ProgramData, entrypoint: str | None) -> Iterator[tuple[str, Graph]]:
    for name, g in program.graphs.items():
        if entrypoint is None or name == entrypoint:
            yield name, g


def to_dot(program: ProgramData, entrypoint: str | None = None, *, collapse: int | None = None,
           ) -> str:
    """Graphviz dot text of the program's graphs (ops clustered by module path)."""
    lines = ["digraph coreai {", "  rankdir=TB;", '  node [shape=box, fontname="monospace"];']
    for gname, g in _graphs(program, entrypoint):
        nodes, edges = _nodes_and_edges(g, collapse)
        lines.append(f"  subgraph cluster_{_ident(gname)} {{")
        lines.append(f"    label={json.dumps('@' + gname)};")
        clusters: dict[str, list[_Node]] = {}
        for n in nodes:
            if n.group:
                clusters.setdefault(n.group, []).append(n)
            else:
                shape = ", shape=ellipse" if n.key.startswith(("in_", "out_")) else ""
                lines.append(f"    {gname}_{n.key} [label={_dot_str(n.label)}{shape}];")
        for i, (group, members) in enumerate(sorted(clusters.items())):
            lines.append(f"    subgraph cluster_{_ident(gname)}_{i} {{")
            lines.append(f"      label={json.dumps(group)}; style=dashed;")
            for n in members:
                lines.append(f"      {gname}_{n.key} [label={_dot_str(n.label)}];")
            lines.append("    }")
        for src, dst, _ in edges:
            lines.append(f"    {gname}_{src} -> {gname}_{dst};")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_mermaid(program: ProgramData, entrypoint: str | None = None, *,
               collapse: int | None = None) -> str:
    """Mermaid flowchart text of the program's graphs."""
    lines = ["flowchart TD"]
    for gname, g in _graphs(program, entrypoint):
        nodes, edges = _nodes_and_edges(g, collapse)
        lines.append(f"  subgraph {_ident(gname)}[\"@{gname}\"]")
        for n in nodes:
            label = (n.label.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                     .replace("\\n", "<br/>").replace('"', "#quot;"))
            open_, close = ("([", "])") if n.key.startswith(("in_", "out_")) else ("[", "]")
            lines.append(f"    {_ident(gname)}_{n.key}{open_}\"{label}\"{close}")
        for src, dst, _ in edges:
            lines.append(f"    {_ident(gname)}_{src} --> {_ident(gname)}_{dst}")
        lines.append("  end")
    return "\n".join(lines) + "\n"


def render_svg(program: ProgramData, path: str, *, collapse: int | None = None,
               entrypoint: str | None = None) -> None:
    """Render the dot picture to ``path`` with Graphviz (the ``dot`` binary must exist)."""
    dot = shutil.which("dot")
    if dot is None:
        raise RuntimeError("Graphviz is not installed (no `dot` on PATH); install it, e.g. "
                           "`apt-get install graphviz`, or use program.to_dot() / to_mermaid()")
    subprocess.run([dot, "-Tsvg", "-o", str(path)], input=to_dot(
        program, entrypoint, collapse=collapse).encode(), check=True)


def _ident(s: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in s)


def _dot_str(s: str) -> str:
    return '"' + s.replace('"', '\\"') + '"'

