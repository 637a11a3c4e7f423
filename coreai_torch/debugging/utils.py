"""Helpers the debugging modules share: op ids, source locations, inputs, the macOS error.

**Op ids.** An op of a :class:`coreai_core.Program` is identified by its position in its
graph's op list (``0`` is the first op), the "coreai" level of Apple's debug info. An FX node
is identified by its name. :func:`operation_ids` gives the ids of a graph's ops.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from coreai_core import Graph, Operation, Program

__all__ = ["DeviceRuntimeError", "LocationInfo", "as_numpy", "entry_graph",
           "get_operation_locations", "input_dict", "needs_device_runtime",
           "op_kind", "operation_ids", "split_module_frame", "torch_args",
           "unwrap_inputs"]


class DeviceRuntimeError(RuntimeError):
    """What needs Apple's on-device Core AI runtime (macOS), which Linux does not have."""


def needs_device_runtime(what: str) -> DeviceRuntimeError:
    """The one error for a tool that needs Apple's device runtime: what, why, what to do."""
    return DeviceRuntimeError(
        f"{what} needs Apple's Core AI device runtime, which runs on macOS only (it places "
        "ops on the CPU, GPU and Neural Engine and reports that plan); this machine has "
        "Apple's interpreter and this project's numpy runtime only. Run it on a Mac with "
        "Apple's coreai-torch, or use benchmark_coreai_program / compare_results here for "
        "timings on the runtimes this machine has")


def split_module_frame(frame: str) -> tuple[str, int | None]:
    """A module frame of a stack (``"Linear$3"``: the third ``Linear``) as (type, number);
    the number is None when the frame has none."""
    type_name, _, suffix = frame.partition("$")
    return type_name, int(suffix) if suffix.isdigit() else None


@dataclass(frozen=True)
class LocationInfo:
    """A source location of an op: file, line and column (0 when unknown)."""

    filename: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}"


def get_operation_locations(operation: Operation) -> list[LocationInfo]:
    """The source locations of an op (the user's line the converter recorded), or []."""
    loc = operation.location
    if loc.file is None:
        return []
    return [LocationInfo(loc.file, loc.line or 0, 0)]


def entry_graph(program: Program, entry_point: str | None) -> Graph:
    """``program``'s graph ``entry_point`` (its only graph when None), or a clear error."""
    if entry_point is None:
        names = [n for n in program.graphs if n not in program.composites]
        if len(names) != 1:
            raise ValueError(f"the program has graphs {names}: name the entry point")
        entry_point = names[0]
    if entry_point not in program.graphs:
        raise KeyError(f"the program has no graph {entry_point!r}; it has "
                       f"{list(program.graphs)}")
    return program.graphs[entry_point]


def operation_ids(graph: Graph) -> dict[Operation, int]:
    """Each op of ``graph`` (top level) and its id: its position in the graph."""
    return {op: i for i, op in enumerate(graph.ops)}


def as_numpy(value: Any) -> np.ndarray:
    """A tensor, Apple NDArray, scalar or array as a numpy array (bfloat16 as float32)."""
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.numpy()
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        return np.asarray(value.numpy())
    return np.asarray(value)


def unwrap_inputs(inputs: Any) -> Any:
    """``inputs`` with each dict value that is a one-element tuple or list of a tensor or
    array replaced by that element: Apple's comparator example passes ``{"x": (tensor,)}``
    (an example-input tuple under the input's name)."""
    if not isinstance(inputs, Mapping):
        return inputs
    return {k: v[0] if isinstance(v, (list, tuple)) and len(v) == 1
            and isinstance(v[0], (torch.Tensor, np.ndarray)) else v
            for k, v in inputs.items()}


def input_dict(graph: Graph, inputs: Any) -> dict[str, Any]:
    """``inputs`` (a dict by name, a sequence in order, or one value) by input name."""
    inputs = unwrap_inputs(inputs)
    if isinstance(inputs, Mapping):
        return dict(inputs)
    values = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    names = graph.input_names
    if len(values) != len(names):
        raise ValueError(f"got {len(values)} inputs, graph @{graph.name} takes {names}")
    return dict(zip(names, values, strict=True))


def torch_args(inputs: Any) -> tuple[Any, ...]:
    """``inputs`` as positional torch arguments (a dict's values in order)."""
    inputs = unwrap_inputs(inputs)
    values = (list(inputs.values()) if isinstance(inputs, Mapping)
              else list(inputs) if isinstance(inputs, (list, tuple)) else [inputs])
    return tuple(torch.from_numpy(np.asarray(v)) if isinstance(v, np.ndarray) else v
                 for v in values)


_WORD = re.compile(r"[^a-z0-9]+")


def op_kind(target: str) -> str:
    """``aten.permute`` for ``aten::permute.default``, ``aten.permute.default``, ..."""
    parts = [p for p in _WORD.split(target.lower()) if p]
    return ".".join(parts[:2]) if len(parts) >= 2 else ".".join(parts)
