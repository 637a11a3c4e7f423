"""Built-in lowerings (linalg family): linear algebra onto the linalg dialect ops
(``coreai_core/dialects/_linalg.py``).

Factorizations map onto one op each (svd, eigh, eig, cholesky, lu_factor, geqrf, ldl_factor);
everything else is composed from them the way LAPACK/torch compose it: ``solve`` and ``inv``
are getrf + getrs, ``qr`` is geqrf + orgqr, ``det``/``slogdet`` read the LU diagonal and the
pivot parity, ``cholesky_solve``/``cholesky_inverse`` are two triangular solves, ``pinv``
goes through svd (eigh when hermitian), ``ormqr`` multiplies by the explicit Q.

``check_errors`` arguments are accepted and ignored: the runtime never raises on singular or
indefinite input, it returns LAPACK's ``info`` outputs like the ``*_ex`` functions do. For the
same reason the ``_linalg_check_errors`` effect that ``torch.linalg.inv``/``solve``/
``cholesky``/``lu_factor``/``ldl_factor`` wrap in ``with_effects`` is dropped by the converter.
"""

from __future__ import annotations

import numpy as np
import torch

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._linalg_utils import (
    diagonal,
    empty,
    eye,
    matrix_dims,
    mH,
    mT,
    pad_cols,
    permutation_sign,
    sgn,
    slice_matrix,
    triangle,
)
from coreai_torch.utils import arg_meta, cast_to, result_type

LOWERINGS = LoweringSet("linalg")
reg = LOWERINGS.register_torch_lowering


# -- decompositions -----------------------------------------------------------------------------

@reg("aten::_linalg_svd.default")
def aten__linalg_svd_default(A: Value, full_matrices: bool = False, compute_uv: bool = True,
                             driver: str | None = None) -> tuple[Value, Value, Value]:
    """_linalg_svd(Tensor A, bool full_matrices=False, bool compute_uv=True, *, str? driver=None) -> (Tensor U, Tensor S, Tensor Vh)

    ``driver`` selects a CUDA routine in torch; the CPU (and the runtime) always use gesdd.
    """  # noqa: E501
    if not compute_uv:
        (s,) = coreai.svd(A, compute_uv=False)
        return empty(result_type(index=0)), s, empty(result_type(index=2))
    u, s, vh = coreai.svd(A, full_matrices=full_matrices)
    return u, s, vh


@reg("aten::_linalg_eigh.default")
def aten__linalg_eigh_default(A: Value, UPLO: str = "L", compute_v: bool = True,
                              ) -> tuple[Value, Value]:
    """_linalg_eigh(Tensor A, str UPLO="L", bool compute_v=True) -> (Tensor eigenvalues, Tensor eigenvectors)"""  # noqa: E501
    if UPLO not in ("L", "U"):
        raise ValueError(f"UPLO must be 'L' or 'U', got {UPLO!r}")
    if not compute_v:
        (w,) = coreai.eigh(A, upper=UPLO == "U", compute_v=False)
        return w, empty(result_type(index=1))
    w, v = coreai.eigh(A, upper=UPLO == "U")
    return w, v


@reg("aten::linalg_eig.default")
def aten_linalg_eig_default(self: Value) -> tuple[Value, Value]:
    """linalg_eig(Tensor self) -> (Tensor eigenvalues, Tensor eigenvectors)"""
    w, v = coreai.eig(self)
    return w, v


@reg("aten::geqrf.default")
def aten_geqrf_default(self: Value) -> tuple[Value, Value]:
    """geqrf(Tensor self) -> (Tensor a, Tensor tau)"""
    a, tau = coreai.geqrf(self)
    return a, tau


@reg("aten::linalg_householder_product.default")
def aten_linalg_householder_product_default(input: Value, tau: Value) -> Value:
    """linalg_householder_product(Tensor input, Tensor tau) -> Tensor"""
    return coreai.householder_product(input, tau)


