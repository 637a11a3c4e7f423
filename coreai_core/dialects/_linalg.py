"""Linear algebra: factorizations and solves on the last two axes, batched over the others.

Every op treats its operands as stacks of matrices ``[*batch, rows, cols]`` (vectors
``[*batch, n]`` for pivots, taus, singular/eigen values). Operands that meet (a factor and a
right-hand side) broadcast their batch dims like ``batch_matmul``. Conventions are LAPACK's,
which are also torch.linalg's: pivots are 1-based int32 row interchanges (row ``i`` was swapped
with row ``pivots[i]``, applied in order), ``info`` is an int32 per matrix, 0 on success and
``k > 0`` when the ``k``-th leading minor / pivot failed (the factor is then incomplete but
defined). Factorizations that are not unique (signs of singular vectors, eigenvector phases)
are defined up to that freedom. Element types: float32, float64, complex64 and complex128;
for complex matrices every transpose below is the conjugate transpose (``.T`` reads ``^H``),
"symmetric" reads "Hermitian", and singular values and eigh's eigenvalues are real.
"""

from __future__ import annotations

from coreai_core._dtypes import DType
from coreai_core._ir import Dim, TensorType, Value
from coreai_core._opdef import builder_names, defop
from coreai_core._shapes import broadcast_shapes, expect, same_dtype

_LINALG_DTYPES = (DType.float32, DType.float64, DType.complex64, DType.complex128)
DimT = int | Dim


def _matrix(x: Value, what: str, square: bool = False) -> tuple[tuple, DimT, DimT]:
    """(batch, rows, cols) of a matrix stack, checking its rank and element type."""
    t = x.type
    expect(t.rank >= 2, f"{what} must be a matrix or a stack of matrices, got {t}")
    expect(t.element_type in _LINALG_DTYPES,
           f"{what} must be float32, float64, complex64 or complex128 (like torch.linalg), "
           f"got {t}")
    *batch, m, n = t.shape
    if square and isinstance(m, int) and isinstance(n, int):
        expect(m == n, f"{what} must be square, got {t}")
    return tuple(batch), m, n


def _min(a: DimT, b: DimT) -> DimT:
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    if a == b:
        return a
    return Dim()


def _same(a: DimT, b: DimT, message: str) -> None:
    if isinstance(a, int) and isinstance(b, int):
        expect(a == b, message)


def _pivots(pivots: Value, what: str) -> None:
    expect(pivots.type.element_type is DType.int32 and pivots.type.rank >= 1,
           f"{what} pivots must be an int32 vector (stack), got {pivots.type}")


@defop(traits=("multi_result", "heavy"))
def svd(x: Value, full_matrices: bool = False, compute_uv: bool = True) -> list[TensorType]:
    """Singular value decomposition ``x = u @ diag(s) @ vh`` with s descending.

    Results ``(u, s, vh)`` with u ``[*, m, m|k]``, s ``[*, k]``, vh ``[*, n|k, n]`` where
    ``k = min(m, n)`` (``full_matrices`` selects the square forms); only ``(s,)`` when not
    ``compute_uv``. Singular vectors are unique up to a common sign per singular pair.
    """
    batch, m, n = _matrix(x, "svd input")
    k = _min(m, n)
    s = TensorType([*batch, k], x.type.element_type.real_dtype)
    if not compute_uv:
        return [s]
    u = x.type.with_shape([*batch, m, m if full_matrices else k])
    vh = x.type.with_shape([*batch, n if full_matrices else k, n])
    return [u, s, vh]


@defop(traits=("multi_result", "heavy"))
def eigh(x: Value, upper: bool = False, compute_v: bool = True) -> list[TensorType]:
    """Eigen-decomposition of symmetric matrices, reading only the lower (or ``upper``) triangle.

    Results ``(w, v)``: eigenvalues ``[*, n]`` ascending and orthonormal eigenvectors as the
    columns of ``v`` ``[*, n, n]`` (each unique up to sign for distinct eigenvalues); only
    ``(w,)`` when not ``compute_v``.
    """
    batch, n, _ = _matrix(x, "eigh input", square=True)
    w = TensorType([*batch, n], x.type.element_type.real_dtype)
    return [w, x.type] if compute_v else [w]


