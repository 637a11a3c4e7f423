"""Which ops come from which source line and module: maps, and the annotated source.

Op ids are those of :mod:`.utils` (positions in the program's main graph); a module path is
the converter's ``nn.Module`` path of the op (``("layers", "0", "attn")``).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from coreai_core import Program
from coreai_torch.debugging.annotations import write_annotated_sources
from coreai_torch.debugging.utils import LocationInfo, entry_graph, get_operation_locations

__all__ = ["ModulePath", "annotate_source_with_operations", "module_paths_by_op_id",
           "source_locations_by_op_id"]

ModulePath = tuple[str, ...]


def _main(program: Program) -> str:
    return "main" if "main" in program.graphs else entry_graph(program, None).name


def module_paths_by_op_id(program: Program, *,
                          exclude: Callable[[LocationInfo], bool] | None = None,
                          ) -> dict[int, ModulePath]:
    """Op id -> the module path of the op (ops without one, or excluded by their source
    location, are left out)."""
    out = {}
    for i, op in enumerate(program.graphs[_main(program)].ops):
        locs = get_operation_locations(op)
        if exclude is not None and locs and exclude(locs[0]):
            continue
        if op.location.module_path:
            out[i] = tuple(op.location.module_path.split("."))
    return out


def source_locations_by_op_id(program: Program, *,
                              exclude: Callable[[LocationInfo], bool] | None = None,
                              ) -> dict[int, LocationInfo]:
    """Op id -> the op's source location (the user's line the converter recorded)."""
    out = {}
    for i, op in enumerate(program.graphs[_main(program)].ops):
        locs = [loc for loc in get_operation_locations(op) if exclude is None or not exclude(loc)]
        if locs:
            out[i] = locs[0]
    return out


def annotate_source_with_operations(coreai_program: Program, output: TextIO | None = None, *,
                                    exclude: Callable[[LocationInfo], bool] | None = None,
                                    annotate_all_files: bool = False) -> None:
    """Print the source lines the program's ops come from, each op under its line.

    Only files that exist here are printed with their text (others as line numbers);
    ``annotate_all_files`` prints whole files instead of the lines around each op.
    """
    graph = coreai_program.graphs[_main(coreai_program)]
    notes: dict[tuple[str, int], list[str]] = defaultdict(list)
    for i, loc in source_locations_by_op_id(coreai_program, exclude=exclude).items():
        op = graph.ops[i]
        where = f" in {op.location.module_path}" if op.location.module_path else ""
        notes[(loc.filename, loc.line)].append(f"%{i} {op.name}{where}")
    if not annotate_all_files:
        notes = {k: v for k, v in notes.items() if Path(k[0]).exists()} or notes
    write_annotated_sources(notes, output or sys.stdout, whole_files=annotate_all_files)
