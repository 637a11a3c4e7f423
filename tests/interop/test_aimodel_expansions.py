"""The exact expansions of ops Core AI lacks (mappings/elementwise_math.py,
tensor_expansions.py, control.py) on the values random samples miss: signed zeros,
infinities, NaN, ties, every resize mode. Each runs on Apple's interpreter and is compared
with coreai_core's runtime."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest

from coreai_core import Composite, Program, TensorType
from coreai_core.dialects import coreai
from coreai_torch.aimodel import export_aimodel, run_aimodel
from coreai_torch.aimodel.loaded import narrow_input
from coreai_torch.errors import UnexportableOpsError
from tests.interop.helpers import check_matches_runtime
from tests.interop.test_aimodel_export import program_of, t

EDGE = np.array([0.5, 1.5, 2.5, -0.5, -2.5, -7.0, 7.0, -0.0, 0.0, np.inf, -np.inf, np.nan,
                 0.49999997, -0.49999997, 8388607.5, -8388607.5, 1e30, -1e-30, 1e-45, -1e-45,
                 np.nextafter(np.float32(3), np.float32(0))], np.float32)


def _same_bits(program: Program, path: Path, inputs: dict[str, np.ndarray]) -> None:
    """Apple's result equals the runtime's bit for bit (signed zeros included; NaN matches
    NaN, whatever its sign bit)."""
    export_aimodel(program, path)
    got = run_aimodel(path, inputs)
    # int64 results come back as int32 (the documented narrowing)
    want = {k: narrow_input(k, v) for k, v in program.run(inputs).items()}
    for name in want:
        assert got[name].dtype == want[name].dtype, name
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
        if want[name].dtype.kind == "f":
            numbers = ~np.isnan(want[name])
            np.testing.assert_array_equal(np.signbit(got[name][numbers]),
                                          np.signbit(want[name][numbers]), name)


@pytest.mark.parametrize("op", ["floor", "ceil", "trunc"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_rounding_is_exact(op: str, dtype: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    scaled = rng.standard_normal(64) * 10.0 ** rng.integers(-8, 9, 64)
    with np.errstate(over="ignore"):  # float16: large values become +-inf, kept as cases
        x = np.concatenate([EDGE, scaled]).astype(dtype)
    program = program_of({"x": t(x.size, dtype=dtype)}, getattr(coreai, op))
    _same_bits(program, tmp_path / "r.aimodel", {"x": x})
    np.testing.assert_array_equal(program.run({"x": x})["y0"], getattr(np, op)(x))


def test_rounding_integers_is_the_identity(tmp_path: Path) -> None:
    x = np.array([-3, 0, 5], np.int32)
    _same_bits(program_of({"x": t(3, dtype="int32")}, coreai.floor), tmp_path / "i.aimodel",
               {"x": x})


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_remainder_takes_the_sign_of_the_divisor(dtype: str, tmp_path: Path) -> None:
    x = np.array([5, -5, 5, -5, 4, -4, 4, -4, 0, 7, -7], dtype)
    y = np.array([3, 3, -3, -3, 2, 2, -2, -2, -3, 7, 7], dtype)
    if dtype == "float32":
        x = np.concatenate([x, np.array([5.5, -0.0, 1.0, -1.0, np.nan, np.inf], dtype)])
        y = np.concatenate([y, np.array([-2.5, 3.0, np.inf, np.inf, 2.0, 2.0], dtype)])
    program = program_of({"x": t(x.size, dtype=dtype), "y": t(y.size, dtype=dtype)},
                         coreai.broadcasting_remainder)
    _same_bits(program, tmp_path / "m.aimodel", {"x": x, "y": y})


@pytest.mark.parametrize("op", ["broadcasting_fmax", "broadcasting_fmin"])
def test_fmax_fmin_ignore_one_nan(op: str, tmp_path: Path) -> None:
    x = np.array([np.nan, 1.0, np.nan, -np.inf, 2.0, 3.0], np.float32)
    y = np.array([1.0, np.nan, np.nan, np.inf, -2.0, 3.0], np.float32)
    program = program_of({"x": t(6), "y": t(6)}, getattr(coreai, op))
    _same_bits(program, tmp_path / "f.aimodel", {"x": x, "y": y})


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_log_softmax_rows_with_infinities_and_nan(dtype: str, tmp_path: Path) -> None:
    x = np.array([[1.0, 2.0, 3.0, -1.0], [np.inf, 0.0, 1.0, 2.0], [np.inf, np.inf, 0.0, 1.0],
                  [-np.inf, 0.0, 1.0, 2.0], [np.nan, 0.0, 1.0, 2.0], [np.inf, np.nan, 0, 1]],
                 dtype)
    program = program_of({"x": t(6, 4, dtype=dtype)}, lambda v: coreai.log_softmax(v, axis=1))
    check_matches_runtime(program, tmp_path / "l.aimodel", {"x": x})


INTERPOLATIONS: dict[str, tuple[TensorType, dict[str, Any]]] = {
    "nearest_up": (t(1, 2, 3, 5), {"sizes": [7, 10]}),
    "nearest_scales": (t(1, 2, 4, 6), {"sizes": [6, 4], "scales": [1.5, 0.7]}),
    "nearest_large": (t(1, 1, 9, 130), {"sizes": [13, 200]}),  # not ATen's legacy index rule
    "nearest_exact": (t(1, 2, 5, 3), {"sizes": [8, 7], "mode": "nearest_exact"}),
    "nearest_1d": (t(2, 3, 5), {"sizes": [12]}),
    "nearest_3d": (t(1, 1, 2, 3, 4), {"sizes": [3, 5, 2]}),
    "linear": (t(1, 2, 4, 5), {"sizes": [9, 3], "mode": "linear"}),
    "linear_align_corners": (t(1, 2, 4, 5), {"sizes": [7, 11], "mode": "linear",
                                             "align_corners": True}),
    "linear_scales": (t(1, 1, 4, 6), {"sizes": [10, 9], "mode": "linear",
                                      "scales": [2.5, 1.5]}),
    "linear_same_size": (t(1, 1, 4, 6), {"sizes": [4, 9], "mode": "linear"}),
    "linear_1d": (t(2, 3, 6), {"sizes": [4], "mode": "linear"}),
    "trilinear": (t(1, 1, 3, 4, 2), {"sizes": [5, 2, 4], "mode": "linear"}),
    "cubic": (t(1, 2, 5, 4), {"sizes": [8, 9], "mode": "cubic"}),
    "cubic_align_corners": (t(1, 1, 4, 4), {"sizes": [7, 3], "mode": "cubic",
                                            "align_corners": True}),
    "linear_float16": (TensorType((1, 2, 3, 4), "float16"), {"sizes": [6, 8],
                                                             "mode": "linear"}),
}


@pytest.mark.parametrize("case", sorted(INTERPOLATIONS))
def test_interpolate_matches_runtime(case: str, tmp_path: Path) -> None:
    typ, attrs = INTERPOLATIONS[case]
    program = program_of({"x": typ}, lambda x: coreai.interpolate(x, **attrs))
    x = np.random.default_rng(0).standard_normal(typ.static_shape).astype(typ.element_type.numpy)
    if attrs.get("mode", "nearest").startswith("nearest"):
        _same_bits(program, tmp_path / "i.aimodel", {"x": x})  # a pure gather
    else:
        check_matches_runtime(program, tmp_path / "i.aimodel", {"x": x})


def test_reverse_and_negative_strides(tmp_path: Path) -> None:
    def build(x: Any) -> Any:
        return (coreai.reverse(x, [0, 2]),
                coreai.slice_(x, [-1, 4, 0], [-100, 0, 3], axes=[0, 2, 1], strides=[-2, -3, 1]),
                coreai.slice_(x, [0], [5], axes=[0], strides=[-1]))  # empty
    x = np.arange(5 * 3 * 6, dtype=np.float32).reshape(5, 3, 6)
    _same_bits(program_of({"x": t(5, 3, 6)}, build), tmp_path / "s.aimodel", {"x": x})


@pytest.mark.parametrize("pred", [True, False])
def test_if_runs_the_taken_branch(pred: bool, tmp_path: Path) -> None:
    def build(p: Any, x: Any) -> Any:
        return coreai.if_(p, [x], lambda a: (coreai.log(a), coreai.neg(a)),
                          lambda a: (coreai.exp(a), a))
    program = program_of({"p": t(1, dtype="bool"), "x": t(2, 3)}, build)
    x = np.array([[-1.0, 0.0, 2.0], [np.nan, np.inf, -0.0]], np.float32)  # log(-1) is NaN
    check_matches_runtime(program, tmp_path / "c.aimodel", {"p": np.array([pred]), "x": x})


@pytest.mark.parametrize("limit", [0, 1, 5])
def test_while_in_a_branch_carries_several_values(limit: int, tmp_path: Path) -> None:
    """A counting loop (int64 counter, narrowed) doubling a tensor, inside an if's branch;
    zero iterations included."""
    def loop(n: Any, x: Any) -> Any:
        def cond(i: Any, y: Any, m: Any) -> Any:
            return coreai.shrink_dims(coreai.broadcasting_less(i, m), [0])

        def body(i: Any, y: Any, m: Any) -> Any:
            return (coreai.broadcasting_add(i, coreai.constant(np.array([1], np.int64))),
                    coreai.broadcasting_mul(y, 2.0), m)

        start = coreai.constant(np.array([0], np.int64))
        return tuple(coreai.while_([start, x, n], cond, body)[:2])

    def build(p: Any, n: Any, x: Any) -> Any:
        return coreai.if_(p, [n, x], loop, lambda n, x: (n, coreai.neg(x)))
    program = program_of({"p": t(1, dtype="bool"), "n": t(1, dtype="int64"), "x": t(3)}, build)
    for pred in (True, False):
        inputs = {"p": np.array([pred]), "n": np.array([limit], np.int64),
                  "x": np.array([1.5, -2.0, 0.25], np.float32)}
        _same_bits(program, tmp_path / f"w{pred}.aimodel", inputs)


@pytest.mark.parametrize("version", [1, 2])  # a Core AI composite; inlined (no version there)
def test_invoked_composite_matches_bit_for_bit(version: int, tmp_path: Path) -> None:
    program = Program()
    with program.graph("scaled", inputs={"a": t(3)},
                       composite=Composite("my.scaled", version, {"k": 2.0})) as g:
        g.outputs({"b": coreai.broadcasting_mul(g["a"], 2.0)})
    with program.graph("main", inputs={"x": t(3)}) as g:
        (y,) = coreai.invoke([coreai.relu(g["x"])], callee="scaled")
        g.outputs({"y": y})
    x = np.array([-1.0, 0.5, 3.0], np.float32)
    _same_bits(program, tmp_path / "inv.aimodel", {"x": x})


# Static instances of mapped ops whose op-db sample is dynamic.
CASES: dict[str, tuple[dict[str, TensorType], Callable[..., Any]]] = {
    "get_shape": ({"x": t(2, 3)}, lambda x: coreai.get_shape(x)),
    "log_softmax": ({"x": t(2, 5)}, lambda x: coreai.log_softmax(x, axis=0)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_case_matches_runtime(case: str, tmp_path: Path) -> None:
    inputs, build = CASES[case]
    check_matches_runtime(program_of(inputs, build), tmp_path / "case.aimodel")


SORTABLE = np.array([[3.0, np.nan, 1.0, 3.0, -np.inf, 1.0, 2.0, np.nan, -0.0, 0.0, np.inf],
                     [0.5, 0.5, -1.0, np.inf, np.nan, 2.0, -2.0, 0.5, 7.0, np.inf, -0.0]],
                    np.float32)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_sort_orders_nan_and_ties_like_runtime(descending: bool, dtype: str,
                                               tmp_path: Path) -> None:
    """NaN is the largest value; equal values keep their index order (stable)."""
    x = SORTABLE if dtype == "float32" else np.nan_to_num(SORTABLE, posinf=9, neginf=-9
                                                          ).astype(dtype)
    program = program_of({"x": t(2, 11, dtype=dtype)}, lambda v: (
        *coreai.sort(v, axis=1, descending=descending),
        coreai.argsort(v, axis=-1, descending=descending, stable=False),
        coreai.sort(v, axis=0, descending=descending)[1]))
    _same_bits(program, tmp_path / "s.aimodel", {"x": x})
    # topk: the runtime picks ties as torch's CPU kernel does (docs/runtime.md), the asset
    # stably (its expansion is an argsort); without ties in a row they agree bit for bit
    distinct = np.argsort(np.arange(22).reshape(2, 11) * 7 % 22, axis=1).astype(dtype)
    distinct[0, 3] = np.nan if dtype == "float32" else distinct[0, 3]
    topk = program_of({"x": t(2, 11, dtype=dtype)},
                      lambda v: coreai.topk(v, 4, axis=1, largest=descending))
    _same_bits(topk, tmp_path / "topk.aimodel", {"x": distinct})


@pytest.mark.parametrize("kind", ["sum", "product", "max", "min"])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("exclusive", [False, True])
def test_scan_matches_runtime(kind: Literal["sum", "product", "max", "min"], reverse: bool,
                              exclusive: bool, tmp_path: Path) -> None:
    x = np.array([[1.0, 2.0, np.nan, 4.0, 0.5], [-1.0, 3.0, -2.0, 0.5, 2.0]], np.float32)
    ints = np.array([[1, -2, 3, 0, 2], [4, 1, -1, 2, 2]], np.int32)
    program = program_of({"x": t(2, 5), "i": t(2, 5, dtype="int32"),
                          "h": t(2, 5, dtype="float16")}, lambda v, i, h: tuple(
        coreai.scan(a, axis=1, kind=kind, reverse=reverse, exclusive=exclusive)
        for a in (v, i, h)))
    check_matches_runtime(program, tmp_path / "c.aimodel",
                          {"x": x, "i": ints, "h": x.astype(np.float16)})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_along_axis_with_duplicates_and_nan(
        reduction: Literal["none", "add", "mul", "max", "min"], include_self: bool,
                                                    tmp_path: Path) -> None:
    """Repeated indices combine in order (the last write wins for "none"); NaN propagates."""
    x = np.array([[0.0, 1.0, np.nan, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0]],
                 np.float32)
    idx = np.array([[1, 1, 3], [0, 0, -4], [2, 3, 2]], np.int64)
    upd = np.array([[10.0, 20.0, 30.0], [1.0, 2.0, 3.0], [np.nan, 5.0, 6.0]], np.float32)
    program = program_of({"x": t(3, 4), "i": t(3, 3, dtype="int64"), "u": t(3, 3)},
                         lambda a, i, u: coreai.scatter_along_axis(
                             a, i, u, axis=1, reduction=reduction, include_self=include_self))
    _same_bits(program, tmp_path / "s.aimodel", {"x": x, "i": idx, "u": upd})


def test_scatter_along_axis_mean_is_refused(tmp_path: Path) -> None:
    program = program_of({"x": t(3, 4), "i": t(3, 2, dtype="int64"), "u": t(3, 2)},
                         lambda a, i, u: coreai.scatter_along_axis(a, i, u, axis=1,
                                                                   reduction="mean"))
    with pytest.raises(UnexportableOpsError, match="reduction='mean'"):
        export_aimodel(program, tmp_path / "m.aimodel")


@pytest.mark.parametrize("accumulate", [False, True])
def test_scatter_nd_rows_and_elements(accumulate: bool, tmp_path: Path) -> None:
    """Full-depth and partial-depth index vectors, negative indices, repeats (accumulated or
    the last one kept), broadcast updates."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    elements = np.array([[0, 1, 2], [1, -1, 0], [0, 1, 2]], np.int32)
    rows = np.array([[1, 2], [0, 0], [-1, 2]], np.int32)
    program = program_of({"x": t(2, 3, 4), "e": t(3, 3, dtype="int32"),
                          "r": t(3, 2, dtype="int32"), "u": t(3), "v": t(4)},
                         lambda a, e, r, u, v: (
                             coreai.scatter_nd(a, e, u, accumulate=accumulate),
                             coreai.scatter_nd(a, r, v, accumulate=accumulate)))
    inputs = {"x": x, "e": elements, "r": rows, "u": np.array([1.5, -2.0, 4.0], np.float32),
              "v": np.array([0.5, 1.0, -1.0, 2.0], np.float32)}
    _same_bits(program, tmp_path / "n.aimodel", inputs)


