"""Sliding-window machinery shared by the convolution and pooling kernels.

Everything here is vectorized over pixels: Python loops run over kernel positions (taps) only,
each tap being one strided numpy view of the padded input.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from coreai_core._dtypes import DType
from coreai_core._shapes import window_out
from coreai_core.dialects._nn import _fill, _pads

Ints = Sequence[int]

# Above this many bytes of windows per sample, convolutions avoid the im2col copy (flat-shift
# matmuls for stride 1, a tap-by-tap copy otherwise). Per sample, so that the method (and the
# bits) of a sample never depend on the batch it is in.
_IM2COL_BYTES = 1 << 22
# Depthwise convolutions run every tap over a block of channels of about this many output
# bytes before moving on, so the block stays in cache across its taps (one pass over memory
# instead of two per tap). Each element sees the same operations in the same order.
_DEPTHWISE_BLOCK_BYTES = 1 << 17


_F32 = np.dtype(np.float32)
_HALF = frozenset({np.dtype(np.float16), np.dtype(DType.bfloat16.numpy)})


def trailing(slices: Iterable[slice]) -> tuple[Any, ...]:
    """An index applying ``slices`` to the last axes (``x[..., s0, s1]``)."""
    return (..., *slices)


def acc_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype arithmetic runs in: float32 for float16/bfloat16 (like torch's CPU opmath)."""
    dtype = np.dtype(dtype)
    return _F32 if dtype in _HALF else dtype


def geometry(shape: Sequence[int], kernel: Ints, strides: Ints | None, pads: Ints | None,
             dilation: Ints | None, ceil_mode: bool = False, pool: bool = False,
             ) -> tuple[tuple[int, ...], ...]:
    """Normalize window attributes like the type rule; returns (k, s, d, pads, out)."""
    n = len(shape) - 2
    k = tuple(kernel)
    if pool:
        k = _fill(kernel, n, 1, "kernel_size")
        s = _fill(strides, n, 1, "strides") if strides else k
    else:
        s = _fill(strides, n, 1, "strides")
    d, p = _fill(dilation, n, 1, "dilation"), _pads(pads, n)
    out = tuple(int(window_out(shape[2 + i], k[i], s[i], p[2 * i], p[2 * i + 1], d[i],
                               ceil_mode)) for i in range(n))
    return k, s, d, p, out


