"""Complex element types through the text form, save/load and runtime inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from coreai_core import DType, Program, TensorType, load, parse, promote_types
from coreai_core.dialects import coreai
from coreai_core.errors import ParseError

COMPLEX = st.sampled_from([np.complex64, np.complex128])


def parts(dtype: type) -> st.SearchStrategy[complex]:
    width = 32 if dtype is np.complex64 else 64
    f = st.floats(width=width, allow_nan=True, allow_infinity=True)
    return st.builds(complex, f, f)


@st.composite
def complex_arrays(draw, max_size: int = 20) -> np.ndarray:
    """Complex arrays with any parts (NaN, inf, -0.0 included); small enough to print."""
    dtype = draw(COMPLEX)
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 5]), max_size=2)))
    n = int(np.prod(shape))
    values = draw(st.lists(parts(dtype), min_size=n, max_size=n))
    out = np.empty(n, dtype)
    out.real = [v.real for v in values]
    out.imag = [v.imag for v in values]
    return out.reshape(shape)


def one_constant(arr: np.ndarray) -> Program:
    p = Program()
    with p.graph("main") as g:
        g.outputs({"y": coreai.constant(arr, name="c" if arr.size > 16 else None)})
    return p


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@given(arr=complex_arrays())
def test_complex_constants_round_trip_through_text_bit_for_bit(arr):
    p = one_constant(arr)
    q = parse(p.to_text(full=True))
    assert q == p
    assert same_bits(q.run({})["y"], arr)


def test_complex_constants_print_as_real_imag_pairs():
    p = one_constant(np.array([1.5 - 2j, complex(-0.0, np.inf)], np.complex64))
    assert "dense<[(1.5, -2.0), (-0.0, inf)]> : tensor<2xc64>" in p.to_text()
    nan_bits = np.array([complex(1, 0)], np.complex128)
    nan_bits.view(np.uint64)[1] = 0x7FF0000000000001  # a signalling NaN imaginary part
    assert "(1.0, nan(0x7ff0000000000001))" in one_constant(nan_bits).to_text()


@pytest.mark.parametrize("bad", ["(1.0)", "(1.0, 2.0, 3.0)", "(1.0, x)", "1.0"])
def test_malformed_complex_elements_are_parse_errors(bad):
    text = one_constant(np.array([1 + 1j], np.complex64)).to_text().replace("(1.0, 1.0)", bad)
    with pytest.raises(ParseError, match=r"bad complex64 element|dense data"):
        parse(text)


def test_complex_weights_and_state_round_trip_through_save_and_load(tmp_path: Path):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((8, 5)) + 1j * rng.standard_normal((8, 5))).astype(np.complex64)
    s0 = (rng.standard_normal(5) + 1j * rng.standard_normal(5)).astype(np.complex128)
    p = Program()
    with p.graph("main", inputs={"x": TensorType((8, 5), "complex64")},
                 state={"acc": s0}) as g:
        y = coreai.broadcasting_mul(g["x"], coreai.constant(w, name="w"))
        acc = coreai.broadcasting_add(g["acc"], coreai.cast(coreai.reduce_sum(y, axes=[0]),
                                                            "complex128"))
        g.outputs({"y": y}, state={"acc": acc})
    p.save(tmp_path / "m.coreai")
    q = load(tmp_path / "m.coreai")
    assert q == p
    x = (rng.standard_normal((8, 5)) + 1j).astype(np.complex64)
    assert same_bits(q.run({"x": x})["y"], p.run({"x": x})["y"])
    assert same_bits(q.state["acc"], p.state["acc"])
    assert q.state["acc"].dtype == np.complex128


def test_complex_inputs_accept_arrays_tensors_and_python_numbers():
    p = Program()
    with p.graph("main", inputs={"z": TensorType((2,), "complex64")}) as g:
        g.outputs({"y": coreai.conj(g["z"])})
    want = np.array([1 - 2j, -3 + 0j], np.complex64)
    for given_ in ([1 + 2j, -3], np.conj(want), torch.tensor([1 + 2j, -3 + 0j])):
        got = p.run({"z": given_})["y"]
        assert got.dtype == np.complex64
        np.testing.assert_array_equal(got, want)


def test_complex_dtype_names_and_torch_promotion():
    assert DType.of("c64") is DType.complex64 and DType.of(torch.complex128) is DType.complex128
    assert DType.complex64.real_dtype is DType.float32
    assert DType.float64.complex_dtype is DType.complex128
    for a in DType:
        if a in (DType.uint16, DType.uint32, DType.uint64) or a.torch is None:
            continue  # torch does not promote these (or has no such dtype)
        for b in (DType.complex64, DType.complex128):
            try:
                want = torch.promote_types(a.torch, b.torch)
            except RuntimeError:  # e.g. torch does not promote float8 types
                continue
            assert promote_types(a, b).torch == want, (a, b)
