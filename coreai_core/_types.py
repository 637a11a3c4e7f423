"""Tensor types: element type plus a shape of static sizes and dynamic :class:`Dim` symbols.

Plain data below the IR (:mod:`coreai_core._ir` re-exports it): a dimension is an int or a
named symbol with optional inclusive bounds; see :mod:`coreai_core.runtime._dims` for what a
symbol's name may express (a relation to other symbols) and how ``run()`` checks it.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from coreai_core._dtypes import SHORT_NAME, DType
from coreai_core._syntax import DIM_NAME, quote

__all__ = ["Dim", "TensorType", "format_type"]


@attrs.frozen
class Dim:
    """A dynamic dimension: a named symbol with optional inclusive bounds."""

    name: str = "?"
    min: int | None = None
    max: int | None = None

    def __str__(self) -> str:
        return _format_dim(self)

    def admits(self, size: int) -> bool:
        return (self.min is None or size >= self.min) and (self.max is None or size <= self.max)


def _to_dim(d: Any) -> int | Dim:
    if isinstance(d, Dim):
        return d
    if d is None:
        return Dim()
    if isinstance(d, str):
        return Dim(d)
    if isinstance(d, (bool, np.bool_)):
        raise TypeError(f"a dimension must be an int or a Dim, got {d!r}")
    try:
        i = int(d)
    except (TypeError, ValueError):
        raise TypeError(f"a dimension must be an int or a Dim, got {d!r}") from None
    if i != d or i < 0:
        raise ValueError(f"a static dimension must be a non-negative int, got {d!r}")
    return i


def _to_dtype(dtype: Any) -> DType:
    return DType.of(dtype)


def _to_shape(shape: Any) -> tuple[int | Dim, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    # fast path: types are built constantly while converting; most shapes are plain ints
    if type(shape) in (tuple, list) and all((type(d) is int and d >= 0) or type(d) is Dim
                                            for d in shape):
        return tuple(shape)
    return tuple(_to_dim(d) for d in shape)


@attrs.frozen
class TensorType:
    """Type of a tensor value: a shape (ints or :class:`Dim`) and an element type."""

    shape: tuple[int | Dim, ...] = attrs.field(converter=_to_shape)
    element_type: DType = attrs.field(converter=_to_dtype)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    @property
    def static_shape(self) -> tuple[int, ...] | None:
        """The shape as ints, or None when a dimension is dynamic."""
        dims = tuple(d for d in self.shape if isinstance(d, int))
        return dims if len(dims) == len(self.shape) else None

    @property
    def numel(self) -> int | None:
        """Number of elements, or None when a dimension is dynamic."""
        shape = self.static_shape
        return None if shape is None else int(np.prod(shape, dtype=np.int64))

    @property
    def dtype(self) -> DType:
        return self.element_type

    def with_shape(self, shape: Any) -> TensorType:
        return TensorType(shape, self.element_type)

    def with_dtype(self, dtype: Any) -> TensorType:
        return TensorType(self.shape, dtype)

    def __str__(self) -> str:
        return format_type(self)


def admits(t: TensorType, arr: np.ndarray) -> bool:
    """Whether ``arr`` is a value of ``t``: its dtype, rank, static sizes, bounds, and one size
    per named symbol."""
    if DType.of(arr.dtype) != t.element_type or arr.ndim != t.rank:
        return False
    seen: dict[str, int] = {}
    for d, n in zip(t.shape, arr.shape, strict=True):
        if isinstance(d, int):
            if d != n:
                return False
        elif not d.admits(n) or (d.name != "?" and seen.setdefault(d.name, n) != n):
            return False
    return True


def format_type(t: TensorType) -> str:
    """``tensor<2x?batch[1:64]xf32>``: the unambiguous text of a tensor type."""
    dims = "".join(_format_dim(d) + "x" for d in t.shape)
    return f"tensor<{dims}{SHORT_NAME[t.element_type]}>"


def _format_dim(d: int | Dim) -> str:
    if not isinstance(d, Dim):
        return str(d)
    name = "" if d.name == "?" else d.name if DIM_NAME.fullmatch(d.name) else quote(d.name)
    bounds = ""
    if d.min is not None or d.max is not None:
        bounds = f"[{'' if d.min is None else d.min}:{'' if d.max is None else d.max}]"
    return f"?{name}{bounds}"
