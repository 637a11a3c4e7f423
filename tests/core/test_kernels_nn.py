"""The nn kernels (matmul, conv, pooling, interpolate, quantization) against torch.

Each test builds a one-op program with the builders, runs it with the numpy runtime and
compares with the torch functional op computed in the test: shape, then dtype, then values.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from coreai_core import Dim, DType, Program, TensorType
from coreai_core._opdef import OPS
from coreai_core.dialects import coreai
from coreai_core.runtime.kernels.nn import KERNELS

FLOATS = [np.float32, np.float64, np.float16]

# (rtol, atol) per dtype.
# float64: only summation order differs from torch.
# float32: summation order differs (im2col/BLAS vs oneDNN); sums have up to ~100 terms of
#   magnitude ~1, so the absolute error stays below ~1e-5.
# float16: both sides accumulate in float32 and round once, but torch rounds some
#   intermediates (e.g. interpolation weights, per-tap products) to half; allow a few half
#   ulps (2**-10 ~ 1e-3) relative to results of magnitude up to ~10.
TOL = {
    np.dtype(np.float64): (1e-9, 1e-9),
    np.dtype(np.float32): (1e-5, 1e-4),
    np.dtype(np.float16): (4e-3, 1e-2),
}

seeds = st.integers(0, 2**32 - 1)


def rand(seed: int, shape, dtype, kind: str = "normal") -> np.ndarray:
    """Random data; ``ties`` draws small integers (equal maxima), ``nan`` sprinkles NaN/-inf."""
    rng = np.random.default_rng(seed)
    if kind == "ties":
        a = rng.integers(-2, 3, size=shape).astype(np.float64)
    else:
        a = rng.standard_normal(shape)
    if kind == "nan" and a.size:
        flat = a.reshape(-1)
        flat[rng.integers(0, a.size, size=max(1, a.size // 7))] = np.nan
        flat[rng.integers(0, a.size, size=max(1, a.size // 7))] = -np.inf
    return a.astype(dtype)


def t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


def run_op(build, *arrays: np.ndarray) -> list[np.ndarray]:
    """Build a program applying ``build`` to the arrays as graph inputs, run it, return outputs."""
    program = Program()
    names = [f"x{i}" for i in range(len(arrays))]
    inputs = {n: TensorType(a.shape, a.dtype) for n, a in zip(names, arrays)}
    with program.graph("main", inputs=inputs) as g:
        out = build(*(g[n] for n in names))
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        g.outputs({f"y{i}": v for i, v in enumerate(outs)})
    return list(program.run(dict(zip(names, arrays))).values())


def check(actual: np.ndarray, expected: torch.Tensor, exact: bool = False) -> None:
    """Shape, then dtype, then values (NaN where torch has NaN)."""
    want = expected.detach().numpy()
    assert actual.shape == want.shape, f"shape {actual.shape} != torch {want.shape}"
    assert actual.dtype == want.dtype, f"dtype {actual.dtype} != torch {want.dtype}"
    if exact or actual.dtype.kind in "iub":
        np.testing.assert_array_equal(actual, want)
        return
    rtol, atol = TOL[actual.dtype]
    np.testing.assert_allclose(actual.astype(np.float64), want.astype(np.float64),
                               rtol=rtol, atol=atol, equal_nan=True)


def test_every_nn_op_has_a_kernel():
    nn_ops = {name for name, d in OPS.items() if d.rule.__module__.endswith("dialects._nn")}
    assert nn_ops, "no nn ops found"
    assert nn_ops <= set(KERNELS.names()), sorted(nn_ops - set(KERNELS.names()))


EMPTY_BATCH = {
    "conv": (lambda v, w: coreai.conv(v, w, None, pads=[1, 1], strides=[2, 1]),
             lambda x, w: F.conv2d(x, w, padding=1, stride=(2, 1))),
    "conv_stride1": (lambda v, w: coreai.conv(v, w, None, pads=[1, 1]),
                     lambda x, w: F.conv2d(x, w, padding=1)),
    "conv_transpose": (lambda v, w: coreai.conv_transpose(v, w, None, strides=[2, 2]),
                       lambda x, w: F.conv_transpose2d(x, w, stride=2)),
    "maxpool": (lambda v, w: coreai.maxpool(v, [2, 2], return_indices=True)[1],
                lambda x, w: F.max_pool2d(x, 2, return_indices=True)[1]),
    "avgpool": (lambda v, w: coreai.avgpool(v, [3, 3], strides=[1, 1], pads=[1, 1]),
                lambda x, w: F.avg_pool2d(x, 3, 1, 1)),
    "interpolate": (lambda v, w: coreai.interpolate(v, [7, 3], mode="cubic"),
                    lambda x, w: F.interpolate(x, size=(7, 3), mode="bicubic")),
}


@pytest.mark.parametrize("op", sorted(EMPTY_BATCH))
def test_empty_batch(op):
    build, reference = EMPTY_BATCH[op]
    x = np.zeros((0, 4, 5, 6), np.float32)
    w = rand(0, (4, 4, 3, 3), np.float32)
    (y,) = run_op(build, x, w)
    check(y, reference(t(x), t(w)))


# -- batch_matmul -----------------------------------------------------------------------------

@st.composite
def matmul_shapes(draw):
    dim = st.sampled_from([0, 1, 2, 3, 5, 47])
    m, k, n = draw(dim), draw(dim), draw(dim)
    batch = draw(st.lists(st.sampled_from([1, 2, 3]), max_size=2))
    lhs_b = [draw(st.sampled_from([1, b])) for b in batch]
    rhs_b = [draw(st.sampled_from([1, b])) for b in batch]
    lhs_b = lhs_b[draw(st.integers(0, len(lhs_b))):]
    rhs_b = rhs_b[draw(st.integers(0, len(rhs_b))):]
    lhs = [k] if draw(st.booleans()) and not lhs_b else [*lhs_b, m, k]
    rhs = [k] if draw(st.booleans()) and not rhs_b else [*rhs_b, k, n]
    return lhs, rhs


@pytest.mark.parametrize("dtype", [*FLOATS, np.int64])
@given(shapes=matmul_shapes(), seed=seeds)
def test_batch_matmul(dtype, shapes, seed):
    a = rand(seed, shapes[0], np.float64)
    b = rand(seed + 1, shapes[1], np.float64)
    if dtype is np.int64:
        a, b = np.round(a * 3), np.round(b * 3)
    a, b = a.astype(dtype), b.astype(dtype)
    (y,) = run_op(coreai.batch_matmul, a, b)
    check(y, torch.matmul(t(a), t(b)))


# -- conv / conv_transpose --------------------------------------------------------------------

SIZES_1D = [1, 2, 5, 8, 47]


@st.composite
def conv_case(draw, n: int, transpose: bool = False):
    ints = lambda lo, hi: tuple(draw(st.integers(lo, hi)) for _ in range(n))  # noqa: E731
    groups = draw(st.integers(1, 3))
    cg, og = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    k, s, d = ints(1, 3), ints(1, 3), ints(1, 2)
    if transpose:
        pads = tuple(draw(st.integers(0, d[i] * (k[i] - 1))) for i in range(n) for _ in (0, 1))
        out_pad = tuple(draw(st.integers(0, max(s[i], d[i]) - 1)) for i in range(n))
    else:
        pads, out_pad = ints(0, 2) + ints(0, 2), ()
        pads = tuple(p for i in range(n) for p in (pads[i], pads[n + i]))
    size_st = st.sampled_from(SIZES_1D) if n == 1 else st.integers(1, 6 if n == 2 else 4)
    sizes = []
    for i in range(n):
        size = draw(size_st)
        if not transpose:  # the (dilated) kernel must fit the padded input
            size = max(size, d[i] * (k[i] - 1) + 1 - pads[2 * i] - pads[2 * i + 1])
        sizes.append(size)
    if transpose:  # the output (S-1)*s + d*(k-1) + out_pad + 1 - pads must stay >= 1
        room = [(sizes[i] - 1) * s[i] + d[i] * (k[i] - 1) + out_pad[i] for i in range(n)]
        lo = [min(pads[2 * i], room[i]) for i in range(n)]
        pads = tuple(v for i in range(n) for v in (lo[i], min(pads[2 * i + 1], room[i] - lo[i])))
    batch = draw(st.integers(1, 2))
    bias = draw(st.booleans())
    return dict(batch=batch, groups=groups, cg=cg, og=og, k=k, s=s, d=d, pads=pads,
                out_pad=out_pad, sizes=tuple(sizes), bias=bias)


def _torch_conv(n, transpose):
    if transpose:
        return {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[n]
    return {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[n]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 2, 3])
@given(data=st.data(), seed=seeds)
def test_conv(n, dtype, data, seed):
    c = data.draw(conv_case(n))
    g = c["groups"]
    x = rand(seed, (c["batch"], g * c["cg"], *c["sizes"]), dtype)
    w = rand(seed + 1, (g * c["og"], c["cg"], *c["k"]), dtype)
    b = rand(seed + 2, (g * c["og"],), dtype)
    ops = [x, w, b] if c["bias"] else [x, w]
    (y,) = run_op(lambda *v: coreai.conv(
        v[0], v[1], v[2] if c["bias"] else None, strides=list(c["s"]), pads=list(c["pads"]),
        dilation=list(c["d"]), groups=g), *ops)
    # torch pads symmetrically only: pad explicitly (F.pad lists the last axis first).
    torch_pads = [p for i in reversed(range(n)) for p in (c["pads"][2 * i], c["pads"][2 * i + 1])]
    ref = _torch_conv(n, False)(F.pad(t(x), torch_pads), t(w), t(b) if c["bias"] else None,
                                stride=c["s"], dilation=c["d"], groups=g)
    check(y, ref)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 2, 3])
@given(data=st.data(), seed=seeds)
def test_conv_transpose(n, dtype, data, seed):
    c = data.draw(conv_case(n, transpose=True))
    g = c["groups"]
    x = rand(seed, (c["batch"], g * c["cg"], *c["sizes"]), dtype)
    w = rand(seed + 1, (g * c["cg"], c["og"], *c["k"]), dtype)
    b = rand(seed + 2, (g * c["og"],), dtype)
    ops = [x, w, b] if c["bias"] else [x, w]
    (y,) = run_op(lambda *v: coreai.conv_transpose(
        v[0], v[1], v[2] if c["bias"] else None, strides=list(c["s"]), pads=list(c["pads"]),
        dilation=list(c["d"]), groups=g, output_padding=list(c["out_pad"])), *ops)
    lo, hi = c["pads"][0::2], c["pads"][1::2]
    fn = _torch_conv(n, True)
    args = dict(stride=c["s"], dilation=c["d"], groups=g, output_padding=c["out_pad"])
    bias = t(b) if c["bias"] else None
    if lo == hi:
        ref = fn(t(x), t(w), bias, padding=lo, **args)
    else:  # torch pads symmetrically only: crop the unpadded result instead
        full = fn(t(x), t(w), bias, **args)
        ref = full[(..., *(slice(lo[i], full.shape[2 + i] - hi[i]) for i in range(n)))]
    check(y, ref)


@pytest.mark.parametrize("block_bytes", [1, 3000])  # one channel a block; several
@pytest.mark.parametrize(("batch", "mult", "k", "s", "d"),
                         [(2, 1, 3, 1, 1), (1, 2, 3, 2, 1), (2, 1, 5, 2, 2), (1, 2, 7, 1, 1)])
def test_depthwise_conv_in_channel_blocks(block_bytes, batch, mult, k, s, d, monkeypatch):
    from coreai_core.runtime.kernels import _conv

    x = rand(11, (batch, 6, 13, 12), np.float64)
    w = rand(12, (6 * mult, 1, k, k), np.float64)
    x[0, 0, 0, :3] = -0.0  # the sign of zero survives the blocking too

    def conv() -> np.ndarray:
        (y,) = run_op(lambda *v: coreai.conv(v[0], v[1], None, strides=[s, s],
                                             pads=[k // 2] * 4, dilation=[d, d], groups=6),
                      x, w)
        return y

    whole = conv()
    monkeypatch.setattr(_conv, "_DEPTHWISE_BLOCK_BYTES", block_bytes)
    blocked = conv()
    assert blocked.tobytes() == whole.tobytes()
    check(blocked, F.conv2d(t(x), t(w), stride=s, padding=k // 2, dilation=d, groups=6))


BF16_CASES = {
    "conv": (lambda v: coreai.conv(v, coreai.constant(BF16_W), None, pads=[1, 1]),
             lambda x: F.conv2d(x, torch.from_numpy(BF16_W.astype(np.float32)).bfloat16(),
                                padding=1)),
    "depthwise_conv": (
        lambda v: coreai.conv(v, coreai.constant(BF16_W[:, :1]), None, strides=[2, 2],
                              groups=8),
        lambda x: F.conv2d(x, torch.from_numpy(BF16_W[:, :1].astype(np.float32)).bfloat16(),
                           stride=2, groups=8)),
    "conv_transpose": (
        lambda v: coreai.conv_transpose(v, coreai.constant(BF16_W), None, strides=[2, 2]),
        lambda x: F.conv_transpose2d(x, torch.from_numpy(BF16_W.astype(np.float32)).bfloat16(),
                                     stride=2)),
    "batch_matmul": (lambda v: coreai.batch_matmul(v, v),
                     lambda x: torch.matmul(x, x)),
    "maxpool": (lambda v: coreai.maxpool(v, [3, 3], strides=[2, 2], pads=[1, 1])[0],
                lambda x: F.max_pool2d(x, 3, 2, 1)),
    "avgpool": (lambda v: coreai.avgpool(v, [3, 3], strides=[2, 2], pads=[1, 1],
                                         count_include_pad=False),
                lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
    "bilinear": (lambda v: coreai.interpolate(v, [13, 5], mode="linear"),
                 lambda x: F.interpolate(x, size=(13, 5), mode="bilinear")),
    "bicubic": (lambda v: coreai.interpolate(v, [13, 5], mode="cubic", align_corners=True),
                lambda x: F.interpolate(x, size=(13, 5), mode="bicubic", align_corners=True)),
}
BF16_W = rand(1, (8, 8, 3, 3), DType.bfloat16.numpy)


@pytest.mark.parametrize("op", sorted(BF16_CASES))
def test_bfloat16(op):
    """bfloat16 data computed in float32 and rounded back, like torch's CPU kernels."""
    build, reference = BF16_CASES[op]
    x = rand(0, (1, 8, 9, 9), DType.bfloat16.numpy)
    (y,) = run_op(build, x)
    assert y.dtype == x.dtype
    ref = reference(torch.from_numpy(x.astype(np.float32)).bfloat16()).float().numpy()
    # bfloat16 keeps 8 significant bits (one ulp is 2**-7 relative): both sides round the
    # float32 result once, but torch also rounds some intermediates; allow a few ulps.
    np.testing.assert_allclose(y.astype(np.float32), ref, rtol=3e-2, atol=3e-2)


