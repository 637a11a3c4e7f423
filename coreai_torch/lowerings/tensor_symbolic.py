"""Built-in lowerings (tensor family): symbolic sizes (SymInt arithmetic) and Python operator
targets.

A SymInt/SymFloat/SymBool node lowers to a 0-d int64/float64/bool Value computed at run
time from the input shapes, so dynamic dimensions never get baked in.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable

import numpy as np
import torch
import torch.fx

from coreai_core import DType, Location, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet, qualified_name
from coreai_torch.lowerings._common import ValuesMap
from coreai_torch.utils import cast_to, get_operand, node_dtype, normalize_dim, result_dtype

LOWERINGS = LoweringSet("tensor_symbolic")
reg = LOWERINGS.register_torch_lowering


def _size(x: Value, dim: int) -> Value:
    axis = coreai.constant(np.int64(normalize_dim(dim, x.type.rank)))
    return coreai.gather(coreai.get_shape(x), axis, axis=0)


@reg("aten::sym_size.int")
def aten_sym_size_int(self: Value, dim: int) -> Value:
    """sym_size.int(Tensor self, int dim) -> SymInt"""
    return _size(self, dim)


@reg("aten::sym_numel.default")
def aten_sym_numel_default(self: Value) -> Value:
    """sym_numel(Tensor self) -> SymInt"""
    return coreai.reduce_product(coreai.get_shape(self))


@reg("aten::sym_stride.int")
def aten_sym_stride_int(self: Value, dim: int) -> Value:
    """sym_stride.int(Tensor self, int dim) -> SymInt (row-major strides of a fresh tensor)"""
    axis = normalize_dim(dim, self.type.rank)
    shape = coreai.get_shape(self)
    tail = coreai.slice_(shape, [axis + 1], [self.type.rank], axes=[0], strides=[1])
    return coreai.reduce_product(tail)


@reg("aten::sym_storage_offset.default")
def aten_sym_storage_offset_default(self: Value) -> Value:
    """sym_storage_offset(Tensor self) -> SymInt (always 0: programs have no views)"""
    return coreai.constant(np.int64(0))


@reg("aten::sym_is_contiguous.default")
def aten_sym_is_contiguous_default(self: Value) -> Value:
    """sym_is_contiguous(Tensor self, MemoryFormat memory_format) -> SymBool (always true)"""
    return coreai.constant(True)


@reg("aten::_local_scalar_dense.default")
def aten__local_scalar_dense_default(self: Value) -> Value:
    """_local_scalar_dense(Tensor self) -> Scalar (tensor.item())"""
    return cast_to(coreai.reshape(self, np.zeros((0,), np.int64)), result_dtype())


# -- Python operators on SymInt / SymFloat / SymBool ----------------------------------------------
# These targets have no schema, so their lowerings use the FX-node form.

def _operands(values_map: ValuesMap, node: torch.fx.Node) -> list[Value]:
    """The arguments as 0-d Values of one type: Python's int -> float promotion, bool last."""
    kinds = []
    for a in node.args:
        d = node_dtype(a)
        if d is None:
            d = DType.bool if isinstance(a, bool) else (
                DType.int64 if isinstance(a, int) else DType.float64)
        kinds.append(d)
    compute = DType.float64 if any(k.is_float for k in kinds) else (
        DType.int64 if any(k.is_int for k in kinds) else DType.bool)
    if result_dtype(node).is_float:  # true division of ints is a float division
        compute = DType.float64
    return [get_operand(values_map, node, i, dtype=compute) for i in range(len(node.args))]


def _sym_binary(builder: Callable[..., Value]) -> Callable[..., Value]:
    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
        a, b = _operands(values_map, node)
        return cast_to(builder(a, b), result_dtype(node))

    return lowering


_SYM_BINARY: dict[Callable[..., object], Callable[..., Value]] = {
    operator.add: coreai.broadcasting_add, operator.sub: coreai.broadcasting_sub,
    operator.mul: coreai.broadcasting_mul, operator.floordiv: coreai.broadcasting_floor_divide,
    operator.truediv: coreai.broadcasting_divide, operator.mod: coreai.broadcasting_remainder,
    operator.pow: coreai.broadcasting_pow, operator.eq: coreai.broadcasting_equal,
    operator.ne: coreai.broadcasting_not_equal, operator.lt: coreai.broadcasting_less,
    operator.le: coreai.broadcasting_less_equal, operator.gt: coreai.broadcasting_greater,
    operator.ge: coreai.broadcasting_greater_equal, operator.and_: coreai.broadcasting_and,
    operator.or_: coreai.broadcasting_or, torch.sym_max: coreai.broadcasting_maximum,
    torch.sym_min: coreai.broadcasting_minimum,
}
for _fn, _builder in _SYM_BINARY.items():
    reg(qualified_name(_fn))(_sym_binary(_builder))


@reg(qualified_name(operator.neg))
def coreaix_neg_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """operator.neg(SymInt | SymFloat)"""
    return coreai.neg(get_operand(values_map, node, 0))


@reg(qualified_name(torch.sym_not))
def coreaix_sym_not_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """torch.sym_not(SymBool)"""
    return coreai.not_(cast_to(get_operand(values_map, node, 0), DType.bool))


@reg(qualified_name(torch.sym_float))
@reg(qualified_name(torch.sym_int))
def coreaix_sym_float_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                              ) -> Value:
    """torch.sym_float / torch.sym_int (int() truncates toward zero)"""
    x = get_operand(values_map, node, 0)
    if result_dtype(node).is_int and x.type.element_type.is_float:
        x = coreai.trunc(x)
    return cast_to(x, result_dtype(node))


_ROUNDING: dict[object, Callable[..., Value]] = {
    math.ceil: coreai.ceil, math.floor: coreai.floor, math.trunc: coreai.trunc}


def coreaix_ceil_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """math.ceil / math.floor / math.trunc on a SymFloat (a SymInt passes through)"""
    x = get_operand(values_map, node, 0)
    if x.type.element_type.is_float:
        x = _ROUNDING[node.target](x)
    return cast_to(x, result_dtype(node))


for _rounding in _ROUNDING:
    reg(qualified_name(_rounding))(coreaix_ceil_default)