def test_slice_update_strides(tmp_path: Path) -> None:
    def build(x: Any, u: Any, w: Any) -> Any:
        return (coreai.slice_update(x, u, [4, -1], [-100, 0], axes=[0, 1], strides=[-2, -2]),
                coreai.slice_update(x, w, [1], [100], axes=[1], strides=[3]))
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    inputs = {"x": x, "u": -np.arange(9, dtype=np.float32).reshape(3, 3),
              "w": -np.ones((5, 2), np.float32)}
    _same_bits(program_of({"x": t(5, 6), "u": t(3, 3), "w": t(5, 2)}, build),
               tmp_path / "u.aimodel", inputs)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_modes_with_cropping(
        mode: Literal["constant", "reflect", "replicate", "circular"], tmp_path: Path) -> None:
    """Negative amounts crop (after padding; circular wraps the cropped tensor)."""
    program = program_of({"x": t(2, 4, 5)}, lambda x: (
        coreai.pad(x, [0, 0, 2, -1, -2, 3], mode=mode, value=1.5),
        coreai.pad(x, [1, 1, 0, 0, 0, 0], mode=mode)))
    x = np.arange(40, dtype=np.float32).reshape(2, 4, 5)
    _same_bits(program, tmp_path / "p.aimodel", {"x": x})


