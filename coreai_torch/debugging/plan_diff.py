"""How device placement changed between two programs (before and after a rewrite).

:func:`diff_compute_plans` compares two :class:`~.compute_plan.ComputePlan` s through an
op-id alignment (:func:`.graph_diff.op_id_alignment`). :func:`compare_compute_plans` would
compile both programs for a device first: macOS only (:class:`~.utils.DeviceRuntimeError`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self, TextIO

from coreai_core import Program
from coreai_torch.debugging.compute_plan import ComputeDevice, ComputePlan
from coreai_torch.debugging.graph_diff import OpIdAlignment
from coreai_torch.debugging.graph_match import WeightPolicy
from coreai_torch.debugging.table_writer import write_table
from coreai_torch.debugging.utils import needs_device_runtime

__all__ = ["ComputePlacement", "ComputePlacementChange", "ComputePlanDiff",
           "compare_compute_plans", "diff_compute_plans"]


def _names(devices: tuple[ComputeDevice, ...]) -> str:
    return ",".join(d.value for d in devices) or "-"


@dataclass(frozen=True)
class ComputePlacement:
    operation_id: int
    devices: tuple[ComputeDevice, ...]
    name: str = "?"
    validation: tuple[str, ...] = ()

    def to_dict(self: Self) -> dict[str, Any]:
        return {"operation_id": self.operation_id, "devices": [d.value for d in self.devices],
                "name": self.name, "validation": list(self.validation)}


@dataclass(frozen=True)
class ComputePlacementChange:
    operation_id: int
    before: tuple[ComputeDevice, ...]
    after: tuple[ComputeDevice, ...]
    name: str = "?"
    modified: bool = False
    validation_before: tuple[str, ...] = ()
    validation_after: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        gained = set(self.validation_after) - set(self.validation_before)
        if gained:
            return "; ".join(sorted(gained))
        return "the op changed" if self.modified else "placement changed"

    def to_dict(self: Self) -> dict[str, Any]:
        return {"operation_id": self.operation_id, "before": [d.value for d in self.before],
                "after": [d.value for d in self.after], "name": self.name,
                "modified": self.modified, "reason": self.reason}


@dataclass
class ComputePlanDiff:
    changes: list[ComputePlacementChange] = field(default_factory=list)
    unchanged: int = 0
    unresolved: int = 0
    only_before: list[ComputePlacement] = field(default_factory=list)
    only_after: list[ComputePlacement] = field(default_factory=list)
    alignment: OpIdAlignment | None = None

    def to_dict(self: Self) -> dict[str, Any]:
        return {"changes": [c.to_dict() for c in self.changes], "unchanged": self.unchanged,
                "unresolved": self.unresolved,
                "only_before": [p.to_dict() for p in self.only_before],
                "only_after": [p.to_dict() for p in self.only_after]}

    def write_to(self: Self, output: TextIO, *, width: int | None = None) -> None:
        rows = [(c.operation_id, c.name, _names(c.before), _names(c.after), c.reason)
                for c in self.changes]
        write_table(output, ["op", "name", "before", "after", "reason"], rows, width=width,
                    title=f"{len(self.changes)} placements changed, {self.unchanged} unchanged,"
                          f" {self.unresolved} unresolved, {len(self.only_before)} ops only "
                          f"before, {len(self.only_after)} only after")


async def compare_compute_plans(before_program: Program, after_program: Program,
                                entry_point: str = "main", *,
                                specialization_options: Any = None,
                                weights: WeightPolicy = WeightPolicy.IGNORE) -> ComputePlanDiff:
    """Compile both programs for a device and diff their plans: macOS only."""
    raise needs_device_runtime("compare_compute_plans")


def _devices(plan: ComputePlan, op_id: int) -> tuple[ComputeDevice, ...]:
    return tuple(sorted(plan.devices_for_id(op_id), key=lambda d: d.value))


def diff_compute_plans(before: ComputePlan, after: ComputePlan, alignment: OpIdAlignment,
                       names_before: dict[int, str] | None = None,
                       names_after: dict[int, str] | None = None) -> ComputePlanDiff:
    """Each aligned op whose devices differ, the ops on one side only, and the counts."""
    nb, na = names_before or {}, names_after or {}
    diff = ComputePlanDiff(alignment=alignment)
    unknown = (ComputeDevice.UNKNOWN,)
    for b, a in sorted(alignment.mapping.items()):
        db, da = _devices(before, b), _devices(after, a)
        if db == unknown or da == unknown:
            diff.unresolved += 1
        elif db == da:
            diff.unchanged += 1
        else:
            diff.changes.append(ComputePlacementChange(
                b, db, da, nb.get(b, "?"), b in alignment.modified,
                tuple(sorted(before.validation_messages_for_id(b))),
                tuple(sorted(after.validation_messages_for_id(a)))))
    diff.only_before = [ComputePlacement(i, _devices(before, i), nb.get(i, "?"))
                        for i in alignment.removed]
    diff.only_after = [ComputePlacement(i, _devices(after, i), na.get(i, "?"))
                       for i in alignment.added]
    return diff