@reg("aten::linalg_qr.default")
def aten_linalg_qr_default(A: Value, mode: str = "reduced") -> tuple[Value, Value]:
    """linalg_qr(Tensor A, str mode="reduced") -> (Tensor Q, Tensor R)

    geqrf + orgqr like torch: Q's columns carry LAPACK's signs (R's diagonal may be negative).
    """
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    m, n = matrix_dims(A, "qr")
    k = min(m, n)
    a, tau = coreai.geqrf(A)
    if mode == "complete":
        return coreai.householder_product(pad_cols(a, m), tau), triangle(a, upper=True)
    r = triangle(slice_matrix(a, k, n), upper=True)
    if mode == "r":
        return empty(result_type(index=0)), r
    return coreai.householder_product(slice_matrix(a, m, k), tau), r


@reg("aten::ormqr.default")
def aten_ormqr_default(self: Value, input2: Value, input3: Value, left: bool = True,
                       transpose: bool = False) -> Value:
    """ormqr(Tensor self, Tensor input2, Tensor input3, bool left=True, bool transpose=False) -> Tensor

    ``op(Q) @ C`` (or ``C @ op(Q)``) with the square Q of the reflectors in ``self``/``input2``,
    formed explicitly by orgqr on the reflectors padded to a square matrix.
    """  # noqa: E501
    rows, _ = matrix_dims(self, "ormqr")
    q = coreai.householder_product(pad_cols(self, rows), input2)
    if transpose:
        q = mH(q)
    return coreai.batch_matmul(q, input3) if left else coreai.batch_matmul(input3, q)


@reg("aten::linalg_cholesky_ex.default")
def aten_linalg_cholesky_ex_default(self: Value, upper: bool = False,
                                    check_errors: bool = False) -> tuple[Value, Value]:
    """linalg_cholesky_ex(Tensor self, *, bool upper=False, bool check_errors=False) -> (Tensor L, Tensor info)"""  # noqa: E501
    factor, info = coreai.cholesky(self, upper=upper)
    return factor, info


@reg("aten::cholesky.default")
def aten_cholesky_default(self: Value, upper: bool = False) -> Value:
    """cholesky(Tensor self, bool upper=False) -> Tensor"""
    return coreai.cholesky(self, upper=upper)[0]


@reg("aten::cholesky_solve.default")
def aten_cholesky_solve_default(self: Value, input2: Value, upper: bool = False) -> Value:
    """cholesky_solve(Tensor self, Tensor input2, bool upper=False) -> Tensor

    ``A = L @ L^H`` (``U^H @ U``): two triangular solves, as LAPACK potrs does.
    """
    factor, other = input2, mH(input2)
    first, second = (other, factor) if upper else (factor, other)
    # first a lower-triangular solve (L, or U^H), then an upper one (L^H, or U)
    y = coreai.triangular_solve(first, self, upper=False)
    return coreai.triangular_solve(second, y, upper=True)


@reg("aten::cholesky_inverse.default")
def aten_cholesky_inverse_default(self: Value, upper: bool = False) -> Value:
    """cholesky_inverse(Tensor self, bool upper=False) -> Tensor

    ``inv(L @ L^H) = inv(L)^H @ inv(L)`` (``inv(U) @ inv(U)^H`` when upper).
    """
    n, _ = matrix_dims(self, "cholesky_inverse")
    inv = coreai.triangular_solve(self, eye(n, n, self.type.element_type), upper=upper)
    return coreai.batch_matmul(inv, mH(inv)) if upper else coreai.batch_matmul(mH(inv), inv)


@reg("aten::linalg_ldl_factor_ex.default")
def aten_linalg_ldl_factor_ex_default(self: Value, hermitian: bool = False,
                                      check_errors: bool = False,
                                      ) -> tuple[Value, Value, Value]:
    """linalg_ldl_factor_ex(Tensor self, *, bool hermitian=False, bool check_errors=False) -> (Tensor LD, Tensor pivots, Tensor info)"""  # noqa: E501
    ld, pivots, info = coreai.ldl_factor(self, hermitian=hermitian)
    return ld, pivots, info


