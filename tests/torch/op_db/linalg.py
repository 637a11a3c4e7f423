"""Op-database entries (linalg family): linear algebra (factorizations, solves, inverses,
determinants).

Deterministic results (LU with unambiguous pivots, Cholesky, solves, inverses, determinants,
geqrf/orgqr/ormqr, LDL, pinv) are compared value by value within :func:`tolerance`; results
that are unique only up to signs (singular vectors, eigenvectors, Q of QR) are checked through
invariants: reconstruction, orthogonality, triangularity, and the unique parts (singular values,
eigenvalues) by value. Inputs are well-conditioned by construction (``_linalg_inputs.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from tests.torch.op_db._entry import EntrySet, Sample, half_variant, in_float32
from tests.torch.op_db._linalg_inputs import (
    EIG_DTYPES,
    LINALG_DTYPES,
    as64,
    batches,
    close,
    gaussian,
    general,
    matrix_size,
    normal,
    orthonormal_columns,
    same_layout,
    seeds,
    spd,
    spread,
    symmetric,
    tolerance,
    triangular,
    uniform,
)

aten = torch.ops.aten
LAPACK_NO_HALF = ("torch's CPU LAPACK-backed kernels reject float16/bfloat16 (\"not implemented "
                  "for 'Half'\"); half inputs are the [half] entries")
ENTRIES = EntrySet(no_half=LAPACK_NO_HALF)


add = ENTRIES.add


def _size(sample: Sample) -> int:
    return max((max(a.shape[-2:], default=1) for a in sample.args
                if isinstance(a, torch.Tensor) and a.dim() >= 2), default=1)


def _dtype(sample: Sample) -> torch.dtype:
    return next(a.dtype for a in sample.args if isinstance(a, torch.Tensor)
                and (a.dtype.is_floating_point or a.dtype.is_complex))


def matches(expected: list[torch.Tensor], got: list[np.ndarray], sample: Sample) -> None:
    """Every output by value: integers exactly, floats within ``tolerance`` (see there)."""
    same_layout(expected, got, "linalg")
    tol = tolerance(_dtype(sample), _size(sample))
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        if e.dtype.is_floating_point or e.dtype.is_complex:
            close(g, e, tol, f"output {i}")
        else:
            np.testing.assert_array_equal(np.asarray(g), e.numpy(), err_msg=f"output {i}")


def _contiguous(sample: Sample) -> Sample:
    """Row-major tensors, like every input of an exported program."""
    return Sample(tuple(a.contiguous() if isinstance(a, torch.Tensor) else a
                        for a in sample.args), sample.kwargs)


def matrices(build: Callable[..., torch.Tensor], *, square: bool = True,
             rect: Callable[[int, int], bool] = lambda m, n: True,
             **kwargs: st.SearchStrategy[Any]) -> st.SearchStrategy[Sample]:
    """One matrix stack from ``build(g, batch, m, n, cplx)`` plus drawn keyword arguments."""
    @st.composite
    def draw_sample(draw: Any) -> Sample:
        m = draw(matrix_size())
        n = m if square else draw(matrix_size().filter(lambda n: rect(m, n)))
        dtype = draw(LINALG_DTYPES)
        a = build(draw(seeds()), draw(batches()), m, n, cplx=dtype.is_complex).to(dtype)
        return _contiguous(Sample((a,), {k: draw(v) for k, v in kwargs.items()}))

    return draw_sample()


def _tol(sample: Sample) -> float:
    return tolerance(_dtype(sample), _size(sample))


# -- SVD, eigh, QR: unique up to signs; checked by invariants --------------------------------

def _gaussian(g: torch.Generator, batch: tuple[int, ...], m: int, n: int,
              cplx: bool = False) -> torch.Tensor:
    return gaussian(g, (*batch, m, n), cplx)


def _svd_invariants(expected: list[torch.Tensor], got: list[np.ndarray], sample: Sample) -> None:
    same_layout(expected, got, "svd")
    a, tol = as64(sample.args[0]), _tol(sample)
    u, s, vh = (as64(x) for x in got)
    scale = max(1.0, float(np.abs(a).max(initial=0.0)))
    close(s, expected[1], tol * scale, "singular values")
    k = s.shape[-1]
    close((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a, tol * scale, "U diag(S) Vh != A")
    orthonormal_columns(u, tol, "U")
    orthonormal_columns(vh.swapaxes(-1, -2), tol, "Vh.T")


add("aten::_linalg_svd.default",
    lambda a, full_matrices: torch.linalg.svd(a, full_matrices=full_matrices),
    matrices(_gaussian, square=False,
             full_matrices=st.booleans()),
    compare=_svd_invariants)
add("aten::_linalg_svd.default", torch.linalg.svdvals,
    matrices(_gaussian, square=False),
    compare=matches, name="svdvals")
add("aten::_linalg_svd.default", lambda a: aten._linalg_svd(a, compute_uv=False),
    matrices(_gaussian, square=False),
    compare=matches, name="_linalg_svd(compute_uv=False)")


def _chosen_triangle(a: np.ndarray, uplo: str) -> np.ndarray:
    """The Hermitian matrix eigh sees: the UPLO triangle mirrored (LAPACK reads only the real
    part of the diagonal)."""
    strict = np.tril(a, -1) if uplo == "L" else np.triu(a, 1)
    diag = np.diagonal(a, axis1=-2, axis2=-1).real
    return strict + strict.swapaxes(-1, -2).conj() + diag[..., None] * np.eye(a.shape[-1])


def _eigh_invariants(expected: list[torch.Tensor], got: list[np.ndarray], sample: Sample) -> None:
    same_layout(expected, got, "eigh")
    a = _chosen_triangle(as64(sample.args[0]), sample.kwargs["UPLO"])
    tol = _tol(sample)
    scale = max(1.0, float(np.abs(a).max(initial=0.0)))
    w, v = as64(got[0]), as64(got[1])
    close(w, expected[0], tol * scale, "eigenvalues")
    close(a @ v, v * w[..., None, :], tol * scale, "A V != V diag(w)")
    orthonormal_columns(v, tol, "eigenvectors")


# The input is not symmetric: only the UPLO triangle may be read.
add("aten::_linalg_eigh.default", lambda a, UPLO: torch.linalg.eigh(a, UPLO=UPLO),
    matrices(_gaussian, UPLO=st.sampled_from("LU")),
    compare=_eigh_invariants)
add("aten::_linalg_eigh.default", lambda a, UPLO: torch.linalg.eigvalsh(a, UPLO=UPLO),
    matrices(_gaussian, UPLO=st.sampled_from("LU")),
    compare=matches, name="eigvalsh")
add("aten::_linalg_eigh.default", lambda a, UPLO: aten._linalg_eigh(a, UPLO, compute_v=False),
    matrices(_gaussian, UPLO=st.sampled_from("LU")), compare=matches,
    name="_linalg_eigh(compute_v=False)")


def _same_spectrum(got: np.ndarray, want: np.ndarray, tol: float) -> None:
    """Each eigenvalue of one set is within tol of one of the other, both ways (the order is
    LAPACK's implementation detail). Eigenvalues of the normal test matrices move by at most
    the backward error, so no separation between them is needed."""
    distance = np.abs(got[..., :, None] - want[..., None, :])
    assert (distance.min(axis=-1) <= tol).all(), "eigenvalues differ from torch's"
    assert (distance.min(axis=-2) <= tol).all(), "eigenvalues differ from torch's"


def _eig_invariants(expected: list[torch.Tensor], got: list[np.ndarray], sample: Sample) -> None:
    same_layout(expected, got, "eig")
    a = np.asarray(sample.args[0].numpy(), np.complex128)
    tol = tolerance(sample.args[0].dtype, _size(sample)) * 3  # |eigenvalues| <= 3 * sqrt(2)
    w, v = (np.asarray(x, np.complex128) for x in got)
    _same_spectrum(w, as64(expected[0]), tol)
    np.testing.assert_allclose(a @ v, v * w[..., None, :], atol=tol, err_msg="A V != V diag(w)")
    np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1.0, atol=tol,
                               err_msg="eigenvectors are not unit norm")


def _eigvals(expected: list[torch.Tensor], got: list[np.ndarray], sample: Sample) -> None:
    same_layout(expected, got, "eigvals")
    tol = tolerance(sample.args[0].dtype, _size(sample)) * 3
    _same_spectrum(np.asarray(got[0], np.complex128), as64(expected[0]), tol)


@st.composite
def _normal_matrices(draw: Any) -> Sample:
    dtype = draw(EIG_DTYPES)
    return Sample((normal(draw(seeds()), draw(batches()), draw(matrix_size()), dtype),))


add("aten::linalg_eig.default", torch.linalg.eig, _normal_matrices(), compare=_eig_invariants)
add("aten::linalg_eig.default", torch.linalg.eigvals, _normal_matrices(), compare=_eigvals,
    name="eigvals")


def _qr_invariants(expected: list[torch.Tensor], got: list[np.ndarray], sample: Sample) -> None:
    same_layout(expected, got, "qr")
    a, tol = as64(sample.args[0]), _tol(sample)
    q, r = as64(got[0]), as64(got[1])
    assert not np.tril(r, -1).any(), "R is not upper triangular"
    if sample.kwargs["mode"] == "r":
        rh = r.swapaxes(-1, -2).conj()
        close(rh @ r, a.swapaxes(-1, -2).conj() @ a, tol, "R^H @ R != A^H @ A")
        return
    orthonormal_columns(q, tol, "Q")
    close(q @ r, a, tol, "Q @ R != A")


add("aten::linalg_qr.default", lambda a, mode: torch.linalg.qr(a, mode=mode),
    matrices(spread, square=False, mode=st.sampled_from(("reduced", "complete", "r"))),
    compare=_qr_invariants)

# geqrf/orgqr/ormqr are deterministic (LAPACK's Householder sign convention).
add("aten::geqrf.default", torch.geqrf, matrices(spread, square=False), compare=matches)


@st.composite
def _reflectors(draw: Any, rhs: bool = False) -> Sample:
    """geqrf's (a, tau) of an m x n matrix (m >= n for householder_product), and for ormqr
    a right-hand side C whose rows (left) or columns (right) match m."""
    g, batch, dtype = draw(seeds()), draw(batches()), draw(LINALG_DTYPES)
    m = draw(matrix_size())
    n = draw(st.integers(1, m)) if not rhs else draw(matrix_size())
    a, tau = torch.geqrf(spread(g, batch, m, n, cplx=dtype.is_complex))
    if not rhs:
        tau = tau[..., :draw(st.integers(0, tau.shape[-1]))]
        return _contiguous(Sample((a.to(dtype), tau.to(dtype))))
    left, transpose = draw(st.booleans()), draw(st.booleans())
    other = draw(matrix_size())
    c = gaussian(g, (*batch, m, other) if left else (*batch, other, m), dtype.is_complex)
    return _contiguous(Sample((a.to(dtype), tau.to(dtype), c.to(dtype)),
                              {"left": left, "transpose": transpose}))


add("aten::linalg_householder_product.default", torch.linalg.householder_product,
    _reflectors(), compare=matches)
add("aten::ormqr.default", lambda a, tau, c, left, transpose: torch.ormqr(
    a, tau, c, left=left, transpose=transpose), _reflectors(rhs=True), compare=matches)


# -- Cholesky ----------------------------------------------------------------------------------

def _cholesky_info(expected: list[torch.Tensor], got: list[np.ndarray], sample: Sample) -> None:
    """info exactly; the factor only where it exists (a failed factor's content is LAPACK
    implementation detail)."""
    same_layout(expected, got, "cholesky_ex")
    np.testing.assert_array_equal(got[1], expected[1].numpy(), err_msg="info")
    ok = expected[1].numpy() == 0
    close(as64(got[0])[ok], as64(expected[0])[ok], _tol(sample), "factor")


add("aten::linalg_cholesky_ex.default", lambda a, upper: torch.linalg.cholesky_ex(a, upper=upper),
    matrices(spd, upper=st.booleans()), compare=matches)
add("aten::linalg_cholesky_ex.default", lambda a, upper: torch.linalg.cholesky_ex(a, upper=upper),
    matrices(symmetric, upper=st.booleans()), compare=_cholesky_info,
    name="linalg_cholesky_ex(indefinite)")
add("aten::cholesky.default", lambda a, upper: torch.cholesky(a, upper=upper),
    matrices(spd, upper=st.booleans()), compare=matches)


@st.composite
def _cholesky_factor(draw: Any, rhs: bool) -> Sample:
    g, batch, dtype = draw(seeds()), draw(batches()), draw(LINALG_DTYPES)
    upper = draw(st.booleans())
    n = draw(matrix_size())
    factor = torch.linalg.cholesky(spd(g, batch, n, cplx=dtype.is_complex), upper=upper)
    factor = factor.to(dtype)
    if not rhs:
        return _contiguous(Sample((factor,), {"upper": upper}))
    b = gaussian(g, (*batch, n, draw(matrix_size())), dtype.is_complex).to(dtype)
    return _contiguous(Sample((b, factor), {"upper": upper}))


add("aten::cholesky_solve.default", lambda b, f, upper: torch.cholesky_solve(b, f, upper=upper),
    _cholesky_factor(rhs=True), compare=matches)
add("aten::cholesky_inverse.default", lambda f, upper: torch.cholesky_inverse(f, upper=upper),
    _cholesky_factor(rhs=False), compare=matches)


# -- LU, solve, inverse, determinants -----------------------------------------------------------

def singular(g: torch.Generator, batch: tuple[int, ...], m: int, n: int,
             cplx: bool = False) -> torch.Tensor:
    """``general`` with its last column zeroed: U gets an exact zero pivot (info > 0)."""
    a = general(g, batch, m, n, cplx).clone()
    a[..., -1] = 0
    return a


add("aten::linalg_lu_factor_ex.default", torch.linalg.lu_factor_ex,
    matrices(general, square=False), compare=matches)
add("aten::linalg_lu_factor_ex.default", torch.linalg.lu_factor_ex,
    matrices(singular), compare=matches, name="linalg_lu_factor_ex(singular)")
add("aten::linalg_lu.default", torch.linalg.lu, matrices(general, square=False),
    compare=matches)


@st.composite
def _lu_unpack_args(draw: Any) -> Sample:
    g, batch, dtype = draw(seeds()), draw(batches()), draw(LINALG_DTYPES)
    m, n = draw(matrix_size()), draw(matrix_size())
    lu, pivots = torch.linalg.lu_factor(general(g, batch, m, n, dtype.is_complex))
    return _contiguous(Sample((lu.to(dtype), pivots), {
        "unpack_data": draw(st.booleans()), "unpack_pivots": draw(st.booleans())}))


add("aten::lu_unpack.default", lambda lu, p, unpack_data, unpack_pivots: torch.lu_unpack(
    lu, p, unpack_data=unpack_data, unpack_pivots=unpack_pivots),
    _lu_unpack_args(), compare=matches)
# float16/bfloat16 factors: unpacking moves values, so they compare exactly
ENTRIES.append(half_variant(ENTRIES[-1], compare=None, no_half=""))


def _rhs(draw: Any, g: torch.Generator, batch: tuple[int, ...], n: int, left: bool,
         dtype: torch.dtype) -> torch.Tensor:
    """B for a left (n x k) or right (k x n) solve; its batch broadcasts against ``batch``."""
    b_batch = draw(st.sampled_from([batch, batch[1:], tuple(1 for _ in batch)]))
    k = draw(matrix_size())
    return gaussian(g, (*b_batch, n, k) if left else (*b_batch, k, n), dtype.is_complex).to(dtype)


@st.composite
def _lu_solve_args(draw: Any) -> Sample:
    g, batch, dtype = draw(seeds()), draw(batches()), draw(LINALG_DTYPES)
    n, left, adjoint = draw(matrix_size()), draw(st.booleans()), draw(st.booleans())
    lu, pivots = torch.linalg.lu_factor(general(g, batch, n, n, dtype.is_complex))
    b = _rhs(draw, g, batch, n, left, dtype)
    return _contiguous(Sample((lu.to(dtype), pivots, b), {"left": left, "adjoint": adjoint}))


add("aten::linalg_lu_solve.default", lambda lu, p, b, left, adjoint: torch.linalg.lu_solve(
    lu, p, b, left=left, adjoint=adjoint), _lu_solve_args(), compare=matches)


@st.composite
def solve_args(draw: Any) -> Sample:
    """A and B for solve: matrix B (batch broadcast), one vector, or a batch of vectors."""
    g, batch, dtype = draw(seeds()), draw(batches()), draw(LINALG_DTYPES)
    n, left = draw(matrix_size()), draw(st.booleans())
    a = general(g, batch, n, n, dtype.is_complex).to(dtype)
    # torch rejects vector right-hand sides with left=False
    kind = draw(st.sampled_from(("matrix", "vector", "vectors") if left else ("matrix",)))
    if kind == "matrix":
        b = _rhs(draw, g, batch, n, left, dtype)
    else:
        b = gaussian(g, (*batch, n) if kind == "vectors" else (n,), dtype.is_complex).to(dtype)
    return _contiguous(Sample((a, b), {"left": left}))


add("aten::_linalg_solve_ex.default", lambda a, b, left: aten._linalg_solve_ex(a, b, left=left),
    solve_args(), compare=matches)
add("aten::_linalg_solve_ex.default", lambda a, b, left: torch.linalg.solve_ex(a, b, left=left),
    solve_args(), compare=matches, name="linalg.solve_ex")
add("aten::linalg_inv_ex.default", torch.linalg.inv_ex, matrices(general), compare=matches)

# The LU outputs are those of A.T (torch factors the column-major view of a row-major A).
add("aten::_linalg_det.default", aten._linalg_det, matrices(general), compare=matches)
add("aten::_linalg_det.default", torch.linalg.det, matrices(singular), compare=matches,
    name="det(singular)")
add("aten::_linalg_slogdet.default", aten._linalg_slogdet, matrices(general), compare=matches)
add("aten::_linalg_slogdet.default", torch.linalg.slogdet, matrices(singular), compare=matches,
    name="slogdet(singular)")


# -- triangular solves, pseudo-inverse, LDL -----------------------------------------------------

@st.composite
def _triangular_args(draw: Any) -> Sample:
    g, batch, dtype = draw(seeds()), draw(batches()), draw(LINALG_DTYPES)
    n, upper, left = draw(matrix_size()), draw(st.booleans()), draw(st.booleans())
    a = triangular(g, batch, n, upper, dtype.is_complex).to(dtype)
    b = _rhs(draw, g, batch, n, left, dtype)
    return _contiguous(Sample((a, b), {"upper": upper, "left": left,
                                       "unitriangular": draw(st.booleans())}))


@st.composite
def _legacy_triangular_args(draw: Any) -> Sample:
    sample = draw(_triangular_args())
    a, b = sample.args
    upper, transpose = sample.kwargs["upper"], draw(st.booleans())
    if not sample.kwargs["left"]:  # the legacy form solves on the left only
        b = b.mT.contiguous()
    return Sample((b, a), {"upper": upper, "transpose": transpose,
                           "unitriangular": sample.kwargs["unitriangular"]})


# Deprecated, but still what torch.triangular_solve exports.
add("aten::triangular_solve.default",
    lambda b, a, upper, transpose, unitriangular: torch.triangular_solve(
        b, a, upper=upper, transpose=transpose, unitriangular=unitriangular),
    _legacy_triangular_args(), compare=matches)


@st.composite
def _matrix_exp_args(draw: Any) -> Sample:
    """Entries |.| <= 2 / n, so the norm stays below ~2: both Pade implementations are then
    accurate to a few ulps times n."""
    g, batch, dtype = draw(seeds()), draw(batches()), draw(LINALG_DTYPES)
    n = draw(matrix_size())
    a = 2 * uniform(g, (*batch, n, n), dtype.is_complex) / n
    return Sample((a.to(dtype).contiguous(),))


add("aten::linalg_matrix_exp.default", torch.linalg.matrix_exp, _matrix_exp_args(),
    compare=matches)
# float16/bfloat16: torch's half kernel is wrong (exp([[0.1, 0.2], [0, 0.3]]) gives -21072 on
# the diagonal in float16, inf for a 3x3 matrix of norm ~1); the runtime computes in float32
# and rounds once, as the float32 reference does
ENTRIES.append(half_variant(ENTRIES[-1], compare=None, no_half="",
                            reference=in_float32(torch.linalg.matrix_exp)))


add("aten::linalg_solve_triangular.default",
    lambda a, b, upper, left, unitriangular: torch.linalg.solve_triangular(
        a, b, upper=upper, left=left, unitriangular=unitriangular),
    _triangular_args(), compare=matches)


@st.composite
def _pinv_args(draw: Any) -> Sample:
    """Singular values in [0.5, 3]; cutoffs atol=1 / rtol=0.3 drop some of them."""
    g, batch, dtype = draw(seeds()), draw(batches()), draw(LINALG_DTYPES)
    hermitian = draw(st.booleans())
    m = draw(matrix_size())
    cplx = dtype.is_complex
    a = symmetric(g, batch, m, cplx=cplx) if hermitian else spread(g, batch, m,
                                                                    draw(matrix_size()), cplx)
    atol = draw(st.sampled_from((None, 1.0, "tensor")))
    rtol = draw(st.sampled_from((None, 0.3)))
    args: tuple[Any, ...] = (a.to(dtype),)
    if atol == "tensor":  # a tensor atol next to a float rtol makes torch call .item()
        args = (*args, torch.full(batch, 1.0, dtype=torch.float64))
        atol = rtol = None
    return _contiguous(Sample(args, {"atol": atol, "rtol": rtol, "hermitian": hermitian}))


def _pinv(a: torch.Tensor, *tensor_atol: torch.Tensor, atol: Any, rtol: Any,
          hermitian: bool) -> torch.Tensor:
    return torch.linalg.pinv(a, atol=tensor_atol[0] if tensor_atol else atol, rtol=rtol,
                             hermitian=hermitian)


add("aten::linalg_pinv.atol_rtol_tensor", _pinv, _pinv_args(), compare=matches)

@st.composite
def _ldl_args(draw: Any, solve: bool = False) -> Sample:
    """A symmetric (complex: Hermitian or complex symmetric, as ``hermitian`` says) matrix;
    for ldl_solve its torch factor and a right-hand side."""
    g, batch, dtype = draw(seeds()), draw(batches()), draw(LINALG_DTYPES)
    n, hermitian = draw(matrix_size()), draw(st.booleans())
    a = symmetric(g, batch, n, cplx=dtype.is_complex, hermitian=hermitian).to(dtype)
    if not solve:
        return _contiguous(Sample((a,), {"hermitian": hermitian}))
    ld, pivots = torch.linalg.ldl_factor(a, hermitian=hermitian)
    b = _rhs(draw, g, batch, n, True, dtype)
    return _contiguous(Sample((ld, pivots, b), {"hermitian": hermitian}))


add("aten::linalg_ldl_factor_ex.default",
    lambda a, hermitian: torch.linalg.ldl_factor_ex(a, hermitian=hermitian),
    _ldl_args(), compare=matches)


add("aten::linalg_ldl_solve.default", lambda ld, p, b, hermitian: torch.linalg.ldl_solve(
    ld, p, b, hermitian=hermitian), _ldl_args(solve=True), compare=matches)
