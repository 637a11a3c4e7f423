"""Constant folding computes with the runtime the user configured (``optimize(runtime=...)``)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from coreai_core import Program, TensorType, Value, defop
from coreai_core._opdef import OPS
from coreai_core.dialects import coreai
from coreai_core.optimizer import ConstantFoldingPass, PassManager, optimize
from coreai_core.runtime import Runtime

C = np.array([0.5, 1.0, 2.0], np.float32)
X = np.array([10.0, 20.0, 30.0], np.float32)


def _exp_of_constant() -> Program:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((3,), "float32")}) as g:
        g.outputs({"y": coreai.broadcasting_add(coreai.exp(coreai.constant(C)), g["x"])})
    return p


def _exp2_runtime() -> Runtime:
    """A runtime whose coreai.exp kernel is replaced (by 2**x, easy to tell from e**x)."""
    rt = Runtime()
    rt.register_kernel("coreai.exp", np.exp2, allow_override=True)
    return rt


def _op_names(p: Program) -> list[str]:
    return [op.name for op in p.graphs["main"].ops]


def test_folding_uses_the_kernel_overridden_on_the_runtime() -> None:
    rt = _exp2_runtime()
    p = _exp_of_constant()
    report = p.optimize(runtime=rt)
    assert report["constant_folding"].changed
    assert "coreai.exp" not in _op_names(p)
    # the folded constant holds rt's exp, so even the default runtime now computes 2**c + x
    np.testing.assert_allclose(p.run({"x": X})["y"], np.exp2(C) + X, rtol=1e-6)
    np.testing.assert_allclose(rt.run(p, {"x": X})["y"], np.exp2(C) + X, rtol=1e-6)


def test_without_a_runtime_folding_uses_the_default_kernels() -> None:
    p = _exp_of_constant()
    optimize(p)
    assert "coreai.exp" not in _op_names(p)
    np.testing.assert_allclose(p.run({"x": X})["y"], np.exp(C) + X, rtol=1e-6)


def test_a_checked_run_compares_with_the_same_runtime() -> None:
    """The check runs the programs with the runtime that folded, so the fold is no mismatch."""
    rt = _exp2_runtime()
    p = _exp_of_constant()
    report = optimize(p, check={"x": X}, runtime=rt)
    assert report.validation is not None and report.validation.passed
    np.testing.assert_allclose(rt.run(p, {"x": X})["y"], np.exp2(C) + X, rtol=1e-6)


def test_named_passes_and_pass_managers_take_the_runtime() -> None:
    rt = _exp2_runtime()
    for make in (lambda: PassManager(["constant_folding"], runtime=rt),
                 lambda: PassManager([ConstantFoldingPass(runtime=rt)])):
        p = _exp_of_constant()
        make().run(p)
        np.testing.assert_allclose(p.run({"x": X})["y"], np.exp2(C) + X, rtol=1e-6)


@pytest.fixture
def halve_op() -> Iterator[object]:
    """``test_fold.halve(x)``: an op whose only kernel lives on one runtime."""

    @defop("test_fold.halve")
    def halve(x: Value) -> TensorType:
        """x / 2."""
        return x.type

    yield halve
    OPS.unregister("test_fold.halve")


def test_an_op_with_a_kernel_on_the_runtime_only_folds_with_that_runtime(halve_op) -> None:
    def build() -> Program:
        p = Program()
        with p.graph("main", inputs={"x": TensorType((3,), "float32")}) as g:
            g.outputs({"y": coreai.broadcasting_add(halve_op(coreai.constant(C)), g["x"])})
        return p

    unfolded = build()
    optimize(unfolded)  # the default runtime has no kernel: the op stays
    assert "test_fold.halve" in _op_names(unfolded)

    rt = Runtime()
    rt.register_kernel("test_fold.halve", lambda x: x / np.float32(2))
    folded = build()
    optimize(folded, runtime=rt)
    assert "test_fold.halve" not in _op_names(folded)
    np.testing.assert_allclose(folded.run({"x": X})["y"], C / 2 + X, rtol=1e-6)
