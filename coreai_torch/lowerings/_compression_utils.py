"""Helpers of the compression lowerings: read a constant operand's data (for the argument
checks eager runs too), and store a constant operand in another form (bit-packed, or retyped
to a 4-bit type), in place when only the op being lowered reads it."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from coreai_core import TensorType, Value, WeightRef, current_program
from coreai_core.dialects import coreai


def constant_data(value: Value | None) -> np.ndarray | None:
    """The data of a constant operand (a bound weight or an inline constant); None for a
    value computed in the graph or an unbound weight (its checks wait for the data)."""
    op = value.owner if value is not None else None
    if op is None or op.name != "coreai.constant":
        return None
    ref = op.attributes["value"]
    if isinstance(ref, WeightRef):
        program = current_program()
        data = None if program is None else program.weights.get(ref.name)
        return None if data is None else np.asarray(data)
    return np.asarray(ref)


def converted_constant(value: Value, target: TensorType,
                       convert: Callable[[np.ndarray], np.ndarray], what: str,
                       sole_reader: bool) -> Value:
    """The constant ``value`` stored as ``convert(data)`` of type ``target``.

    The weight is replaced when the op being lowered is its only reader (the program keeps one
    copy), else the converted form is stored once as a weight of its own that every reader
    shares (a tied embedding read by the gather and the output projection, in two
    entrypoints); a weight an earlier entrypoint already converted (its type is ``target``) is
    used as it is.
    """
    if value.type == target:
        return value
    op = value.owner
    if op is None or op.name != "coreai.constant":
        raise ValueError(f"{what} must be a constant (a buffer or parameter of the module), not "
                         f"a value computed in the graph ({value!r})")
    ref = op.attributes["value"]
    program = current_program()
    if isinstance(ref, WeightRef):
        data = None if program is None else program.weights.get(ref.name)
        if data is None:
            raise ValueError(f"{what} must be bound (the weight {ref} has no data)")
    else:
        data = ref
    shared = None
    if isinstance(ref, WeightRef) and not sole_reader and program is not None:
        shared = f"{ref.name}.as_" + re.sub(r"[^0-9A-Za-z_]", "_", str(target))
        if program.weight_types.get(shared) == target:
            return coreai.constant(WeightRef(shared))
    converted = convert(np.asarray(data))
    if isinstance(ref, WeightRef) and sole_reader and program is not None:
        program.weights[ref.name] = converted
        program.weight_types[ref.name] = target
        value.type = target
        return value
    if shared is not None and program is not None:
        program.add_weight(shared, converted)
        return coreai.constant(WeightRef(shared))
    return coreai.constant(converted, dtype=target.element_type)
