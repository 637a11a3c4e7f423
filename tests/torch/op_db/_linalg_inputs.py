"""Well-conditioned matrix inputs and invariant checks for the linear-algebra op-db entries.

Inputs are built in float64 from a drawn seed, then cast. Every family of inputs has a
condition number bounded by construction (stated per builder), so torch's LAPACK (MKL or
OpenBLAS) and the runtime's (scipy's) agree to a small multiple of ``n * eps`` whatever their
blocking and summation order; that bound is what :func:`tolerance` states.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from tests.torch.op_db._entry import sizes

LINALG_DTYPES = st.sampled_from((torch.float32, torch.float64, torch.complex64, torch.complex128))
EIG_DTYPES = LINALG_DTYPES
Build = Callable[[torch.Generator, tuple[int, ...], int, int], torch.Tensor]


def batches() -> st.SearchStrategy[tuple[int, ...]]:
    """Batch shapes: none, or one or two dims of size 1-3."""
    return st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)


def matrix_size() -> st.SearchStrategy[int]:
    """Matrix sizes 1-6, sometimes 47."""
    return sizes(1, 6)


def tolerance(dtype: Any, n: int) -> float:
    """Backward-stable factorizations of matrices with condition number <= ~10 agree to
    ``n * eps * cond`` between LAPACK builds; 50 * n * eps leaves headroom for that."""
    single = (torch.float32, torch.complex64, np.float32, np.complex64)
    eps = float(np.finfo(np.float32 if dtype in single else np.float64).eps)
    return 50.0 * max(n, 1) * eps


def uniform(g: torch.Generator, shape: tuple[int, ...], cplx: bool = False) -> torch.Tensor:
    """Uniform in [-1, 1] (complex: both parts, scaled by 1/sqrt(2) so |z| <= 1)."""
    re = torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1
    if not cplx:
        return re
    im = torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1
    return torch.complex(re, im) / 2**0.5


def gaussian(g: torch.Generator, shape: tuple[int, ...], cplx: bool = False) -> torch.Tensor:
    re = torch.randn(shape, generator=g, dtype=torch.float64)
    return torch.complex(re, torch.randn(shape, generator=g, dtype=torch.float64)) if cplx \
        else re


def general(g: torch.Generator, batch: tuple[int, ...], m: int, n: int,
            cplx: bool = False) -> torch.Tensor:
    """Rows of ``I + E / 2`` (|E| <= 1 / size) in a random order, cut to m x n.

    Strictly diagonally dominant before the row shuffle (condition number <= 3), so partial
    pivoting has no near-ties and swaps rows whenever the shuffle moved them.
    """
    size = max(m, n)
    a = torch.eye(size, dtype=torch.float64) + uniform(g, (*batch, size, size), cplx) / (
        2 * size)
    order = torch.argsort(torch.rand((*batch, size), generator=g), dim=-1)
    a = torch.take_along_dim(a, order.unsqueeze(-1), dim=-2)
    return a[..., :m, :n]


def _unitary(g: torch.Generator, batch: tuple[int, ...], n: int, cplx: bool) -> torch.Tensor:
    q, _ = torch.linalg.qr(gaussian(g, (*batch, n, n), cplx))
    return q


def spectrum(g: torch.Generator, batch: tuple[int, ...], k: int, signed: bool) -> torch.Tensor:
    """k real values with magnitudes in [0.5, 3] (random signs if ``signed``)."""
    s = 0.5 + 2.5 * torch.rand((*batch, k), generator=g, dtype=torch.float64)
    if signed:
        s = s * torch.where(torch.rand((*batch, k), generator=g) < 0.5, -1.0, 1.0)
    return s


def symmetric(g: torch.Generator, batch: tuple[int, ...], n: int, _: int = 0,
              cplx: bool = False, hermitian: bool = True) -> torch.Tensor:
    """``Q diag(d) Q^H`` (``Q diag(d) Q^T``, complex symmetric, when not ``hermitian``) with
    Q unitary and real |d| in [0.5, 3] of mixed signs: indefinite, condition <= 6."""
    q = _unitary(g, batch, n, cplx)
    d = spectrum(g, batch, n, signed=True).unsqueeze(-2)
    return (q * d) @ (q.mH if hermitian else q.mT)


def spd(g: torch.Generator, batch: tuple[int, ...], n: int, _: int = 0,
        cplx: bool = False) -> torch.Tensor:
    """``Q diag(d) Q^H`` with d in [0.5, 3]: positive definite, condition <= 6."""
    q = _unitary(g, batch, n, cplx)
    return (q * spectrum(g, batch, n, signed=False).unsqueeze(-2)) @ q.mH


def spread(g: torch.Generator, batch: tuple[int, ...], m: int, n: int,
           cplx: bool = False) -> torch.Tensor:
    """``U diag(s) V^H`` with singular values in [0.5, 3] (condition <= 6), any m x n."""
    k = min(m, n)
    u = _unitary(g, batch, m, cplx)[..., :k]
    v = _unitary(g, batch, n, cplx)[..., :k]
    return (u * spectrum(g, batch, k, signed=False).unsqueeze(-2)) @ v.mH


def triangular(g: torch.Generator, batch: tuple[int, ...], n: int, upper: bool,
               cplx: bool = False) -> torch.Tensor:
    """Diagonal in +-[1, 2], off-diagonal |.| <= 1 / n (condition stays small, also with a
    unit diagonal); the other triangle is large noise that solvers must not read."""
    diag = 1 + torch.rand((*batch, n), generator=g, dtype=torch.float64)
    diag = diag * torch.where(torch.rand((*batch, n), generator=g) < 0.5, -1.0, 1.0)
    off = uniform(g, (*batch, n, n), cplx) / n
    tri = torch.triu(off, 1) if upper else torch.tril(off, -1)
    noise = torch.tril(off, -1) if upper else torch.triu(off, 1)
    return tri + torch.diag_embed(diag).to(off.dtype) + 100 * noise


def normal(g: torch.Generator, batch: tuple[int, ...], n: int, dtype: torch.dtype,
           ) -> torch.Tensor:
    """``Q T Q^H`` with Q unitary: a normal matrix, so its eigenvalues are perfectly
    conditioned. Real dtypes: T has 2x2 blocks [[a, b], [-b, a]] (eigenvalues a +- ib,
    b in [0.5, 2]) and real diagonal entries, all parts in [-3, 3]; complex dtypes: T is a
    diagonal of random complex values."""
    if dtype.is_complex:
        q = _unitary(g, batch, n, cplx=True)
        w = 3 * uniform(g, (*batch, n), cplx=True)
        return ((q * w.unsqueeze(-2)) @ q.mH).to(dtype)
    t = torch.diag_embed(3 * uniform(g, (*batch, n)))
    pairs = int(torch.randint(0, n // 2 + 1, (), generator=g))
    for i in range(pairs):
        b = 0.5 + 1.5 * torch.rand(batch, generator=g, dtype=torch.float64)
        t[..., 2 * i, 2 * i + 1] = b
        t[..., 2 * i + 1, 2 * i] = -b
        t[..., 2 * i + 1, 2 * i + 1] = t[..., 2 * i, 2 * i]
    q = _unitary(g, batch, n, cplx=False)
    return (q @ t @ q.mT).to(dtype)


@st.composite
def seeds(draw: Any) -> torch.Generator:
    return torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))


# -- invariant checks --------------------------------------------------------------------------

def _numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor's values (torch may hand back a lazily conjugated view)."""
    return t.detach().resolve_conj().resolve_neg().numpy()


def as64(x: Any) -> np.ndarray:
    """float64 (complex128 for complex data) numpy copy."""
    a = np.asarray(_numpy(x) if isinstance(x, torch.Tensor) else x)
    return a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)


def same_layout(expected: list[torch.Tensor], got: list[np.ndarray], what: str) -> None:
    """Output count, shapes and dtypes as torch's."""
    assert len(got) == len(expected), f"{what}: {len(got)} outputs, torch has {len(expected)}"
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert tuple(np.shape(g)) == tuple(e.shape), f"{what} output {i}: shape"
        assert np.asarray(g).dtype == _numpy(e).dtype, f"{what} output {i}: dtype"


def close(got: Any, want: Any, tol: float, what: str) -> None:
    """|got - want| <= tol * (1 + |want|) elementwise, in float64."""
    np.testing.assert_allclose(as64(got), as64(want), rtol=tol, atol=tol, err_msg=what)


def orthonormal_columns(q: np.ndarray, tol: float, what: str) -> None:
    q = as64(q)
    gram = q.swapaxes(-1, -2).conj() @ q
    close(gram, np.broadcast_to(np.eye(q.shape[-1]), gram.shape), tol, f"{what}: Q^H @ Q != I")


