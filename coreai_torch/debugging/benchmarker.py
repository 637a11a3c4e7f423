"""Time a Core AI program per op, and group the times by source module and line.

- :class:`CoreAIBenchmarker` runs this project's ``Program`` on the numpy runtime with
  :meth:`coreai_core.runtime.Runtime.profile` (the wall time of every kernel call), ``num_runs``
  times: one :class:`OperationTiming` per op, its samples one per run, in milliseconds.
- :class:`InterpreterBenchmarker` exports the program to an ``.aimodel`` and times whole calls
  on Apple's interpreter: Apple's profiler reports no per-op interval there (coreai-core
  1.0.0b3 on Linux sends a few activity events per call), so the result is one timing for
  the whole function.

:func:`benchmark_coreai_program` is the first (``runtime="reference"``) or the second
(``runtime="interpreter"``). Times come from the default environment; the first run (which
plans the program) is not counted.
"""

from __future__ import annotations

import logging
import statistics
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, TextIO

from coreai_core import Operation, Program
from coreai_core.runtime import default_runtime
from coreai_torch.debugging.annotations import write_annotated_sources
from coreai_torch.debugging.table_writer import Row, TreeNode, write_table, write_tree
from coreai_torch.debugging.utils import (
    LocationInfo,
    as_numpy,
    entry_graph,
    get_operation_locations,
    input_dict,
    needs_device_runtime,
    split_module_frame,
)

__all__ = ["BenchmarkResult", "Benchmarker", "CoreAIBenchmarker", "EventData",
           "InterpreterBenchmarker", "Measurement", "ModuleTiming", "OperationTiming",
           "Statistics", "benchmark_coreai_program"]

logger = logging.getLogger(__name__)
UNKNOWN_MODULE = "<unknown>"


