"""The convolution methods of ``coreai.conv`` (pointwise, chunked im2col, depthwise) against
torch eager, the plan built once per op (``prepared_by``), threads and im2col memory."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from coreai_core import Dim, Program, TensorType, Value, defop
from coreai_core._opdef import OPS
from coreai_core.dialects import coreai
from coreai_core.runtime import Runtime, _threads, prepared_by
from coreai_core.runtime.kernels import _conv, nn
from tests.core.kernel_util import check, rand, seeds

# float64: only the summation order differs from torch (at most a few hundred terms of
# magnitude ~3); float32: the same with float32 rounding of each partial sum.
TOL = {np.dtype(np.float64): (1e-10, 1e-10), np.dtype(np.float32): (1e-5, 1e-4)}
SIZES = {1: [1, 2, 5, 47], 2: [1, 2, 3, 7], 3: [1, 2, 4]}
METHODS = ["pointwise", "im2col", "im2col-chunked", "depthwise", "depthwise-planar"]


def method_settings(method: str) -> Any:
    """Patches forcing the variant: im2col one output row per chunk (a one-byte budget);
    depthwise over channel planes whatever their size (else small planes run channels
    last)."""
    return mock.patch.multiple(
        _conv, _CHUNK_BYTES=1 if method == "im2col-chunked" else _conv._CHUNK_BYTES,
        _PLANAR_MIN_ROW=0 if method == "depthwise-planar" else _conv._PLANAR_MIN_ROW)


@pytest.fixture
def double_scale_op() -> Iterator[Callable[..., Value]]:
    """``test_kernels_conv.double_scale(x, alpha)``, x * 2 * alpha: an op for the
    ``prepared_by`` test, defined for it only (the op-db tests cover every defined op)."""

    @defop("test_kernels_conv.double_scale")
    def double_scale(x: Value, alpha: float = 1.0) -> TensorType:
        """x * 2 * alpha."""
        return x.type

    yield double_scale
    OPS.unregister("test_kernels_conv.double_scale")


@st.composite
def conv_cases(draw: Any, method: str) -> dict[str, Any]:
    """A convolution that ``conv_plan`` runs with ``method``: 1-3 spatial dims, odd sizes,
    strides, dilation, asymmetric padding, groups."""
    n = draw(st.integers(1, 3))
    ints = lambda lo, hi: tuple(draw(st.integers(lo, hi)) for _ in range(n))  # noqa: E731
    s, d = ints(1, 3), ints(1, 2)
    if method == "pointwise":
        k, pads, d = (1,) * n, (0,) * (2 * n), (1,) * n
    else:
        k = ints(1, 3 if n > 1 else 5)
        pads = ints(0, 2) + ints(0, 2)
        if not method.startswith("depthwise") and max(k) == 1 and not any(pads):
            pads = (1, *pads[1:])  # else it is pointwise
    if method.startswith("depthwise"):
        groups, cg = draw(st.integers(2, 5)), 1
    else:  # one input channel per group is depthwise: more when grouped
        groups = draw(st.integers(1, 2))
        cg = draw(st.integers(1 if groups == 1 else 2, 3))
    og = draw(st.integers(1, 2))
    sizes = tuple(max(draw(st.sampled_from(SIZES[n])),
                      d[i] * (k[i] - 1) + 1 - pads[2 * i] - pads[2 * i + 1]) for i in range(n))
    return dict(n=n, k=k, s=s, d=d, pads=pads, groups=groups, cg=cg, og=og, sizes=sizes,
                batch=draw(st.integers(1, 2)), bias=draw(st.booleans()))


def is_prepared(step: Any) -> bool:
    """The step calls the conv its kernel's ``prepare`` made (an optional operand left out
    wraps the call; the wrapper keeps the name)."""
    return step.call.__qualname__.endswith("conv_prepared")


def torch_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None,
               c: dict[str, Any]) -> torch.Tensor:
    """torch's convolution, the asymmetric padding applied with F.pad (last axis first)."""
    n = c["n"]
    torch_pads = [p for i in reversed(range(n)) for p in (c["pads"][2 * i], c["pads"][2 * i + 1])]
    fn = (F.conv1d, F.conv2d, F.conv3d)[n - 1]
    return fn(F.pad(torch.from_numpy(x), torch_pads), torch.from_numpy(w),
              None if b is None else torch.from_numpy(b), stride=c["s"], dilation=c["d"],
              groups=c["groups"])


def conv_program(c: dict[str, Any], x: np.ndarray, w: np.ndarray, b: np.ndarray | None,
                 batch: int | Dim | None = None) -> Program:
    """``main(x) = conv(x, w, b)`` with the weight and bias as constants."""
    p = Program()
    shape = (x.shape[0] if batch is None else batch, *x.shape[1:])
    with p.graph("main", inputs={"x": TensorType(shape, x.dtype)}) as g:
        g.outputs({"y": coreai.conv(g["x"], coreai.constant(w), None if b is None else
                                    coreai.constant(b), strides=list(c["s"]),
                                    pads=list(c["pads"]), dilation=list(c["d"]),
                                    groups=c["groups"])})
    return p