@reg("aten::linalg_ldl_solve.default")
def aten_linalg_ldl_solve_default(LD: Value, pivots: Value, B: Value,
                                  hermitian: bool = False) -> Value:
    """linalg_ldl_solve(Tensor LD, Tensor pivots, Tensor B, *, bool hermitian=False) -> Tensor"""
    return coreai.ldl_solve(LD, pivots, B, hermitian=hermitian)


# -- LU and what is built on it -----------------------------------------------------------------

@reg("aten::linalg_lu_factor_ex.default")
def aten_linalg_lu_factor_ex_default(A: Value, check_errors: bool = False,
                                     ) -> tuple[Value, Value, Value]:
    """linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False) -> (Tensor LU, Tensor pivots, Tensor info)

    ``pivot=False`` is not lowered (torch's CPU kernel rejects it too).
    """  # noqa: E501
    lu, pivots, info = coreai.lu_factor(A)
    return lu, pivots, info


def _lu_unpack(lu: Value, pivots: Value) -> tuple[Value, Value, Value]:
    """P, L, U with ``A = P @ L @ U`` from getrf's packed factor and pivots."""
    m, n = matrix_dims(lu, "lu_unpack")
    k = min(m, n)
    dtype = lu.type.element_type
    lower = coreai.broadcasting_add(triangle(slice_matrix(lu, m, k), upper=False, diagonal=-1),
                                    eye(m, k, dtype))
    upper = triangle(slice_matrix(lu, k, n), upper=True)
    perm = coreai.pivots_to_permutation(pivots, size=m)  # x[perm] = L @ U, so P[perm[c], c] = 1
    rows = coreai.constant(np.arange(m, dtype=np.int64).reshape(m, 1))
    p = coreai.cast(coreai.broadcasting_equal(coreai.expand_dims(perm, [-2]), rows), dtype)
    return p, lower, upper


@reg("aten::linalg_lu.default")
def aten_linalg_lu_default(A: Value) -> tuple[Value, Value, Value]:
    """linalg_lu(Tensor A, *, bool pivot=True) -> (Tensor P, Tensor L, Tensor U)"""
    lu, pivots, _ = coreai.lu_factor(A)
    return _lu_unpack(lu, pivots)


@reg("aten::lu_unpack.default")
def aten_lu_unpack_default(LU_data: Value, LU_pivots: Value, unpack_data: bool = True,
                           unpack_pivots: bool = True) -> tuple[Value, Value, Value]:
    """lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True, bool unpack_pivots=True) -> (Tensor P, Tensor L, Tensor U)"""  # noqa: E501
    p, lower, upper = _lu_unpack(LU_data, LU_pivots)
    if not unpack_pivots:
        p = empty(result_type(index=0))
    if not unpack_data:
        lower, upper = empty(result_type(index=1)), empty(result_type(index=2))
    return p, lower, upper


def _lu_solve(lu: Value, pivots: Value, b: Value, left: bool, adjoint: bool) -> Value:
    if left:
        return coreai.lu_solve(lu, pivots, b, adjoint=adjoint)
    # X @ op(A) = B  <=>  op(A)^H @ X^H = B^H
    return mH(coreai.lu_solve(lu, pivots, mH(b), adjoint=not adjoint))


@reg("aten::linalg_lu_solve.default")
def aten_linalg_lu_solve_default(LU: Value, pivots: Value, B: Value, left: bool = True,
                                 adjoint: bool = False) -> Value:
    """linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True, bool adjoint=False) -> Tensor"""  # noqa: E501
    return _lu_solve(LU, pivots, B, left, adjoint)


def _is_vector_rhs(a: Value, b: Value) -> bool:
    """torch's rule: B is a (batch of) vector(s) if 1-d or shaped like A without its last dim."""
    return b.type.rank == 1 or (b.type.rank == a.type.rank - 1
                                and tuple(b.type.shape) == tuple(a.type.shape[:-1]))


