"""BLAS held at one thread during a run whatever ``Runtime(threads=n)``, then restored; the
bits do not depend on ``n``."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import ThreadpoolController

from coreai_core import Program, TensorType
from coreai_core.dialects import coreai
from coreai_core.runtime import Runtime

F32 = "float32"


def _blas_threads() -> list[int]:
    return [info["num_threads"] for info in ThreadpoolController().select(user_api="blas").info()]


def _spying_runtime(threads: int, seen: list[list[int]]) -> Runtime:
    """A runtime whose tanh kernel records the BLAS thread counts while the run is under way."""

    def tanh(x: np.ndarray) -> np.ndarray:
        seen.append(_blas_threads())
        return np.tanh(x)

    return Runtime({"coreai.tanh": tanh}, allow_override=True, threads=threads)


def _tanh_program() -> Program:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((4,), F32)}) as g:
        g.outputs({"y": coreai.tanh(g["x"])})
    return p


@pytest.mark.parametrize(("caller", "threads"), [(2, 1), (2, 2), (1, 1), (1, 2)])
def test_run_sets_blas_threads_and_restores_the_callers(caller, threads):
    controller = ThreadpoolController()
    assert controller.select(user_api="blas").info(), "numpy links no BLAS threadpoolctl sees"
    seen: list[list[int]] = []
    runtime = _spying_runtime(threads, seen)
    x = np.linspace(-2, 2, 4, dtype=np.float32)
    with controller.limit(limits=caller, user_api="blas"):
        before = _blas_threads()
        assert set(before) == {caller}
        y = runtime.run(_tanh_program(), {"x": x})["y"]
        after = _blas_threads()
        runtime.run_collect(_tanh_program(), {"x": x})
        after_collect = _blas_threads()
    assert seen == [[1] * len(before)] * 2
    assert after == before and after_collect == before
    np.testing.assert_array_equal(y, np.tanh(x))


def test_run_restores_blas_threads_after_a_failing_kernel():
    def failing(x: np.ndarray) -> np.ndarray:
        raise ValueError("boom")

    runtime = Runtime({"coreai.tanh": failing}, allow_override=True, threads=1)
    controller = ThreadpoolController()
    with controller.limit(limits=2, user_api="blas"):
        with pytest.raises(Exception, match="boom"):
            runtime.run(_tanh_program(), {"x": np.zeros(4, np.float32)})
        assert set(_blas_threads()) == {2}


def _blas_heavy_program() -> Program:
    """A 2-D matmul big enough for BLAS to use several threads, a matrix-vector product with a
    long sum (threaded OpenBLAS splits it: other bits), a batched matmul the runtime splits
    over its pool, and a convolution over a batch."""
    rng = np.random.default_rng(7)
    p = Program()
    with p.graph("main", inputs={"a": TensorType((300, 256), F32),
                                 "v": TensorType((1, 10_000), F32),
                                 "s": TensorType((4, 96, 128), F32),
                                 "x": TensorType((3, 8, 24, 24), F32)}) as g:
        w = coreai.constant(rng.standard_normal((256, 320), np.float32), name="w")
        long = coreai.constant(rng.standard_normal((10_000, 100), np.float32), name="long")
        m = coreai.batch_matmul(g["s"], coreai.constant(
            rng.standard_normal((128, 200), np.float32), name="m"))
        k = coreai.constant(rng.standard_normal((16, 8, 3, 3), np.float32), name="k")
        g.outputs({"mm": coreai.batch_matmul(g["a"], w), "bmm": m,
                   "mv": coreai.batch_matmul(g["v"], long),
                   "conv": coreai.conv(g["x"], k, None, pads=[1, 1])})
    return p


def test_results_identical_whatever_the_threads_and_the_callers_blas():
    p = _blas_heavy_program()
    rng = np.random.default_rng(8)
    inputs = {"a": rng.standard_normal((300, 256), np.float32),
              "v": rng.standard_normal((1, 10_000), np.float32),
              "s": rng.standard_normal((4, 96, 128), np.float32),
              "x": rng.standard_normal((3, 8, 24, 24), np.float32)}
    controller = ThreadpoolController()
    results = {}
    for caller in (1, 2):  # a threaded BLAS would split the long sum of "mv": other bits
        with controller.limit(limits=caller, user_api="blas"):
            for threads in (1, 2):
                results[caller, threads] = Runtime(threads=threads).run(p, inputs)
    reference = results[1, 1]
    for key, outputs in results.items():
        for name, y in outputs.items():
            want = reference[name]
            assert y.dtype == want.dtype and y.shape == want.shape
            assert y.tobytes() == want.tobytes(), (key, name)
    # and the values are the products, not merely equal to each other
    for name, lhs, rhs in [("mm", inputs["a"], p.weights["w"]),
                           ("mv", inputs["v"], p.weights["long"])]:
        np.testing.assert_allclose(reference[name], lhs.astype(np.float64) @ rhs,
                                   rtol=1e-4, atol=1e-3)