def arrays(c: dict[str, Any], seed: int, dtype: Any,
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    g, cg, og = c["groups"], c["cg"], c["og"]
    x = rand(seed, (c["batch"], g * cg, *c["sizes"]), dtype)
    w = rand(seed + 1, (g * og, cg, *c["k"]), dtype)
    b = rand(seed + 2, (g * og,), dtype) if c["bias"] else None
    return x, w, b


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("method", METHODS)
@given(data=st.data(), seed=seeds)
def test_each_method_matches_torch(method: str, dtype: Any, data: st.DataObject,
                                   seed: int) -> None:
    c = data.draw(conv_cases(method))
    x, w, b = arrays(c, seed, dtype)
    with method_settings(method):
        plan = _conv.conv_plan(x.shape[1:], w.shape, x.dtype, c["s"], c["pads"], c["d"],
                               c["groups"])
        y = conv_program(c, x, w, b).run({"x": x})["y"]
    assert plan.method == method.split("-")[0]
    check(y, torch_conv(x, w, b, c), *TOL[np.dtype(dtype)])


@pytest.mark.parametrize("method", METHODS)
@given(data=st.data(), seed=seeds)
def test_a_plan_runs_its_prepared_conv_with_the_kernels_bits(method: str, data: st.DataObject,
                                                             seed: int) -> None:
    """The plan calls the conv prepared once for the op; it gives exactly the kernel's bits
    (the kernel plans the same convolution per call), also for a dynamic batch."""
    c = data.draw(conv_cases(method))
    x, w, b = arrays(c, seed, np.float32)
    with method_settings(method):
        for batch in (None, Dim("n")):
            program = conv_program(c, x, w, b, batch)
            (step,) = Runtime().plan(program).steps
            assert is_prepared(step)
            got = program.run({"x": x})["y"]
            want = nn.conv(x, w, b, strides=c["s"], pads=c["pads"], dilation=c["d"],
                           groups=c["groups"])
            assert got.tobytes() == want.tobytes()


def test_a_prepared_conv_given_another_shape_plans_that_shape() -> None:
    """A dynamic spatial size is not prepared; a prepared conv called on other shapes (a
    caller reusing the callable) plans them instead of misreading them."""
    x = rand(1, (1, 4, 9, 9), np.float32)
    w = rand(2, (4, 1, 3, 3), np.float32)
    p = Program()
    with p.graph("main", inputs={"x": TensorType((1, 4, Dim("h"), 9), "float32")}) as g:
        g.outputs({"y": coreai.conv(g["x"], coreai.constant(w), None, groups=4)})
    (step,) = Runtime().plan(p).steps
    assert not is_prepared(step)
    want = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), groups=4)
    check(p.run({"x": x})["y"], want, *TOL[np.dtype(np.float32)])
    prepared = nn.conv.prepare([TensorType((1, 4, 5, 5), "float32"),  # type: ignore[attr-defined]
                                TensorType(w.shape, "float32"), None], groups=4)
    check(prepared(x, w, None, groups=4), want, *TOL[np.dtype(np.float32)])


@pytest.mark.parametrize("batch", [1, 3])  # chunks or blocks split, or the batch
@pytest.mark.parametrize(("c", "chunk"), [
    (dict(n=2, k=(3, 3), s=(1, 1), d=(1, 1), pads=(1,) * 4, groups=64, cg=1, og=1,
          sizes=(56, 56), bias=True), None),  # planar
    (dict(n=2, k=(3, 3), s=(2, 2), d=(1, 1), pads=(1,) * 4, groups=432, cg=1, og=2,
          sizes=(24, 24), bias=True), None),  # channels last
    (dict(n=2, k=(3, 3), s=(1, 1), d=(1, 1), pads=(1,) * 4, groups=4, cg=8, og=8,
          sizes=(28, 28), bias=False), 1 << 14),  # chunked im2col
])
def test_results_identical_whatever_the_threads(c: dict[str, Any], chunk: int | None,
                                                batch: int) -> None:
    """Chunked im2col cuts its work into the same blocks on any number of threads and, with
    several, runs them on the pool; depthwise (both layouts) runs its blocks on the calling
    thread (its blocks of short numpy calls only took turns at the interpreter lock). The
    bits are identical either way."""
    c = {**c, "batch": batch}
    x, w, b = arrays(c, 5, np.float32)
    calls: list[tuple[tuple[int, ...], bool]] = []

    def spy(bounds: list[int], fn: Any) -> Any:
        calls.append((tuple(bounds), _threads.active_pool() is not None))
        return real(bounds, fn)

    real = _threads.parallel_chunks
    with mock.patch.object(_conv, "_CHUNK_BYTES", chunk or _conv._CHUNK_BYTES), \
            mock.patch.object(_threads, "BLOCK_WORK", 1 << 12), \
            mock.patch.object(_threads, "parallel_chunks", spy):
        program = conv_program(c, x, w, b)
        one = Runtime(threads=1).run(program, {"x": x})["y"]
        serial, calls[:] = list(calls), []
        two = Runtime(threads=2).run(program, {"x": x})["y"]
    assert [bounds for bounds, _ in calls] == [bounds for bounds, _ in serial]
    assert not any(pooled for _, pooled in serial)
    if c["cg"] == 1:  # depthwise
        assert calls == []
    else:
        assert any(pooled and len(bounds) > 2 for bounds, pooled in calls)
    assert one.tobytes() == two.tobytes()
    check(one, torch_conv(x, w, b, c), *TOL[np.dtype(np.float32)])