@defop(traits=("multi_result", "heavy"))
def eig(x: Value) -> tuple[TensorType, TensorType]:
    """Eigen-decomposition of general square matrices (LAPACK geev), always complex.

    Results ``(w, v)``: eigenvalues ``[*, n]`` in no particular order and eigenvectors as the
    columns of ``v`` ``[*, n, n]`` with ``x @ v = v @ diag(w)``, each scaled to unit norm
    (unique up to a unit complex factor for distinct eigenvalues). The element type is the
    complex type of the input's precision (complex64 for float32 and complex64 input).
    """
    batch, n, _ = _matrix(x, "eig input", square=True)
    c = x.type.element_type.complex_dtype
    return TensorType([*batch, n], c), x.type.with_dtype(c)


@defop(traits=("multi_result", "heavy"))
def cholesky(x: Value, upper: bool = False) -> tuple[TensorType, TensorType]:
    """Cholesky factor of symmetric positive-definite matrices, and an int32 info per matrix.

    Results ``(factor, info)``: ``x = L @ L.T`` with L lower triangular (or ``x = U.T @ U``
    with ``upper``), read from that triangle of x; the other triangle of the factor is zero.
    ``info = k > 0`` when the leading minor of order k is not positive definite.
    """
    batch, _, _ = _matrix(x, "cholesky input", square=True)
    return x.type, TensorType(list(batch), DType.int32)


@defop(traits=("multi_result", "heavy"))
def lu_factor(x: Value) -> tuple[TensorType, TensorType, TensorType]:
    """LU factorization with partial pivoting (LAPACK getrf) of ``[*, m, n]`` matrices.

    Results ``(lu, pivots, info)``: L (unit lower, diagonal not stored) and U packed in one
    ``[*, m, n]`` matrix, 1-based int32 ``pivots`` ``[*, min(m, n)]`` and int32 ``info``
    ``[*]`` (``k > 0`` when ``U[k-1, k-1]`` is exactly zero). ``x = P @ L @ U``.
    """
    batch, m, n = _matrix(x, "lu_factor input")
    return (x.type, TensorType([*batch, _min(m, n)], DType.int32),
            TensorType(list(batch), DType.int32))


@defop(traits=("heavy",))
def lu_solve(lu: Value, pivots: Value, b: Value, adjoint: bool = False) -> TensorType:
    """Solve ``A @ X = B`` (``A.T @ X = B`` with ``adjoint``) from ``lu_factor``'s lu and pivots.

    ``lu`` ``[*, n, n]``, ``pivots`` ``[*, n]``, ``b`` ``[*, n, k]``; batch dims broadcast.
    """
    dtype = same_dtype(lu, b)
    lb, n, _ = _matrix(lu, "lu_solve factor", square=True)
    bb, nb, k = _matrix(b, "lu_solve right-hand side")
    _pivots(pivots, "lu_solve")
    _same(pivots.type.shape[-1], n, f"pivots {pivots.type} do not match the factor {lu.type}")
    _same(nb, n, f"right-hand side {b.type} does not match the factor {lu.type}")
    return TensorType([*broadcast_shapes(lb, pivots.type.shape[:-1], bb), n, k], dtype)


@defop()
def pivots_to_permutation(pivots: Value, size: int) -> TensorType:
    """The row order that LAPACK pivots produce: int64 ``perm`` ``[*, size]``.

    Starting from ``0, 1, ..., size - 1``, entry ``i`` is swapped with entry ``pivots[i] - 1``
    for each i in order, so that ``x[perm] = L @ U`` for ``x``'s ``lu_factor`` (``P.T @ x``).
    """
    _pivots(pivots, "pivots_to_permutation")
    k = pivots.type.shape[-1]
    expect(size >= 0, f"size must be >= 0, got {size}")
    if isinstance(k, int):
        expect(k <= size, f"{k} pivots cannot permute {size} rows")
    return TensorType([*pivots.type.shape[:-1], size], DType.int64)


@defop(traits=("heavy",))
def triangular_solve(a: Value, b: Value, upper: bool, left: bool = True,
                     unitriangular: bool = False) -> TensorType:
    """Solve ``A @ X = B`` (or ``X @ A = B`` when not ``left``) for triangular A (BLAS trsm).

    Only the ``upper`` (or lower) triangle of ``a`` is read; with ``unitriangular`` its
    diagonal is taken as ones. ``a`` ``[*, n, n]``; ``b`` ``[*, n, k]`` (``[*, k, n]`` when not
    ``left``); batch dims broadcast. A zero on the diagonal gives inf/NaN, not an error.
    """
    dtype = same_dtype(a, b)
    ab, n, _ = _matrix(a, "triangular_solve matrix", square=True)
    bb, rows, cols = _matrix(b, "triangular_solve right-hand side")
    _same(rows if left else cols, n, f"right-hand side {b.type} does not match {a.type}")
    return TensorType([*broadcast_shapes(ab, bb), rows, cols], dtype)


