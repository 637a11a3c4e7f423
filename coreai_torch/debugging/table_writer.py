"""Plain-text tables and trees for the reports' ``write_*`` methods."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

__all__ = ["Row", "TreeNode", "format_table", "write_table", "write_tree"]

DEFAULT_WIDTH = 150


@dataclass(frozen=True)
class Row:
    """One table row: its cells, already formatted."""

    cells: tuple[str, ...]


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any] | Row], *,
                 width: int | None = None) -> str:
    """Rows under headers, columns padded to their widest cell, cut at ``width`` chars."""
    cells = [r.cells if isinstance(r, Row) else tuple(_cell(c) for c in r) for r in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells if i < len(r))])
              for i, h in enumerate(headers)]
    limit = width or DEFAULT_WIDTH

    def line(parts: Sequence[str]) -> str:
        return "  ".join(p.ljust(w) for p, w in zip(parts, widths, strict=False)).rstrip()[:limit]

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)


def write_table(output: TextIO, headers: Sequence[str], rows: Sequence[Sequence[Any] | Row],
                *, width: int | None = None, title: str | None = None) -> None:
    if title:
        output.write(title + "\n")
    output.write(format_table(headers, rows, width=width) + "\n")


@dataclass
class TreeNode:
    """A labelled node of a printed tree."""

    label: str
    children: list[TreeNode] = field(default_factory=list)


def write_tree(output: TextIO, node: TreeNode, indent: str = "") -> None:
    output.write(f"{indent}{node.label}\n")
    for child in node.children:
        write_tree(output, child, indent + "  ")
