"""Op-database entries (complex family): building, taking apart and conjugating complex numbers,
angle and sgn. The other families' ops on complex tensors are in their own modules
(``elementwise_complex.py``, ``tensor_complex.py``, ``nn_complex.py``, ``random_complex.py``)."""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from tests.torch.op_db._entry import (
    COMPLEX_NO_HALF,
    EntrySet,
    Sample,
    broadcastable,
    shapes,
    tensors,
)

COMPLEX = st.sampled_from((torch.complex64, torch.complex128))
PARTS = st.sampled_from((torch.float32, torch.float64))  # the parts of complex64/complex128
REAL = st.sampled_from((torch.float32, torch.float64, torch.int32, torch.int64))
REAL_OR_HALF = st.sampled_from((torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                torch.int32, torch.int64))

ENTRIES = EntrySet(no_half=COMPLEX_NO_HALF)
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
