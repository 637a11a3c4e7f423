"""The elementary-function expansions (mappings/elementwise_elementary.py) on Apple's
interpreter, against the float64 value (numpy's float64 functions are within an ulp of
float64, 2**-29 float32 ulps):
every float16 value (every pair of a float16 grid for two-operand functions) and, for
float32, every exponent with a spread of significands plus random bit patterns, with the
special values (+-0, +-inf, NaN, subnormals). Each op's error must stay within the bound its
docstring states; the special values must match exactly."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from coreai_core.dialects import coreai
from coreai_torch.aimodel import export_aimodel, run_aimodel
from coreai_torch.aimodel.mappings.elementwise_elementary import APPLE_ERRORS
from tests.interop.test_aimodel_export import program_of, t

# Apple's measured errors (ulps) the stated bounds are relative to
# (see mappings/elementwise_elementary.py)
L, E, A = APPLE_ERRORS["log"], APPLE_ERRORS["exp"], APPLE_ERRORS["atan"]
# float16 computes in float32 and rounds once: 0.5 ulp + a float32 error of a few ulps
F16_BOUND = 0.5 + 8 * 2.0 ** -13

UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], float]] = {
    "log1p": (np.log1p, 3.5 + 2 * L),
    "expm1": (np.expm1, 2.5 + 2 * E + 2 * L),
    "log2": (np.log2, 1.5 + 2 * L),
    "log10": (np.log10, 1.5 + 2 * L),
    "exp2": (np.exp2, E + 0.7 + 0.5),
}
BINARY: dict[str, tuple[Callable[[np.ndarray, np.ndarray], np.ndarray], float]] = {
    "broadcasting_atan2": (np.arctan2, A + 4),
    "broadcasting_hypot": (np.hypot, 2.75),
}
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0]


def all_float16() -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)


def float32_sample(rng: np.random.Generator) -> np.ndarray:
    """Every exponent and sign with 2**11 significands each (the extremes and a stride),
    random bit patterns, and the special values."""
    significands = np.unique(np.concatenate([
        np.arange(0, 1 << 23, 1 << 13), (1 << 23) - 1 - np.arange(0, 1 << 23, 1 << 13),
        rng.integers(0, 1 << 23, 1 << 10), np.arange(16)]).astype(np.uint32))
    exponents = np.arange(256, dtype=np.uint32) << 23
    grid = (exponents[:, None] | significands[None, :]).reshape(-1)
    bits = np.concatenate([grid, grid | np.uint32(1 << 31),
                           rng.integers(0, 1 << 32, 1 << 18, dtype=np.uint64).astype(np.uint32)])
    return np.concatenate([bits.view(np.float32), np.array(SPECIALS, np.float32)])


def ulp_errors(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in ulps of ``got``'s type at ``exact``; 0 where both are the same
    infinity or NaN, or where ``exact`` rounds to an infinity ``got`` also is; inf where one
    is NaN or infinite and the other not."""
    info = np.finfo(got.dtype)
    with np.errstate(all="ignore"):
        rounded = exact.astype(got.dtype)
        exponent = np.floor(np.log2(np.maximum(np.abs(exact), float(info.smallest_normal))))
        ulp = np.exp2(exponent - info.nmant)
        err = np.abs(got.astype(np.float64) - exact) / ulp
    same_special = (np.isnan(got) & np.isnan(exact)) | (np.isinf(got) & (got == rounded))
    err[same_special] = 0.0
    err[np.isnan(err)] = np.inf  # NaN against a number
    return err


def _zero_signs_match(got: np.ndarray, exact: np.ndarray) -> None:
    zeros = exact == 0
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(exact[zeros]))


def _run(op: str, dtype: str, path: Path, **inputs: np.ndarray) -> np.ndarray:
    n = next(iter(inputs.values())).size
    program = program_of({k: t(n, dtype=dtype) for k in inputs}, getattr(coreai, op))
    export_aimodel(program, path)
    return run_aimodel(path, inputs)["y0"]


def _check(op: str, got: np.ndarray, exact: np.ndarray, bound: float,
           where: np.ndarray) -> None:
    err = ulp_errors(got, exact)
    worst = int(np.argmax(err))
    assert err.max() <= bound, (f"{op}: {err.max():.3f} ulps > {bound:.3f} at input "
                                f"{where[worst]!r}: got {got[worst]!r}, exact {exact[worst]!r}")
    _zero_signs_match(got, exact)


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_float16_every_value(op: str, tmp_path: Path) -> None:
    x = all_float16()
    got = _run(op, "float16", tmp_path / "u.aimodel", x=x)
    with np.errstate(all="ignore"):
        exact = UNARY[op][0](x.astype(np.float64))
    _check(op, got, exact, F16_BOUND, x)


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_float32_every_exponent(op: str, tmp_path: Path) -> None:
    x = float32_sample(np.random.default_rng(0))
    got = _run(op, "float32", tmp_path / "u.aimodel", x=x)
    with np.errstate(all="ignore"):
        exact = UNARY[op][0](x.astype(np.float64))
    _check(op, got, exact, UNARY[op][1], x)