# -- pooling ----------------------------------------------------------------------------------

@st.composite
def pool_case(draw, n: int, dilation: bool = True, unpadded_fit: bool = False):
    ints = lambda lo, hi: tuple(draw(st.integers(lo, hi)) for _ in range(n))  # noqa: E731
    k = ints(1, 3)
    s = None if draw(st.booleans()) else ints(1, 3)
    d = ints(1, 2) if dilation else (1,) * n
    p = tuple(draw(st.integers(0, k[i] // 2)) for i in range(n))  # torch: pad <= kernel / 2
    size_st = st.sampled_from(SIZES_1D) if n == 1 else st.integers(1, 7 if n == 2 else 5)
    # unpadded_fit: torch's avg_pool3d wants the window to fit the input without padding.
    sizes = tuple(max(draw(size_st), d[i] * (k[i] - 1) + 1 - (0 if unpadded_fit else 2 * p[i]))
                  for i in range(n))
    return dict(k=k, s=s, d=d, p=p, sizes=sizes, ceil_mode=draw(st.booleans()),
                shape=(draw(st.integers(1, 2)), draw(st.integers(1, 3)), *sizes))


def _pads(p):
    return [v for v in p for _ in (0, 1)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 2, 3])
@given(data=st.data(), seed=seeds, kind=st.sampled_from(["normal", "ties", "nan"]),
       indices=st.booleans())
def test_maxpool(n, dtype, data, seed, kind, indices):
    c = data.draw(pool_case(n))
    x = rand(seed, c["shape"], dtype, kind)
    out = run_op(lambda v: coreai.maxpool(
        v, kernel_size=list(c["k"]), strides=None if c["s"] is None else list(c["s"]),
        pads=_pads(c["p"]), dilation=list(c["d"]), ceil_mode=c["ceil_mode"],
        return_indices=indices), x)
    fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[n]
    ref, ref_idx = fn(t(x), c["k"], c["s"], c["p"], c["d"], ceil_mode=c["ceil_mode"],
                      return_indices=True)
    check(out[0], ref, exact=True)  # a max is exact in any dtype
    if indices:
        check(out[1], ref_idx)
    else:
        assert len(out) == 1


def test_maxpool_int64():
    x = np.random.default_rng(3).integers(-5, 5, size=(2, 3, 7, 6)).astype(np.int64)
    y, idx = run_op(lambda v: coreai.maxpool(v, kernel_size=[3, 2], strides=[2, 1],
                                             pads=[1, 1, 0, 0], ceil_mode=True,
                                             return_indices=True), x)
    ref, ref_idx = F.max_pool2d(t(x), (3, 2), (2, 1), (1, 0), ceil_mode=True,
                                return_indices=True)
    check(y, ref)
    check(idx, ref_idx)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 2, 3])
