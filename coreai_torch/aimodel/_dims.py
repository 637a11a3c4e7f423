"""The names and bounds of dynamic dimensions, kept in the asset's custom metadata.

Core AI's tensor types say only that a dimension is dynamic (``?``): they carry neither its
name (which ties the sequence length of two inputs together) nor its bounds. The exporter
writes both into the asset's ``metadata.json`` under :data:`KEY`, and the loaded asset checks
inputs and state against them before anything runs, as ``Program.run`` does.

The value: ``{function: {"input" | "state": {name: [dim, ...]}}}``, each dim an int (static)
or ``[name, min, max]`` (``None`` for a missing bound).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from coreai_core import Dim, Graph, TensorType

__all__ = ["KEY", "declared_shapes", "dims_metadata"]

KEY = "coreai_torch.dynamic_dims"

Shape = list[Any]


def _shape(t: TensorType) -> Shape:
    return [d if isinstance(d, int) else [d.name, d.min, d.max] for d in t.shape]


def dims_metadata(graphs: Sequence[Graph]) -> dict[str, Any]:
    """What :data:`KEY` holds for ``graphs`` (empty when every shape is static)."""
    out: dict[str, Any] = {}
    for g in graphs:
        kinds = {"input": g.inputs, "state": g.state_inputs}
        if all(v.type.static_shape is not None for vs in kinds.values() for v in vs.values()):
            continue
        out[g.name] = {kind: {n: _shape(v.type) for n, v in values.items()}
                       for kind, values in kinds.items()}
    return out


def _dim(d: Any) -> int | Dim:
    if isinstance(d, int):
        return d
    name, lo, hi = d
    return Dim(str(name), lo, hi)


def declared_shapes(metadata: Mapping[str, Any], function: str, kind: str,
                    ) -> dict[str, tuple[int | Dim, ...]]:
    """The shapes (dims named and bounded) of ``function``'s inputs or state (``kind``) in
    ``metadata`` (what :data:`KEY` holds); empty when none were recorded (static shapes, or
    an asset written by another tool)."""
    found = metadata.get(function, {}).get(kind, {})
    return {n: tuple(_dim(d) for d in shape) for n, shape in found.items()}
