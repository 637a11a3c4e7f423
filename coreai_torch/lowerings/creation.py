"""Built-in lowerings (shape family): tensor factories — full/zeros/ones/empty, *_like, new_*,
scalar_tensor, arange — and the shape operands they share with the view ops in ``shape.py``.

``empty``-style ops (``empty.memory_format``, ``empty_strided``, ``empty_like``, ``new_empty``)
lower to zeros: torch leaves their contents unspecified, the converted program makes them
deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch.fx

from coreai_core import DType, Location, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._common import ValuesMap
from coreai_torch.utils import cast_to, get_arg, get_operand, result_dtype, result_type

LOWERINGS = LoweringSet("creation")
reg = LOWERINGS.register_torch_lowering

Piece = int | Value  # a static size, or a 1-element int64 Value holding a dynamic one


# -- shape operands -------------------------------------------------------------------------------

def dim_piece(x: Value, axis: int, loc: Location) -> Piece:
    """Size of ``x`` along ``axis``: an int when static, else a [1] slice of get_shape(x)."""
    d = x.type.shape[axis]
    if isinstance(d, int):
        return d
    return coreai.slice_(coreai.get_shape(x, loc=loc), [axis], [axis + 1], axes=[0],
                         strides=[1], loc=loc)


def size_piece(values_map: ValuesMap, s: Any, loc: Location) -> Piece:
    """A torch size argument (int or SymInt FX node) as a :data:`Piece`."""
    if isinstance(s, torch.fx.Node):
        return coreai.reshape(cast_to(values_map[s.name], DType.int64, loc), [1], loc=loc)
    return int(s)


def shape_operand(pieces: Sequence[Piece], loc: Location) -> Any:
    """A 1-d int64 shape operand: a constant when every piece is static, else a concat."""
    if all(isinstance(p, int) for p in pieces):
        return np.asarray(pieces, dtype=np.int64).reshape(len(pieces))
    parts = [p if isinstance(p, Value) else coreai.constant(np.asarray([p], np.int64), loc=loc)
             for p in pieces]
    return coreai.concat(parts, axis=0, loc=loc)


def shape_of(x: Value, loc: Location) -> Any:
    """The shape of ``x`` as an operand (a constant when static)."""
    if x.type.is_static:
        return np.asarray(x.type.shape, dtype=np.int64).reshape(x.type.rank)
    return coreai.get_shape(x, loc=loc)


def sizes_operand(values_map: ValuesMap, sizes: Sequence[Any], loc: Location) -> Any:
    """A ``SymInt[] size`` argument as a shape operand."""
    return shape_operand([size_piece(values_map, s, loc) for s in sizes], loc)


def _filled(value: Any, dtype: DType, shape: Any, values_map: ValuesMap,
            loc: Location) -> Value:
    """A tensor of ``shape`` filled with ``value`` (a Python scalar or a SymInt/SymFloat node)."""
    if isinstance(value, torch.fx.Node):
        scalar = cast_to(values_map[value.name], dtype, loc)
    else:
        scalar = coreai.constant(value, dtype=dtype, loc=loc)
    if isinstance(shape, np.ndarray) and shape.size == 0:
        return scalar
    return coreai.broadcast_to(scalar, shape, loc=loc)


# -- factories ------------------------------------------------------------------------------------

@reg("aten::full.default")
def aten_full_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""  # noqa: E501
    shape = sizes_operand(values_map, node.args[0], loc)
    return _filled(get_arg(node, 1, "fill_value"), result_dtype(node), shape, values_map, loc)


@reg("aten::zeros.default", "aten::ones.default", "aten::empty.memory_format",
     "aten::empty_strided.default")
def aten_zeros_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """zeros / ones / empty.memory_format (SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor;
    also empty_strided(SymInt[] size, SymInt[] stride, ...). empty is deterministic zeros."""
    value = 1 if node.target._schema.name == "aten::ones" else 0
    shape = sizes_operand(values_map, node.args[0], loc)
    return _filled(value, result_dtype(node), shape, values_map, loc)


@reg("aten::new_zeros.default", "aten::new_ones.default", "aten::new_empty.default")
def aten_new_zeros_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """new_zeros / new_ones / new_empty (Tensor self, SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""  # noqa: E501
    value = 1 if node.target._schema.name == "aten::new_ones" else 0
    shape = sizes_operand(values_map, node.args[1], loc)
    return _filled(value, result_dtype(node), shape, values_map, loc)


@reg("aten::new_full.default")
def aten_new_full_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""  # noqa: E501
    shape = sizes_operand(values_map, node.args[1], loc)
    return _filled(get_arg(node, 2, "fill_value"), result_dtype(node), shape, values_map, loc)


@reg("aten::zeros_like.default", "aten::ones_like.default", "aten::empty_like.default")
def aten_zeros_like_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """zeros_like / ones_like / empty_like (Tensor self, *, ScalarType? dtype=None, ...)"""
    value = 1 if node.target._schema.name == "aten::ones_like" else 0
    x = get_operand(values_map, node, 0, loc)
    return _filled(value, result_dtype(node), shape_of(x, loc), values_map, loc)


@reg("aten::full_like.default")
def aten_full_like_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"""  # noqa: E501
    x = get_operand(values_map, node, 0, loc)
    return _filled(get_arg(node, 1, "fill_value"), result_dtype(node), shape_of(x, loc),
                   values_map, loc)


@reg("aten::fill.Scalar")
def aten_fill_scalar(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """fill.Scalar(Tensor self, Scalar value) -> Tensor"""
    x = get_operand(values_map, node, 0, loc)
    return _filled(get_arg(node, 1, "value"), result_dtype(node), shape_of(x, loc), values_map,
                   loc)


@reg("aten::fill.Tensor")
def aten_fill_tensor(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """fill.Tensor(Tensor self, Tensor value) -> Tensor (value is 0-d)"""
    x = get_operand(values_map, node, 0, loc)
    value = cast_to(get_operand(values_map, node, 1, loc), result_dtype(node), loc)
    if x.type.rank == 0:
        return value
    return coreai.broadcast_to(value, shape_of(x, loc), loc=loc)


@reg("aten::scalar_tensor.default")
def aten_scalar_tensor_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                               ) -> Value:
    """scalar_tensor(Scalar s, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""  # noqa: E501
    return _filled(node.args[0], result_dtype(node), np.zeros(0, np.int64), values_map, loc)


# -- arange ---------------------------------------------------------------------------------------

def _scalar_value(values_map: ValuesMap, arg: Any, dtype: DType, loc: Location) -> Value:
    if isinstance(arg, torch.fx.Node):
        return cast_to(values_map[arg.name], dtype, loc)
    return coreai.constant(arg, dtype=dtype, loc=loc)


def _arange(values_map: ValuesMap, node: torch.fx.Node, start: Any, end: Any, step: Any,
            loc: Location) -> Value:
    """torch's CPU arange: ``start + step * i`` computed in the accumulation type (int64 for
    integer results, with start/step truncated toward zero; double for float32/float64; float
    for the half types) and rounded once to the result type. The length is torch's (from the
    node's result type) whenever the bounds are static."""
    out = result_type(node)
    dtype = out.element_type
    if not dtype.is_float:
        acc = DType.int64
    else:
        acc = DType.float64 if dtype in (DType.float32, DType.float64) else DType.float32
    n = out.shape[0]
    if isinstance(n, int):
        i64 = [coreai.constant(v, dtype=DType.int64, loc=loc) for v in (0, n, 1)]
        idx = cast_to(coreai.range_(*i64, loc=loc), acc, loc)
        scaled = coreai.broadcasting_mul(idx, _scalar_value(values_map, step, acc, loc), loc=loc)
        values = coreai.broadcasting_add(scaled, _scalar_value(values_map, start, acc, loc),
                                         loc=loc)
    else:
        values = coreai.range_(*(_scalar_value(values_map, v, acc, loc)
                                 for v in (start, end, step)), loc=loc)
    return cast_to(values, dtype, loc)


@reg("aten::arange.start_step")
def aten_arange_start_step(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""  # noqa: E501
    return _arange(values_map, node, node.args[0], get_arg(node, 1, "end"),
                   get_arg(node, 2, "step", 1), loc)


@reg("aten::arange.start")
def aten_arange_start(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """arange.start(Scalar start, Scalar end, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""  # noqa: E501
    return _arange(values_map, node, node.args[0], get_arg(node, 1, "end"), 1, loc)


@reg("aten::arange.default")
def aten_arange_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """arange(Scalar end, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""  # noqa: E501
    return _arange(values_map, node, 0, node.args[0], 1, loc)
