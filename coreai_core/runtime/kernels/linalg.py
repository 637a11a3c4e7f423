"""Numpy/LAPACK kernels of the linear-algebra ops.

``numpy.linalg`` (batched) computes svd, eigh and eig and ``scipy.linalg.expm`` the matrix
exponential; the LAPACK routines torch calls (getrf, getrs, trsm, geqrf, orgqr/ungqr,
sytrf/hetrf, sytrs/hetrs, potrf) come from ``scipy.linalg.lapack``/``blas`` in the input's
precision and run once per matrix of the (broadcast) batch, so pivots and info follow LAPACK
exactly. scipy's getrf/getrs use 0-based pivots; the dialect's are 1-based.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Literal

import numpy as np
from scipy.linalg import blas, expm, lapack

from coreai_core.runtime.kernels._registry import KernelSet

KERNELS = KernelSet("linalg")



def _lapack(name: str, x: np.ndarray) -> Callable:
    return lapack.get_lapack_funcs((name,), (x,))[0]


def _batches(*arrays: np.ndarray, core: tuple[int, ...]) -> tuple[tuple[int, ...], list]:
    """The broadcast batch shape and each array broadcast to it (``core`` trailing ranks)."""
    batch = np.broadcast_shapes(*(a.shape[:a.ndim - c] for a, c in zip(arrays, core,
                                                                          strict=True)))
    return batch, [np.broadcast_to(a, batch + a.shape[a.ndim - c:])
                   for a, c in zip(arrays, core, strict=True)]


def _each(batch: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    return np.ndindex(*batch) if batch else iter([()])


def _real(x: np.ndarray) -> np.dtype:
    """The dtype of x's real part (x's own dtype for real x)."""
    return np.finfo(x.dtype).dtype


def _check_lu_pivots(pivots: np.ndarray, n: int, op: str) -> None:
    """LU pivots (1-based) must lie in [1, n]: LAPACK reads rows outside the matrix otherwise."""
    if pivots.size and (pivots.min() < 1 or pivots.max() > n):
        bad = int(pivots.min() if pivots.min() < 1 else pivots.max())
        raise IndexError(f"{op}: pivot {bad} is out of range; LU pivots are 1-based, valid "
                         f"pivots: [1, {n}] (as returned by lu_factor)")


def _check_ldl_pivots(pivots: np.ndarray, n: int) -> None:
    """Bunch-Kaufman pivots (LAPACK sytrf, lower): each is in [1, n] (a 1x1 block) or a pair
    of equal negative values in [-n, -1] (a 2x2 block); anything else makes sytrs read
    outside the matrix."""
    flat = pivots.reshape(-1, pivots.shape[-1]) if pivots.ndim else pivots.reshape(1, 1)
    for row in flat:
        k = 0
        while k < len(row):
            p = int(row[k])
            if p == 0 or abs(p) > n:
                raise IndexError(f"ldl_solve: pivot {p} at position {k} is out of range; valid "
                                 f"pivots: [1, {n}] or a pair of equal values in [-{n}, -1] "
                                 "(as returned by ldl_factor)")
            if p < 0:
                if k + 1 >= len(row) or int(row[k + 1]) != p:
                    raise IndexError(f"ldl_solve: negative pivot {p} at position {k} must be "
                                     "followed by the same value (a 2x2 block, as returned by "
                                     "ldl_factor)")
                k += 1
            k += 1


def _check(info: int, routine: str) -> None:
    if info < 0:  # an argument error is a bug in this module, never a property of the data
        raise RuntimeError(f"LAPACK {routine}: invalid argument {-info}")


def _solve_each(factors: np.ndarray, pivots: np.ndarray, b: np.ndarray, routine: str,
                check_pivots: Callable[[], None],
                solve: Callable[..., tuple[np.ndarray, int]]) -> np.ndarray:
    """LAPACK ``routine`` (a solve from a factorization and its pivots) once per matrix of the
    broadcast batch of ``factors``, ``pivots`` and ``b``: ``solve(routine, factor, pivots,
    rhs)`` returns ``(x, info)``. ``check_pivots`` runs first, unless there is nothing to
    solve."""
    batch, (f_b, piv_b, b_b) = _batches(factors, pivots, b, core=(2, 1, 2))
    out = np.empty(batch + b.shape[-2:], b.dtype)
    if out.size == 0:
        return out
    check_pivots()
    fn = _lapack(routine, factors)
    for i in _each(batch):
        x, code = solve(fn, f_b[i], piv_b[i], b_b[i])
        _check(code, routine)
        out[i] = x
    return out


@KERNELS.register("coreai.svd")
def svd(x: np.ndarray, *, full_matrices: bool = False, compute_uv: bool = True) -> list:
    """``numpy.linalg.svd`` (LAPACK gesdd, torch's CPU driver)."""
    if not compute_uv:
        return [np.linalg.svd(x, compute_uv=False).astype(_real(x), copy=False)]
    u, s, vh = np.linalg.svd(x, full_matrices=full_matrices)
    return [u.astype(x.dtype, copy=False), s.astype(_real(x), copy=False),
            vh.astype(x.dtype, copy=False)]


@KERNELS.register("coreai.eigh")
def eigh(x: np.ndarray, *, upper: bool = False, compute_v: bool = True) -> list:
    """``numpy.linalg.eigh`` (LAPACK syevd, torch's CPU routine) on the chosen triangle."""
    uplo: Literal["L", "U"] = "U" if upper else "L"
    if not compute_v:
        return [np.linalg.eigvalsh(x, UPLO=uplo).astype(_real(x), copy=False)]
    w, v = np.linalg.eigh(x, UPLO=uplo)
    return [w.astype(_real(x), copy=False), v.astype(x.dtype, copy=False)]


@KERNELS.register("coreai.eig")
def eig(x: np.ndarray) -> list:
    """``numpy.linalg.eig`` (LAPACK geev, torch's CPU routine), cast to complex."""
    c = np.result_type(x.dtype, np.complex64)
    w, v = np.linalg.eig(x)
    return [w.astype(c, copy=False), v.astype(c, copy=False)]


@KERNELS.register("coreai.cholesky")
def cholesky(x: np.ndarray, *, upper: bool = False) -> list:
    """LAPACK potrf per matrix; the unused triangle of the factor is zeroed."""
    batch = x.shape[:-2]
    out = np.zeros_like(x)
    info = np.zeros(batch, np.int32)
    if x.shape[-1] == 0:
        return [out, info]
    potrf = _lapack("potrf", x)
    for i in _each(batch):
        c, code = potrf(x[i], lower=not upper, clean=1)
        _check(code, "potrf")
        out[i], info[i] = c, code
    # potrf leaves the other triangle of a failed factor untouched
    return [np.triu(out) if upper else np.tril(out), info]


@KERNELS.register("coreai.lu_factor")
def lu_factor(x: np.ndarray) -> list:
    """LAPACK getrf per matrix; 1-based int32 pivots."""
    *batch_l, m, n = x.shape
    batch = tuple(batch_l)
    lu = np.empty_like(x)
    piv = np.empty((*batch, min(m, n)), np.int32)
    info = np.zeros(batch, np.int32)
    if m == 0 or n == 0:
        return [lu, piv, info]
    getrf = _lapack("getrf", x)
    for i in _each(batch):
        f, p, code = getrf(x[i])
        _check(code, "getrf")
        lu[i], piv[i], info[i] = f, p + 1, code
    return [lu, piv, info]


@KERNELS.register("coreai.lu_solve")
def lu_solve(lu: np.ndarray, pivots: np.ndarray, b: np.ndarray, *,
             adjoint: bool = False) -> np.ndarray:
    """LAPACK getrs per matrix of the broadcast batch."""
    trans = (2 if np.iscomplexobj(lu) else 1) if adjoint else 0  # 2: conjugate transpose
    return _solve_each(lu, pivots, b, "getrs",
                       lambda: _check_lu_pivots(pivots, lu.shape[-1], "lu_solve"),
                       lambda getrs, f, p, rhs: getrs(f, p - 1, rhs, trans=trans))


@KERNELS.register("coreai.pivots_to_permutation")
def pivots_to_permutation(pivots: np.ndarray, *, size: int) -> np.ndarray:
    """Apply the row interchanges in order to ``0..size-1`` (vectorized over the batch)."""
    batch = pivots.shape[:-1]
    _check_lu_pivots(pivots, size, "pivots_to_permutation")  # would wrap silently
    perm = np.broadcast_to(np.arange(size, dtype=np.int64), (*batch, size)).copy()
    for i in range(pivots.shape[-1]):
        j = pivots[..., i:i + 1].astype(np.int64) - 1
        here = perm[..., i:i + 1].copy()
        perm[..., i:i + 1] = np.take_along_axis(perm, j, axis=-1)
        np.put_along_axis(perm, j, here, axis=-1)
    return perm


@KERNELS.register("coreai.triangular_solve")
def triangular_solve(a: np.ndarray, b: np.ndarray, *, upper: bool, left: bool = True,
                     unitriangular: bool = False) -> np.ndarray:
    """BLAS trsm per matrix of the broadcast batch (no singularity check, like torch)."""
    batch, (a_b, b_b) = _batches(a, b, core=(2, 2))
    out = np.empty(batch + b.shape[-2:], b.dtype)
    if out.size == 0:
        return out
    trsm = blas.get_blas_funcs(("trsm",), (a,))[0]
    for i in _each(batch):
        out[i] = trsm(1.0, a_b[i], b_b[i], side=0 if left else 1, lower=not upper,
                      diag=1 if unitriangular else 0)
    return out


@KERNELS.register("coreai.geqrf")
def geqrf(x: np.ndarray) -> list:
    """LAPACK geqrf per matrix."""
    *batch_l, m, n = x.shape
    batch = tuple(batch_l)
    a = np.empty_like(x)
    tau = np.empty((*batch, min(m, n)), x.dtype)
    if m == 0 or n == 0:
        return [a, tau]
    routine = _lapack("geqrf", x)
    for i in _each(batch):
        f, t, _, code = routine(x[i])
        _check(code, "geqrf")
        a[i], tau[i] = f, t
    return [a, tau]


@KERNELS.register("coreai.householder_product")
def householder_product(a: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """LAPACK orgqr (ungqr for complex) per matrix."""
    batch = a.shape[:-2]
    q = np.empty_like(a)
    if a.shape[-1] == 0:
        return q
    if tau.shape[-1] == 0:  # no reflectors: the first n columns of the identity
        q[...] = np.eye(*a.shape[-2:], dtype=a.dtype)
        return q
    orgqr = _lapack("ungqr" if np.iscomplexobj(a) else "orgqr", a)
    for i in _each(batch):
        f, _, code = orgqr(a[i], tau[i])
        _check(code, "orgqr")
        q[i] = f
    return q


@KERNELS.register("coreai.matrix_exp")
def matrix_exp(x: np.ndarray) -> np.ndarray:
    """``scipy.linalg.expm`` (batched over the leading axes) in float64/complex128, rounded
    once: scipy's float32 Pade evaluation loses ~13 ulp on entries of 1e5."""
    if x.size == 0:
        return x.copy()
    wide = np.complex128 if np.iscomplexobj(x) else np.float64
    return np.asarray(expm(x.astype(wide))).astype(x.dtype, copy=False)


@KERNELS.register("coreai.ldl_factor")
def ldl_factor(x: np.ndarray, *, hermitian: bool = False) -> list:
    """LAPACK sytrf (hetrf for complex hermitian; lower) per matrix; the upper triangle of
    ``ld`` is zeroed."""
    batch, n = x.shape[:-2], x.shape[-1]
    ld = np.zeros_like(x)
    piv = np.empty((*batch, n), np.int32)
    info = np.zeros(batch, np.int32)
    if n == 0:
        return [ld, piv, info]
    sytrf = _lapack("hetrf" if hermitian and np.iscomplexobj(x) else "sytrf", x)
    for i in _each(batch):
        f, p, code = sytrf(x[i], lower=1)
        _check(code, "sytrf")
        ld[i], piv[i], info[i] = np.tril(f), p, code
    return [ld, piv, info]


@KERNELS.register("coreai.ldl_solve")
def ldl_solve(ld: np.ndarray, pivots: np.ndarray, b: np.ndarray, *,
              hermitian: bool = False) -> np.ndarray:
    """LAPACK sytrs (hetrs for complex hermitian; lower) per matrix of the broadcast batch."""
    return _solve_each(ld, pivots, b, "hetrs" if hermitian and np.iscomplexobj(ld) else "sytrs",
                       lambda: _check_ldl_pivots(pivots, ld.shape[-1]),
                       lambda sytrs, f, p, rhs: sytrs(f, p, rhs, lower=1))