@defop(traits=("multi_result", "heavy"))
def geqrf(x: Value) -> tuple[TensorType, TensorType]:
    """QR factorization in LAPACK's Householder form (geqrf).

    Results ``(a, tau)``: R on and above the diagonal of ``a`` ``[*, m, n]``, the Householder
    vectors ``v_i`` (with an implicit 1 at row i) below it, and their scales ``tau``
    ``[*, min(m, n)]``; ``Q = H_0 @ H_1 @ ...`` with ``H_i = I - tau_i v_i v_i^T``.
    """
    batch, m, n = _matrix(x, "geqrf input")
    return x.type, TensorType([*batch, _min(m, n)], x.type.element_type)


@defop(traits=("heavy",))
def householder_product(a: Value, tau: Value) -> TensorType:
    """The first n columns of ``H_0 @ ... @ H_{k-1}`` (LAPACK orgqr) for ``a`` ``[*, m, n]``.

    ``a`` holds the Householder vectors below its diagonal (as ``geqrf`` leaves them; the rest
    is ignored) and ``tau`` ``[*, k]`` their scales, with ``m >= n >= k``.
    """
    dtype = same_dtype(a, tau)
    batch, m, n = _matrix(a, "householder_product input")
    expect(tau.type.rank == a.type.rank - 1, f"tau {tau.type} must be [*batch, k] for {a.type}")
    k = tau.type.shape[-1]
    if isinstance(m, int) and isinstance(n, int):
        expect(m >= n, f"householder_product needs rows >= columns, got {a.type}")
    if isinstance(n, int) and isinstance(k, int):
        expect(k <= n, f"tau {tau.type} has more scales than {a.type} has columns")
    for d_a, d_t in zip(batch, tau.type.shape[:-1], strict=True):
        _same(d_a, d_t, f"tau {tau.type} and input {a.type} have different batch dims")
    return TensorType([*batch, m, n], dtype)


@defop(traits=("heavy",))
def matrix_exp(x: Value) -> TensorType:
    """The matrix exponential ``sum_k x^k / k!`` of square matrices (scaling and squaring
    with a Pade approximant, as scipy.linalg.expm computes it)."""
    _matrix(x, "matrix_exp input", square=True)
    return x.type


@defop(traits=("multi_result", "heavy"))
def ldl_factor(x: Value, hermitian: bool = False) -> tuple[TensorType, TensorType, TensorType]:
    """Bunch-Kaufman LDL^T factorization of symmetric matrices (LAPACK sytrf, lower triangle).

    For complex input, ``hermitian`` factors ``x = L D L^H`` (hetrf) instead of the complex
    symmetric ``x = L D L^T``; real input ignores it.

    Results ``(ld, pivots, info)``: L (unit lower, diagonal not stored) and the block
    diagonal D packed in the lower triangle of ``ld`` (upper triangle zero); int32
    ``pivots`` ``[*, n]`` in LAPACK's form (a negative pair marks a 2x2 block); int32 ``info``.
    """
    batch, n, _ = _matrix(x, "ldl_factor input", square=True)
    return x.type, TensorType([*batch, n], DType.int32), TensorType(list(batch), DType.int32)


@defop(traits=("heavy",))
def ldl_solve(ld: Value, pivots: Value, b: Value, hermitian: bool = False) -> TensorType:
    """Solve ``A @ X = B`` from ``ldl_factor``'s ld and pivots (LAPACK sytrs; hetrs for a
    complex ``hermitian`` factor).

    ``ld`` ``[*, n, n]``, ``pivots`` ``[*, n]``, ``b`` ``[*, n, k]``; batch dims broadcast.
    """
    dtype = same_dtype(ld, b)
    lb, n, _ = _matrix(ld, "ldl_solve factor", square=True)
    bb, nb, k = _matrix(b, "ldl_solve right-hand side")
    _pivots(pivots, "ldl_solve")
    _same(nb, n, f"right-hand side {b.type} does not match the factor {ld.type}")
    return TensorType([*broadcast_shapes(lb, pivots.type.shape[:-1], bb), n, k], dtype)


# the builders of the ops defined above (see builder_names)
__all__ = [*builder_names(__name__)]
