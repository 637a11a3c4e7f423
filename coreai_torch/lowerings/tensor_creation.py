"""Built-in lowerings (tensor family): tensor factories — full/zeros/ones/empty, *_like, new_*,
scalar_tensor, arange, empty_permuted, tril_indices/triu_indices — and the shape operands they
share with the view ops in ``tensor_shape.py``.

``empty``-style ops (``empty.memory_format``, ``empty_strided``, ``empty_like``, ``new_empty``)
lower to zeros: torch leaves their contents unspecified, the converted program makes them
deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.utils import cast_to, result_dtype, result_type

LOWERINGS = LoweringSet("tensor_creation")
reg = LOWERINGS.register_torch_lowering

Piece = int | Value  # a static size, or a 1-element int64 Value holding a dynamic one


# -- shape operands -------------------------------------------------------------------------------

def dim_piece(x: Value, axis: int) -> Piece:
    """Size of ``x`` along ``axis``: an int when static, else a [1] slice of get_shape(x)."""
    d = x.type.shape[axis]
    if isinstance(d, int):
        return d
    return coreai.slice_(coreai.get_shape(x), [axis], [axis + 1], axes=[0],
                         strides=[1])


def size_piece(s: int | Value) -> Piece:
    """A torch size argument (an int, or a symbolic size's 0-d Value) as a :data:`Piece`."""
    if isinstance(s, Value):
        return coreai.reshape(cast_to(s, DType.int64), [1])
    return int(s)


def shape_operand(pieces: Sequence[Piece]) -> Any:
    """A 1-d int64 shape operand: a constant when every piece is static, else a concat."""
    if all(isinstance(p, int) for p in pieces):
        return np.asarray(pieces, dtype=np.int64).reshape(len(pieces))
    parts = [p if isinstance(p, Value) else coreai.constant(np.asarray([p], np.int64))
             for p in pieces]
    return coreai.concat(parts, axis=0)


def shape_of(x: Value) -> Any:
    """The shape of ``x`` as an operand (a constant when static)."""
    if x.type.is_static:
        return np.asarray(x.type.shape, dtype=np.int64).reshape(x.type.rank)
    return coreai.get_shape(x)


def sizes_operand(sizes: Sequence[int | Value]) -> Any:
    """A ``SymInt[] size`` argument as a shape operand."""
    return shape_operand([size_piece(s) for s in sizes])


def _filled(value: float | Value, shape: Any) -> Value:
    """A tensor of ``shape`` and the node's dtype filled with ``value`` (a number or a Value)."""
    scalar = cast_to(value, result_dtype())
    if isinstance(shape, np.ndarray) and shape.size == 0:
        return scalar
    return coreai.broadcast_to(scalar, shape)


# -- factories ------------------------------------------------------------------------------------
# Core AI tensors are dense values on one device: the binder ignores ``layout``, ``device``,
# ``pin_memory`` and ``memory_format`` (coreai_torch._schema.IGNORED_ARGUMENTS). ``dtype`` is
# declared so that any value is accepted; the result type already carries it.

@reg("aten::full.default")
def aten_full_default(size: list[int | Value], fill_value: float | Value,
                      dtype: DType | None = None) -> Value:
    """full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""  # noqa: E501
    return _filled(fill_value, sizes_operand(size))


def _constant_factory(value: int) -> Callable[..., Value]:
    def lowering(size: list[int | Value], stride: list[int | Value] | None = None,
                 dtype: DType | None = None) -> Value:
        return _filled(value, sizes_operand(size))

    return lowering


def _register_fills(rows: Sequence[tuple[str, int]], factory: Callable[[int], Callable[..., Value]],
                    doc: str) -> None:
    """Register ``factory(value)`` for ``aten::<overload>`` of each ``(overload, value)`` row,
    documented by ``doc``, formatted with the row's ``value``, ``overload`` and ``op`` (the
    overload's name before the dot)."""
    for overload, value in rows:
        doc_text = doc.format(overload=overload, op=overload.partition(".")[0], value=value)
        reg(f"aten::{overload}")(factory(value)).__doc__ = doc_text


_register_fills((("zeros.default", 0), ("ones.default", 1), ("empty.memory_format", 0),
                 ("empty_strided.default", 0)), _constant_factory,
                "{overload}(SymInt[] size, ...) -> Tensor filled with {value} (empty: zeros)")


def _new_factory(value: int) -> Callable[..., Value]:
    def lowering(self: Value, size: list[int | Value], dtype: DType | None = None) -> Value:
        return _filled(value, sizes_operand(size))

    return lowering


_register_fills((("new_zeros.default", 0), ("new_ones.default", 1), ("new_empty.default", 0)),
                _new_factory, "{op}(Tensor self, SymInt[] size, ...) -> Tensor filled with "
                "{value}")


@reg("aten::new_full.default")
def aten_new_full_default(self: Value, size: list[int | Value], fill_value: float | Value,
                          dtype: DType | None = None) -> Value:
    """new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""  # noqa: E501
    return _filled(fill_value, sizes_operand(size))


def _like_factory(value: int) -> Callable[..., Value]:
    def lowering(self: Value, dtype: DType | None = None) -> Value:
        return _filled(value, shape_of(self))

    return lowering


_register_fills((("zeros_like.default", 0), ("ones_like.default", 1), ("empty_like.default", 0)),
                _like_factory, "{op}(Tensor self, ...) -> Tensor filled with {value}")


@reg("aten::full_like.default")
def aten_full_like_default(self: Value, fill_value: float | Value,
                           dtype: DType | None = None) -> Value:
    """full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"""  # noqa: E501
    return _filled(fill_value, shape_of(self))


@reg("aten::fill.Scalar")
def aten_fill_scalar(self: Value, value: float | Value) -> Value:
    """fill.Scalar(Tensor self, Scalar value) -> Tensor"""
    return _filled(value, shape_of(self))


@reg("aten::fill.Tensor")
def aten_fill_tensor(self: Value, value: Value) -> Value:
    """fill.Tensor(Tensor self, Tensor value) -> Tensor (value is 0-d)"""
    value = cast_to(value, result_dtype())
    if self.type.rank == 0:
        return value
    return coreai.broadcast_to(value, shape_of(self))


@reg("aten::scalar_tensor.default")
def aten_scalar_tensor_default(s: float | Value, dtype: DType | None = None) -> Value:
    """scalar_tensor(Scalar s, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""  # noqa: E501
    return _filled(s, np.zeros(0, np.int64))


# -- arange ---------------------------------------------------------------------------------------

def _arange(start: float | Value, end: float | Value, step: float | Value) -> Value:
    """torch's CPU arange: ``start + step * i`` computed in the accumulation type (int64 for
    integer results, with start/step truncated toward zero; double for float32/float64; float
    for the half types) and rounded once to the result type. The length is torch's (from the
    node's result type) whenever the bounds are static."""
    out = result_type()
    dtype = out.element_type
    if not dtype.is_float:
        acc = DType.int64
    else:
        acc = DType.float64 if dtype in (DType.float32, DType.float64) else DType.float32
    n = out.shape[0]
    if isinstance(n, int):
        i64 = [coreai.constant(v, dtype=DType.int64) for v in (0, n, 1)]
        idx = cast_to(coreai.range_(*i64), acc)
        scaled = coreai.broadcasting_mul(idx, cast_to(step, acc))
        values = coreai.broadcasting_add(scaled, cast_to(start, acc))
    else:
        values = coreai.range_(*(cast_to(v, acc) for v in (start, end, step)))
    return cast_to(values, dtype)


@reg("aten::arange.start_step")
def aten_arange_start_step(start: float | Value, end: float | Value, step: float | Value = 1,
                           dtype: DType | None = None) -> Value:
    """arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""  # noqa: E501
    return _arange(start, end, step)


@reg("aten::arange.start")
def aten_arange_start(start: float | Value, end: float | Value,
                      dtype: DType | None = None) -> Value:
    """arange.start(Scalar start, Scalar end, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""  # noqa: E501
    return _arange(start, end, 1)


@reg("aten::arange.default")
def aten_arange_default(end: float | Value, dtype: DType | None = None) -> Value:
    """arange(Scalar end, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""  # noqa: E501
    return _arange(0, end, 1)


@reg("aten::empty_permuted.default")
def aten_empty_permuted_default(size: list[int | Value], physical_layout: list[int],
                                dtype: DType | None = None) -> Value:
    """empty_permuted(SymInt[] size, int[] physical_layout, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    Zeros of the logical ``size`` (the physical layout is a storage order Core AI tensors do
    not have; torch leaves the contents unspecified).
    """  # noqa: E501
    shape = sizes_operand(size)
    zero = cast_to(0, result_dtype())
    if isinstance(shape, np.ndarray) and shape.size == 0:
        return zero
    return coreai.broadcast_to(zero, shape)


def _triangle_indices(pick: Callable[..., tuple[np.ndarray, np.ndarray]]) -> Callable[..., Value]:
    def lowering(row: int, col: int, offset: int = 0, dtype: DType | None = None) -> Value:
        rows, cols = pick(row, offset, col)
        coords = np.stack([rows, cols]).astype(np.int64).reshape(2, len(rows))
        return cast_to(coreai.constant(coords), result_dtype())

    return lowering


for _name, _pick in (("tril_indices", np.tril_indices), ("triu_indices", np.triu_indices)):
    _fn = reg(f"aten::{_name}.default")(_triangle_indices(_pick))
    _fn.__doc__ = (f"{_name}(int row, int col, int offset=0, *, ScalarType? dtype=long, ...) -> "
                   "Tensor: the [2, N] coordinates in row-major order (a constant)")
