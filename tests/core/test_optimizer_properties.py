"""Property tests of the optimizer passes on random conv / affine / matmul programs.

Hypothesis draws programs built with the public builders from the patterns the passes rewrite
and the shapes that once broke them: convs (shared weights, depthwise, with and without bias),
batch-norm-like per-channel scales and shifts (also along the wrong axis), matmuls with
constant weights, relu and hard-swish (a value read twice), splits and sorts (multi-result
ops), concats, residual adds, values that are also graph outputs, a composite call, in float32
or float16. Each pass alone, the pair that once corrupted MobileNetV3 and the default pipeline
run on a copy; the copy must verify, compute what the original computes and hold no more
heavy ops (convs, matmuls, calls) than it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coreai_core import Composite, Dim, Program, TensorType, Value, WeightRef, parse
from coreai_core._opdef import OPS, defop
from coreai_core.dialects import coreai
from coreai_core.optimizer import (
    InlineCompositesPass,
    Pass,
    all_graphs,
    default_passes,
    is_heavy,
    pass_names,
)

F = "float32"
COMPOSITE = "hard_swish_affine"


class Drawer:
    """What one step needs: hypothesis draws for structure, a seeded rng for data."""

    def __init__(self, draw: Any, rng: np.random.Generator, dtype: str) -> None:
        self.draw = draw
        self.rng = rng
        self.dtype = np.dtype(dtype)
        self.weights: dict[tuple[int, ...], Value] = {}  # conv weights, to share by shape

    def data(self, *shape: int, scale: float = 1.0) -> np.ndarray:
        return (self.rng.standard_normal(shape) * scale).astype(self.dtype)

    def factor(self, shape: tuple[int, ...]) -> np.ndarray:
        # magnitudes in [0.5, 1.5] with random signs: no scale near zero or infinity
        sign = np.where(self.rng.random(shape) < 0.2, -1.0, 1.0)
        return (sign * (self.rng.random(shape) + 0.5)).astype(self.dtype)

    def vector_shape(self, v: Value) -> tuple[int, ...]:
        """Per-channel (axis 1), per-last-axis, scalar, or full: all the shapes a batch norm
        or a bias takes, and some a fold must refuse."""
        _, c, _, w = v.type.shape
        return self.draw(st.sampled_from([(c, 1, 1), (1, c, 1, 1), (w,), (1, 1, 1, w), (),
                                          tuple(v.type.shape[1:])]))


# 17 channels: more than INLINE_LIMIT, so a bias made by a fold is a weight too
CHANNELS = [1, 2, 3, 4, 6, 17]


def _conv(d: Drawer, v: Value, pool: list[Value], channels: list[int] = CHANNELS) -> Value:
    c = v.type.shape[1]
    depthwise = d.draw(st.booleans())
    out = c if depthwise else d.draw(st.sampled_from(channels))
    k = d.draw(st.sampled_from([1, 3]))
    shape = (out, 1 if depthwise else c, k, k)
    weight = d.weights.get(shape)
    # named like a model's parameters: program weights, whatever their size
    name = f"conv{len(pool)}"
    share = d.draw(st.sampled_from(["no", "value", "weight"])) if weight is not None else "no"
    if weight is not None and share == "weight":  # a second constant op, the same weight
        weight = coreai.constant(WeightRef(weight.owner.attributes["value"].name))
    elif share == "no":  # ("value": the same constant value, read by two convs)
        weight = coreai.constant(d.data(*shape, scale=(shape[1] * k * k) ** -0.5),
                                 name=f"{name}.weight")
        d.weights[shape] = weight
    b = coreai.constant(d.data(out), name=f"{name}.bias") if d.draw(st.booleans()) else None
    return coreai.conv(v, weight, b, pads=[k // 2, k // 2], groups=c if depthwise else 1)


def _matmul(d: Drawer, v: Value, pool: list[Value]) -> Value:
    w = v.type.shape[-1]
    return coreai.batch_matmul(v, coreai.constant(d.data(w, d.draw(st.integers(1, 5)),
                                                         scale=w ** -0.5)))


def _batch_norm(d: Drawer, v: Value, pool: list[Value]) -> Value:
    # (v - mean) * inv_std * gamma + beta, each a constant of one drawn shape
    shape = d.vector_shape(v)
    v = coreai.broadcasting_sub(v, coreai.constant(d.data(*shape)))
    v = coreai.broadcasting_mul(v, coreai.constant(d.factor(shape)))
    v = coreai.broadcasting_mul(v, coreai.constant(d.factor(shape)))
    return coreai.broadcasting_add(v, coreai.constant(d.data(*shape)))


def _affine(d: Drawer, v: Value, pool: list[Value]) -> Value:
    name = d.draw(st.sampled_from(["mul", "divide", "add", "sub"]))
    shape = d.vector_shape(v)
    c = coreai.constant(d.factor(shape) if name in ("mul", "divide") else d.data(*shape))
    a, b = (c, v) if name in ("mul", "add") and d.draw(st.booleans()) else (v, c)
    return getattr(coreai, f"broadcasting_{name}")(a, b)


def _hard_swish(v: Value) -> Value:
    gate = coreai.broadcasting_minimum(coreai.relu(coreai.broadcasting_add(v, 3.0)), 6.0)
    return coreai.broadcasting_divide(coreai.broadcasting_mul(v, gate), 6.0)


def _elementwise(d: Drawer, v: Value, pool: list[Value]) -> Value:
    kind = d.draw(st.sampled_from(["relu", "hard_swish", "add", "mul"]))
    if kind == "relu":
        return coreai.relu(v)
    if kind == "hard_swish":
        return _hard_swish(v)
    scalar = d.draw(st.sampled_from([0.5, 2.0, -1.0, 3.0]))
    return getattr(coreai, f"broadcasting_{kind}")(v, scalar)


def _conv_block(d: Drawer, v: Value, pool: list[Value]) -> Value:
    # conv + inference batch norm (per channel) + activation: the most common block
    v = _conv(d, v, pool, channels=[4, 17])
    c = v.type.shape[1]
    v = coreai.broadcasting_mul(v, coreai.constant(d.factor((c, 1, 1))))
    v = coreai.broadcasting_add(v, coreai.constant(d.data(c, 1, 1)))
    return _hard_swish(v) if d.draw(st.booleans()) else coreai.relu(v)


def _split(d: Drawer, v: Value, pool: list[Value]) -> Value:
    # a multi-result op feeding the next step; the other piece may become an output
    axis = d.draw(st.sampled_from([1, 3]))
    size = v.type.shape[axis]
    if size < 2:
        return v
    first = d.draw(st.integers(1, size - 1))
    pieces = coreai.split(v, split_sizes=[first, size - first], axis=axis)
    keep = d.draw(st.integers(0, 1))
    pool.append(pieces[1 - keep])
    return pieces[keep]


def _sort(d: Drawer, v: Value, pool: list[Value]) -> Value:
    values, _ = coreai.sort(v, axis=-1)  # values are continuous in v; indices are not used
    return values


def _concat(d: Drawer, v: Value, pool: list[Value]) -> Value:
    n, _, h, w = v.type.shape
    partners = [u for u in pool if u.type.shape[0] == n and u.type.shape[2:] == (h, w)]
    other = d.draw(st.sampled_from(partners)) if partners else v
    return coreai.concat([v, other], axis=1)


def _residual(d: Drawer, v: Value, pool: list[Value]) -> Value:
    partners = [u for u in pool if u.type == v.type]
    return coreai.broadcasting_add(v, d.draw(st.sampled_from(partners)) if partners else v)


def _composite(d: Drawer, v: Value, pool: list[Value]) -> Value:
    (y,) = coreai.invoke([v], callee=COMPOSITE)
    return y


STEPS: dict[str, Callable[[Drawer, Value, list[Value]], Value]] = {
    "conv": _conv, "conv_block": _conv_block, "matmul": _matmul, "batch_norm": _batch_norm,
    "affine": _affine, "elementwise": _elementwise, "split": _split, "sort": _sort,
    "concat": _concat, "residual": _residual, "composite": _composite,
}


def _define_composite(program: Program, dtype: str) -> None:
    dims = tuple(Dim(n) for n in "nchw")
    with program.graph(COMPOSITE, inputs={"x": TensorType(dims, dtype)},
                       composite=Composite(COMPOSITE)) as g:
        g.outputs({"y": _hard_swish(coreai.broadcasting_add(
            coreai.broadcasting_mul(g["x"], 0.5), 1.0))})


@st.composite
def conv_programs(draw: Any, steps: tuple[str, ...] = tuple(STEPS),
                  ) -> tuple[Program, dict[str, np.ndarray]]:
    """A random program of ``steps`` (names in :data:`STEPS`) and inputs for it."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    # mostly float32, whose tight tolerance catches a wrong fold; float16 for the dtype checks
    dtype = draw(st.sampled_from([F, F, F, "float16"]))
    d = Drawer(draw, rng, dtype)
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 5)), draw(st.integers(1, 4)),
             draw(st.integers(1, 5)))
    chosen = draw(st.lists(st.sampled_from(steps), min_size=1, max_size=10))
    program = Program()
    _define_composite(program, dtype)
    with program.graph("main", inputs={"x": TensorType(shape, dtype)}) as g:
        v = g["x"]
        pool: list[Value] = [v]
        for step in chosen:
            v = STEPS[step](d, v, pool)
            pool.append(v)
        # intermediate values read by the graph's outputs too: more than one user
        extra = draw(st.lists(st.sampled_from(pool[1:]), max_size=2, unique_by=id)) \
            if len(pool) > 1 else []
        g.outputs({"y": v, **{f"o{i}": u for i, u in enumerate(extra) if u is not v}})
    return program, {"x": rng.standard_normal(shape).astype(dtype)}