W3 = np.random.default_rng(2).standard_normal((4, 1, 2, 3, 2)).astype(np.float32)
WINDOWS: dict[str, tuple[TensorType, Callable[[Any], Any]]] = {
    "conv_3d": (t(1, 2, 5, 6, 4), lambda x: coreai.conv(
        x, coreai.constant(W3), coreai.constant(np.arange(4, dtype=np.float32)),
        strides=[1, 2, 1], pads=[1, 0, 1, 1, 0, 1], dilation=[2, 1, 1], groups=2)),
    "conv_transpose_3d": (t(1, 4, 3, 2, 3), lambda x: coreai.conv_transpose(
        x, coreai.constant(W3), strides=[2, 1, 2], pads=[1, 0, 1], output_padding=[1, 0, 0])),
    "maxpool_3d": (t(1, 2, 5, 4, 6), lambda x: coreai.maxpool(
        x, kernel_size=[2, 3, 2], strides=[2, 1, 2], pads=[1, 1, 0])),
    "maxpool_ceil": (t(1, 2, 7, 6), lambda x: coreai.maxpool(
        x, kernel_size=[3, 2], strides=[2, 2], pads=[1, 0], ceil_mode=True)),
    "sumpool_3d_ceil": (t(1, 1, 5, 4, 5), lambda x: coreai.sumpool(
        x, kernel_size=[2, 2, 3], strides=[2, 3, 2], ceil_mode=True)),
    "avgpool_ceil_include_pad": (t(1, 2, 7, 5), lambda x: coreai.avgpool(
        x, kernel_size=[3, 2], strides=[2, 2], pads=[1, 1], ceil_mode=True)),
    "avgpool_ceil_exclude_pad": (t(1, 2, 7), lambda x: coreai.avgpool(
        x, kernel_size=[3], strides=[2], pads=[1], ceil_mode=True, count_include_pad=False)),
    "avgpool_3d": (t(1, 1, 4, 5, 6), lambda x: coreai.avgpool(
        x, kernel_size=[2, 3, 2], pads=[1, 1, 0], count_include_pad=False)),
}


