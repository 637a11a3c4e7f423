"""Op-database entries (complex family): complex numbers (the ``complex`` lowering family) and the
elementwise, reduction and data-movement ops torch allows on complex64/complex128 tensors."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from tests.torch.op_db import nn, tensor_shape
from tests.torch.op_db._entry import (
    EntrySet,
    Sample,
    broadcastable,
    complex_variants,
    shapes,
    tensors,
)

COMPLEX = st.sampled_from((torch.complex64, torch.complex128))
PARTS = st.sampled_from((torch.float32, torch.float64))  # the parts of complex64/complex128
REAL = st.sampled_from((torch.float32, torch.float64, torch.int32, torch.int64))
REAL_OR_HALF = st.sampled_from((torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                torch.int32, torch.int64))

ENTRIES = EntrySet(no_half="the complex family: complex values, for which torch has no bfloat16 "
                              "type and only an experimental complex32")
COVERED_ELSEWHERE = {
    # torch.export's decompositions turn these into _conj_physical / _conj (+ clone); they
    # reach the converter only from a program exported without run_decompositions
    name: "tests/torch/test_complex_lowerings.py::test_undecomposed_conjugates_match_torch"
    for name in ("aten::conj_physical.default", "aten::resolve_conj.default")}


add = ENTRIES.add


def one(dtypes: st.SearchStrategy = COMPLEX, low: float = -4.0, high: float = 4.0,
        special: bool = False, min_rank: int = 0, **kwargs: Any) -> st.SearchStrategy[Sample]:
    """One tensor of any shape (sizes 1 and 47 included)."""
    @st.composite
    def build(draw: Any) -> Sample:
        x = draw(tensors(draw(shapes(min_rank=min_rank)), draw(dtypes), low=low, high=high,
                         special=special))
        return Sample((x,), {k: draw(v) for k, v in kwargs.items()})

    return build()


def two(dtypes: st.SearchStrategy = COMPLEX, other: st.SearchStrategy | None = None,
        low: float = -4.0, high: float = 4.0, rhs_low: float | None = None,
        ) -> st.SearchStrategy[Sample]:
    """Two broadcastable tensors; ``other`` draws the second dtype (default: the first's)."""
    @st.composite
    def build(draw: Any) -> Sample:
        shape = draw(shapes())
        dtype = draw(dtypes)
        x = draw(tensors(shape, dtype, low=low, high=high))
        y = draw(tensors(draw(broadcastable(shape)), dtype if other is None else draw(other),
                         low=low if rhs_low is None else rhs_low, high=high))
        return Sample((x, y) if draw(st.booleans()) else (y, x))

    return build()


@st.composite
def pairs(draw: Any) -> Sample:
    """A float32/float64 tensor whose last axis holds (real, imag) pairs."""
    shape = (*draw(shapes(max_rank=3)), 2)
    return Sample((draw(tensors(shape, draw(PARTS), special=True)),))


# -- the complex family ---------------------------------------------------------------------------
add("aten::view_as_real.default", torch.view_as_real, one(special=True))
add("aten::view_as_real_copy.default", torch.ops.aten.view_as_real_copy, one(special=True))
add("aten::view_as_real.default", lambda z: torch.real(z) * 2, one(), name="real")
add("aten::view_as_real.default", lambda z: torch.imag(z) - 1, one(), name="imag")
add("aten::view_as_complex.default", torch.view_as_complex, pairs())
add("aten::view_as_complex_copy.default", torch.ops.aten.view_as_complex_copy, pairs())


@st.composite
def parts_samples(draw: Any, positive_first: bool = False) -> Sample:
    dtype = draw(PARTS)
    shape = draw(shapes())
    lo = 0.0 if positive_first else -4.0
    a = draw(tensors(shape, dtype, low=lo, high=4.0, special=not positive_first))
    b = draw(tensors(draw(broadcastable(shape)), dtype, special=not positive_first))
    return Sample((a, b) if positive_first or draw(st.booleans()) else (b, a))


add("aten::complex.default", torch.complex, parts_samples())
add("aten::polar.default", torch.polar, parts_samples(positive_first=True))
add("aten::_conj.default", torch.conj, one(special=True))
add("aten::_conj_physical.default", torch.conj_physical, one(special=True))
add("aten::angle.default", torch.angle, one(special=True), name="angle[complex]")
add("aten::angle.default", torch.angle, one(REAL_OR_HALF, special=True), name="angle[real]")
add("aten::sgn.default", torch.sgn, one(special=False), name="sgn[complex]")
add("aten::sgn.default", torch.sgn, one(REAL_OR_HALF, special=True), name="sgn[real]")


@st.composite
def with_zeros(draw: Any) -> Sample:
    """Complex values with some exact zeros (sgn(0) = 0)."""
    (z,) = draw(one()).args
    mask = draw(tensors(z.shape, torch.bool))
    return Sample((torch.where(mask, torch.zeros_like(z), z),))


add("aten::sgn.default", torch.sgn, with_zeros(), name="sgn[zeros]")

# -- elementwise math on complex tensors ----------------------------------------------------------
for _name, _lo, _hi in [
    ("acos", -2, 2), ("acosh", -2, 2), ("asin", -2, 2), ("asinh", -2, 2), ("atan", -2, 2),
    ("atanh", -2, 2), ("cos", -4, 4), ("cosh", -4, 4), ("sin", -4, 4), ("sinh", -4, 4),
    ("tan", -1.5, 1.5), ("tanh", -4, 4), ("exp", -4, 4), ("exp2", -4, 4), ("expm1", -4, 4),
    ("log", -4, 4), ("log2", -4, 4), ("log10", -4, 4), ("log1p", -4, 4), ("sqrt", -4, 4),
    ("rsqrt", 0.5, 4), ("reciprocal", 0.5, 4), ("sigmoid", -4, 4), ("neg", -4, 4),
]:
    add(f"aten::{_name}.default", getattr(torch, _name), one(low=_lo, high=_hi),
        name=f"{_name}[complex]")
add("aten::silu.default", F.silu, one(), name="silu[complex]")
add("aten::abs.default", torch.abs, one(special=True), name="abs[complex]")
for _name in ("isnan", "isinf", "isfinite"):
    add(f"aten::{_name}.default", getattr(torch, _name), one(special=True),
        name=f"{_name}[complex]")
for _name in ("add", "sub", "mul"):
    add(f"aten::{_name}.Tensor", getattr(torch, _name), two(), name=f"{_name}[complex]")
    add(f"aten::{_name}.Tensor", getattr(torch, _name), two(COMPLEX, REAL),
        name=f"{_name}[complex,real]")
add("aten::div.Tensor", torch.div, two(COMPLEX, COMPLEX, rhs_low=0.5),
    name="div[complex]")
add("aten::pow.Tensor_Tensor", torch.pow, two(COMPLEX, COMPLEX, low=0.5, high=2.0),
    name="pow[complex]",
    atol=1e-4, rtol=1e-4,
    tol_reason="complex pow is exp(b * log(a)): numpy and torch round log and exp "
               "differently, and the error grows with |b * log(a)|")
add("aten::pow.Tensor_Scalar", lambda z, e: z ** e, one(e=st.sampled_from((2, 3, 0.5, -1))),
    name="pow_scalar[complex]", atol=1e-4, rtol=1e-4,
    tol_reason="complex pow is exp(e * log(z)) in both, with different roundings")
add("aten::mul.Tensor", lambda z, c: z * c, one(c=st.sampled_from((1j, 2 - 0.5j, 3.0))),
    name="mul_scalar[complex]")
add("aten::eq.Tensor", torch.eq, two(), name="eq[complex]")
add("aten::ne.Tensor", torch.ne, two(), name="ne[complex]")


@st.composite
def where_samples(draw: Any) -> Sample:
    shape = draw(shapes())
    dtype = draw(COMPLEX)
    cond = draw(tensors(draw(broadcastable(shape)), torch.bool))
    x = draw(tensors(shape, dtype))
    y = draw(tensors(draw(broadcastable(shape)), dtype))
    return Sample((cond, x, y) if draw(st.booleans()) else (cond, y, x))


add("aten::where.self", torch.where, where_samples(), name="where[complex]")
add("aten::_to_copy.default", lambda z, d: z.to(d), st.one_of(
    one(st.just(torch.complex64), d=st.just(torch.complex128)),
    one(st.just(torch.complex128), d=st.just(torch.complex64))), name="to[complex]")
add("aten::_to_copy.default", lambda x, d: x.to(d),
    one(REAL, d=st.sampled_from((torch.complex64, torch.complex128))), name="to[real->complex]")
add("aten::_to_copy.default", lambda z, d: z.to(d),  # keeps the real part (torch warns)
    one(d=st.sampled_from((torch.float32, torch.float64, torch.int32, torch.bool))),
    name="to[complex->real]")

# -- reductions and data movement -----------------------------------------------------------------
add("aten::sum.dim_IntList", lambda z, d: z.sum(d), one(min_rank=1, d=st.just(-1)),
    name="sum[complex]")
add("aten::mean.dim", lambda z, d: z.mean(d), one(min_rank=1, d=st.just(0)),
    name="mean[complex]")
add("aten::mm.default", torch.mm, st.builds(
    lambda a, b: Sample((a, b)),
    tensors((3, 47), torch.complex64), tensors((47, 1), torch.complex64)), name="mm[complex]",
    atol=1e-4, tol_reason="a 47-term complex dot product: summation order differs from torch")
add("aten::permute.default", lambda z: z.permute(*reversed(range(z.dim()))).contiguous(),
    one(min_rank=1), name="permute[complex]")
add("aten::view.default", lambda z: z.reshape(-1), one(min_rank=1), name="view[complex]")
add("aten::cat.default", lambda a, b: torch.cat([a, b], 0), st.builds(
    lambda a, b: Sample((a, b)), tensors((2, 47), torch.complex128),
    tensors((1, 47), torch.complex128)), name="cat[complex]")
add("aten::slice.Tensor", lambda z: z[..., 1::2], one(min_rank=1), name="slice[complex]")
add("aten::flip.default", lambda z: z.flip(0), one(min_rank=1), name="flip[complex]")
add("aten::expand.default", lambda z: z.expand(3, *z.shape), one(), name="expand[complex]")

# the general mm and cat entries on complex inputs (the ones above draw one complex dtype each)
ENTRIES += complex_variants([e for e in nn.ENTRIES if not e.name], ["aten::mm.default"],
                            atol=1e-4, rtol=1e-5,
                            tol_reason="complex dot products of up to 47 terms: numpy and "
                                       "torch sum them in different orders")
ENTRIES += complex_variants([e for e in tensor_shape.ENTRIES if not e.name], ["aten::cat.default"])
