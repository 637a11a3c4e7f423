"""Exporter behaviour beyond the per-op samples: the features the samples do not reach (1-d
windows, padding rules, narrowing), the one refusal error, and how the path is written."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from coreai_core import Location, Program, TensorType
from coreai_core._builder import default_location
from coreai_core.dialects import coreai
from coreai_torch.aimodel import export_aimodel, run_aimodel
from coreai_torch.errors import AimodelExportError, UnexportableOpsError
from tests.interop.helpers import check_matches_runtime


def t(*shape: int, dtype: str = "float32") -> TensorType:
    return TensorType(shape, dtype)


def program_of(inputs: dict[str, TensorType], build: Callable[..., Any]) -> Program:
    p = Program()
    with p.graph("main", inputs=inputs) as g:
        with default_location(Location("model.py", 3, "block")):
            out = build(*g.inputs.values())
        outs = out if isinstance(out, tuple) else (out,)
        g.outputs({f"y{i}": v for i, v in enumerate(outs)})
    return p


W = np.random.default_rng(1).standard_normal((6, 4, 3)).astype(np.float32)
CASES: dict[str, tuple[dict[str, TensorType], Callable[..., Any]]] = {
    "conv_1d_bias_pads": ({"x": t(2, 4, 9)}, lambda x: coreai.conv(
        x, coreai.constant(W), coreai.constant(np.arange(6, dtype=np.float32)),
        strides=[2], pads=[1, 2], dilation=[2])),
    "maxpool_2d_pads": ({"x": t(1, 2, 7, 6)}, lambda x: coreai.maxpool2d(
        x, kernel_size=[3, 2], strides=[2, 1], pads=[1, 1, 0, 1])),
    "maxpool_1d": ({"x": t(1, 2, 9)}, lambda x: coreai.maxpool(x, kernel_size=[3])),
    "avgpool_exclude_pad": ({"x": t(1, 2, 7, 6)}, lambda x: coreai.avgpool(
        x, kernel_size=[3, 3], strides=[2, 2], pads=[1, 1], count_include_pad=False)),
    "avgpool_include_pad": ({"x": t(1, 2, 7, 6)}, lambda x: coreai.avgpool(
        x, kernel_size=[3, 2], strides=[1, 2], pads=[1, 1, 0, 0])),
    "avgpool_1d_divisor": ({"x": t(1, 2, 8)}, lambda x: coreai.avgpool(
        x, kernel_size=[2], divisor_override=3)),
    "conv_transpose_2d": ({"x": t(1, 4, 5, 4)}, lambda x: coreai.conv_transpose(
        x, coreai.constant(np.ones((4, 3, 3, 2), np.float32)), strides=[2, 1], pads=[1, 1],
        groups=2, output_padding=[1, 0])),
    "slice_clamped_strided": ({"x": t(5, 6)}, lambda x: coreai.slice_(
        x, [1, -100], [100, 5], axes=[0, 1], strides=[2, 3])),
    "gather_axis_1_int64_constant": ({"x": t(3, 5, 2)}, lambda x: coreai.gather(
        x, coreai.constant(np.array([[4, 0], [1, 1]], np.int64)), axis=1)),
    "argmax_all_axes": ({"x": t(3, 4)}, lambda x: coreai.argmax(x)),
    "matmul_vectors": ({"a": t(4), "b": t(4, 3), "c": t(3)}, lambda a, b, c: (
        coreai.batch_matmul(a, b), coreai.batch_matmul(b, c))),
    "float64_constant_narrowed": ({"x": t(2, 3)}, lambda x: coreai.broadcasting_mul(
        x, coreai.cast(coreai.constant(np.array([0.5, 2.0, -1.0])), "float32"))),
    "concat_static": ({"a": t(2, 3), "b": t(2, 1)}, lambda a, b: coreai.concat(
        [a, b, a], axis=-1)),
    "input_and_constant_outputs": ({"x": t(2, 3)}, lambda x: (
        x, coreai.constant(np.arange(3, dtype=np.float32)), coreai.relu(x))),
    "reduce_all_axes_int64_input": ({"x": t(2, 3, dtype="int64")}, lambda x: (
        coreai.reduce_sum(x), coreai.cast(x, "float32"))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_feature_matches_runtime(case: str, tmp_path: Path) -> None:
    inputs, build = CASES[case]
    check_matches_runtime(program_of(inputs, build), tmp_path / "case.aimodel")


EDGE_FLOATS = np.array([0.5, 1.5, 2.5, -0.5, -2.5, -7.0, 7.0, -0.0, np.inf, -np.inf, np.nan],
                       np.float32)
EDGE_INTS = np.array([7, -7, 6, -6, 0, 1, -1], np.int32)


@pytest.mark.parametrize("op", ["round_", "sign", "isinf", "isnan", "neg", "reciprocal"])
def test_unary_edge_values_match_runtime(op: str, tmp_path: Path) -> None:
    """Ties round to even, signed zeros, infinities and NaN (random samples miss them)."""
    program = program_of({"x": t(11)}, getattr(coreai, op))
    check_matches_runtime(program, tmp_path / "e.aimodel", {"x": EDGE_FLOATS})


@pytest.mark.parametrize("op", ["broadcasting_floor_divide", "broadcasting_modulo"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_division_signs_match_runtime(op: str, dtype: str, tmp_path: Path) -> None:
    """Negative operands: floor division rounds down, modulo takes the sign of lhs."""
    x = EDGE_INTS.astype(dtype)
    y = np.array([2, 2, -4, -4, 3, -3, 5], dtype)
    program = program_of({"x": t(7, dtype=dtype), "y": t(7, dtype=dtype)},
                         getattr(coreai, op))
    check_matches_runtime(program, tmp_path / "d.aimodel", {"x": x, "y": y})


TIES = np.array([1.0, 3.0, -2.0, 3.0, -2.0], np.float32)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("values", [TIES, EDGE_FLOATS], ids=["ties", "nan_inf"])
def test_arg_reductions_pick_like_runtime(op: str, values: np.ndarray, tmp_path: Path) -> None:
    """The first of equal extremes; NaN wins, as in torch."""
    program = program_of({"x": t(values.size)}, getattr(coreai, op))
    check_matches_runtime(program, tmp_path / "a.aimodel", {"x": values})


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min", "reduce_sum", "softmax", "relu"])
def test_nan_propagates_like_runtime(op: str, tmp_path: Path) -> None:
    values = np.stack([EDGE_FLOATS, np.nan_to_num(EDGE_FLOATS, nan=3.0, posinf=4.0,
                                                  neginf=-4.0)])
    program = program_of({"x": t(2, 11)}, lambda x: getattr(coreai, op)(x, **(
        {"axes": [1]} if op.startswith("reduce") else {})))
    check_matches_runtime(program, tmp_path / "n.aimodel", {"x": values})


@pytest.mark.parametrize("op", ["broadcasting_maximum", "broadcasting_minimum"])
def test_binary_nan_propagates_like_runtime(op: str, tmp_path: Path) -> None:
    program = program_of({"x": t(11), "y": t(11)}, getattr(coreai, op))
    check_matches_runtime(program, tmp_path / "b.aimodel",
                          {"x": EDGE_FLOATS, "y": EDGE_FLOATS[::-1].copy()})


@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool"])
def test_bitwise_not_matches_runtime(dtype: str, tmp_path: Path) -> None:
    x = np.array([0, 1, 7, 255 if dtype == "uint8" else -7], dtype)
    program = program_of({"x": t(4, dtype=dtype)}, coreai.bitwise_not)
    check_matches_runtime(program, tmp_path / "n.aimodel", {"x": x})


def _unexportable() -> Program:
    def build(x: Any) -> Any:
        y = coreai.cholesky(coreai.matrix_exp(x))[0]
        big = coreai.broadcasting_add(coreai.constant(np.array(2**40)), 1)
        return (*coreai.maxpool2d(coreai.cholesky(y)[0], kernel_size=[2, 2],
                                  return_indices=True),
                big)
    return program_of({"x": t(1, 1, 4, 4, dtype="float64")}, build)


def test_every_refusal_listed_once_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "m.aimodel"
    with pytest.raises(UnexportableOpsError) as info:
        export_aimodel(_unexportable(), path)
    found = {(op.op, op.count) for op in info.value.ops}
    assert {("coreai.cholesky", 2), ("coreai.matrix_exp", 1)} <= found
    reasons = " | ".join(op.reason for op in info.value.ops)
    assert "int64 constant values in [1099511627776, 1099511627776] do not fit int32" in reasons
    assert "return_indices=True" in reasons
    assert "Core AI has no linear-algebra" in reasons  # the op's own reason (not_exported.py)
    assert all('model.py":3' in op.location for op in info.value.ops)
    assert list(tmp_path.iterdir()) == []


def test_existing_asset_replaced_other_files_kept(tmp_path: Path) -> None:
    program = program_of({"x": t(2)}, lambda x: coreai.relu(x))
    path = tmp_path / "m.aimodel"
    export_aimodel(program, path)
    first = sorted(p.name for p in path.iterdir())
    export_aimodel(program_of({"x": t(2)}, lambda x: coreai.neg(x)), path)
    assert sorted(p.name for p in path.iterdir()) == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.aimodel"]  # no staging left
    other = tmp_path / "notes.aimodel"
    other.write_text("mine")
    with pytest.raises(AimodelExportError, match=r"not an \.aimodel"):
        export_aimodel(program, other)
    assert other.read_text() == "mine"


def test_every_entrypoint_becomes_a_function(tmp_path: Path) -> None:
    p = Program()
    with p.graph("prefill", inputs={"x": t(2, 3)}) as g:
        g.outputs({"h": coreai.relu(g["x"])})
    with p.graph("decode", inputs={"h": t(2, 3), "step": t(3)}) as g:
        g.outputs({"out": coreai.broadcasting_add(g["h"], g["step"]), "h2": g["h"]})
    path = export_aimodel(p, tmp_path / "two.aimodel")
    rng = np.random.default_rng(3)
    x, step = rng.standard_normal((2, 3), np.float32), rng.standard_normal(3, np.float32)
    h = run_aimodel(path, {"x": x}, entrypoint="prefill")
    assert list(h) == ["h"] and np.array_equal(h["h"], p.run({"x": x}, entrypoint="prefill")["h"])
    got = run_aimodel(path, {"h": h["h"], "step": step}, entrypoint="decode")
    want = p.run({"h": h["h"], "step": step}, entrypoint="decode")
    assert list(got) == list(want) == ["out", "h2"]
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


def test_bad_input_names_refused(tmp_path: Path) -> None:
    program = program_of({"in": t(2)}, lambda x: coreai.relu(x))
    with pytest.raises(UnexportableOpsError, match="'in' is not a Python identifier"):
        export_aimodel(program, tmp_path / "m.aimodel")


def test_missing_extra_names_what_to_install() -> None:
    code = ("import sys; sys.modules['coreai'] = None\n"
            "try:\n    import coreai_torch.aimodel\n"
            "except ImportError as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parents[2]).stdout
    assert out.startswith("MissingExtraError") and "pip install 'coreai-torch[coreai]'" in out


def test_core_packages_do_not_import_apple_package() -> None:
    code = ("import sys, coreai_core, coreai_torch, coreai_torch.cli\n"
            "print(sorted(m for m in sys.modules if m == 'coreai' or m.startswith('coreai.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parents[2]).stdout
    assert out.strip() == "[]"


def test_verify_aimodel_reports_per_output_errors(tmp_path: Path) -> None:
    import torch

    from coreai_torch.aimodel import verify_aimodel

    class Two(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.relu(x), x * 2

    program = program_of({"x": t(2, 3)}, lambda x: (coreai.relu(x), coreai.broadcasting_mul(
        x, 3.0)))
    path = export_aimodel(program, tmp_path / "m.aimodel")
    x = torch.randn(2, 3)
    report = verify_aimodel(Two(), path, (x,), program=program)
    assert [o.passed for o in report.against_torch.outputs] == [True, False]
    assert report.against_runtime is not None and report.against_runtime.passed
    assert not report.passed
    want = float((x * 3 - x * 2).abs().max())
    assert report.against_torch.outputs[1].max_abs == pytest.approx(want, rel=1e-6)
    assert "against coreai_core's runtime" in str(report)
