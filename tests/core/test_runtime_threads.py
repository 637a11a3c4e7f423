"""Every core by default, the same bits on any thread count: ``Runtime()`` uses the cores the
process may run on; matmuls, convolutions and float64 elementwise blocks cut their work into
blocks fixed by the shapes; BLAS is held at one thread during a run (in every worker) and
restored after."""

from __future__ import annotations

import concurrent.futures
import hashlib
import itertools
import math
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.special
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import ThreadpoolController

from coreai_core import Program, TensorType
from coreai_core.dialects import coreai
from coreai_core.runtime import Runtime, _threads
from tests.core.kernel_util import seeds

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


# -- every core by default, the same bits on any thread count ------------------------------------

THREADS = (1, 2, 3, 4, 8)


@pytest.fixture(scope="module")
def runtimes() -> dict[int, Runtime]:
    return {t: Runtime(threads=t) for t in THREADS}


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 4096 multiply-adds, so that the small shapes of these tests are cut into
    several blocks (the real threshold, ~4M, is for speed only)."""
    monkeypatch.setattr(_threads, "BLOCK_WORK", 1 << 12)


def _same_on_every_thread_count(runtimes: dict[int, Runtime], p: Program,
                                inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs with one thread, after checking that every thread count gives the same
    bytes (and dtypes, shapes)."""
    reference = runtimes[1].run(p, inputs)
    for threads, runtime in runtimes.items():
        got = runtime.run(p, inputs)
        for name, want in reference.items():
            assert got[name].dtype == want.dtype and got[name].shape == want.shape
            assert got[name].tobytes() == want.tobytes(), (threads, name)
    return reference


def _dot_bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The float32 dot-product error bound k * u * |a| @ |b| (u = 2^-24, k terms), with the
    rounding of the bound itself covered by the factor 1 + 1e-6."""
    return a.shape[-1] * 2.0**-24 * (np.abs(a).astype(np.float64) @ np.abs(b)) * (1 + 1e-6)


def test_default_threads_are_the_available_cores() -> None:
    assert Runtime().threads == _threads.available_cores() == Runtime(threads=None).threads
    assert 1 <= _threads.available_cores() <= len(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match="threads"):
        Runtime(threads=True)  # type: ignore[arg-type]


@pytest.mark.parametrize(("files", "want"), [
    ({"cpu.max": "max 100000\n"}, None),
    ({"cpu.max": "150000 100000\n"}, 1.5),
    ({"cpu.max": "50000 100000\n"}, 0.5),
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
    ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3.0),
    ({"cpu,cpuacct/cpu.cfs_quota_us": "200000\n",
      "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, 2.0),
    ({}, None),
])
def test_cgroup_quota_v1_and_v2(tmp_path: Path, files: dict[str, str], want: float | None,
                                ) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert _threads._cgroup_quota(tmp_path) == want


def test_available_cores_is_capped_by_the_quota(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_threads, "_cgroup_quota", lambda root: 1.5)
    assert _threads.available_cores() == min(2, len(os.sched_getaffinity(0)))
    monkeypatch.setattr(_threads, "_cgroup_quota", lambda root: 0.25)
    assert _threads.available_cores() == 1


@given(count=st.integers(0, 5000), work=st.integers(0, 1 << 30),
       quantum=st.sampled_from([1, 16, 64]))
def test_fixed_bounds_cover_the_range_in_blocks_of_the_quantum(count: int, work: int,
                                                               quantum: int) -> None:
    bounds = _threads.fixed_bounds(count, work, quantum)
    assert bounds[0] == 0 and bounds[-1] == count
    sizes = np.diff(bounds)
    assert np.all(sizes > 0) or count == 0
    assert len(sizes) <= _threads.MAX_BLOCKS
    assert all(s % quantum == 0 for s in sizes[:-1])


dims = st.sampled_from([1, 2, 5, 47, 64, 130])


@settings(max_examples=15, deadline=None)
@given(m=dims, k=dims, n=st.sampled_from([1, 47, 64, 200]), stack=st.sampled_from([(), (3,)]),
       transposed=st.booleans(), seed=seeds)
@pytest.mark.usefixtures("small_blocks")
def test_matmul_by_a_weight_same_bits_on_any_thread_count(
        runtimes: dict[int, Runtime], m: int, k: int, n: int, stack: tuple[int, ...],
        transposed: bool, seed: int) -> None:
    """Row blocks (many rows) or column blocks of the weight (few rows), with the weight as a
    torch linear layer passes it (transposed) or plain."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((*stack, m, k), np.float32)
    w = (rng.standard_normal((n, k), np.float32).T if transposed
         else rng.standard_normal((k, n), np.float32))
    p = Program()
    with p.graph("main", inputs={"x": TensorType(x.shape, F32)}) as g:
        g.outputs({"y": coreai.batch_matmul(g["x"], coreai.constant(w, name="w"))})
    y = _same_on_every_thread_count(runtimes, p, {"x": x})["y"]
    want = x.astype(np.float64) @ w
    assert np.all(np.abs(y - want) <= _dot_bound(x, w) + 1e-30)


