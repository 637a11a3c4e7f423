"""Kernels computed in float64 and rounded once give the correctly rounded float32 result.

GELU and SiLU at real sizes run in cache-sized float64 blocks (``in_float64_blocks``); rsqrt
is 1/sqrt in float64, rounded once (1/sqrt in float32 rounds twice: 25% off by one ulp). The
references here are independent of numpy's and scipy's vector functions: Python's ``math``
(``erfc``, ``exp``) per element, in double, rounded once to float32. A double result can
round differently from the exact one only within ~1e-16 (relative) of a float32 rounding
boundary, a chance of ~2^-29 per element.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest

from coreai_core import Program, TensorType, Value
from coreai_core.dialects import coreai
from coreai_core.runtime import Runtime
from coreai_core.runtime.kernels.elementwise import BLOCK, in_float64_blocks
from tests.core.kernel_util import run_op


def _reference(fn: Callable[[float], float], x: np.ndarray) -> np.ndarray:
    return np.array([fn(float(v)) for v in x.reshape(-1)]).astype(np.float32).reshape(x.shape)


def _gelu(v: float) -> float:
    return v * 0.5 * math.erfc(-v / math.sqrt(2.0))  # erfc: no cancellation for v < 0


def _silu(v: float) -> float:
    return v / (1.0 + math.exp(-v)) if v > -700 else v * math.exp(v)


def _inputs(seed: int) -> np.ndarray:
    """More than two blocks of values over [-12, 12] (GELU's left tail included), with a
    size that is not a multiple of the block, seen through a transposed (strided) view."""
    rng = np.random.default_rng(seed)
    data = rng.uniform(-12.0, 12.0, size=(3, BLOCK + 5)).astype(np.float32)
    return data.T


@pytest.mark.parametrize(("build", "fn"), [(coreai.gelu, _gelu), (coreai.silu, _silu)],
                         ids=["gelu", "silu"])
def test_float32_results_are_correctly_rounded(build: Callable[..., object],
                                               fn: Callable[[float], float]) -> None:
    x = _inputs(0)
    (got,) = run_op(build, x)
    want = _reference(fn, x)
    assert got.dtype == np.float32 and got.shape == x.shape
    mismatched = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
    assert mismatched.size == 0, (f"{mismatched.size} of {x.size} not correctly rounded, e.g. "
                                  f"x={x.reshape(-1)[mismatched[:3]]}")


def test_gelu_left_tail_is_exact_where_one_plus_erf_cancels() -> None:
    x = np.linspace(-9.0, -5.4, 4001, dtype=np.float32)  # 1 + erf(x/sqrt2) < 3e-8 here
    (got,) = run_op(coreai.gelu, x)
    np.testing.assert_array_equal(got, _reference(_gelu, x))
    assert np.all(got < 0)


def test_blocks_give_the_whole_array_result() -> None:
    def square_plus_one(y: np.ndarray, scratch: np.ndarray) -> None:
        np.multiply(y, y, out=scratch)
        np.add(scratch, 1.0, out=y)

    for x in (_inputs(1), np.full((), 2.5, np.float32), np.zeros((0, 3), np.float32)):
        got = in_float64_blocks(x, square_plus_one)
        wide = x.astype(np.float64)
        np.testing.assert_array_equal(got, (wide * wide + 1.0).astype(np.float32))
        assert got.dtype == x.dtype and got.shape == x.shape


@pytest.mark.parametrize("build", [lambda v: coreai.gelu(v, approximate="none"), coreai.silu,
                                   coreai.sigmoid], ids=["gelu", "silu", "sigmoid"])
def test_blocks_shared_among_threads_give_the_same_bits(build: Callable[..., Value]) -> None:
    p = Program()
    x = np.random.default_rng(2).uniform(-12, 12, size=(5, 4 * BLOCK + 7)).astype(np.float32)
    with p.graph("main", inputs={"x": TensorType(x.shape, "float32")}) as g:
        g.outputs({"y": build(g["x"])})
    one = Runtime(threads=1).run(p, {"x": x})["y"]
    two = Runtime(threads=2).run(p, {"x": x})["y"]
    assert one.tobytes() == two.tobytes()
    np.testing.assert_array_equal(one, run_op(build, x)[0])


def test_rsqrt_is_correctly_rounded() -> None:
    """Checked in exact rational arithmetic: r is the correctly rounded 1/sqrt(x) when the
    exact value lies between the midpoints to r's float32 neighbours, i.e. when
    lo^2 * x <= 1 <= hi^2 * x (1/sqrt is decreasing)."""
    rng = np.random.default_rng(5)
    x = np.concatenate([
        rng.uniform(0.0, 4.0, 3000), 10.0 ** rng.uniform(-40, 38, 3000),  # subnormals too
    ]).astype(np.float32)
    x = x[x > 0]
    (got,) = run_op(coreai.rsqrt, x)
    assert got.dtype == np.float32
    bad = []
    for xv, r in zip(x, got, strict=True):
        down = np.nextafter(r, np.float32(0))
        up = np.nextafter(r, np.float32(np.inf))
        lo = (Fraction(float(down)) + Fraction(float(r))) / 2
        hi = (Fraction(float(r)) + Fraction(float(up))) / 2
        if not lo * lo * Fraction(float(xv)) <= 1 <= hi * hi * Fraction(float(xv)):
            bad.append(float(xv))
    assert not bad, f"{len(bad)} of {x.size} not correctly rounded, e.g. x={bad[:3]}"