def test_im2col_at_224_copies_the_windows_in_chunks() -> None:
    """ResNet's 7x7 stride-2 stem at 224x224: its windows are 7.4 MB; the kernel's peak
    allocation stays near the padded input, the output and one chunk."""
    x = rand(3, (1, 3, 224, 224), np.float32)
    w = rand(4, (64, 3, 7, 7), np.float32)
    tracemalloc.start()
    try:
        y = nn.conv(x, w, None, strides=[2, 2], pads=[3, 3, 3, 3])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    windows = 3 * 49 * 112 * 112 * 4
    padded = 3 * 230 * 230 * 4
    assert peak < y.nbytes + padded + 2 * _conv._CHUNK_BYTES + (1 << 16) < windows
    want = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=2, padding=3)
    check(y, want, 1e-5, 2e-4)  # 147 terms of magnitude ~3 each


def test_prepared_by_specializes_a_user_kernel_once_per_op(
        double_scale_op: Callable[..., Value]) -> None:
    """A runtime's own kernel with a ``prepare``: called once per op when planning, with the
    operand types; its result runs each time. ``prepare`` returning None, or rejecting the
    op (the kernel then reports problems at run time, naming the op), keeps the kernel."""
    seen: list[Any] = []

    def prepare(types: list[Any], *, alpha: float) -> Any:
        seen.append((types, alpha))
        if alpha == 0:
            raise ValueError("alpha 0 is not prepared")
        if alpha < 0:
            return None
        scale = np.float32(alpha * 2)

        def scaled(x: np.ndarray, *, alpha: float) -> np.ndarray:
            return x * scale

        return scaled

    @prepared_by(prepare)
    def double_scale(x: np.ndarray, *, alpha: float) -> np.ndarray:
        return x * np.float32(alpha * 2)

    runtime = Runtime()
    runtime.register_kernel("test_kernels_conv.double_scale", double_scale)
    p = Program()
    x_type = TensorType((3,), "float32")
    with p.graph("main", inputs={"x": x_type}) as g:
        g.outputs({"a": double_scale_op(g["x"], alpha=1.5),
                   "b": double_scale_op(g["x"], alpha=-1.0),
                   "c": double_scale_op(g["x"], alpha=0.0)})
    x = np.arange(3, dtype=np.float32)
    for _ in range(2):
        out = runtime.run(p, {"x": x})
        np.testing.assert_array_equal(out["a"], x * 3)
        np.testing.assert_array_equal(out["b"], -x * 2)
        np.testing.assert_array_equal(out["c"], x * 0)
    assert [alpha for _, alpha in seen] == [1.5, -1.0, 0.0]
    assert seen[0][0] == [x_type]
    kinds = [step.call.__qualname__.endswith("scaled") for step in runtime.plan(p).steps]
    assert kinds == [True, False, False]


@pytest.mark.parametrize("method", ["pointwise", "im2col", "depthwise"])
def test_read_only_and_strided_inputs(method: str) -> None:
    """The kernel reads read-only arrays (folded constants) and non-contiguous views without
    padding (the windows view needs a contiguous buffer: it copies)."""
    k, groups = {"pointwise": (1, 1), "im2col": (3, 1), "depthwise": (3, 4)}[method]
    x = np.ascontiguousarray(rand(7, (1, 9, 8, 4), np.float64).transpose(0, 3, 1, 2))[
        :, :, ::-1]
    x.flags.writeable = False
    w = rand(8, (4, 4 // groups, k, k), np.float64)
    w.flags.writeable = False
    assert not x.flags.c_contiguous
    y = nn.conv(x, w, None, groups=groups)
    want = F.conv2d(torch.from_numpy(x.copy()), torch.from_numpy(w.copy()), groups=groups)
    check(y, want, *TOL[np.dtype(np.float64)])
