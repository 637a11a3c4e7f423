"""Edge cases fed to the exporter: each either exports and matches our runtime or is refused
with one UnexportableOpsError naming the op and the reason, never another exception (issue
36: hf/funnel's export raised a raw IndexError in ``_dynamic_slice``: a refused op's stand-in
value had lost its rank, and the slice after it indexed its axes)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from coreai_core import Dim, DType, Program, TensorType, Value
from coreai_core.dialects import coreai
from coreai_torch.aimodel import export_aimodel
from coreai_torch.errors import UnexportableOpsError
from tests.interop.helpers import check_matches_runtime
from tests.interop.isolated_export import export_in_child

N = Dim("n", 1, 8)


def _program(inputs: dict[str, TensorType], build: Callable[..., Value]) -> Program:
    program = Program()
    with program.graph("main", inputs=inputs) as g:
        g.outputs({"y": build(*g.inputs.values())})
    return program


def _nonzero_then(after: Callable[[Value], Value]) -> Callable[[Value], Value]:
    return lambda x: after(coreai.non_zero(x))


# name -> (inputs, build, the ops the refusal names and a piece of each reason)
REFUSED: dict[str, tuple[dict[str, TensorType], Callable[..., Value], dict[str, str]]] = {
    "slice_after_refused_dynamic": (
        {"x": TensorType((N, 3), DType.float32)},
        _nonzero_then(lambda v: coreai.slice_(v, [0], [1], axes=[1], strides=[1])),
        {"coreai.non_zero": "depends on the data"}),
    "split_after_refused_dynamic": (
        {"x": TensorType((N, 3), DType.float32)},
        _nonzero_then(lambda v: coreai.split(v, [1, 1], axis=1)[0]),
        {"coreai.non_zero": "depends on the data"}),
    "transpose_gather_after_refused": (
        {"x": TensorType((N, 3), DType.float32)},
        _nonzero_then(lambda v: coreai.gather(coreai.transpose(v, [1, 0]),
                                              coreai.constant(np.array([0], np.int64)),
                                              axis=1)),
        {"coreai.non_zero": "depends on the data"}),
    "negative_stride_dynamic": (
        {"x": TensorType((N, 3), DType.float32)},
        lambda x: coreai.slice_(x, [-1], [-100], axes=[0], strides=[-1]),
        {"coreai.slice": "negative slice stride"}),
    "split_along_dynamic_axis": (
        {"x": TensorType((N, 4), DType.float32)},
        lambda x: coreai.split(x, [1, 1], axis=0)[0],
        {"coreai.split": "dynamic axis"}),
    "int64_constant_out_of_int32": (
        {"x": TensorType((3,), DType.int64)},
        lambda x: coreai.broadcasting_add(x, coreai.constant(np.array(2**40, np.int64))),
        {"coreai.constant": "do not fit int32"}),
    "sum_of_a_gather_of_no_rows": (
        {"x": TensorType((4, 3), DType.float32)},
        lambda x: coreai.reduce_sum(coreai.gather(
            x, coreai.constant(np.zeros((0,), np.int64)), axis=0), axes=[0], keep_dims=True),
        {"coreai.gather": "zero-size tensor", "coreai.reduce_sum": "zero-size tensor"}),
    "float64_constant_overflows_float32": (
        {"x": TensorType((3,), DType.float32)},
        lambda x: coreai.broadcasting_add(x, coreai.cast(
            coreai.constant(np.array([1e300], np.float64)), DType.float32)),
        {"coreai.constant": "overflow float32"}),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_edge_case_is_refused_by_name(name: str, tmp_path: Path) -> None:
    inputs, build, reasons = REFUSED[name]
    with pytest.raises(UnexportableOpsError) as info:
        export_aimodel(_program(inputs, build), tmp_path / "edge.aimodel")
    named = {op.op: op.reason for op in info.value.ops}
    assert set(named) == set(reasons), named
    for op, piece in reasons.items():
        assert piece in named[op], named[op]
    assert list(tmp_path.iterdir()) == []


# edge shapes that export: rank 0, size 1 everywhere, odd sizes, empty reductions
EXPORTED: dict[str, tuple[dict[str, TensorType], Callable[..., Value]]] = {
    "rank0_reductions": ({"x": TensorType((), DType.float32)},
                         lambda x: coreai.reduce_sum(coreai.reduce_max(x), keep_dims=True)),
    "rank0_softmax_of_reshape": ({"x": TensorType((), DType.float32)},
                                 lambda x: coreai.softmax(coreai.reshape(x, [1, 1]), axis=-1)),
    "ones_argmax": ({"x": TensorType((1, 1, 1), DType.float32)},
                    lambda x: coreai.argmax(x, axis=1, keep_dims=False)),
    "odd_slice_clamped": ({"x": TensorType((47, 1), DType.float32)},
                          lambda x: coreai.slice_(x, [-100], [2**62], axes=[0], strides=[3])),
    "reduce_no_axes": ({"x": TensorType((3, 1), DType.int32)},
                       lambda x: coreai.reduce_sum(x, axes=[], keep_dims=False)),
}


@pytest.mark.parametrize("name", sorted(EXPORTED))
def test_edge_case_exports_and_matches_runtime(name: str, tmp_path: Path) -> None:
    inputs, build = EXPORTED[name]
    check_matches_runtime(_program(inputs, build), tmp_path / "edge.aimodel")


def test_a_scatter_of_no_updates_is_the_identity(tmp_path: Path) -> None:
    """Quirk: Core AI's compiler crashed the process (SIGSEGV/SIGILL) on a ``scatter_nd``
    with empty indices (Chameleon's logits masking) and miscomputed ``scatter_along_axis``
    with them; the exporter emits the identity. Run in a child process (~12 s: it imports
    torch): a regression must fail this test, not kill the run."""
    no_rows = np.zeros((0, 1), np.int64)
    program = Program()
    with program.graph("main", inputs={"x": TensorType((4, 3), DType.float32)}) as g:
        x = g["x"]
        g.outputs({
            "nd": coreai.scatter_nd(x, coreai.constant(no_rows),
                                    coreai.constant(np.full((1, 3), -1.0, np.float32))),
            "nd_add": coreai.scatter_nd(x, coreai.constant(no_rows),
                                        coreai.constant(np.ones((1, 3), np.float32)),
                                        accumulate=True),
            "along": coreai.scatter_along_axis(
                x, coreai.constant(np.zeros((4, 0), np.int64)),
                coreai.constant(np.zeros((4, 0), np.float32)), axis=1)})
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    for out in program.run({"x": x}).values():
        np.testing.assert_array_equal(out, x)  # nothing is written
    result = export_in_child(program, {"x": x}, tmp_path)
    assert result == {"max_abs": {"nd": 0.0, "nd_add": 0.0, "along": 0.0}}
