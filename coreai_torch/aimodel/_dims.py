"""The names and bounds of dynamic dimensions, kept in the asset's custom metadata.

Core AI's tensor types say only that a dimension is dynamic (``?``): they carry neither its
name (which ties the sequence length of two inputs together) nor its bounds. The exporter
writes both into the asset's ``metadata.json`` under :data:`KEY`, and the loaded asset checks
inputs and state against them before anything runs, as ``Program.run`` does.

The value: ``{function: {"input" | "state": {name: [dim, ...]}}}``, each dim an int (static)
or ``[name, min, max]`` (``None`` for a missing bound). An asset's record is read with
:func:`parse_record`, which checks that shape (a record edited by hand or damaged raises
one ``ValueError`` saying what is wrong), and it only names and bounds what Apple's own
descriptor leaves dynamic: a size Apple declares static wins over the record.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from coreai_core import Dim, Graph, TensorType

__all__ = ["KEY", "Record", "declared_shapes", "dims_metadata", "parse_record"]

KEY = "coreai_torch.dynamic_dims"

Shape = list[Any]
# function -> "input" | "state" -> value name -> its dims
Record = dict[str, dict[str, dict[str, tuple[int | Dim, ...]]]]
_KINDS = ("input", "state")
_MAX_SIZE = 2**63 - 1


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


def _size(value: Any, where: str) -> int:
    if type(value) is not int or not 0 <= value <= _MAX_SIZE:
        raise ValueError(f"{where}: expected a size (an integer from 0 to 2**63-1), got "
                         f"{_short(value)}")
    return value


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _dim(d: Any, where: str) -> int | Dim:
    if not isinstance(d, list):
        return _size(d, where)
    if len(d) != 3 or not isinstance(d[0], str):
        raise ValueError(f"{where}: expected a size or [name, min, max], got {_short(d)}")
    lo, hi = (None if b is None else _size(b, where) for b in d[1:])
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"{where}: the bounds [{lo}, {hi}] are empty")
    try:
        return Dim(d[0], lo, hi)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None


def _mapping(value: Any, where: str, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected an object of {what}, got {_short(value)}")
    return value


def parse_record(text: Any) -> Record:
    """The record stored under :data:`KEY` (JSON text), checked; ``ValueError`` says what is
    wrong with it."""
    if not isinstance(text, str):
        raise ValueError(f"expected JSON text, got {_short(text)}")
    try:
        raw = json.loads(text)
    except RecursionError:
        raise ValueError("it is nested too deeply to be a record of shapes") from None
    except ValueError as e:
        raise ValueError(f"it is not valid JSON ({e})") from None
    record: Record = {}
    for function, kinds in _mapping(raw, "the record", "functions").items():
        record[function] = {}
        for kind, values in _mapping(kinds, function, '"input" and "state"').items():
            if kind not in _KINDS:
                raise ValueError(f"{function}: unknown kind {kind!r} (expected input or state)")
            shapes = record[function][kind] = {}
            for name, shape in _mapping(values, f"{function} {kind}", "shapes").items():
                where = f"{function} {kind} {name!r}"
                if not isinstance(shape, list):
                    raise ValueError(f"{where}: expected a list of dims, got {_short(shape)}")
                shapes[name] = tuple(_dim(d, f"{where} axis {i}") for i, d in enumerate(shape))
    return record


def declared_shapes(record: Record, function: str, kind: str,
                    ) -> dict[str, tuple[int | Dim, ...]]:
    """The shapes (dims named and bounded) of ``function``'s inputs or state (``kind``) in
    the checked ``record`` (see :func:`parse_record`); empty when none were recorded (static
    shapes, or an asset written by another tool)."""
    return dict(record.get(function, {}).get(kind, {}))
