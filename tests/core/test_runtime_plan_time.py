"""Weights rebuilt once per plan (``coreai_core/runtime/_plan_time.py``): a compressed
weight's decompression and the transpose after it run while planning, not on every call, and
a half matmul reads a float32 copy of its constant weight made once; results are the
per-step computation's."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import Program, TensorType
from coreai_core.dialects import coreai


def _linear_int4(rows: int, k: int, n: int, dtype: str, seed: int,
                 ) -> tuple[Program, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = rng.integers(-8, 8, (n, k)).astype(ml_dtypes.int4)
    scale = (rng.random((n, 1)) * 0.1 + 0.01).astype(dtype)
    x = rng.standard_normal((rows, k)).astype(dtype)
    p = Program()
    with p.graph("main", inputs={"x": TensorType((rows, k), dtype)}) as g:
        w = coreai.constexpr_blockwise_shift_scale(data, scale)
        g.outputs({"y": coreai.batch_matmul(g["x"], coreai.transpose(w, perm=[1, 0]))})
    dense = (data.astype(np.float32) * scale.astype(np.float32)).astype(dtype)
    return p, x, dense


@settings(max_examples=8, deadline=None)
@given(rows=st.sampled_from([1, 3, 47]), k=st.sampled_from([16, 64]),
       n=st.sampled_from([1, 8, 33]), dtype=st.sampled_from(["float32", "float16"]),
       seed=st.integers(0, 3))
def test_decompression_runs_once_per_plan(rows: int, k: int, n: int, dtype: str,
                                          seed: int) -> None:
    p, x, dense = _linear_int4(rows, k, n, dtype, seed)
    plan = p.explain_plan()
    # planned as constants: neither the decompression nor the transpose is a step
    assert "constexpr_blockwise_shift_scale" not in plan, plan
    assert "transpose" not in plan, plan
    got = p.run({"x": x})["y"]
    want = (x.astype(np.float32) @ dense.astype(np.float32).T).astype(dtype)
    assert got.dtype == want.dtype and got.shape == want.shape
    # float32 products summed in BLAS's order against numpy's: a few ulps of the dtype
    tol = 1e-5 if dtype == "float32" else 2e-3
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol,
                               atol=tol * float(np.abs(want.astype(np.float32)).max()))
    np.testing.assert_array_equal(p.run({"x": x})["y"], got)  # a second call: same bits


def test_the_program_stays_compressed() -> None:
    p, _, _ = _linear_int4(1, 16, 8, "float32", 0)
    p.run({"x": np.ones((1, 16), np.float32)})
    ops = [op.name for op in p.graphs["main"].ops]
    assert "coreai.constexpr_blockwise_shift_scale" in ops
    assert {str(w.dtype) for w in p.weights.values()} >= {"int4"}