@settings(max_examples=15, deadline=None)
@given(batch=st.sampled_from([(1,), (2, 3), (47,)]), m=dims, k=dims, n=dims, seed=seeds)
@pytest.mark.usefixtures("small_blocks")
def test_batched_matmul_same_bits_on_any_thread_count(
        runtimes: dict[int, Runtime], batch: tuple[int, ...], m: int, k: int, n: int,
        seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((*batch, m, k), np.float32)
    b = rng.standard_normal((*batch, k, n), np.float32)
    p = Program()
    with p.graph("main", inputs={"a": TensorType(a.shape, F32),
                                 "b": TensorType(b.shape, F32)}) as g:
        g.outputs({"y": coreai.batch_matmul(g["a"], g["b"])})
    y = _same_on_every_thread_count(runtimes, p, {"a": a, "b": b})["y"]
    want = a.astype(np.float64) @ b
    assert np.all(np.abs(y - want) <= _dot_bound(a, b) + 1e-30)


@settings(max_examples=15, deadline=None)
@given(batch=st.sampled_from([1, 2]), channels=st.sampled_from([1, 8, 47]),
       size=st.sampled_from([1, 5, 47]), kernel=st.sampled_from([1, 3]),
       stride=st.sampled_from([1, 2]), depthwise=st.booleans(), seed=seeds)
@pytest.mark.usefixtures("small_blocks")
def test_conv_same_bits_on_any_thread_count(
        runtimes: dict[int, Runtime], batch: int, channels: int, size: int, kernel: int,
        stride: int, depthwise: bool, seed: int) -> None:
    """Pointwise (blocks of pixels), im2col (chunks or blocks of output channels) and
    depthwise (blocks of channels) convolutions, against torch in float64."""
    rng = np.random.default_rng(seed)
    groups = channels if depthwise else 1
    out_channels = channels if depthwise else 33
    x = rng.standard_normal((batch, channels, size, size), np.float32)
    w = rng.standard_normal((out_channels, channels // groups, kernel, kernel), np.float32)
    bias = rng.standard_normal(out_channels, np.float32)
    pad = kernel // 2
    p = Program()
    with p.graph("main", inputs={"x": TensorType(x.shape, F32)}) as g:
        g.outputs({"y": coreai.conv(g["x"], coreai.constant(w, name="w"),
                                    coreai.constant(bias, name="b"), strides=[stride] * 2,
                                    pads=[pad] * 4, groups=groups)})
    y = _same_on_every_thread_count(runtimes, p, {"x": x})["y"]
    args = dict(stride=stride, padding=pad, groups=groups)
    want = torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(),
                                      torch.from_numpy(bias).double(), **args).numpy()
    magnitude = torch.nn.functional.conv2d(torch.from_numpy(x).double().abs(),
                                           torch.from_numpy(w).double().abs(),
                                           torch.from_numpy(bias).double().abs(), **args).numpy()
    terms = channels // groups * kernel * kernel + 1  # the bias is one more term of the sum
    assert np.all(np.abs(y - want) <= terms * 2.0**-24 * magnitude * (1 + 1e-6) + 1e-30)


@settings(max_examples=10, deadline=None)
@given(shape=st.sampled_from([(1, 47), (47, 130), (3, 5, 1000), (20000,)]),
       axes=st.sampled_from([None, [-1], [0]]), seed=seeds)
@pytest.mark.usefixtures("small_blocks")
def test_elementwise_and_reductions_same_bits_on_any_thread_count(
        runtimes: dict[int, Runtime], shape: tuple[int, ...], axes: list[int] | None,
        seed: int) -> None:
    """GELU (float64 blocks), a chain of elementwise ops, and reductions and softmax of its
    result (fixed blocks of rows)."""
    x = np.random.default_rng(seed).uniform(-6, 6, shape).astype(np.float32)
    p = Program()
    with p.graph("main", inputs={"x": TensorType(x.shape, F32)}) as g:
        v = coreai.gelu(g["x"], approximate="none")
        v = coreai.broadcasting_add(coreai.broadcasting_mul(v, 0.5), coreai.tanh(g["x"]))
        g.outputs({"v": v, "sum": coreai.reduce_sum(v, axes=axes, keep_dims=False),
                   "max": coreai.reduce_max(v, axes=axes, keep_dims=True),
                   "mean": coreai.reduce_mean(v, axes=axes, keep_dims=False),
                   "soft": coreai.softmax(v, axis=-1)})
    out = _same_on_every_thread_count(runtimes, p, {"x": x})
    wide = x.astype(np.float64)
    gelu = wide * 0.5 * (1 + scipy.special.erf(wide / np.sqrt(2)))
    # three float32 roundings of values below 6 + 1 (gelu, the product, the sum)
    np.testing.assert_allclose(out["v"], gelu * 0.5 + np.tanh(wide), rtol=0, atol=3 * 7 * 2**-24)
    ax = None if axes is None else tuple(axes)
    v = out["v"].astype(np.float64)
    count = v.size if ax is None else math.prod(v.shape[a] for a in ax)
    # a float32 sum of `count` terms: count * u * sum |v| bounds its error
    bound = count * 2.0**-24 * np.sum(np.abs(v), axis=ax)
    assert np.all(np.abs(out["sum"] - np.sum(v, axis=ax)) <= bound * (1 + 1e-6))
    np.testing.assert_array_equal(out["max"], np.max(out["v"], axis=ax, keepdims=True))
    # the mean: the sum's bound, plus the division's rounding
    mean_bound = bound / count + 2.0**-24 * np.abs(np.sum(v, axis=ax) / count)
    assert np.all(np.abs(out["mean"] - np.sum(v, axis=ax) / count) <= mean_bound * (1 + 1e-6))
    # softmax: exp(v - max) with v - max exact (Sterbenz) and exp within 1 ulp, a sum of n
    # such terms within n ulps, a division within half an ulp: (n + 3) ulps relative
    e = np.exp(v - v.max(axis=-1, keepdims=True))
    want = e / e.sum(axis=-1, keepdims=True)
    n = v.shape[-1]
    np.testing.assert_allclose(out["soft"], want, rtol=(n + 3) * 2.0**-24, atol=0)


def test_blas_on_one_thread_in_every_worker_and_restored_after() -> None:
    """Blocks run on several threads, each sees BLAS at one thread (no oversubscription next
    to torch), and the caller's BLAS setting is back after the run."""
    seen: list[tuple[int, list[int]]] = []

    def spying_tanh(x: np.ndarray) -> np.ndarray:
        def block(a: int, b: int) -> np.ndarray:
            seen.append((threading.get_ident(), _blas_threads()))
            time.sleep(0.01)  # keep this thread busy so the next block goes to another one
            return np.tanh(x[a:b])

        return np.concatenate(_threads.parallel_chunks(list(range(0, 9)), block))

    runtime = Runtime({"coreai.tanh": spying_tanh}, allow_override=True, threads=4)
    p = Program()
    with p.graph("main", inputs={"x": TensorType((8,), F32)}) as g:
        g.outputs({"y": coreai.tanh(g["x"])})
    x = np.linspace(-2, 2, 8, dtype=np.float32)
    controller = ThreadpoolController()
    with controller.limit(limits=2, user_api="blas"):
        y = runtime.run(p, {"x": x})["y"]
        assert set(_blas_threads()) == {2}
    assert len(seen) == 8 and len({ident for ident, _ in seen}) > 1
    assert all(set(counts) == {1} for _, counts in seen)
    np.testing.assert_array_equal(y, np.tanh(x))


@pytest.mark.parametrize("width", [2, 3, 8])
def test_parallel_chunks_returns_every_block_once_in_block_order(width: int) -> None:
    """However the threads take the blocks (here the caller's blocks are slow, so the pool
    takes most of them), each runs once and the results come back in block order."""
    calls: list[tuple[int, int]] = []
    caller = threading.get_ident()

    def block(a: int, b: int) -> tuple[int, int]:
        calls.append((a, b))
        if threading.get_ident() == caller:
            time.sleep(0.005)
        return a, b

    bounds = [0, 1, 3, 4, 9, 10, 15, 16, 20]
    pairs = list(itertools.pairwise(bounds))
    with concurrent.futures.ThreadPoolExecutor(width) as pool, \
            _threads.RunContext(pool, width, blas=False):
        got = _threads.parallel_chunks(bounds, block)
    assert got == pairs
    assert sorted(calls) == pairs


def test_parallel_chunks_raises_a_blocks_error_after_the_blocks_in_flight_end() -> None:
    """A failing block's error reaches the caller, and no block still runs after the call
    returns (a kernel's output buffer is never written behind the caller's back)."""
    running = threading.Event()
    finished: list[int] = []

    def block(a: int, b: int) -> int:
        if a == 0:
            running.wait(1.0)  # fail only once another thread holds a block
            raise ValueError("block 0 failed")
        running.set()
        time.sleep(0.02)
        finished.append(a)
        return a

    with concurrent.futures.ThreadPoolExecutor(2) as pool, \
            _threads.RunContext(pool, 2, blas=False):
        with pytest.raises(ValueError, match="block 0 failed"):
            _threads.parallel_chunks(list(range(0, 6)), block)
        done = list(finished)
    time.sleep(0.05)
    assert finished == done  # nothing finished after the call returned
    assert len(finished) < 5  # the blocks stop once one has failed


ZOO = ("mlp", "cnn_batchnorm", "lstm", "bert[sdpa]", "llama[sdpa]",
       "resnet", "mobilenet_v2", "wav2vec2[eager]")


@pytest.mark.slow
@pytest.mark.parametrize("name", ZOO)
@pytest.mark.usefixtures("small_blocks")
def test_zoo_models_same_bits_on_any_thread_count(runtimes: dict[int, Runtime],
                                                  name: str) -> None:
    """Whole converted and optimized models of the zoo, each run on 1, 2, 3, 4 and 8 threads,
    with blocks small enough that their matmuls and convolutions are cut; and the run
    matches torch eager (the model tests' float32 tolerances)."""
    from coreai_torch import TorchConverter, get_decomp_table, verify
    from tests.models.test_models import ATOL, RTOL
    from tests.models.zoo import all_models

    model, inputs = all_models()[name]()
    with torch.no_grad():
        ep = torch.export.export(model, inputs).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
    program.optimize()
    arrays = dict(zip(program.graphs["main"].inputs, (t.numpy() for t in inputs), strict=True))
    _same_on_every_thread_count(runtimes, program, arrays)
    assert verify(model, program, inputs, rtol=RTOL, atol=ATOL).passed


def test_a_run_of_only_ufuncs_leaves_blas_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan whose every step is a direct ufunc call never reaches BLAS: its run skips the
    BLAS thread count (a few microseconds per call); any other plan holds it."""
    entered: list[bool] = []
    real = _threads.BlasThreads.__enter__

    def spy(self: _threads.BlasThreads) -> None:
        entered.append(True)
        real(self)

    monkeypatch.setattr(_threads.BlasThreads, "__enter__", spy)
    runtime = Runtime(threads=1)
    chain = Program()
    with chain.graph("main", inputs={"x": TensorType((4,), F32)}) as g:
        g.outputs({"y": coreai.broadcasting_mul(coreai.tanh(g["x"]), 2.0)})
    x = np.linspace(-1, 1, 4, dtype=np.float32)
    np.testing.assert_array_equal(runtime.run(chain, {"x": x})["y"],
                                  np.tanh(x) * np.float32(2))
    assert runtime.plan(chain).calls_only_ufuncs and entered == []
    product = Program()
    with product.graph("main", inputs={"a": TensorType((4, 4), F32)}) as g:
        g.outputs({"y": coreai.tanh(coreai.batch_matmul(g["a"], g["a"]))})
    a = np.eye(4, dtype=np.float32)
    np.testing.assert_array_equal(runtime.run(product, {"a": a})["y"], np.tanh(a))
    assert not runtime.plan(product).calls_only_ufuncs and entered == [True]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
@pytest.mark.usefixtures("small_blocks")
def test_a_forked_child_runs_on_a_pool_of_its_own() -> None:
    """A child forked after the runtime's pool started has the pool object without its
    threads; its runs must not wait on them forever (they would, reusing the pool)."""
    runtime = Runtime(threads=2)
    p = Program()
    with p.graph("main", inputs={"a": TensorType((256, 256), F32)}) as g:
        g.outputs({"y": coreai.batch_matmul(g["a"], g["a"])})  # 4 column blocks
    a = np.random.default_rng(0).standard_normal((256, 256), np.float32)
    parent = runtime.run(p, {"a": a})["y"]  # starts the pool's threads
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, send a digest (fits the pipe), exit without teardown
        try:
            os.write(write, hashlib.sha256(runtime.run(p, {"a": a})["y"].tobytes()).digest())
        finally:
            os._exit(0)
    os.close(write)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child's run hung on the parent's pool")
    with os.fdopen(read, "rb") as f:
        assert f.read() == hashlib.sha256(parent.tobytes()).digest()