def heavy_ops(program: Program) -> int:
    return sum(is_heavy(op) for g in all_graphs(program) for op in g.ops)


def copy_of(program: Program) -> Program:
    return parse(str(program), weights={k: np.array(v) for k, v in program.weights.items()})


# Reassociation error allowed, relative to the magnitude of a result (see assert_same_results)
TOLERANCE = {np.dtype(np.float32): 1e-4, np.dtype(np.float16): 5e-2}


def assert_same_results(after: dict[str, np.ndarray], before: dict[str, np.ndarray]) -> None:
    """Equal up to float reassociation.

    Weights are scaled by 1/sqrt(fan-in), so values stay of order 1. A fold reorders the
    rounding of each product and sum (conv(x, W) * s vs conv(x, W * s), (a + b) + c vs
    a + (b + c)) and rounds folded weights once more: a few ulps per op over at most ~30
    chained ops. In float32 (ulp 6e-8 of the magnitude) that stays below 1e-5 of the values'
    magnitude, so 1e-4 leaves margin; in float16 (ulp 1e-3) below 2e-2, so 5e-2. A wrong fold
    (a shift lost, a scale applied twice) is off by the constants themselves (>= 0.5).
    """
    assert list(after) == list(before)
    for k, want in before.items():
        got = after[k]
        assert got.dtype == want.dtype and got.shape == want.shape, k
        tol = TOLERANCE[want.dtype]
        scale = max(1.0, float(np.max(np.abs(want.astype(np.float64)), initial=0.0)))
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=k)