@given(data=st.data(), seed=seeds, count_include_pad=st.booleans(),
       divisor=st.sampled_from([None, None, 1, 3]))
def test_avgpool(n, dtype, data, seed, count_include_pad, divisor):
    c = data.draw(pool_case(n, dilation=False, unpadded_fit=n == 3))
    x = rand(seed, c["shape"], dtype)
    (y,) = run_op(lambda v: coreai.avgpool(
        v, kernel_size=list(c["k"]), strides=None if c["s"] is None else list(c["s"]),
        pads=_pads(c["p"]), ceil_mode=c["ceil_mode"], count_include_pad=count_include_pad,
        divisor_override=divisor), x)
    if n == 1:  # avg_pool1d has no divisor_override: pool a [N, C, 1, W] image instead
        s = None if c["s"] is None else (1, *c["s"])
        ref = F.avg_pool2d(t(x)[:, :, None], (1, *c["k"]), s, (0, *c["p"]), c["ceil_mode"],
                           count_include_pad, divisor)[:, :, 0]
    else:
        fn = F.avg_pool2d if n == 2 else F.avg_pool3d
        # torch has no float16 avg_pool3d on CPU: pool in float32, round once to half.
        xt = t(x).float() if n == 3 and dtype is np.float16 else t(x)
        ref = fn(xt, c["k"], c["s"], c["p"], c["ceil_mode"], count_include_pad, divisor)
        ref = ref.to(t(x).dtype)
    check(y, ref)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 2, 3])