@reg("aten::_linalg_solve_ex.default")
def aten__linalg_solve_ex_default(A: Value, B: Value, left: bool = True,
                                  check_errors: bool = False,
                                  ) -> tuple[Value, Value, Value, Value]:
    """_linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool check_errors=False) -> (Tensor result, Tensor LU, Tensor pivots, Tensor info)"""  # noqa: E501
    lu, pivots, info = coreai.lu_factor(A)
    if _is_vector_rhs(A, B):
        axis = -1 if left else -2
        x = _lu_solve(lu, pivots, coreai.expand_dims(B, [B.type.rank + axis + 1]), left, False)
        x = coreai.shrink_dims(x, [axis])
    else:
        x = _lu_solve(lu, pivots, B, left, False)
    return x, lu, pivots, info


@reg("aten::linalg_inv_ex.default")
def aten_linalg_inv_ex_default(A: Value, check_errors: bool = False) -> tuple[Value, Value]:
    """linalg_inv_ex(Tensor A, *, bool check_errors=False) -> (Tensor inverse, Tensor info)"""
    n, _ = matrix_dims(A, "inv")
    lu, pivots, info = coreai.lu_factor(A)
    return coreai.lu_solve(lu, pivots, eye(n, n, A.type.element_type)), info


def _det_factor(A: Value) -> tuple[Value, Value]:
    """The LU factor torch's det/slogdet return: of A.T when A is real and row-major (torch
    factors the column-major view), else of A. Either has the same determinant."""
    val = arg_meta("A")
    row_major = not isinstance(val, torch.Tensor) or val.is_contiguous()
    transposed = row_major and not A.type.element_type.is_complex
    lu, pivots, _ = coreai.lu_factor(mT(A) if transposed else A)
    return lu, pivots


@reg("aten::_linalg_det.default")
def aten__linalg_det_default(A: Value) -> tuple[Value, Value, Value]:
    """_linalg_det(Tensor A) -> (Tensor result, Tensor LU, Tensor pivots)

    ``det = sign(P) * prod(diag(U))``.
    """
    lu, pivots = _det_factor(A)
    sign = permutation_sign(pivots, A.type.element_type)
    det = coreai.broadcasting_mul(sign, coreai.reduce_product(diagonal(lu), axes=[-1]))
    return det, lu, pivots


@reg("aten::_linalg_slogdet.default")
def aten__linalg_slogdet_default(A: Value) -> tuple[Value, Value, Value, Value]:
    """_linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet, Tensor LU, Tensor pivots)

    ``sign = sign(P) * prod(sgn(diag(U)))``, ``logabsdet = sum(log|diag(U)|)`` (a singular
    matrix gives sign 0 and -inf; complex input gives a complex sign of modulus 1).
    """
    lu, pivots = _det_factor(A)
    d = diagonal(lu)
    sign = coreai.broadcasting_mul(permutation_sign(pivots, A.type.element_type),
                                   coreai.reduce_product(sgn(d), axes=[-1]))
    logabsdet = coreai.reduce_sum(coreai.log(coreai.abs_(d)), axes=[-1])
    return sign, logabsdet, lu, pivots


# -- triangular solves and the pseudo-inverse ---------------------------------------------------

@reg("aten::linalg_solve_triangular.default")
def aten_linalg_solve_triangular_default(self: Value, B: Value, upper: bool, left: bool = True,
                                         unitriangular: bool = False) -> Value:
    """linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True, bool unitriangular=False) -> Tensor"""  # noqa: E501
    return coreai.triangular_solve(self, B, upper=upper, left=left, unitriangular=unitriangular)


def _pinv_tolerance(A: Value, atol: Value | None, rtol: Value | None,
                    largest: Value) -> Value:
    """torch's cutoff ``max(atol, rtol * largest)`` in float64, ``[*, 1]``.

    Defaults: atol 0; rtol ``eps * max(m, n)``, or 0 where a positive atol is given.
    """
    f64 = DType.float64
    m, n = matrix_dims(A, "pinv")
    eps = float(np.finfo(A.type.element_type.real_dtype.numpy).eps)
    default_rtol = coreai.constant(eps * max(m, n), dtype=f64)
    zero = coreai.constant(0.0, dtype=f64)
    atol64 = zero if atol is None else coreai.cast(atol, f64)
    if rtol is not None:
        rtol64 = coreai.cast(rtol, f64)
    elif atol is not None:
        rtol64 = coreai.broadcasting_where(coreai.broadcasting_greater(atol64, zero), zero,
                                           default_rtol)
    else:
        rtol64 = default_rtol
    scaled = coreai.broadcasting_mul(coreai.expand_dims(rtol64, [-1]), coreai.cast(largest, f64))
    return coreai.broadcasting_maximum(coreai.expand_dims(atol64, [-1]), scaled)


