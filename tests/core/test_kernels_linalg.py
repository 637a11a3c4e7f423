"""The linalg kernels against torch.linalg: one-op programs run by the numpy runtime.

The op-db (tests/torch/op_db/linalg.py) covers the lowerings; these tests pin the ops'
own conventions: 1-based int32 pivots, info outputs, empty matrices, batch broadcasting,
the permutation pivots describe, and the type rules' errors.

Tolerance: inputs are diagonally dominant (condition number <= 3), so LAPACK builds agree to
a few ulps times n; 50 * n * eps bounds that (the same rule as the op-db's ``tolerance``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from coreai_core import Program, TensorType
from coreai_core.dialects import coreai
from coreai_core.errors import TypeRuleError
from coreai_core.runtime import KernelError
from tests.core.kernel_util import check, run_op, seeds

DTYPES = st.sampled_from([np.float32, np.float64])
SIZES = st.sampled_from([1, 2, 3, 5, 47])
BATCHES = st.lists(st.integers(1, 3), max_size=2).map(tuple)


def check_complex(got: np.ndarray, want: torch.Tensor, tolerance: float) -> None:
    """Shape, dtype, then both parts (kernel_util.check compares real values only)."""
    w = want.numpy()
    assert got.shape == w.shape and got.dtype == w.dtype, (got.shape, got.dtype, w.shape, w.dtype)
    np.testing.assert_allclose(got.astype(np.complex128), w.astype(np.complex128),
                               rtol=tolerance, atol=tolerance)


def tol(dtype: type, n: int) -> float:
    return 50.0 * max(n, 1) * float(np.finfo(dtype).eps)


def dominant(seed: int, batch: tuple[int, ...], m: int, n: int, dtype: type) -> np.ndarray:
    """Rows of I + E/2 (|E| <= 1/size) shuffled, cut to m x n: pivoting without near-ties."""
    rng = np.random.default_rng(seed)
    size = max(m, n)
    a = np.eye(size) + rng.uniform(-1, 1, (*batch, size, size)) / (2 * size)
    a = np.take_along_axis(a, rng.permuted(np.broadcast_to(
        np.arange(size), (*batch, size)), axis=-1)[..., None], axis=-2)
    return np.ascontiguousarray(a[..., :m, :n]).astype(dtype)


@given(seed=seeds, batch=BATCHES, m=SIZES, n=SIZES, dtype=DTYPES)
def test_lu_factor_matches_torch(seed, batch, m, n, dtype):
    a = dominant(seed, batch, m, n, dtype)
    lu, piv, info = run_op(coreai.lu_factor, a)
    want = torch.linalg.lu_factor_ex(torch.from_numpy(a))
    check(lu, want.LU, tol(dtype, n), tol(dtype, n))
    check(piv, want.pivots)
    check(info, want.info)


@given(seed=seeds, batch=BATCHES, m=SIZES, n=SIZES)
def test_pivots_describe_torch_lu_permutation(seed, batch, m, n):
    a = dominant(seed, batch, m, n, np.float64)
    _, piv, _ = run_op(coreai.lu_factor, a)
    (perm,) = run_op(lambda p: coreai.pivots_to_permutation(p, size=m), piv)
    assert perm.dtype == np.int64
    p = torch.linalg.lu(torch.from_numpy(a)).P.numpy()  # A = P @ L @ U
    # P.T @ A = A[perm]  <=>  P.T == I[perm]
    np.testing.assert_array_equal(p.swapaxes(-1, -2), np.eye(m)[perm])


def test_cholesky_info_names_the_failing_minor():
    a = np.array([[[4.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
                  [[2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 1.0]]])
    factor, info = run_op(coreai.cholesky, a)
    want = torch.linalg.cholesky_ex(torch.from_numpy(a))
    check(info, want.info)
    assert info.tolist() == [2, 0]
    check(factor[1], want.L[1], 1e-15, 1e-15)


@pytest.mark.parametrize("build", [
    coreai.lu_factor, coreai.cholesky, coreai.geqrf, coreai.ldl_factor,
    lambda x: coreai.svd(x, compute_uv=False), lambda x: coreai.eigh(x, compute_v=False)])
def test_empty_matrices(build):
    outs = run_op(build, np.zeros((2, 0, 0), np.float32))
    for o in outs:
        if o.ndim == 1:  # info: success for an empty matrix, as torch reports
            np.testing.assert_array_equal(o, np.zeros(2, np.int32))
        else:
            assert o.shape[0] == 2 and o.size == 0


@given(seed=seeds, batch=BATCHES, n=SIZES, k=SIZES, upper=st.booleans(), left=st.booleans(),
       unit=st.booleans(), dtype=DTYPES)
def test_triangular_solve_broadcasts_and_reads_one_triangle(seed, batch, n, k, upper, left,
                                                            unit, dtype):
    rng = np.random.default_rng(seed)
    a = (np.eye(n) * rng.uniform(1, 2, n) + rng.uniform(-1, 1, (*batch, n, n)) / n
         ).astype(dtype)
    b = rng.standard_normal((n, k) if left else (k, n)).astype(dtype)  # batch broadcasts
    (x,) = run_op(lambda p, q: coreai.triangular_solve(p, q, upper=upper, left=left,
                                                       unitriangular=unit), a, b)
    want = torch.linalg.solve_triangular(torch.from_numpy(a), torch.from_numpy(b), upper=upper,
                                         left=left, unitriangular=unit)
    check(x, want, tol(dtype, n), tol(dtype, n))


@given(seed=seeds, batch=BATCHES, n=SIZES, adjoint=st.booleans(), dtype=DTYPES)
def test_lu_solve_broadcasts_the_factor(seed, batch, n, adjoint, dtype):
    a = dominant(seed, (), n, n, dtype)
    b = np.random.default_rng(seed).standard_normal((*batch, n, 2)).astype(dtype)
    lu, piv, _ = run_op(coreai.lu_factor, a)
    (x,) = run_op(lambda f, p, r: coreai.lu_solve(f, p, r, adjoint=adjoint), lu, piv, b)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    check(x, torch.linalg.solve(ta.mT if adjoint else ta, tb), tol(dtype, n), tol(dtype, n))


@given(seed=seeds, m=SIZES, n=SIZES, dtype=DTYPES)
def test_householder_product_with_fewer_reflectors(seed, m, n, dtype):
    m, n = max(m, n), min(m, n)
    a = dominant(seed, (2,), m, n, dtype)
    qr, tau = run_op(coreai.geqrf, a)
    k = n // 2  # the columns past k start as the identity's
    (q,) = run_op(coreai.householder_product, qr, np.ascontiguousarray(tau[..., :k]))
    want = torch.linalg.householder_product(torch.from_numpy(qr), torch.from_numpy(tau[..., :k]))
    check(q, want, tol(dtype, m), tol(dtype, m))


@pytest.mark.parametrize("build, inputs, message", [
    (coreai.lu_factor, [TensorType((3, 3), "int32")], "float32, float64, complex64"),
    (coreai.cholesky, [TensorType((3, 4), "float32")], "must be square"),
    (coreai.eigh, [TensorType((3,), "float32")], "matrix"),
    (lambda a, b: coreai.triangular_solve(a, b, upper=True),
     [TensorType((3, 3), "float32"), TensorType((4, 2), "float32")], "does not match"),
    (lambda a, t: coreai.householder_product(a, t),
     [TensorType((2, 3), "float32"), TensorType((2,), "float32")], "rows >= columns"),
    (lambda p: coreai.pivots_to_permutation(p, size=2),
     [TensorType((3,), "int32")], "cannot permute"),
])
def test_type_rules_reject_ill_formed_operands(build, inputs, message):
    p = Program()
    with p.graph("main", inputs={f"x{i}": t for i, t in enumerate(inputs)}) as g, \
            pytest.raises(TypeRuleError, match=message):
        build(*[g[f"x{i}"] for i in range(len(inputs))])


@given(seed=seeds, n=SIZES, dtype=st.sampled_from([np.complex64, np.complex128]))
def test_complex_adjoint_is_the_conjugate_transpose(seed, n, dtype):
    rng = np.random.default_rng(seed)
    a = (np.eye(n) + (rng.uniform(-1, 1, (n, n)) + 1j * rng.uniform(-1, 1, (n, n))) / (4 * n)
         ).astype(dtype)
    b = (rng.standard_normal((n, 2)) + 1j * rng.standard_normal((n, 2))).astype(dtype)
    lu, piv, _ = run_op(coreai.lu_factor, a)
    (x,) = run_op(lambda f, p, r: coreai.lu_solve(f, p, r, adjoint=True), lu, piv, b)
    want = torch.linalg.solve(torch.from_numpy(a).mH, torch.from_numpy(b))
    check_complex(x, want, tol(dtype, n))


@given(seed=seeds, n=SIZES, hermitian=st.booleans())
def test_complex_ldl_hermitian_or_symmetric(seed, n, hermitian):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    a = np.eye(n) * 2 * n + (z + (z.conj().T if hermitian else z.T))
    ld, piv, info = run_op(lambda x: coreai.ldl_factor(x, hermitian=hermitian), a)
    want = torch.linalg.ldl_factor_ex(torch.from_numpy(a), hermitian=hermitian)
    check_complex(ld, want.LD, tol(np.complex128, n))
    check(piv, want.pivots)
    check(info, want.info)
    b = rng.standard_normal((n, 1)).astype(np.complex128)
    (x,) = run_op(lambda f, p, r: coreai.ldl_solve(f, p, r, hermitian=hermitian), ld, piv, b)
    check_complex(x, torch.linalg.solve(torch.from_numpy(a), torch.from_numpy(b)),
                  tol(np.complex128, n))


@given(seed=seeds, n=st.sampled_from([1, 2, 5]), complex_=st.booleans())
def test_matrix_exp_of_a_large_norm_is_rounded_once(seed, n, complex_):
    """Entries up to 9 (exp reaches ~1e5, as in torch's OpInfo samples): the float32 result
    is the float64 one rounded, within an ulp of the exact value (mpmath, 30 digits); scipy's
    float32 Pade evaluation was ~13 ulp off."""
    import mpmath

    rng = np.random.default_rng(seed)
    a = rng.uniform(-9, 9, (n, n))
    if complex_:
        a = a + 1j * rng.uniform(-9, 9, (n, n))
    a = a.astype(np.complex64 if complex_ else np.float32)
    (got,) = run_op(coreai.matrix_exp, a)
    with mpmath.workdps(30):
        exact = np.array(mpmath.expm(mpmath.matrix(a.astype(np.complex128).tolist())).tolist(),
                         dtype=np.complex128)
    assert got.dtype == a.dtype
    # one rounding of each part: half an ulp of the largest entry, plus float64's error
    ulp = np.spacing(np.float32(np.abs(exact).max()))
    assert np.abs(got.astype(np.complex128) - exact).max() <= ulp, (got, exact)


@pytest.mark.parametrize("op, pivots, message", [
    ("lu_solve", [0, 2, 3], "pivot 0 is out of range"),
    ("lu_solve", [1, 4, 3], "pivot 4 is out of range"),
    ("ldl_solve", [1, 0, 3], "pivot 0 at position 1"),
    ("ldl_solve", [1, 2, -4], "pivot -4 at position 2"),
    ("ldl_solve", [1, 2, -3], "must be followed by the same value"),
    ("ldl_solve", [-2, 1, 3], "must be followed by the same value"),
])
def test_solves_reject_pivots_a_factorization_cannot_give(op, pivots, message):
    # LAPACK's getrs/sytrs index rows by these pivots without checking them: out-of-range
    # values read outside the matrix (varying results, heap corruption), so the kernels check.
    a = dominant(0, (), 3, 3, np.float64)
    b = np.ones((3, 1))
    solve = coreai.lu_solve if op == "lu_solve" else coreai.ldl_solve
    with pytest.raises(KernelError, match=message):
        run_op(solve, a, np.array(pivots, np.int32), b)


def test_ldl_solve_accepts_the_pivots_of_a_real_factorization():
    # a symmetric indefinite matrix whose Bunch-Kaufman factorization has a 2x2 block
    a = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 1.0]])
    ld, piv = torch.linalg.ldl_factor(torch.from_numpy(a))
    assert (piv < 0).any()  # the case the pair check must accept
    b = np.arange(3.0).reshape(3, 1)
    (x,) = run_op(coreai.ldl_solve, ld.numpy(), piv.numpy(), b)
    np.testing.assert_allclose(a @ x, b, atol=1e-12)