@given(data=st.data(), seed=seeds)
def test_sumpool(n, dtype, data, seed):
    c = data.draw(pool_case(n))
    x = rand(seed, c["shape"], dtype)
    k, d, p = c["k"], c["d"], c["p"]
    s = c["s"] or k
    (y,) = run_op(lambda v: coreai.sumpool(
        v, kernel_size=list(k), strides=None if c["s"] is None else list(c["s"]),
        pads=_pads(p), dilation=list(d), ceil_mode=c["ceil_mode"]), x)
    # torch has no sum pool: a depthwise convolution with a ones kernel is one. Its output
    # size comes from torch's max pool; ceil_mode windows overhang the high side (zeros).
    max_pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[n]
    out = max_pool(t(x).double(), k, s, p, d, ceil_mode=c["ceil_mode"]).shape[2:]
    extra = [max(0, (out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 - x.shape[2 + i] - 2 * p[i])
             for i in range(n)]
    xp = F.pad(t(x), [v for i in reversed(range(n)) for v in (p[i], p[i] + extra[i])])
    ones = torch.ones((x.shape[1], 1, *k), dtype=xp.dtype)
    ref = _torch_conv(n, False)(xp, ones, stride=s, dilation=d, groups=x.shape[1])
    check(y, ref)


# -- interpolate ------------------------------------------------------------------------------

TORCH_MODE = {("nearest", 1): "nearest", ("nearest", 2): "nearest", ("nearest", 3): "nearest",
              ("nearest_exact", 1): "nearest-exact", ("nearest_exact", 2): "nearest-exact",
              ("nearest_exact", 3): "nearest-exact", ("linear", 1): "linear",
              ("linear", 2): "bilinear", ("linear", 3): "trilinear", ("cubic", 2): "bicubic"}

SCALES = [0.5, 0.75, 1.0, 1.3, 1.5, 2.0, 2.5, 3.0, 1 / 3]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(("mode", "n"), sorted(TORCH_MODE))
@given(data=st.data(), seed=seeds)
def test_interpolate(mode, n, dtype, data, seed):
    size_st = st.sampled_from(SIZES_1D) if n == 1 else st.integers(1, 8 if n == 2 else 5)
    sizes = [data.draw(size_st) for _ in range(n)]
    x = rand(seed, (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3)), *sizes), dtype)
    align = data.draw(st.booleans()) if mode in ("linear", "cubic") else None
    kw = {} if align is None else {"align_corners": align}
    if data.draw(st.booleans()):  # by scale factor: torch's coordinate mapping uses it
        factors = [data.draw(st.sampled_from(SCALES) | st.floats(0.3, 3.2)) for _ in range(n)]
        factors = [max(f, 1.0 / s) for f, s in zip(factors, sizes)]  # output size >= 1
        ref = F.interpolate(t(x), scale_factor=factors, mode=TORCH_MODE[mode, n], **kw)
        out_sizes = list(ref.shape[2:])
        assert out_sizes == [math.floor(s * f) for s, f in zip(sizes, factors)]
    else:
        factors = None
        out_sizes = [data.draw(st.integers(1, 9)) for _ in range(n)]
        ref = F.interpolate(t(x), size=out_sizes, mode=TORCH_MODE[mode, n], **kw)
    (y,) = run_op(lambda v: coreai.interpolate(v, out_sizes, mode=mode,
                                               align_corners=bool(align), scales=factors), x)
    check(y, ref, exact=mode.startswith("nearest"))


