"""Where Apple's device runtime places each op (CPU, GPU, Neural Engine).

A plan is read from the debug info of a model compiled for a device (each compiled kernel's
``residency`` and the "coreai" op ids it covers). Compiling for a device needs Apple's device
runtime: :meth:`ComputePlan.from_program` raises :class:`~.utils.DeviceRuntimeError` off
macOS. A :class:`ComputePlan` made from records you have (``parse_debug_infos`` of a Mac's
model) works here.
"""

from __future__ import annotations

import enum
import sys
from collections import defaultdict
from typing import Any, Self, TextIO

from coreai_core import Operation, Program
from coreai_torch.debugging.annotations import write_annotated_sources
from coreai_torch.debugging.debug_info import DebugInfoRecord, get_operation_id
from coreai_torch.debugging.table_writer import write_table
from coreai_torch.debugging.utils import get_operation_locations, needs_device_runtime

__all__ = ["ComputeDevice", "ComputePlan", "Residency"]

ModulePath = tuple[str, ...]


class Residency(enum.Enum):
    PLACED = "PLACED"
    NO_ENTRY = "NO ENTRY"
    NO_DEVICE = "NO DEVICE"


class ComputeDevice(enum.Enum):
    CPU = "CPU"
    GPU = "GPU"
    NEURAL_ENGINE = "NEURAL_ENGINE"
    UNKNOWN = "UNKNOWN"

    @staticmethod
    def parse(text: str) -> ComputeDevice:
        text = text.upper()
        if text == "ANE":
            return ComputeDevice.NEURAL_ENGINE
        return ComputeDevice.__members__.get(text, ComputeDevice.UNKNOWN)


class ComputePlan:
    """"coreai" op id -> the devices its kernels run on, and the validation messages."""

    def __init__(self: Self, debug_info_records: list[DebugInfoRecord]) -> None:
        self.records = list(debug_info_records)
        self._devices: dict[int, set[ComputeDevice]] = defaultdict(set)
        self._messages: dict[int, set[str]] = defaultdict(set)
        for record in self.records:
            for info in record.operations:
                if info.is_symbol():
                    continue
                residency = info.get_residency()
                for op_id in info.get_op_ids("coreai"):
                    self._devices[op_id].add(ComputeDevice.parse(residency) if residency
                                             else ComputeDevice.UNKNOWN)
                    for v in info.get_all_metadata("validation"):
                        if isinstance(v.value, str):
                            self._messages[op_id].add(v.value)

    @classmethod
    async def from_program(cls, program: Program, specialization_options: Any = None,
                           ) -> ComputePlan:
        """Compile ``program`` for a device and read its plan: macOS only."""
        raise needs_device_runtime("ComputePlan.from_program")

    def residency_for_id(self: Self, operation_id: int) -> Residency:
        devices = self._devices.get(operation_id)
        if devices is None:
            return Residency.NO_ENTRY
        return Residency.PLACED if devices - {ComputeDevice.UNKNOWN} else Residency.NO_DEVICE

    def devices_for_id(self: Self, operation_id: int) -> set[ComputeDevice]:
        return set(self._devices.get(operation_id, {ComputeDevice.UNKNOWN}))

    def get_devices(self: Self, operation: Operation) -> set[ComputeDevice]:
        op_id = get_operation_id(operation)
        return {ComputeDevice.UNKNOWN} if op_id is None else self.devices_for_id(op_id)

    def validation_messages_for_id(self: Self, operation_id: int) -> set[str]:
        return set(self._messages.get(operation_id, set()))

    def get_validation_messages(self: Self, operation: Operation) -> set[str]:
        op_id = get_operation_id(operation)
        return set() if op_id is None else self.validation_messages_for_id(op_id)

    def _ops(self, program: Program | None, module: ModulePath | None,
             ) -> list[tuple[int, str]]:
        if program is None:
            return [(i, "?") for i in sorted(self._devices)]
        graph = program.graphs["main" if "main" in program.graphs else next(iter(program.graphs))]
        prefix = ".".join(module) if module else None
        return [(i, op.name) for i, op in enumerate(graph.ops)
                if op.name != "coreai.constant" and (prefix is None or (
                    op.location.module_path or "").startswith(prefix))]

    def to_dict(self: Self, program: Program | None = None, *,
                module: ModulePath | None = None) -> dict[str, Any]:
        return {"operations": [
            {"id": i, "name": name, "residency": self.residency_for_id(i).value,
             "devices": sorted(d.value for d in self.devices_for_id(i)),
             "validation": sorted(self.validation_messages_for_id(i))}
            for i, name in self._ops(program, module)]}

    def write_summary(self: Self, program: Program, output: TextIO | None = None, *,
                      module: ModulePath | None = None) -> None:
        rows = [(i, name, self.residency_for_id(i).value,
                 ",".join(sorted(d.value for d in self.devices_for_id(i))))
                for i, name in self._ops(program, module)]
        write_table(output or sys.stdout, ["op", "name", "residency", "devices"], rows)

    def annotate_source(self: Self, program: Program, output: TextIO | None = None, *,
                        module: ModulePath | None = None,
                        annotate_all_files: bool = False) -> None:
        graph = program.graphs["main" if "main" in program.graphs else next(iter(program.graphs))]
        notes: dict[tuple[str, int], list[str]] = defaultdict(list)
        for i, name in self._ops(program, module):
            for loc in get_operation_locations(graph.ops[i]):
                devices = ",".join(sorted(d.value for d in self.devices_for_id(i)))
                notes[(loc.filename, loc.line)].append(f"%{i} {name}: {devices}")
        write_annotated_sources(notes, output or sys.stdout, whole_files=annotate_all_files)
