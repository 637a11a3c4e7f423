"""A report of every intermediate compared between torch and a Core AI program.

:func:`compare_program_intermediates` is :func:`coreai_torch.verify.find_first_divergence`
as one :class:`IntermediateComparison` per FX value; :func:`compare_intermediates` compares
values you already have (``Inspector.get_intermediates_for_ops`` results) through a mapping
FX value name -> op output (:func:`.torch_utils.get_torch_to_coreai_output_mapping`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np
import torch
from numpy.typing import NDArray
from torch.export import ExportedProgram

from coreai_core import Program
from coreai_torch.debugging.comparator import Comparator
from coreai_torch.debugging.debug_info import OutputMapping
from coreai_torch.debugging.inspector import Inspector
from coreai_torch.debugging.table_writer import write_table
from coreai_torch.debugging.utils import needs_device_runtime, unwrap_inputs
from coreai_torch.verify import compare as compare_arrays
from coreai_torch.verify import find_first_divergence

__all__ = ["IntermediateComparison", "IntermediatesReport", "compare_intermediates",
           "compare_program_intermediates"]

Status = Comparator.Status


@dataclass
class IntermediateComparison:
    """One FX value against the op output that computes it."""

    torch_node_name: str
    coreai_op_id: int
    status: Comparator.Status
    max_diff: float | None = None
    shape: tuple[int, ...] | None = None
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"torch_node_name": self.torch_node_name, "coreai_op_id": self.coreai_op_id,
                "status": self.status.name, "max_diff": self.max_diff,
                "shape": None if self.shape is None else list(self.shape),
                "detail": self.detail}


@dataclass
class IntermediatesReport:
    comparisons: list[IntermediateComparison] = field(default_factory=list)

    @property
    def compared(self) -> list[IntermediateComparison]:
        return [c for c in self.comparisons if c.status in (Status.PASS, Status.FAIL)]

    @property
    def failures(self) -> list[IntermediateComparison]:
        return [c for c in self.comparisons if c.status is Status.FAIL]

    def summary(self) -> dict[str, int]:
        counts = Counter(c.status.name for c in self.comparisons)
        return {s.name: counts.get(s.name, 0) for s in Status if counts.get(s.name)}

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "comparisons": [c.to_dict() for c in self.comparisons]}

    def write_to(self, output: TextIO, *, width: int | None = None) -> None:
        rows = [(c.torch_node_name, c.coreai_op_id, c.status.name, c.max_diff,
                 "" if c.shape is None else list(c.shape), c.detail) for c in self.comparisons]
        summary = ", ".join(f"{k} {v}" for k, v in self.summary().items())
        write_table(output, ["torch node", "op", "status", "max diff", "shape", "detail"], rows,
                    width=width, title=f"intermediates: {summary}")


Values = dict[Inspector.OpID, list[NDArray[Any] | None] | None]


def compare_intermediates(torch_intermediates: Values, coreai_intermediates: Values,
                          mappings: dict[str, OutputMapping], *, rtol: float = 1e-05,
                          atol: float = 0.001, exclude_multi_output: bool = True,
                          ) -> IntermediatesReport:
    """Compare each FX value of ``mappings`` (``name`` or ``name#k``) with the op output it
    maps to, within ``atol + rtol * |torch|``."""
    report = IntermediatesReport()
    for name, m in mappings.items():
        node, _, index = name.partition("#")
        k = int(index) if index else 0
        if exclude_multi_output and index:
            report.comparisons.append(IntermediateComparison(name, m.target_op_id,
                                                             Status.EXCLUDED))
            continue
        want_all = torch_intermediates.get(node)
        got_all = coreai_intermediates.get(m.target_op_id)
        want = want_all[k] if want_all is not None and k < len(want_all) else None
        got = (got_all[m.target_output] if got_all is not None
               and m.target_output < len(got_all) else None)
        if want is None:
            report.comparisons.append(IntermediateComparison(
                name, m.target_op_id, Status.UNKNOWN, detail="no torch value"))
            continue
        if got is None:
            report.comparisons.append(IntermediateComparison(
                name, m.target_op_id, Status.NO_TARGET_VALUE, shape=tuple(np.shape(want))))
            continue
        c = compare_arrays(name, np.asarray(got), np.asarray(want), rtol, atol)
        report.comparisons.append(IntermediateComparison(
            name, m.target_op_id, Status.PASS if c.passed else Status.FAIL, c.max_abs,
            tuple(np.shape(want)), c.problem))
    return report


async def compare_program_intermediates(exported_program: ExportedProgram, program: Program,
                                        inputs: dict[str, torch.Tensor], *,
                                        function_name: str = "main",
                                        specialization_options: Any = None, rtol: float = 1e-05,
                                        atol: float = 0.001, exclude_multi_output: bool = True,
                                        ) -> IntermediatesReport:
    """Every intermediate of ``program`` (this project's runtime) that maps to an FX node,
    against torch (:func:`coreai_torch.verify.find_first_divergence`)."""
    if specialization_options is not None:
        raise needs_device_runtime("compare_program_intermediates(specialization_options=...)")
    ids: dict[str, int] = {}
    graph = program.graphs[function_name]
    for i, op in enumerate(graph.ops):
        for r in op.results:
            if r.name:
                ids.setdefault(r.name, i)
    divergence = find_first_divergence(exported_program, program, unwrap_inputs(inputs),
                                       rtol=rtol, atol=atol,
                                       entrypoint=function_name)
    report = IntermediatesReport()
    for row in divergence.nodes:
        op_id = ids.get(row.node, -1)  # -1: a value that exists once composites are inlined
        if exclude_multi_output and "#" in row.node:
            report.comparisons.append(IntermediateComparison(row.node, op_id, Status.EXCLUDED))
            continue
        report.comparisons.append(IntermediateComparison(
            row.node, op_id, Status.PASS if row.passed else Status.FAIL, row.max_abs,
            detail=f"{row.target} -> {row.op}" + (f" at {row.source}" if row.source else "")))
    return report
