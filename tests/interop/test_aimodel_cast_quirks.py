"""One regression test per quirk of Apple's Core AI compiler and interpreter that the
differential export test (test_aimodel_differential.py) or its exploration found, each
exported, run on Apple's interpreter and compared exactly with torch eager and our runtime.
docs/coreai-interop.md ("Compiler quirks worked around") lists them with their fixes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from coreai_core import DType, Program, TensorType, Value
from coreai_core.dialects import coreai
from coreai_torch.aimodel import export_aimodel, run_aimodel

# every integer type an .aimodel holds (int64 is exported as int32)
INTEGERS = (DType.int8, DType.int16, DType.int32, DType.uint8, DType.uint16, DType.uint32)
HALVES = (DType.float16, DType.bfloat16)
# odd sizes and 1, as the project's tests use
SHAPES = hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=7)


def _program(inputs: dict[str, TensorType], build: Callable[..., dict[str, Value]]) -> Program:
    program = Program()
    with program.graph("main", inputs=inputs) as g:
        g.outputs(build(*g.inputs.values()))
    return program


def _asset_and_runtime(program: Program, inputs: dict[str, np.ndarray], tmp: Path,
                       ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    path = export_aimodel(program, tmp / "quirk.aimodel")
    return run_aimodel(path, inputs), program.run(inputs)


def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    bad = ~((got == want) | (np.isnan(got) & np.isnan(want)))
    assert not bad.any(), f"{what}: got {got[bad][:4]}, want {want[bad][:4]}"


_FLOATS = st.floats(-300.0, 300.0, width=32)


@settings(max_examples=8)
@given(x=hnp.arrays(np.float32, SHAPES, elements=_FLOATS))
def test_float_int_float_round_trips_truncate(x: np.ndarray, tmp_path_factory: Any) -> None:
    """Quirk: ``x.int().float()`` and ``x.long().float()`` came back as ``x`` (the cast pair
    folded), and truncation ``x - (x*7).int().float()/7`` as 0."""
    program = _program({"x": TensorType(x.shape, DType.float32)}, lambda v: {
        "via_int32": coreai.cast(coreai.cast(v, DType.int32), DType.float32),
        "via_int64": coreai.cast(coreai.cast(v, DType.int64), DType.float32),
        "fraction": coreai.broadcasting_sub(v, coreai.broadcasting_divide(coreai.cast(
            coreai.cast(coreai.broadcasting_mul(v, 7.0), DType.int32), DType.float32), 7.0)),
        "nonzero_after_trunc": coreai.cast(coreai.cast(v, DType.int32), DType.bool),
    })
    got, ours = _asset_and_runtime(program, {"x": x}, tmp_path_factory.mktemp("q"))
    t = torch.from_numpy(x)
    eager = {"via_int32": t.int().float(), "via_int64": t.long().float(),
             "fraction": t - (t * 7).int().float() / 7, "nonzero_after_trunc": t.int().bool()}
    for name, want in eager.items():
        _same(ours[name], want.numpy(), f"runtime {name}")
        _same(got[name], want.numpy(), f"asset {name}")


def _integer_data(dtype: DType) -> np.ndarray:
    info = np.iinfo(dtype.numpy)
    values = [info.min, info.min + 1, -300, -200, -129, -128, -1, 0, 1, 127, 128, 200, 255,
              256, 300, 32767, 32768, 65535, 70000, info.max - 1, info.max]
    return np.unique(np.array([v for v in values if info.min <= v <= info.max], dtype.numpy))


@pytest.mark.parametrize("src", INTEGERS, ids=lambda d: d.name)
def test_integer_casts_wrap_around_and_do_not_fold(src: DType, tmp_path: Path) -> None:
    """Quirk: Apple's integer casts saturate (int32 -300 -> int8 gave -128, torch -44; a
    negative value -> unsigned gave 0), and a narrowing round trip int16 -> uint8 -> int16
    folded to the identity. Every pair and every chain of two casts, against torch."""
    x = _integer_data(src)
    chains = [(b,) for b in INTEGERS if b is not src] + [
        (b, c) for b, c in itertools.product(INTEGERS, INTEGERS) if b is not src and c is not b]

    def build(v: Value) -> dict[str, Value]:
        outs = {}
        for chain in chains:
            y = v
            for dtype in chain:
                y = coreai.cast(y, dtype)
            outs["_".join(d.name for d in chain)] = y
        return outs

    program = _program({"x": TensorType(x.shape, src)}, build)
    got, ours = _asset_and_runtime(program, {"x": x}, tmp_path)
    for chain in chains:
        name = "_".join(d.name for d in chain)
        want = torch.from_numpy(x.astype(np.int64))  # torch has no uint16/uint32 arithmetic
        for dtype in chain:  # torch's integer casts wrap: the value modulo 2**bits
            bits = np.dtype(dtype.numpy).itemsize * 8
            want = want % (1 << bits)
            if np.dtype(dtype.numpy).kind == "i":
                want = torch.where(want >= 1 << (bits - 1), want - (1 << bits), want)
        _same(ours[name], want.numpy(), f"runtime {src.name}->{name}")
        _same(got[name], want.numpy(), f"asset {src.name}->{name}")


@pytest.mark.parametrize("src", [DType.float32, *HALVES, DType.int16, DType.uint16, DType.int32],
                         ids=lambda d: d.name)
def test_rounding_float_casts_are_not_folded(src: DType, tmp_path: Path) -> None:
    """Quirk: a cast chain through a narrower float folded (float32 -> bfloat16 -> float16
    gave float32 -> float16, int16 32767 -> float16 -> float32 gave 32767, not 32768)."""
    values = [-300.7, -200.5, -129.2, -1.5, -0.7, -0.0, 0.0, 0.3, 1.0, 1.9, 127.6, 255.5,
              300.2, 2049.0, 4097.0, 32767.0, 60000.0]
    x = np.array(values, np.float64)
    if src.is_float:
        x = x.astype(src.numpy)
    else:
        info = np.iinfo(src.numpy)
        x = np.unique(np.clip(np.trunc(x), info.min, info.max)).astype(src.numpy)
    floats = (DType.float32, *HALVES)
    chains = [(b, c) for b, c in itertools.product(floats, floats) if b is not src and c is not b]
    program = _program({"x": TensorType(x.shape, src)}, lambda v: {
        f"{b.name}_{c.name}": coreai.cast(coreai.cast(v, b), c) for b, c in chains})
    got, ours = _asset_and_runtime(program, {"x": x}, tmp_path)
    with np.errstate(over="ignore"):
        for b, c in chains:
            name = f"{b.name}_{c.name}"
            want = x.astype(b.numpy).astype(c.numpy)  # each cast rounds to nearest even
            _same(ours[name], want, f"runtime {src.name}->{name}")
            _same(got[name], want, f"asset {src.name}->{name}")


@settings(max_examples=8)
@given(x=hnp.arrays(np.int32, SHAPES, elements=st.integers(-1000, 1000)),
       a=st.sampled_from([2, 3, 7, -2, -3]), b=st.sampled_from([2, 5, -3]))
def test_integer_division_chains_are_not_reassociated(x: np.ndarray, a: int, b: int,
                                                      tmp_path_factory: Any) -> None:
    """The peer converter's quirk "integer divide reassociated": ``(x // a) // b``,
    ``(x * a) // a`` and ``x // a * a`` keep their floor semantics (checked, not found in
    coreai-core 1.0.0b3)."""
    def build(v: Value) -> dict[str, Value]:
        def const(k: int) -> Value:
            return coreai.constant(np.array(k, np.int32))
        fd = coreai.broadcasting_floor_divide
        return {"twice": fd(fd(v, const(a)), const(b)),
                "mul_div": fd(coreai.broadcasting_mul(v, const(a)), const(a)),
                "div_mul": coreai.broadcasting_mul(fd(v, const(a)), const(a)),
                "mod": coreai.broadcasting_modulo(fd(v, const(a)), const(b))}

    program = _program({"x": TensorType(x.shape, DType.int32)}, build)
    got, ours = _asset_and_runtime(program, {"x": x}, tmp_path_factory.mktemp("q"))
    t = torch.from_numpy(x)
    eager = {"twice": (t // a) // b, "mul_div": (t * a) // a, "div_mul": (t // a) * a,
             "mod": torch.fmod(t // a, b)}  # coreai.broadcasting_modulo is C's fmod
    for name, want in eager.items():
        _same(ours[name], want.numpy(), f"runtime {name}")
        _same(got[name], want.numpy(), f"asset {name}")


@pytest.mark.parametrize("reduce", ["reduce_sum", "reduce_max", "reduce_mean", "argmax"])
def test_reductions_without_keep_dims_drop_the_axis(reduce: str, tmp_path: Path) -> None:
    """The peer converter's quirk "keepdims=0 ignored": the exported reduction has the
    dropped axis gone, as torch's (checked on shapes with 1 and odd sizes)."""
    x = np.random.default_rng(0).standard_normal((3, 1, 5)).astype(np.float32)

    def build(v: Value) -> dict[str, Value]:
        if reduce == "argmax":
            return {f"axis{a}": coreai.argmax(v, axis=a) for a in range(3)}
        return {f"axis{a}": getattr(coreai, reduce)(v, axes=[a], keep_dims=False)
                for a in range(3)}

    program = _program({"x": TensorType(x.shape, DType.float32)}, build)
    got, ours = _asset_and_runtime(program, {"x": x}, tmp_path)
    t = torch.from_numpy(x)
    eager = {"reduce_sum": torch.sum, "reduce_max": torch.amax, "reduce_mean": torch.mean,
             "argmax": torch.argmax}[reduce]
    for a in range(3):
        want = eager(t, a)
        assert got[f"axis{a}"].shape == ours[f"axis{a}"].shape == tuple(want.shape)
        np.testing.assert_allclose(got[f"axis{a}"], want.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reduce", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                                    "reduce_product", "all_", "any_"])
def test_a_reduction_over_no_axes_is_the_identity(reduce: str, tmp_path: Path) -> None:
    """Quirk: Core AI's reductions take an empty axis list as "every axis"; the dialect's
    reduce none (numpy's ``axis=()``; the torch lowering spells torch's ``dim=[]``, which
    means every axis, as ``axes=None``), so numpy is the reference here."""
    x = np.random.default_rng(1).standard_normal((2, 1, 3)).astype(np.float32)
    program = _program({"x": TensorType(x.shape, DType.float32)}, lambda v: {
        "y": getattr(coreai, reduce)(v, axes=[], keep_dims=False)})
    got, ours = _asset_and_runtime(program, {"x": x}, tmp_path)
    numpy_fn = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max,
                "reduce_min": np.min, "reduce_product": np.prod, "all_": np.all,
                "any_": np.any}[reduce]
    want = numpy_fn(x, axis=())
    _same(ours["y"], want, "runtime")
    _same(got["y"], want, "asset")