PIPELINES: dict[str, Callable[[], list[Pass]]] = {
    **{name: (lambda name=name: [p for p in default_passes() if p.name == name])
       for name in pass_names()},
    "inline_composites": lambda: [InlineCompositesPass()],
    "constant_folding+fold_affine": lambda: [p for p in default_passes()
                                             if p.name in ("constant_folding", "fold_affine")],
    "default": default_passes,
    "inline+default": lambda: [InlineCompositesPass(), *default_passes()],
}


def check_pipeline(pipeline: str, program: Program, inputs: dict[str, np.ndarray]) -> None:
    """Optimize a copy of ``program`` with ``pipeline``; same results, no extra heavy op."""
    program.verify()
    before = program.run(inputs)
    optimized = copy_of(program)
    optimized.optimize(PIPELINES[pipeline]())
    optimized.verify()
    assert_same_results(optimized.run(inputs), before)
    assert heavy_ops(optimized) <= heavy_ops(program), str(optimized)


@pytest.mark.parametrize("pipeline", list(PIPELINES))
@given(case=conv_programs())
def test_passes_keep_results_and_never_add_heavy_ops(
        pipeline: str, case: tuple[Program, dict[str, np.ndarray]]) -> None:
    check_pipeline(pipeline, *case)


# conv + batch norm + relu or hard-swish blocks with residuals, splits and concats: the
# mobile architectures (MobileNetV3, LCNet, ...) whose results the optimizer once changed
MOBILE_STEPS = ("conv_block", "conv_block", "residual", "split", "concat", "affine")


@pytest.mark.parametrize("pipeline", ["fold_affine", "constant_folding+fold_affine", "default"])
@given(case=conv_programs(steps=MOBILE_STEPS))
def test_mobile_blocks_keep_results(pipeline: str,
                                    case: tuple[Program, dict[str, np.ndarray]]) -> None:
    check_pipeline(pipeline, *case)


def test_a_misspelt_trait_is_rejected() -> None:
    # heaviness is the "heavy" trait: a misspelt trait would silently let a rewrite copy the op
    def haevy_op(x: Value) -> TensorType:
        return x.type

    with pytest.raises(ValueError, match=r"unknown trait\(s\) \['haevy'\].*'heavy'"):
        defop("test.haevy_op", traits=("haevy",))(haevy_op)
    assert "test.haevy_op" not in OPS