@pytest.mark.parametrize("mode", ["nearest", "nearest_exact", "linear", "cubic"])
@given(data=st.data(), seed=seeds)
def test_interpolate_large_2d_output(mode, data, seed):
    """Outputs with H + W > 128 take ATen's generic kernel (other nearest index rule)."""
    sizes = [data.draw(st.integers(1, 9)), data.draw(st.sampled_from([1, 7, 47]))]
    x = rand(seed, (1, 2, *sizes), np.float32)
    factors = [data.draw(st.floats(65, 90) | st.sampled_from([66.0, 70.5])) / s for s in sizes]
    kw = {} if mode.startswith("nearest") else {"align_corners": data.draw(st.booleans())}
    ref = F.interpolate(t(x), scale_factor=factors, mode=TORCH_MODE[mode, 2], **kw)
    out_sizes = list(ref.shape[2:])
    assert sum(out_sizes) > 128
    (y,) = run_op(lambda v: coreai.interpolate(v, out_sizes, mode=mode, scales=factors,
                                               align_corners=kw.get("align_corners", False)), x)
    check(y, ref, exact=mode.startswith("nearest"))


@pytest.mark.parametrize("mode", ["nearest", "nearest_exact", "linear", "cubic"])
@given(data=st.data(), seed=seeds)
def test_interpolate_output_size_operand(mode, data, seed):
    """Sizes known only at run time (output_size operand, -1 in sizes): same as static."""
    x = rand(seed, (1, 2, data.draw(st.integers(1, 8)), data.draw(st.integers(1, 8))),
             np.float32)
    out_sizes = [data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9))]
    kw = {} if mode.startswith("nearest") else {"align_corners": data.draw(st.booleans())}
    ref = F.interpolate(t(x), size=out_sizes, mode=TORCH_MODE[mode, 2], **kw)
    sizes = [-1, out_sizes[1]] if data.draw(st.booleans()) else [-1, -1]
    program = Program()
    with program.graph("main", inputs={"x": TensorType(x.shape, "float32")}) as g:
        y = coreai.interpolate(g["x"], sizes, mode=mode, output_size=coreai.constant(
            np.asarray(out_sizes, np.int64)), align_corners=kw.get("align_corners", False))
        assert sizes == [
            -1 if isinstance(d, Dim) else d for d in y.type.shape[2:]]
        g.outputs({"y": y})
    check(program.run({"x": x})["y"], ref, exact=mode.startswith("nearest"))


