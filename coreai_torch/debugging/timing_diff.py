"""How op times changed between two programs (before and after a rewrite).

:func:`compare_results` pairs two :class:`~.benchmarker.BenchmarkResult` s through an op-id
alignment: a timing whose ops all map onto one timing of the other side is matched; a timing
that covers more ops on one side (ops fused together, or split) is resized; the rest are on
one side only. :func:`compare_runs` benchmarks both programs on this project's runtime and
aligns them (with ``specialization_options``, a device compile: macOS only).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from typing import Any, Self, TextIO

from coreai_core import Program
from coreai_torch.debugging.benchmarker import (
    BenchmarkResult,
    OperationTiming,
    benchmark_coreai_program,
)
from coreai_torch.debugging.graph_diff import OpIdAlignment, op_id_alignment
from coreai_torch.debugging.graph_match import WeightPolicy
from coreai_torch.debugging.table_writer import write_table
from coreai_torch.debugging.utils import needs_device_runtime

__all__ = ["MatchedDispatch", "Resize", "ResizedDispatch", "TimingDiff", "compare_results",
           "compare_runs"]

logger = logging.getLogger(__name__)


def _median(t: OperationTiming) -> float:
    return max(t.measurement.sort_key, 0.0)


@dataclass(frozen=True)
class MatchedDispatch:
    before: OperationTiming
    after: OperationTiming
    modified: bool = False

    @property
    def median_delta_ms(self) -> float:
        return _median(self.after) - _median(self.before)

    def to_dict(self) -> dict[str, Any]:
        return {"before": self.before.to_dict(), "after": self.after.to_dict(),
                "modified": self.modified, "median_delta_ms": self.median_delta_ms}


class Resize(enum.Enum):
    GAINED = "gained"
    LOST = "lost"


@dataclass(frozen=True)
class ResizedDispatch:
    before: OperationTiming
    after: OperationTiming
    extra_op_ids: frozenset[int]
    resize: Resize
    modified: bool = False

    @property
    def median_delta_ms(self) -> float:
        return _median(self.after) - _median(self.before)

    def to_dict(self) -> dict[str, Any]:
        return {"before": self.before.to_dict(), "after": self.after.to_dict(),
                "extra_op_ids": sorted(self.extra_op_ids), "resize": self.resize.value,
                "modified": self.modified, "median_delta_ms": self.median_delta_ms}


@dataclass
class TimingDiff:
    matched: list[MatchedDispatch] = field(default_factory=list)
    resized: list[ResizedDispatch] = field(default_factory=list)
    only_before: list[OperationTiming] = field(default_factory=list)
    only_after: list[OperationTiming] = field(default_factory=list)
    alignment: OpIdAlignment | None = None

    @property
    def before_dispatches(self) -> list[OperationTiming]:
        return [*(m.before for m in self.matched), *(r.before for r in self.resized),
                *self.only_before]

    @property
    def after_dispatches(self) -> list[OperationTiming]:
        return [*(m.after for m in self.matched), *(r.after for r in self.resized),
                *self.only_after]

    def to_dict(self: Self) -> dict[str, Any]:
        return {"matched": [m.to_dict() for m in self.matched],
                "resized": [r.to_dict() for r in self.resized],
                "only_before": [t.to_dict() for t in self.only_before],
                "only_after": [t.to_dict() for t in self.only_after]}

    def write_to(self: Self, output: TextIO, *, width: int | None = None) -> None:
        total_b = sum(_median(t) for t in self.before_dispatches)
        total_a = sum(_median(t) for t in self.after_dispatches)
        rows: list[tuple[Any, ...]] = [
            (m.before.tree_label, m.after.tree_label, f"{m.median_delta_ms:+.4f}",
             "modified" if m.modified else "")
            for m in sorted(self.matched, key=lambda m: -abs(m.median_delta_ms))]
        rows += [(r.before.tree_label, r.after.tree_label, f"{r.median_delta_ms:+.4f}",
                  f"{r.resize.value} {sorted(r.extra_op_ids)}") for r in self.resized]
        rows += [(t.tree_label, "", f"{-_median(t):+.4f}", "only before") for t in self.only_before]
        rows += [("", t.tree_label, f"{_median(t):+.4f}", "only after") for t in self.only_after]
        write_table(output, ["before", "after", "delta ms", "note"], rows, width=width,
                    title=f"{total_b:.4f} ms -> {total_a:.4f} ms (sum of medians)")


def compare_results(alignment: OpIdAlignment, before: BenchmarkResult, after: BenchmarkResult,
                    ) -> TimingDiff:
    """Pair the timings of ``before`` and ``after`` through ``alignment``."""
    diff = TimingDiff(alignment=alignment)
    after_of = {i: t for t in after.operation_timings for i in t.op_ids}
    used: set[int] = set()
    for b in before.operation_timings:
        targets = {alignment.mapping[i] for i in b.op_ids if i in alignment.mapping}
        partners = {id(after_of[i]): after_of[i] for i in targets if i in after_of}
        if len(partners) != 1:
            diff.only_before.append(b)
            continue
        a = next(iter(partners.values()))
        if id(a) in used:
            diff.only_before.append(b)
            continue
        used.add(id(a))
        modified = any(i in alignment.modified for i in b.op_ids)
        mapped_back = {alignment.mapping[i] for i in b.op_ids if i in alignment.mapping}
        if set(a.op_ids) == mapped_back and len(b.op_ids) == len(a.op_ids):
            diff.matched.append(MatchedDispatch(b, a, modified))
        elif len(a.op_ids) > len(b.op_ids):
            diff.resized.append(ResizedDispatch(b, a, frozenset(set(a.op_ids) - mapped_back),
                                                Resize.GAINED, modified))
        else:
            diff.resized.append(ResizedDispatch(
                b, a, frozenset(i for i in b.op_ids if alignment.mapping.get(i) not in a.op_ids),
                Resize.LOST, modified))
    diff.only_after = [t for t in after.operation_timings if id(t) not in used]
    return diff


async def compare_runs(before_program: Program, after_program: Program, inputs: dict[str, Any],
                       num_runs: int = 1, entry_point: str = "main", *,
                       excluded_operations: tuple[str, ...] | None = None,
                       specialization_options: Any = None,
                       weights: WeightPolicy = WeightPolicy.IGNORE) -> TimingDiff:
    """Benchmark both programs on this project's runtime and pair their op timings."""
    if specialization_options is not None:
        raise needs_device_runtime("compare_runs(specialization_options=...) (device timing)")
    before = await benchmark_coreai_program(before_program, inputs, entry_point, num_runs,
                                            excluded_operations)
    after = await benchmark_coreai_program(after_program, inputs, entry_point, num_runs,
                                           excluded_operations)
    alignment = op_id_alignment(before_program, after_program, entry_point, weights=weights)
    return compare_results(alignment, before, after)