@dataclass(frozen=True)
class Statistics:
    """Summary of samples in milliseconds."""

    minimum: float
    maximum: float
    average: float
    std_dev: float
    median: float

    @staticmethod
    def from_values(values: list[float]) -> Statistics | None:
        if not values:
            return None
        return Statistics(min(values), max(values), statistics.fmean(values),
                          statistics.pstdev(values), statistics.median(values))

    def to_dict(self: Self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class Measurement:
    statistics: Statistics | None
    samples: list[float]

    @staticmethod
    def from_samples(samples: list[float]) -> Measurement:
        return Measurement(Statistics.from_values(samples), list(samples))

    @property
    def sort_key(self) -> float:
        return self.statistics.median if self.statistics is not None else -1.0

    def to_dict(self: Self) -> dict[str, Any]:
        return {"statistics": None if self.statistics is None else self.statistics.to_dict(),
                "samples": list(self.samples)}


@dataclass
class OperationTiming:
    """The time of one op (or of ops timed together), one sample per run."""

    op_ids: list[int]
    operations: list[Operation]
    measurement: Measurement
    odix_id: int | None = None

    @property
    def op_id(self) -> int:
        return self.op_ids[0]

    @property
    def op_names(self) -> list[str]:
        return [op.name for op in self.operations]

    @property
    def tree_label(self) -> str:
        names = ",".join(dict.fromkeys(self.op_names))
        return f"%{self.op_id} {names}: {self.measurement.sort_key:.4f} ms"

    def location(self) -> LocationInfo | None:
        locs = [loc for op in self.operations for loc in get_operation_locations(op)]
        return locs[0] if locs else None

    def to_dict(self: Self) -> dict[str, Any]:
        return {"op_ids": list(self.op_ids), "op_names": self.op_names,
                "odix_id": self.odix_id, "measurement": self.measurement.to_dict()}

    def to_row(self: Self) -> Row:
        s = self.measurement.statistics
        loc = self.location()
        ids = ",".join(map(str, self.op_ids)) if len(self.op_ids) <= 4 else \
            f"{self.op_ids[0]}..{self.op_ids[-1]}"
        cells = (ids, ",".join(dict.fromkeys(self.op_names)),
                 *(f"{v:.4f}" if s else "" for v in
                   ((s.median, s.average, s.minimum, s.maximum) if s else (0, 0, 0, 0))),
                 str(loc) if loc else "")
        return Row(tuple(cells))


def _per_run_sums(timings: list[OperationTiming]) -> list[float]:
    runs = max((len(t.measurement.samples) for t in timings), default=0)
    return [sum(t.measurement.samples[i] for t in timings if i < len(t.measurement.samples))
            for i in range(runs)]


@dataclass
class ModuleTiming:
    """The ops of one module (by the converter's module path) and its submodules."""

    name: str
    operation_timings: list[OperationTiming]
    children: list[ModuleTiming]

    @property
    def type_name(self: Self) -> str:
        return split_module_frame(self.name)[0]

    @property
    def instance(self: Self) -> int | None:
        return split_module_frame(self.name)[1]

    @property
    def aggregated_op_stats(self) -> Statistics | None:
        """Statistics of the per-run total of every op in this module and below (ms)."""
        return Statistics.from_values(_per_run_sums(self.get_all_operations()))

    def to_dict(self: Self) -> dict[str, Any]:
        return {"name": self.name, "type_name": self.type_name, "instance": self.instance,
                "operation_timings": [t.to_dict() for t in self.operation_timings],
                "children": [c.to_dict() for c in self.children]}

    def get_all_operations(self: Self) -> list[OperationTiming]:
        return [*self.operation_timings, *(t for c in self.children
                                            for t in c.get_all_operations())]

    def get_all_modules(self: Self) -> list[ModuleTiming]:
        return [self, *(m for c in self.children for m in c.get_all_modules())]

    def get_operations_at_location(self: Self, location: LocationInfo) -> list[OperationTiming]:
        return [t for t in self.get_all_operations()
                if (loc := t.location()) is not None and (loc.filename, loc.line)
                == (location.filename, location.line)]

    def annotate_dominant_source(self: Self, output: TextIO,
                                 exclude: Callable[[LocationInfo], bool] | None = None) -> None:
        """Print the source line where this module spends most of its time."""
        by_line: dict[tuple[str, int], float] = defaultdict(float)
        for t in self.get_all_operations():
            loc = t.location()
            if loc is not None and not (exclude and exclude(loc)):
                by_line[(loc.filename, loc.line)] += max(t.measurement.sort_key, 0.0)
        if not by_line:
            output.write(f"{self.name}: no source location\n")
            return
        line = max(by_line, key=by_line.__getitem__)
        write_annotated_sources({line: [f"{self.name}: {by_line[line]:.4f} ms"]}, output)

    def to_tree_node(self: Self, show_operations: bool = False) -> TreeNode:
        stats = self.aggregated_op_stats
        label = f"{self.name}: {stats.median if stats else 0.0:.4f} ms"
        node = TreeNode(label, [c.to_tree_node(show_operations) for c in self.children])
        if show_operations:
            node.children += [TreeNode(t.tree_label) for t in self.operation_timings]
        return node

    def write_to(self: Self, output: TextIO, show_operations: bool = False, *,
                 width: int | None = None) -> None:
        write_tree(output, self.to_tree_node(show_operations))


@dataclass
class BenchmarkResult:
    """Per-op timings of a benchmarked program, and every op of it by id."""

    operation_timings: list[OperationTiming]
    operations_by_id: dict[int, Operation] = field(default_factory=dict)
    unattributed_samples: int = 0
    unattributed_compile_ids: int = 0
    symbol_samples: int = 0
    symbol_intervals: int = 0

    def to_dict(self: Self) -> dict[str, Any]:
        return {"operation_timings": [t.to_dict() for t in self.operation_timings],
                "operation_names": {i: op.name for i, op in self.operations_by_id.items()},
                "unattributed_samples": self.unattributed_samples,
                "unattributed_compile_ids": self.unattributed_compile_ids,
                "symbol_samples": self.symbol_samples, "symbol_intervals": self.symbol_intervals}

    def get_operation_summary(self: Self) -> list[OperationTiming]:
        """The timings, slowest (median) first."""
        return sorted(self.operation_timings, key=lambda t: t.measurement.sort_key,
                      reverse=True)

    def get_module_timings(self) -> dict[str, ModuleTiming]:
        """Top-level modules by name, each with its submodules, from the ops' module paths
        (ops without one under ``<unknown>``)."""
        tree: dict[str, Any] = {}
        for t in self.operation_timings:
            path = next((op.location.module_path for op in t.operations
                         if op.location.module_path), None)
            node = tree
            for part in (path.split(".") if path else [UNKNOWN_MODULE]):
                node = node.setdefault(part, {"__ops__": []})
            node["__ops__"].append(t)

        def build(name: str, node: dict[str, Any]) -> ModuleTiming:
            return ModuleTiming(name, node["__ops__"],
                                [build(k, v) for k, v in node.items() if k != "__ops__"])

        return {name: build(name, node) for name, node in tree.items()}

    def annotate_source(self: Self, output: TextIO | None = None, *,
                        annotate_all_files: bool = False,
                        exclude: Callable[[LocationInfo], bool] | None = None) -> None:
        """Print the source lines the time is spent on, with each line's ops and times."""
        notes: dict[tuple[str, int], list[str]] = defaultdict(list)
        for t in self.get_operation_summary():
            loc = t.location()
            if loc is not None and not (exclude and exclude(loc)):
                notes[(loc.filename, loc.line)].append(t.tree_label)
        write_annotated_sources(notes, output or sys.stdout, whole_files=annotate_all_files)

    def write_summary(self: Self, output: TextIO, top_n: int | None = None, *,
                      width: int | None = None) -> None:
        """A table of the ops, slowest first (times in ms, over the runs)."""
        timings = self.get_operation_summary()[:top_n]
        total = sum(max(t.measurement.sort_key, 0.0) for t in self.operation_timings)
        write_table(output, ["op", "name", "median", "mean", "min", "max", "source"],
                    [t.to_row() for t in timings], width=width,
                    title=f"{len(self.operation_timings)} timed ops, {total:.4f} ms total "
                          "(sum of medians)")


@dataclass(frozen=True)
class EventData:
    """The payload of a profiler event: an interval, or a group of compile ids."""

    @dataclass(frozen=True)
    class Interval:
        duration: int

        @staticmethod
        def from_dict(data: dict[str, Any]) -> EventData.Interval:
            return EventData.Interval(int(data["duration"]))

    @dataclass(frozen=True)
    class CompileIdGroup:
        group_id: int
        members: tuple[int, ...]

        @staticmethod
        def from_dict(data: dict[str, Any]) -> EventData.CompileIdGroup:
            return EventData.CompileIdGroup(int(data.get("group_id", data.get("groupId", 0))),
                                            tuple(int(m) for m in data.get("members", ())))

    interval: EventData.Interval | None = None
    compile_id_group: EventData.CompileIdGroup | None = None

    @staticmethod
    def from_dict(data: dict[str, Any]) -> EventData:
        interval = data.get("interval")
        group = data.get("compile_id_group", data.get("compileIdGroup"))
        return EventData(EventData.Interval.from_dict(interval) if interval else None,
                         EventData.CompileIdGroup.from_dict(group) if group else None)


class Benchmarker(ABC):
    """Times ``coreai_program``'s ``entry_point``; ``excluded_operations`` (op names) are
    left out of the result."""

    def __init__(self: Self, coreai_program: Program, entry_point: str = "main",
                 excluded_operations: tuple[str, ...] | None = None,
                 specialization_options: Any = None) -> None:
        if specialization_options is not None:
            raise needs_device_runtime("benchmarking with specialization_options (compiled "
                                       "for a device)")
        if not isinstance(coreai_program, Program):
            raise TypeError("the benchmarker takes this project's Program "
                            f"(TorchConverter().to_coreai()), got {type(coreai_program).__name__}")
        self.program = coreai_program
        self.entry_point = entry_point
        self.excluded_operations = tuple(excluded_operations or ())

    @abstractmethod
    async def benchmark(self: Self, inputs: dict[str, Any], num_runs: int = 1
                        ) -> BenchmarkResult:
        """Run ``num_runs`` times (after one warm-up run) and return the timings."""

    def _inputs(self, inputs: dict[str, Any]) -> dict[str, Any]:
        graph = entry_graph(self.program, self.entry_point)
        return {k: as_numpy(v) for k, v in input_dict(graph, inputs).items()}


class CoreAIBenchmarker(Benchmarker):
    """Per-op times on this project's numpy runtime."""

    async def benchmark(self: Self, inputs: dict[str, Any], num_runs: int = 1
                        ) -> BenchmarkResult:
        if num_runs < 1:
            raise ValueError(f"num_runs must be at least 1, got {num_runs}")
        runtime = default_runtime()
        arrays = self._inputs(inputs)
        graph = entry_graph(self.program, self.entry_point)
        ids = {op: i for i, op in enumerate(graph.ops)}
        samples: dict[int, list[float]] = defaultdict(list)
        for run in range(num_runs + 1):
            state = {k: v.copy() for k, v in self.program.initial_state.items()}
            _, timings = runtime.profile(self.program, arrays, self.entry_point, state)
            if run == 0:
                continue  # the warm-up run plans the program
            for op, seconds in timings:
                if op in ids and op.name not in self.excluded_operations:
                    samples[ids[op]].append(seconds * 1e3)
        timed = [OperationTiming([i], [graph.ops[i]], Measurement.from_samples(s))
                 for i, s in sorted(samples.items())]
        return BenchmarkResult(timed, dict(enumerate(graph.ops)))


class InterpreterBenchmarker(Benchmarker):
    """Whole-call times on Apple's interpreter (see the module docstring)."""

    async def benchmark(self: Self, inputs: dict[str, Any], num_runs: int = 1
                        ) -> BenchmarkResult:
        from coreai_torch.aimodel import export_aimodel, load_aimodel

        if num_runs < 1:
            raise ValueError(f"num_runs must be at least 1, got {num_runs}")
        arrays = self._inputs(inputs)
        graph = entry_graph(self.program, self.entry_point)
        samples = []
        with tempfile.TemporaryDirectory() as tmp:
            path = export_aimodel(self.program, Path(tmp) / "bench.aimodel",
                                  entrypoints=[self.entry_point])
            state = {k: v.copy() for k, v in self.program.initial_state.items()} or None
            with load_aimodel(path, state=state) as model:
                for run in range(num_runs + 1):
                    t0 = time.perf_counter()
                    model.run(arrays, self.entry_point)
                    if run:
                        samples.append((time.perf_counter() - t0) * 1e3)
        ops = [op for op in graph.ops if op.name not in self.excluded_operations]
        whole = OperationTiming([i for i, op in enumerate(graph.ops) if op in ops], ops,
                                Measurement.from_samples(samples))
        return BenchmarkResult([whole], dict(enumerate(graph.ops)), symbol_samples=len(samples),
                               symbol_intervals=1)


async def benchmark_coreai_program(coreai_program: Program, inputs: dict[str, Any],
                                   entry_point: str = "main", num_runs: int = 1,
                                   excluded_operations: tuple[str, ...] | None = None,
                                   specialization_options: Any = None, *,
                                   runtime: str = "reference") -> BenchmarkResult:
    """Time ``coreai_program`` on this project's runtime per op (``runtime="reference"``) or
    on Apple's interpreter as a whole (``runtime="interpreter"``)."""
    kinds: dict[str, type[Benchmarker]] = {"reference": CoreAIBenchmarker,
                                           "interpreter": InterpreterBenchmarker}
    if runtime not in kinds:
        raise ValueError(f"runtime must be one of {sorted(kinds)}, got {runtime!r}")
    bench = kinds[runtime](coreai_program, entry_point, excluded_operations,
                           specialization_options)
    return await bench.benchmark(inputs, num_runs)