def test_interpolate_nearest_uint8():
    x = np.random.default_rng(5).integers(0, 255, size=(1, 2, 5, 7)).astype(np.uint8)
    (y,) = run_op(lambda v: coreai.interpolate(v, [9, 4], mode="nearest_exact"), x)
    check(y, F.interpolate(t(x), size=(9, 4), mode="nearest-exact"))


# -- quantize / dequantize --------------------------------------------------------------------

TORCH_QDTYPE = {DType.int8: torch.qint8, DType.uint8: torch.quint8, DType.int32: torch.qint32}


@st.composite
def quant_case(draw):
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 5, 47]), min_size=1, max_size=3)))
    dtype = draw(st.sampled_from([DType.int8, DType.uint8, DType.int32, DType.int16]))
    info = np.iinfo(dtype.numpy)
    axis = draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    count = 1 if axis is None else shape[axis]
    scale = np.array([draw(st.floats(1e-3, 0.5)) for _ in range(count)], np.float32)
    zp_hi = min(int(info.max), 300)
    zp = np.array([draw(st.integers(max(int(info.min), -300), zp_hi)) for _ in range(count)],
                  np.int64)
    if axis is None:
        scale, zp = scale[0], zp[0]
    return shape, dtype, axis, np.asarray(scale), np.asarray(zp)


