"""Op-database entries (elementwise family): elementwise math, comparisons and where on
complex64/complex128 tensors (some with a real operand)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from tests.torch.op_db._entry import (
    COMPLEX_NO_HALF,
    EntrySet,
    Sample,
    broadcastable,
    shapes,
    tensors,
)
from tests.torch.op_db.complex import COMPLEX, REAL, one

ENTRIES = EntrySet(no_half=COMPLEX_NO_HALF)
add = ENTRIES.add


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
