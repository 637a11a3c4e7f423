"""What an op mapping may ask while exporting: constant operands, result types, dtypes.

Also the type narrowing rules (int64 -> int32, float64 -> float32), in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from coreai_core import DType, Graph, Operation, Program, TensorType, Value, WeightRef

__all__ = ["APPLE_DTYPES", "NARROWED", "Emit", "ExportContext", "OpMapping", "Refused",
           "apple_shape", "narrow_constant"]

# Element types an .aimodel holds, as the numpy dtypes Apple's builders accept.
APPLE_DTYPES: dict[DType, Any] = {
    DType.float32: np.float32, DType.float16: np.float16, DType.bfloat16: DType.bfloat16.numpy.type,
    DType.int32: np.int32,
    DType.int16: np.int16, DType.int8: np.int8, DType.uint32: np.uint32, DType.uint16: np.uint16,
    DType.uint8: np.uint8, DType.bool: np.bool_,
    # inside graphs only (export.py refuses complex inputs and outputs): mappings/complex.py
    DType.complex64: np.complex64,
    # compressed weights and quantized tensors (4-bit constants are stored packed)
    **{d: d.numpy.type for d in (DType.int4, DType.uint4, DType.float4_e2m1fn,
                                 DType.float8_e4m3fn, DType.float8_e5m2)},
}
# 64-bit types become 32-bit ones: Apple's runtime has no 64-bit tensors in practice.
NARROWED: dict[DType, DType] = {DType.int64: DType.int32, DType.float64: DType.float32,
                                DType.complex128: DType.complex64}


def apple_shape(t: TensorType | Value) -> tuple[int, ...]:
    """``t``'s shape as Core AI builders take it: -1 for a dynamic dimension (``?``)."""
    typ = t.type if isinstance(t, Value) else t
    return tuple(d if isinstance(d, int) else -1 for d in typ.shape)


class Refused(Exception):
    """A mapping cannot export this op exactly; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def exported_dtype(dtype: DType) -> DType:
    """The element type ``dtype`` has in the .aimodel, or :class:`Refused`."""
    dtype = NARROWED.get(dtype, dtype)
    if dtype not in APPLE_DTYPES:
        raise Refused(f"element type {dtype.name} has no .aimodel counterpart")
    return dtype


def narrow_constant(array: np.ndarray) -> np.ndarray:
    """``array`` in its exported element type; :class:`Refused` if its values do not fit."""
    dtype = DType.of(array.dtype)
    target = exported_dtype(dtype)
    if target is dtype:
        return array
    if dtype is DType.int64:
        info = np.iinfo(np.int32)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise Refused(f"int64 constant values in [{array.min()}, {array.max()}] do not "
                          f"fit int32")
        return array.astype(np.int32)
    parts = np.stack([array.real, array.imag]) if array.dtype.kind == "c" else array
    if np.any(np.abs(parts[np.isfinite(parts)]) > np.finfo(np.float32).max):
        raise Refused(f"{dtype.name} constant values overflow {target.name}")
    return array.astype(target.numpy)


# Emits a graph's ops on Apple values standing for its inputs; returns its outputs' values.
Inline = Callable[[Graph, Sequence[Any]], list[Any]]


def _no_inlining(graph: Graph, args: Sequence[Any]) -> list[Any]:
    raise Refused("nested graphs cannot be emitted here")


class ExportContext:
    """Read-only facts about the program being exported, for the op mappings; ``inline``:
    the exporter's walk, for ops whose attributes hold graphs (branches); ``invoke``: a call
    of a graph of the program (a Core AI composite function, or else ``inline``)."""

    def __init__(self, program: Program, inline: Inline = _no_inlining,
                 invoke: Inline | None = None) -> None:
        self.program = program
        self.inline = inline
        self.invoke = inline if invoke is None else invoke

    def constant_array(self, value: Value) -> np.ndarray:
        """The data of ``value`` if a ``coreai.constant`` makes it, else :class:`Refused`."""
        op = value.owner
        if op is None or op.name != "coreai.constant":
            raise Refused("an operand that must be known at export time is computed")
        data = op.attributes["value"]
        if isinstance(data, WeightRef):
            data = self.program.weights.get(data.name)
            if data is None:
                raise Refused(f"weight {op.attributes['value'].name!r} is not bound")
        return np.asarray(data)

    def constant_ints(self, value: Value) -> list[int]:
        return [int(v) for v in self.constant_array(value).reshape(-1)]

    @staticmethod
    def static_shape(value: Value) -> tuple[int, ...]:
        """``value``'s shape, or :class:`Refused` for a dynamic one (the mapping reads
        sizes at export time)."""
        shape = value.type.static_shape
        if shape is None:
            raise Refused(f"its mapping needs static shapes (it reads sizes at export time), "
                          f"got {value.type}: export with static shapes")
        return shape

    def result_shape(self, op: Operation, index: int = 0) -> tuple[int, ...]:
        return self.static_shape(op.results[index])

    @staticmethod
    def apple_dtype(t: TensorType | Value) -> Any:
        """The numpy dtype of ``t``'s exported element type."""
        typ = t.type if isinstance(t, Value) else t
        return APPLE_DTYPES[exported_dtype(typ.element_type)]


Emit = Callable[[ExportContext, Operation, Sequence[Any]], list[Any]]


@attrs.frozen
class OpMapping:
    """How one dialect op becomes Core AI ops (an entry of ``ops.MAPPINGS``)."""

    emit: Emit
    core_ai: str  # the Core AI op(s) emitted, for the documentation table