def _torch_quantize(x, dtype, axis, scale, zp):
    """int_repr of torch's quantized tensor, or torch's decomposed formula for int16."""
    if dtype in TORCH_QDTYPE:
        if axis is None:
            q = torch.quantize_per_tensor(t(x), float(scale), int(zp), TORCH_QDTYPE[dtype])
        else:
            q = torch.quantize_per_channel(t(x), t(scale).double(), t(zp), axis % x.ndim,
                                           TORCH_QDTYPE[dtype])
        return q.int_repr(), q.dequantize()
    info = np.iinfo(dtype.numpy)
    s, z = t(scale), t(zp)
    if axis is not None:
        shape = [1] * x.ndim
        shape[axis] = -1
        s, z = s.reshape(shape), z.reshape(shape)
    q = torch.clamp(torch.round(t(x) * (1.0 / s)) + z, int(info.min), int(info.max))
    q = q.to(dtype.torch)
    return q, (q.float() - z) * s


@pytest.mark.filterwarnings("ignore:.*quantize_per_tensor.*:UserWarning")
@given(case=quant_case(), seed=seeds)
def test_quantize_dequantize(case, seed):
    shape, dtype, axis, scale, zp = case
    x = (rand(seed, shape, np.float64) * 40).astype(np.float32)
    ref_q, ref_dq = _torch_quantize(x, dtype, axis, scale, zp)
    (q,) = run_op(lambda v, s, z: coreai.quantize(v, s, z, axis=axis, dtype=dtype),
                  x, scale, zp)
    check(q, ref_q)
    (dq,) = run_op(lambda v, s, z: coreai.dequantize(v, s, z, axis=axis), q, scale, zp)
    check(dq, ref_dq)