@reg("aten::triangular_solve.default")
def aten_triangular_solve_default(self: Value, A: Value, upper: bool = True,
                                  transpose: bool = False, unitriangular: bool = False,
                                  ) -> tuple[Value, Value]:
    """triangular_solve(Tensor self, Tensor A, bool upper=True, bool transpose=False, bool unitriangular=False) -> (Tensor solution, Tensor cloned_coefficient)

    The deprecated form: solves ``op(A) @ X = self`` with ``op`` a plain transpose when
    ``transpose`` (also for complex A), and returns A, broadcast to the batch, as the second.
    """  # noqa: E501
    a, up = (mT(A), not upper) if transpose else (A, upper)
    x = coreai.triangular_solve(a, self, upper=up, unitriangular=unitriangular)
    shape = list(result_type(index=1).shape)
    if shape == list(A.type.shape):
        return x, A
    if not all(isinstance(d, int) for d in shape):
        raise NotImplementedError(f"triangular_solve needs a static batch to broadcast A, got "
                                  f"{result_type(index=1)}")
    return x, coreai.broadcast_to(A, shape)


@reg("aten::linalg_matrix_exp.default")
def aten_linalg_matrix_exp_default(self: Value) -> Value:
    """linalg_matrix_exp(Tensor self) -> Tensor

    float16/bfloat16 are computed in float32 and rounded once.
    """
    dtype = self.type.element_type
    if dtype in (DType.float16, DType.bfloat16):
        return cast_to(coreai.matrix_exp(cast_to(self, DType.float32)), dtype)
    return coreai.matrix_exp(self)


@reg("aten::linalg_pinv.atol_rtol_tensor")
def aten_linalg_pinv_atol_rtol_tensor(self: Value, atol: Value | None = None,
                                      rtol: Value | None = None,
                                      hermitian: bool = False) -> Value:
    """linalg_pinv.atol_rtol_tensor(Tensor self, *, Tensor? atol=None, Tensor? rtol=None, bool hermitian=False) -> Tensor

    Singular values above the cutoff are inverted, the rest zeroed: ``V @ diag(1/s) @ U^H``;
    with ``hermitian``, eigenvalues of the lower triangle: ``V @ diag(1/w) @ V^H``.
    """  # noqa: E501
    dtype = self.type.element_type
    if hermitian:
        w, v = coreai.eigh(self)
        magnitude = coreai.abs_(w)
        # a 0 appended keeps the max of magnitudes (>= 0) and gives an empty matrix one
        padded = coreai.pad(magnitude, [0, 0] * (w.type.rank - 1) + [0, 1])
        largest = coreai.reduce_max(padded, axes=[-1], keep_dims=True)
        left, right, values = v, mH(v), w
    else:
        u, s, vh = coreai.svd(self)
        magnitude = s
        largest = coreai.slice_(s, [0], [1], axes=[-1], strides=[1])  # s is descending
        left, right, values = mH(vh), mH(u), s
    tol = _pinv_tolerance(self, atol, rtol, largest)
    keep = coreai.broadcasting_greater(coreai.cast(magnitude, DType.float64), tol)
    zero = coreai.constant(0, dtype=values.type.element_type)
    inverted = coreai.cast(coreai.broadcasting_where(keep, coreai.reciprocal(values), zero),
                           dtype)  # singular values / eigenvalues are real
    scaled = coreai.broadcasting_mul(left, coreai.expand_dims(inverted, [-2]))
    return coreai.batch_matmul(scaled, right)


# -- the error check torch.linalg wraps around *_ex ops -----------------------------------------

