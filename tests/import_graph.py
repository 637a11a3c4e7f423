"""A package's import graph read from its source (no import runs), and its cycles.

Every import statement counts: module-level ones, ``if TYPE_CHECKING:`` ones (a cycle hidden
from the interpreter is still a cycle between the modules) and function-local ones.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a ``from ... import`` names (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base[:len(base) - node.level + (1 if is_package else 0)]
    return ".".join([*base, *([node.module] if node.module else [])])


def import_graph(package: Path) -> nx.DiGraph:
    """Modules of ``package`` (a directory) and an edge a -> b where a imports b.

    ``from m import n`` is an edge to ``m.n`` when that is a module of the package, else to
    ``m``; imports of other packages are left out.
    """
    root = package.parent
    paths = {_module_name(p, root): p for p in sorted(package.rglob("*.py"))}
    graph = nx.DiGraph()
    graph.add_nodes_from(paths)
    for module, path in paths.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, module, is_package)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base
                           for a in node.names]
            else:
                continue
            graph.add_edges_from((module, t) for t in targets if t in paths and t != module)
    return graph


def import_cycles(package: Path) -> list[list[str]]:
    """Each group of modules that import one another (directly or through others), sorted."""
    return sorted(sorted(c) for c in nx.strongly_connected_components(import_graph(package))
                  if len(c) > 1)