def _pairs16(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Every float16 value against 64 spread over the range and the specials (both operand
    orders), and random pairs."""
    every = all_float16()
    some = np.concatenate([every[::1024], np.array(SPECIALS, np.float16)])
    pairs = rng.integers(0, 1 << 16, (2, 1 << 20)).astype(np.uint16).view(np.float16)
    x = np.concatenate([np.repeat(every, some.size), np.tile(some, every.size), pairs[0]])
    y = np.concatenate([np.tile(some, every.size), np.repeat(every, some.size), pairs[1]])
    return x, y


def _pairs32(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random bit patterns, operands of near ratios (where atan2 and hypot cancel least
    kindly), every exponent against a few, and the specials against everything."""
    sample = float32_sample(rng)
    with np.errstate(over="ignore", invalid="ignore"):  # inf * 0.5 and overflows: cases
        near = sample * rng.uniform(0.25, 4.0, sample.size).astype(np.float32)
    specials = np.array(SPECIALS, np.float32)
    x = np.concatenate([sample, sample, rng.permutation(sample),
                        np.repeat(specials, sample.size), sample])
    y = np.concatenate([rng.permutation(sample), near, sample,
                        np.tile(sample, specials.size),
                        specials[rng.integers(0, specials.size, sample.size)]])
    return x, y


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary(op: str, dtype: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    x, y = _pairs16(rng) if dtype == "float16" else _pairs32(rng)
    with np.errstate(all="ignore"):
        got = _run(op, dtype, tmp_path / "b.aimodel", x=x, y=y)
        exact = BINARY[op][0](x.astype(np.float64), y.astype(np.float64))
    if op == "broadcasting_hypot":  # the op's rule (C99) also for signaling NaNs, which
        exact[np.isinf(x) | np.isinf(y)] = np.inf  # give numpy NaN
    bound = F16_BOUND if dtype == "float16" else BINARY[op][1]
    _check(op, got, exact, bound, np.stack([x, y], axis=1))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_signbit_and_copysign_exact_but_for_nan_signs(dtype: str, tmp_path: Path) -> None:
    x = all_float16().astype(dtype)
    if dtype == "float32":
        x = np.concatenate([x, float32_sample(np.random.default_rng(2))])
    nan = np.isnan(x)
    got = _run("signbit", dtype, tmp_path / "s.aimodel", x=x)
    np.testing.assert_array_equal(got[~nan], np.signbit(x[~nan]))
    assert not got[nan].any()  # documented: a NaN counts as positive
    magnitudes = np.random.default_rng(3).permutation(x)
    got = _run("broadcasting_copysign", dtype, tmp_path / "c.aimodel", x=magnitudes, y=x)
    want = np.copysign(magnitudes, x)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    numbers = ~nan & ~np.isnan(magnitudes)  # a NaN result's sign: IEEE leaves it open
    np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))
    np.testing.assert_array_equal(got[nan], np.abs(magnitudes[nan]))


def _floats(dtype: str) -> np.ndarray:
    x = all_float16()
    return x if dtype == "float16" else np.concatenate(
        [x.astype(np.float32), float32_sample(np.random.default_rng(4))])


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_nextafter_is_exact(dtype: str, tmp_path: Path) -> None:
    """Every float16 (a float32 sample) toward +-inf, +-0, a random value and itself."""
    x = _floats(dtype)
    rng = np.random.default_rng(5)
    towards = [np.full_like(x, v) for v in (np.inf, -np.inf, 0.0, -0.0)]
    xs = np.concatenate([x] * 6)
    ys = np.concatenate([*towards, rng.permutation(x), x])
    got = _run("broadcasting_nextafter", dtype, tmp_path / "n.aimodel", x=xs, y=ys)
    with np.errstate(all="ignore"):  # NaN operands, the largest value toward inf
        # y where x == y (C99 and torch; numpy's float16 gives x for -0.0 toward +0.0)
        want = np.where(xs == ys, ys, np.nextafter(xs, ys))
    np.testing.assert_array_equal(got, want)
    numbers = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_frexp_is_exact(dtype: str, tmp_path: Path) -> None:
    x = _floats(dtype)
    program = program_of({"x": t(x.size, dtype=dtype)}, coreai.frexp)
    export_aimodel(program, tmp_path / "f.aimodel")
    got = run_aimodel(tmp_path / "f.aimodel", {"x": x})
    with np.errstate(invalid="ignore"):  # NaN operands
        mantissa, exponent = np.frexp(x)
    np.testing.assert_array_equal(got["y0"], mantissa)
    np.testing.assert_array_equal(np.signbit(got["y0"]), np.signbit(mantissa))
    np.testing.assert_array_equal(got["y1"], exponent)
