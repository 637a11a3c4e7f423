"""FFT ops exported as DFT products and the complex ops (mappings/fft.py, complex.py) on Apple's
interpreter, against numpy's float64 FFT of the same float32 data: each output within the
stated bound ``(2n + 1) * u * sum_j |x_j| * scale`` per transformed axis (u = 2**-24), and
the measured error (the figures of docs/coreai-interop.md, printed with ``-s``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from coreai_core import Program
from coreai_core.dialects import coreai
from coreai_torch.aimodel import export_aimodel, run_aimodel
from coreai_torch.errors import UnexportableOpsError
from tests.interop.helpers import check_matches_runtime
from tests.interop.test_aimodel_export import program_of, t

U = 2.0 ** -24
SIZES = [1, 2, 7, 47, 64]
NUMPY_NORM = {"none": "backward", "by_root_n": "ortho", "by_n": "forward"}


def _complex_input(shape: tuple[int, ...], build: Any) -> Program:
    """A program taking the parts of a complex tensor and returning the parts of the result
    (complex inputs and outputs are not exported)."""
    def body(re: Any, im: Any) -> Any:
        out = build(coreai.complex_(re, im))
        return coreai.view_as_real(out) if out.type.element_type.is_complex else out
    return program_of({"re": t(*shape), "im": t(*shape)}, body)


def _data(shape: tuple[int, ...], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(shape).astype(np.float32) for k in ("re", "im")}


def _error_in_bound_units(got: np.ndarray, want: np.ndarray, magnitude: np.ndarray,
                          n: int) -> tuple[float, float]:
    """The largest error over the stated bound (must be <= 1), and the largest error in
    units of ``u * magnitude`` (the measured figure)."""
    err = np.abs(got - want)
    units = err / (U * magnitude)
    return float(units.max() / (2 * n + 1)), float(units.max())


@pytest.mark.parametrize("normalization", ["none", "by_root_n", "by_n"])
@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("n", SIZES)
def test_c2c_one_axis(n: int, forward: bool, normalization: str, tmp_path: Path) -> None:
    shape = (3, n)
    program = _complex_input(shape, lambda z: coreai.fft_c2c(
        z, axes=[1], forward=forward, normalization=normalization))
    export_aimodel(program, tmp_path / "f.aimodel")
    inputs = _data(shape, n)
    got = run_aimodel(tmp_path / "f.aimodel", inputs)["y0"]
    z = inputs["re"].astype(np.float64) + 1j * inputs["im"].astype(np.float64)
    fn = np.fft.fft if forward else np.fft.ifft
    want = fn(z, axis=1, norm=NUMPY_NORM[normalization] if forward else {
        "none": "forward", "by_root_n": "ortho", "by_n": "backward"}[normalization])
    scale = {"none": 1.0, "by_root_n": n ** -0.5, "by_n": 1.0 / n}[normalization]
    magnitude = (np.abs(inputs["re"]) + np.abs(inputs["im"])).sum(axis=1, keepdims=True) * scale
    over, units = _error_in_bound_units(got, np.stack([want.real, want.imag], -1),
                                        magnitude[..., None], n)
    print(f"c2c n={n} forward={forward} {normalization}: {units:.2f} u*sum|x|*s")
    assert over <= 1.0, f"{units:.2f} u*sum|x| exceeds the bound {2 * n + 1}"


@pytest.mark.parametrize("onesided", [True, False])
@pytest.mark.parametrize("n", SIZES)
def test_r2c(n: int, onesided: bool, tmp_path: Path) -> None:
    program = program_of({"x": t(2, n)}, lambda x: coreai.view_as_real(
        coreai.fft_r2c(x, axes=[1], onesided=onesided)))
    export_aimodel(program, tmp_path / "r.aimodel")
    x = np.random.default_rng(n).standard_normal((2, n)).astype(np.float32)
    got = run_aimodel(tmp_path / "r.aimodel", {"x": x})["y0"]
    want = (np.fft.rfft if onesided else np.fft.fft)(x.astype(np.float64), axis=1)
    magnitude = np.abs(x).sum(axis=1, keepdims=True)[..., None]
    over, units = _error_in_bound_units(got, np.stack([want.real, want.imag], -1),
                                        magnitude, n)
    print(f"r2c n={n} onesided={onesided}: {units:.2f} u*sum|x|")
    assert over <= 1.0


@pytest.mark.parametrize("n", SIZES)
def test_c2r(n: int, tmp_path: Path) -> None:
    m = n // 2 + 1
    program = _complex_input((2, m), lambda z: coreai.fft_c2r(
        z, axes=[1], last_dim_size=n, normalization="by_n"))
    export_aimodel(program, tmp_path / "c.aimodel")
    inputs = _data((2, m), n)
    got = run_aimodel(tmp_path / "c.aimodel", inputs)["y0"]
    z = inputs["re"].astype(np.float64) + 1j * inputs["im"].astype(np.float64)
    want = np.fft.irfft(z, n=n, axis=1)
    magnitude = 2 * (np.abs(inputs["re"]) + np.abs(inputs["im"])).sum(axis=1,
                                                                         keepdims=True) / n
    over, units = _error_in_bound_units(got, want, magnitude, m)
    print(f"c2r n={n}: {units:.2f} u*sum|x|*s")
    assert over <= 1.0


def test_several_axes_match_numpy(tmp_path: Path) -> None:
    shape = (2, 7, 3, 4)
    program = _complex_input(shape, lambda z: coreai.fft_c2c(
        z, axes=[1, 3, 2], forward=True, normalization="by_root_n"))
    export_aimodel(program, tmp_path / "n.aimodel")
    inputs = _data(shape, 5)
    got = run_aimodel(tmp_path / "n.aimodel", inputs)["y0"]
    z = inputs["re"].astype(np.float64) + 1j * inputs["im"].astype(np.float64)
    want = np.fft.fftn(z, axes=(1, 3, 2), norm="ortho")
    bound = sum(2 * n + 1 for n in (7, 4, 3)) * U * np.abs(z).sum() / np.sqrt(7 * 4 * 3) * 2
    np.testing.assert_allclose(got, np.stack([want.real, want.imag], -1), rtol=0, atol=bound)
    x = inputs["re"]
    program = program_of({"x": t(*shape)}, lambda v: coreai.fft_c2r(
        coreai.fft_r2c(v, axes=[2, 1]), axes=[2, 1], last_dim_size=7,
        normalization="by_n"))
    export_aimodel(program, tmp_path / "rt.aimodel")
    back = run_aimodel(tmp_path / "rt.aimodel", {"x": x})["y0"]
    # a round trip returns the signal: errors of both transforms, each within its bound
    np.testing.assert_allclose(back, x, rtol=0, atol=2 * 40 * U * np.abs(x).sum())


def _parts(build: Any) -> Any:
    def body(re: Any, im: Any) -> Any:
        out = build(coreai.complex_(re, im))
        return coreai.view_as_real(out) if out.type.element_type.is_complex else out
    return body


# every complex op, in graphs with real inputs and outputs (test_aimodel_ops.py counts them)
CASES: dict[str, tuple[dict[str, Any], Any]] = {
    "parts": ({"re": t(2, 3), "im": t(3)}, lambda re, im: (
        coreai.real(coreai.complex_(re, im)), coreai.imag(coreai.complex_(re, im)))),
    "conj_views": ({"x": t(3, 2)}, lambda x: coreai.view_as_real(
        coreai.conj(coreai.view_as_complex(x)))),
    "fft_c2c": ({"re": t(4, 3), "im": t(4, 3)}, _parts(lambda z: coreai.fft_c2c(
        z, axes=[0, 1], forward=False, normalization="by_n"))),
    "fft_r2c": ({"x": t(4, 5)}, lambda x: coreai.view_as_real(coreai.fft_r2c(x, axes=[0, 1]))),
    "fft_c2r": ({"re": t(4, 3), "im": t(4, 3)}, _parts(lambda z: coreai.fft_c2r(
        z, axes=[0, 1], last_dim_size=5))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_case_matches_runtime(case: str, tmp_path: Path) -> None:
    inputs, build = CASES[case]
    check_matches_runtime(program_of(inputs, build), tmp_path / "c.aimodel")


def test_complex_parts_conj_and_views(tmp_path: Path) -> None:
    def build(re: Any, im: Any) -> Any:
        z = coreai.complex_(re, coreai.constant(np.float32(2)))
        w = coreai.view_as_complex(coreai.view_as_real(coreai.conj(z)))
        return coreai.real(w), coreai.imag(w), coreai.view_as_real(
            coreai.broadcasting_mul(z, coreai.complex_(im, re)))
    program = program_of({"re": t(2, 3), "im": t(2, 3)}, build)
    export_aimodel(program, tmp_path / "z.aimodel")
    inputs = _data((2, 3), 0)
    got = run_aimodel(tmp_path / "z.aimodel", inputs)
    want = program.run(inputs)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, err_msg=name)
    np.testing.assert_array_equal(got["y1"], np.full((2, 3), -2, np.float32))


def test_complex_inputs_and_outputs_are_refused(tmp_path: Path) -> None:
    program = program_of({"z": t(3, dtype="complex64")}, lambda z: coreai.conj(z))
    with pytest.raises(UnexportableOpsError, match="complex inputs are not exported") as info:
        export_aimodel(program, tmp_path / "c.aimodel")
    assert "complex outputs are not exported" in str(info.value)
    assert list(tmp_path.iterdir()) == []
