"""mean(x, dtype=float) on integer inputs: torch sums the integers in the float dtype's
accumulation type (float32 for float16/bfloat16) and rounds the mean once, so values that
overflow float16 or are inexact in bfloat16 still give torch's mean."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.torch.harness import FnModule, assert_matches, convert, export, to_numpy
from tests.torch.op_db._entry import DEFAULT_TOL, tensors

INTS = (torch.int16, torch.int32, torch.int64)
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@pytest.mark.parametrize("src", INTS, ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@settings(max_examples=5, deadline=None)
@given(data=st.data(), by_dim=st.booleans())
def test_mean_of_integers_with_float_dtype(src: torch.dtype, dtype: torch.dtype,
                                           data: st.DataObject, by_dim: bool) -> None:
    shape = (data.draw(st.integers(1, 5)), data.draw(st.integers(1, 47)))
    x = data.draw(tensors(shape, src, low=-100000, high=100000))
    if by_dim:
        dim, keepdim = data.draw(st.sampled_from((0, 1, -1))), data.draw(st.booleans())
        module = FnModule(lambda t: torch.mean(t, dim, keepdim, dtype=dtype), [x], {})
    else:
        module = FnModule(lambda t: torch.mean(t, dtype=dtype), [x], {})
    program = convert(export(module, [x]))
    atol, rtol = DEFAULT_TOL[dtype]
    assert_matches([module(x)], list(program.run([to_numpy(x)]).values()), atol=atol,
                   rtol=rtol, what=f"mean {src} -> {dtype}")