def pad(x: np.ndarray, pads: Ints, out: Ints, k: Ints, s: Ints, d: Ints, value: float,
        extra: Ints | None = None) -> np.ndarray:
    """``x`` padded with ``value``, long enough on the high side for every window of ``out``.

    ``extra`` adds trailing elements per spatial axis (the flat-shift convolution reads past
    the last row). Without any padding ``x`` itself is returned.
    """
    n = x.ndim - 2
    lo = [pads[2 * i] for i in range(n)]
    size = []
    for i in range(n):
        need = (out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1
        size.append(max(x.shape[2 + i] + lo[i] + pads[2 * i + 1], need)
                    + (extra[i] if extra else 0))
    if all(v == 0 for v in lo) and tuple(size) == x.shape[2:]:
        return x
    buf = np.full((*x.shape[:2], *size), value, x.dtype)
    buf[trailing(slice(lo[i], lo[i] + x.shape[2 + i]) for i in range(n))] = x
    return buf


def taps(k: Ints) -> Iterator[tuple[int, ...]]:
    """Kernel positions in row-major order (the order torch scans a window)."""
    return itertools.product(*(range(v) for v in k))


def tap(xp: np.ndarray, pos: Ints, s: Ints, d: Ints, out: Ints) -> np.ndarray:
    """The strided view of padded ``xp`` seen by kernel position ``pos``: [N, C, *out]."""
    return xp[trailing(slice(p * di, p * di + (o - 1) * si + 1, si)
                       for p, si, di, o in zip(pos, s, d, out))]


# -- convolution ------------------------------------------------------------------------------

def conv(x: np.ndarray, w: np.ndarray, strides: Ints | None, pads: Ints | None,
         dilation: Ints | None, groups: int) -> np.ndarray:
    """Grouped N-d cross-correlation in ``x``'s (accumulation) dtype, without bias."""
    n_batch, c = x.shape[:2]
    o, cg = w.shape[:2]
    g, og = groups, o // groups
    k, s, d, p, out = geometry(x.shape, w.shape[2:], strides, pads, dilation)
    kk, npix = math.prod(k), math.prod(out)
    if cg > 1 and c * kk * npix * x.dtype.itemsize <= _IM2COL_BYTES:
        return _conv_im2col(x, w, k, s, d, p, out, g, og)
    if all(v == 1 for v in s):
        return _conv_flat_shift(x, w, k, d, p, out, g, og)
    if cg == 1:
        return _conv_depthwise(x, w, k, s, d, p, out, g, og)
    # im2col, one tap at a time: [N, g, Cg*K, out], then one batched matmul.
    xp = pad(x, p, out, k, s, d, 0.0)
    cols = np.empty((n_batch, c, kk, *out), x.dtype)
    for i, pos in enumerate(taps(k)):
        cols[:, :, i] = tap(xp, pos, s, d, out)
    cols = cols.reshape(n_batch, g, cg * kk, npix)
    y = np.matmul(w.reshape(g, og, cg * kk), cols)
    return y.reshape(n_batch, o, *out)


def _windows_view(xp: np.ndarray, k: Ints, s: Ints, d: Ints, out: Ints) -> np.ndarray:
    """[N, C, *k, *out] strided view of every window of padded ``xp`` (no copy)."""
    n = len(k)
    strides = xp.strides[2:]
    return np.lib.stride_tricks.as_strided(
        xp, (*xp.shape[:2], *k, *out),
        (*xp.strides[:2], *(strides[i] * d[i] for i in range(n)),
         *(strides[i] * s[i] for i in range(n))), writeable=False)


def _conv_im2col(x: np.ndarray, w: np.ndarray, k: Ints, s: Ints, d: Ints, p: Ints,
                 out: Ints, g: int, og: int) -> np.ndarray:
    """im2col in one copy of the windows view, then one batched matmul (small convs)."""
    n_batch, c = x.shape[:2]
    cg, kk, npix = c // g, math.prod(k), math.prod(out)
    xp = pad(x, p, out, k, s, d, 0.0)
    cols = _windows_view(xp, k, s, d, out).reshape(n_batch, g, cg * kk, npix)
    y = np.matmul(w.reshape(g, og, cg * kk), cols)
    return y.reshape(n_batch, g * og, *out)


def _conv_flat_shift(x: np.ndarray, w: np.ndarray, k: Ints, d: Ints, p: Ints, out: Ints,
                     g: int, og: int) -> np.ndarray:
    """Stride-1 convolution as a sum of per-tap matmuls, without an im2col copy.

    With the padded spatial dims flattened, kernel position ``pos`` reads the contiguous run
    ``flat[off(pos) : off(pos) + L]``; each tap is then one BLAS matmul on a strided view.
    The result lives on the padded grid (rows of full padded width) and is cropped at the end.
    """
    n_batch, c = x.shape[:2]
    cg = c // g
    ones = (1,) * len(k)
    # Taps offset along the inner axes read past the last row: one extra leading slab.
    spill = int(any(v > 1 for v in k[1:]))
    xp = pad(x, p, out, k, ones, d, 0.0, extra=(spill, *(0,) * (len(k) - 1)))
    psize = xp.shape[2:]
    inner = [int(np.prod(psize[i + 1:])) for i in range(len(k))]
    length = out[0] * inner[0]
    flat = xp.reshape(n_batch, g, cg, int(np.prod(psize)))
    wt = np.moveaxis(w.reshape(g, og, cg, int(np.prod(k))), -1, 0)  # [K, g, Og, Cg]
    y = np.empty((n_batch, g, og, length), x.dtype)
    offsets = [sum(pi * di * st for pi, di, st in zip(pos, d, inner)) for pos in taps(k)]
    if cg == 1:  # depthwise: a broadcast multiply beats a batch of 1x1 matmuls
        for a, b, scratch in _channel_blocks(y):
            for i, off in enumerate(offsets):
                dst = y[:, a:b] if i == 0 else scratch
                np.multiply(wt[i, a:b], flat[:, a:b, :, off:off + length], out=dst)
                if i:
                    y[:, a:b] += scratch
    else:
        scratch = np.empty_like(y)
        for i, off in enumerate(offsets):
            dst = y if i == 0 else scratch
            np.matmul(wt[i], flat[..., off:off + length], out=dst)
            if i:
                y += scratch
    y = y.reshape(n_batch, g * og, out[0], *psize[1:])
    return y[trailing(slice(0, v) for v in out[1:])]


def _conv_depthwise(x: np.ndarray, w: np.ndarray, k: Ints, s: Ints, d: Ints, p: Ints,
                    out: Ints, g: int, og: int) -> np.ndarray:
    """One input channel per group: multiply-accumulate over kernel positions."""
    n_batch = x.shape[0]
    xp = pad(x, p, out, k, s, d, 0.0)
    wt = w.reshape(g, og, int(np.prod(k)))
    y = np.zeros((n_batch, g, og, *out), x.dtype)
    bshape = (1, -1, og, *(1,) * len(k))
    positions = list(taps(k))
    for a, b, scratch in _channel_blocks(y):
        for i, pos in enumerate(positions):
            np.multiply(wt[a:b, :, i].reshape(bshape), tap(xp[:, a:b], pos, s, d, out)[:, :, None],
                        out=scratch)
            y[:, a:b] += scratch
    return y.reshape(n_batch, g * og, *out)


def _channel_blocks(y: np.ndarray) -> Iterator[tuple[int, int, np.ndarray]]:
    """Blocks ``[a, b)`` of axis 1 of ``y`` of about ``_DEPTHWISE_BLOCK_BYTES``, each with a
    scratch buffer shaped like ``y[:, a:b]``."""
    per_channel = y[:, :1].nbytes
    step = max(1, _DEPTHWISE_BLOCK_BYTES // max(per_channel, 1))
    buffer = np.empty((y.shape[0], min(step, y.shape[1]), *y.shape[2:]), y.dtype)
    for a in range(0, y.shape[1], step):
        b = min(a + step, y.shape[1])
        yield a, b, buffer[:, :b - a]


def conv_transpose(x: np.ndarray, w: np.ndarray, strides: Ints | None, pads: Ints | None,
                   dilation: Ints | None, groups: int, output_padding: Ints | None,
                   ) -> np.ndarray:
    """Transposed convolution: one batched matmul, then a col2im scatter-add per tap."""
    n = x.ndim - 2
    n_batch, c = x.shape[:2]
    g, cg, og = groups, c // groups, w.shape[1]
    k = w.shape[2:]
    s, d, p = _fill(strides, n, 1, "strides"), _fill(dilation, n, 1, "dilation"), _pads(pads, n)
    op = _fill(output_padding, n, 0, "output_padding")
    size = x.shape[2:]
    full = [(size[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 + op[i] for i in range(n)]
    # cols[N, g, Og*K, S] = w[g, Cg, Og*K]^T @ x[N, g, Cg, S]
    wt = np.swapaxes(w.reshape(g, cg, og * int(np.prod(k))), 1, 2)
    cols = np.matmul(wt, x.reshape(n_batch, g, cg, int(np.prod(size))))
    if tuple(s) == tuple(k) and not any(p) and not any(op) and all(v == 1 for v in d):
        # The taps tile the output: each output element is 0 + one product sum, placed by
        # one interleaving copy (the + 0 keeps the scatter-add's +0.0 for a -0.0 sum).
        tiles = cols.reshape(n_batch, g, og, *k, *size)
        order = [0, 1, 2, *(v for i in range(n) for v in (3 + n + i, 3 + i))]
        y = np.add(tiles.transpose(order), np.zeros((), x.dtype))
        return y.reshape(n_batch, g * og, *full)
    cols = cols.reshape(n_batch, g, og, int(np.prod(k)), *size)
    y = np.zeros((n_batch, g, og, *full), x.dtype)
    for i, pos in enumerate(taps(k)):
        y[trailing(slice(pi * di, pi * di + (si_ - 1) * st + 1, st)
                   for pi, di, si_, st in zip(pos, d, size, s))] += cols[:, :, :, i]
    crop = tuple(slice(p[2 * i], full[i] - p[2 * i + 1]) for i in range(n))
    return y.reshape(n_batch, g * og, *full)[trailing(crop)]


# -- pooling ----------------------------------------------------------------------------------

def _lowest(dtype: np.dtype) -> float | int:
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return int(np.iinfo(dtype).min)
    if dtype.kind == "b":
        return False
    return -np.inf


def max_pool(x: np.ndarray, kernel_size: Ints, strides: Ints | None, pads: Ints | None,
             dilation: Ints | None, ceil_mode: bool, return_indices: bool,
             ) -> tuple[np.ndarray, np.ndarray | None]:
    """Max pooling with torch's NaN rule; optional flat int64 indices into each (N, C) plane."""
    k, s, d, p, out = geometry(x.shape, kernel_size, strides, pads, dilation, ceil_mode,
                               pool=True)
    if not return_indices and _tiles(x.shape, k, s, d, p, out):
        # Non-overlapping windows: the same maxima in the same order, one reduction.
        return _fold_tiles(np.maximum, x, k, out), None
    xp = pad(x, p, out, k, s, d, _lowest(x.dtype))
    if not return_indices:
        # -inf padding never wins and np.maximum propagates NaN, like torch.
        y = tap(xp, next(taps(k)), s, d, out).copy()
        for pos in itertools.islice(taps(k), 1, None):
            np.maximum(y, tap(xp, pos, s, d, out), out=y)
        return y, None
    first, scan = _argmax_scan(tuple(x.shape[2:]), tuple(k), tuple(s), tuple(d), tuple(p),
                               tuple(out))
    y = np.full((*x.shape[:2], *out), _lowest(x.dtype), x.dtype)
    idx = np.broadcast_to(first, y.shape).copy()
    is_float = x.dtype.kind == "f" or x.dtype.name == "bfloat16"
    for window, flat, valid in scan:
        v = xp[window]
        # torch scans the window in order and takes a value that is greater, or NaN.
        take = v > y
        if is_float:
            take |= np.isnan(v)
        if valid is not None:
            take &= valid
        np.copyto(y, v, where=take)
        np.copyto(idx, flat, where=take)
    return y, idx


@functools.lru_cache(maxsize=128)
def _argmax_scan(size: tuple[int, ...], k: tuple[int, ...], s: tuple[int, ...],
                 d: tuple[int, ...], p: tuple[int, ...], out: tuple[int, ...],
                 ) -> tuple[np.ndarray, tuple[tuple[tuple[Any, ...], np.ndarray,
                                                   np.ndarray | None], ...]]:
    """The shape-only part of max pooling with indices, memoized (read-only arrays).

    Returns the initial flat index of every window and, per kernel position in scan order,
    its padded-input view index, the flat input index it reads and where that is inside the
    input (None: everywhere), all broadcasting over the output grid.
    """
    n = len(k)
    inner = [math.prod(size[i + 1:]) for i in range(n)]

    def grid(values: list[np.ndarray]) -> list[np.ndarray]:
        """Per-axis vectors shaped to broadcast over the output grid."""
        return [v.reshape([-1 if j == i else 1 for j in range(n)]) for i, v in enumerate(values)]

    def frozen(a: np.ndarray) -> np.ndarray:
        a.flags.writeable = False
        return a

    # torch starts each window at its first in-bounds position on the dilated grid, with
    # value -inf; a window that sees no input at all keeps that (out of range) position.
    start = [np.arange(out[i]) * s[i] - p[2 * i] for i in range(n)]
    first = grid([np.where(st < 0, st + (-st + d[i] - 1) // d[i] * d[i], st)
                  for i, st in enumerate(start)])
    scan = []
    for pos in taps(k):
        coords = grid([st + pos[i] * d[i] for i, st in enumerate(start)])
        valid = functools.reduce(np.logical_and,
                                 [(c >= 0) & (c < size[i]) for i, c in enumerate(coords)])
        flat = sum(c * inner[i] for i, c in enumerate(coords))
        window = (..., *(slice(q * di, q * di + (o - 1) * si + 1, si)
                         for q, si, di, o in zip(pos, s, d, out, strict=True)))
        scan.append((window, frozen(np.asarray(flat)),
                     None if valid.all() else frozen(np.asarray(valid))))
    return frozen(np.asarray(sum(f * inner[i] for i, f in enumerate(first)))), tuple(scan)


def _tiles(shape: Sequence[int], k: Ints, s: Ints, d: Ints, p: Ints, out: Ints) -> bool:
    """The windows tile the input: stride = kernel, no padding or dilation, no overhang."""
    return (tuple(s) == tuple(k) and not any(p) and all(v == 1 for v in d)
            and all(o * kv <= size for o, kv, size in zip(out, k, shape[2:], strict=True))
            and math.prod(k) > 1)


def _tile_taps(x: np.ndarray, k: Ints, out: Ints) -> np.ndarray:
    """[K, N, C, *out]: the taps of tiling windows in row-major kernel order (one copy)."""
    n = len(k)
    crop: tuple[Any, ...] = (..., *(slice(0, o * kv) for o, kv in zip(out, k, strict=True)))
    x = x[crop]
    split = x.reshape(*x.shape[:2], *(v for o, kv in zip(out, k, strict=True) for v in (o, kv)))
    order = [3 + 2 * i for i in range(n)] + [0, 1] + [2 + 2 * i for i in range(n)]
    return split.transpose(order).reshape(math.prod(k), *x.shape[:2], *out)


def _fold_tiles(ufunc: np.ufunc, x: np.ndarray, k: Ints, out: Ints) -> np.ndarray:
    """``ufunc`` folded over the taps of tiling windows in kernel order, left to right.

    Both forms below apply the ufunc in exactly that order; ``accumulate`` makes one call
    per output element, the loop one call per tap, so the cheaper one is picked.
    """
    tiles = _tile_taps(x, k, out)
    if tiles.shape[0] > tiles[0].size:
        return ufunc.accumulate(tiles, axis=0)[-1].copy()
    y = tiles[0].copy()
    for t in tiles[1:]:
        ufunc(y, t, out=y)
    return y


def sum_pool(x: np.ndarray, kernel_size: Ints, strides: Ints | None, pads: Ints | None,
             dilation: Ints | None, ceil_mode: bool) -> np.ndarray:
    """Window sums (zero padding) in ``x``'s (accumulation) dtype."""
    k, s, d, p, out = geometry(x.shape, kernel_size, strides, pads, dilation, ceil_mode,
                               pool=True)
    if _tiles(x.shape, k, s, d, p, out):
        # Non-overlapping windows: the same additions in the same tap order, fewer calls.
        return _fold_tiles(np.add, x, k, out)
    xp = pad(x, p, out, k, s, d, 0)
    y = tap(xp, next(taps(k)), s, d, out).copy()
    for pos in itertools.islice(taps(k), 1, None):
        y += tap(xp, pos, s, d, out)
    return y


def avg_divisor(shape: Sequence[int], kernel_size: Ints, strides: Ints | None,
                pads: Ints | None, ceil_mode: bool, count_include_pad: bool) -> np.ndarray:
    """torch's per-window divisor on the output grid (a product of per-axis counts)."""
    k, s, _, p, out = geometry(shape, kernel_size, strides, pads, None, ceil_mode, pool=True)
    n = len(k)
    div = np.ones((), np.int64)
    for i in range(n):
        size = shape[2 + i]
        start = np.arange(out[i]) * s[i] - p[2 * i]
        end = np.minimum(start + k[i], size + p[2 * i + 1])
        # count_include_pad counts the padding but not the ceil_mode overhang past it.
        inside = np.minimum(end, size) - np.maximum(start, 0)
        count = end - start if count_include_pad else inside
        div = div * count.reshape([-1 if j == i else 1 for j in range(n)])
    return div
