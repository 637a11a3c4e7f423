"""Matrix helpers shared by the linear-algebra lowerings: transposes, triangles, diagonals."""

from __future__ import annotations

import numpy as np

from coreai_core import DType, TensorType, Value
from coreai_core.dialects import coreai


def matrix_dims(x: Value, what: str) -> tuple[int, int]:
    """The static (rows, cols) of a matrix stack; the batch dims may be dynamic."""
    m, n = x.type.shape[-2:]
    if not isinstance(m, int) or not isinstance(n, int):
        raise NotImplementedError(f"{what} needs static matrix sizes, got {x.type}")
    return m, n


def mT(x: Value) -> Value:
    """Swap the last two axes."""
    r = x.type.rank
    return coreai.transpose(x, [*range(r - 2), r - 1, r - 2])


def mH(x: Value) -> Value:
    """The conjugate transpose of the last two axes (``mT`` for real x)."""
    t = mT(x)
    return coreai.conj(t) if x.type.element_type.is_complex else t


def triangle(x: Value, upper: bool, diagonal: int = 0) -> Value:
    """``triu(x, diagonal)`` (or ``tril``) of a matrix stack; the rest is zero."""
    m, n = matrix_dims(x, "a triangle")
    ones = np.ones((m, n), bool)
    mask = np.triu(ones, diagonal) if upper else np.tril(ones, diagonal)
    zero = coreai.constant(0, dtype=x.type.element_type)
    return coreai.broadcasting_where(coreai.constant(mask), x, zero)


def eye(m: int, n: int, dtype: DType) -> Value:
    return coreai.constant(np.eye(m, n, dtype=dtype.numpy))


def diagonal(x: Value) -> Value:
    """The main diagonal ``[*, min(m, n)]`` of a matrix stack (non-finite entries elsewhere
    do not leak in: the off-diagonal is selected away, not multiplied by zero)."""
    m, n = matrix_dims(x, "a diagonal")
    k = min(m, n)
    square = slice_matrix(x, k, k)
    zero = coreai.constant(0, dtype=x.type.element_type)
    on_diag = coreai.broadcasting_where(coreai.constant(np.eye(k, dtype=bool)), square, zero)
    return coreai.reduce_sum(on_diag, axes=[-1])


def slice_matrix(x: Value, rows: int, cols: int) -> Value:
    """The leading ``rows x cols`` block of each matrix."""
    m, n = matrix_dims(x, "a matrix block")
    if (rows, cols) == (m, n):
        return x
    return coreai.slice_(x, [0, 0], [rows, cols], axes=[-2, -1], strides=[1, 1])


def pad_cols(x: Value, cols: int) -> Value:
    """Zero columns appended (or columns dropped) so that each matrix has ``cols`` columns."""
    m, n = matrix_dims(x, "a matrix")
    if cols == n:
        return x
    if cols < n:
        return slice_matrix(x, m, cols)
    pads = [0] * (2 * x.type.rank)
    pads[-1] = cols - n
    return coreai.pad(x, pads)


def empty(t: TensorType) -> Value:
    """A constant for a result torch leaves empty (e.g. Q of ``qr(mode="r")``)."""
    shape = [d if isinstance(d, int) else 0 for d in t.shape]
    return coreai.constant(np.zeros(shape, t.element_type.numpy))


def permutation_sign(pivots: Value, dtype: DType) -> Value:
    """+1 or -1 per matrix: the parity of the row interchanges LAPACK pivots describe."""
    k = pivots.type.shape[-1]
    if not isinstance(k, int):
        raise NotImplementedError(f"pivots need a static length, got {pivots.type}")
    unmoved = coreai.constant(np.arange(1, k + 1, dtype=np.int32))
    swaps = coreai.cast(coreai.broadcasting_not_equal(pivots, unmoved), DType.int32)
    odd = coreai.broadcasting_modulo(coreai.reduce_sum(swaps, axes=[-1]),
                                     coreai.constant(2, dtype=DType.int32))
    # 1 - 2 * odd, in the real type and then (for a complex dtype) cast
    real = dtype.real_dtype
    one = coreai.constant(1, dtype=real)
    sign = coreai.broadcasting_sub(one, coreai.broadcasting_mul(
        coreai.constant(2, dtype=real), coreai.cast(odd, real)))
    return sign if real is dtype else coreai.cast(sign, dtype)


def sgn(x: Value) -> Value:
    """``x / |x|`` (0 at 0) for complex x; ``sign(x)`` for real x."""
    if not x.type.element_type.is_complex:
        return coreai.sign(x)
    modulus = coreai.cast(coreai.abs_(x), x.type.element_type)
    zero = coreai.constant(0, dtype=x.type.element_type)
    is_zero = coreai.broadcasting_equal(modulus, zero)
    safe = coreai.broadcasting_where(is_zero, coreai.constant(1, dtype=x.type.element_type),
                                     modulus)
    return coreai.broadcasting_where(is_zero, zero, coreai.broadcasting_divide(x, safe))