@pytest.mark.parametrize("case", sorted(WINDOWS))
def test_windows_3d_and_ceil_mode(case: str, tmp_path: Path) -> None:
    """3-d windows run on conv3d/maxpool3d/sumpool3d; ceil_mode pads the high side."""
    typ, build = WINDOWS[case]
    check_matches_runtime(program_of({"x": typ}, build), tmp_path / "w.aimodel")


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int8", "bool"])
def test_argmin_of_integers_picks_the_first_minimum(dtype: str, tmp_path: Path) -> None:
    """~x reverses the order without the overflow of -x (the minimum integer included)."""
    info = np.iinfo(dtype) if dtype != "bool" else None
    values = [3, 1, 1, 2] if info is None else [3, info.min, info.max, info.min, 0]
    x = np.array(values, dtype) if info else np.array([1, 0, 0, 1], bool)
    program = program_of({"x": t(x.size, dtype=dtype)}, coreai.argmin)
    _same_bits(program, tmp_path / "a.aimodel", {"x": x})


@pytest.mark.parametrize("op", ["broadcasting_shift_left", "broadcasting_shift_right"])
@pytest.mark.parametrize("dtype", ["int32", "int8", "uint8"])
def test_shifts_wrap_and_fill_like_runtime(op: str, dtype: str, tmp_path: Path) -> None:
    """Every shift from -1 to past the width, on the extremes and a few values."""
    info = np.iinfo(dtype)
    width = info.bits
    values = np.array([info.min, info.max, 0, 1, 5, -3 if info.min < 0 else 3], dtype)
    shifts = np.array([-1, 0, 1, 3, width - 2, width - 1, width, width + 9], dtype=np.int64)
    x, n = (a.reshape(-1).astype(dtype) for a in np.meshgrid(values, shifts))
    program = program_of({"x": t(x.size, dtype=dtype), "n": t(n.size, dtype=dtype)},
                         getattr(coreai, op))
    _same_bits(program, tmp_path / "s.aimodel", {"x": x, "n": n})


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "uint8", "int64"])
@pytest.mark.parametrize("op", ["broadcasting_gcd", "broadcasting_lcm"])
def test_gcd_lcm_unrolled_euclid_is_exact(op: str, dtype: str, tmp_path: Path) -> None:
    """Random operands, zeros, signs, the type's extremes and consecutive Fibonacci numbers
    (Euclid's longest runs, which the unrolled rounds must cover)."""
    info = np.iinfo(np.int32 if dtype == "int64" else dtype)
    low = info.min + 1 if dtype == "int64" else info.min  # |int32 min| is not an int32
    fib = [1, 2]
    while fib[-1] + fib[-2] <= info.max:
        fib.append(fib[-1] + fib[-2])
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.integers(low, info.max, 200, endpoint=True), fib[1:],
                        [0, 0, 7, info.max, low, 12, -12 if low else 12]])
    y = np.concatenate([rng.integers(low, info.max, 200, endpoint=True), fib[:-1],
                        [0, 5, 0, info.max - 1, 6, 18, 18]])
    if op == "broadcasting_lcm":  # keep the products in range: lcm then wraps like torch's
        x, y = x % 1000 - (500 if info.min else 0), y % 1000 - (500 if info.min else 0)
    x, y = x.astype(dtype), y.astype(dtype)
    program = program_of({"x": t(x.size, dtype=dtype), "y": t(y.size, dtype=dtype)},
                         getattr(coreai, op))
    _same_bits(program, tmp_path / "g.aimodel", {"x": x, "y": y})
    if op == "broadcasting_gcd":
        ordinary = (x != low) & (y != low)
        np.testing.assert_array_equal(program.run({"x": x, "y": y})["y0"][ordinary],
                                      np.gcd(x, y)[ordinary])
