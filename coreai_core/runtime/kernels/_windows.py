"""Sliding-window machinery shared by the convolution and pooling kernels.

(The convolution itself is planned in :mod:`._conv`; transposed convolution and pooling
are here.)

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
from coreai_core._shapes import lo_hi_pads, per_axis, window_out

Ints = Sequence[int]

_F32 = np.dtype(np.float32)
HALF = frozenset({np.dtype(np.float16), np.dtype(DType.bfloat16.numpy)})


def trailing(slices: Iterable[slice]) -> tuple[Any, ...]:
    """An index applying ``slices`` to the last axes (``x[..., s0, s1]``)."""
    return (..., *slices)


def acc_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype arithmetic runs in: float32 for float16/bfloat16 (like torch's CPU opmath)."""
    dtype = np.dtype(dtype)
    return _F32 if dtype in HALF else dtype


def geometry(shape: Sequence[int], kernel: Ints, strides: Ints | None, pads: Ints | None,
             dilation: Ints | None, ceil_mode: bool = False, pool: bool = False,
             ) -> tuple[tuple[int, ...], ...]:
    """Normalize window attributes like the type rule; returns (k, s, d, pads, out)."""
    n = len(shape) - 2
    k = tuple(kernel)
    if pool:
        k = per_axis(kernel, n, 1, "kernel_size")
        s = per_axis(strides, n, 1, "strides") if strides else k
    else:
        s = per_axis(strides, n, 1, "strides")
    d, p = per_axis(dilation, n, 1, "dilation"), lo_hi_pads(pads, n)
    out = tuple(int(window_out(shape[2 + i], k[i], s[i], p[2 * i], p[2 * i + 1], d[i],
                               ceil_mode)) for i in range(n))
    return k, s, d, p, out


def padding(size: Sequence[int], k: Ints, s: Ints, d: Ints, p: Ints, out: Ints,
            ) -> tuple[tuple[int, ...], tuple[slice, ...] | None]:
    """The padded spatial shape, long enough on the high side for every window of ``out``,
    and where the input goes in it (None: the input needs no padding)."""
    n = len(size)
    padded = tuple(max(size[i] + p[2 * i] + p[2 * i + 1],
                       (out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1) for i in range(n))
    if all(p[2 * i] == 0 for i in range(n)) and padded == tuple(size):
        return padded, None
    return padded, tuple(slice(p[2 * i], p[2 * i] + size[i]) for i in range(n))


def pad(x: np.ndarray, pads: Ints, out: Ints, k: Ints, s: Ints, d: Ints, value: float,
        ) -> np.ndarray:
    """``x`` padded with ``value`` (see :func:`padding`); ``x`` itself if it needs none."""
    size, inner = padding(x.shape[2:], k, s, d, pads, out)
    if inner is None:
        return x
    buf = np.full((*x.shape[:2], *size), value, x.dtype)
    buf[trailing(inner)] = x
    return buf


def taps(k: Ints) -> Iterator[tuple[int, ...]]:
    """Kernel positions in row-major order (the order torch scans a window)."""
    return itertools.product(*(range(v) for v in k))


def tap(xp: np.ndarray, pos: Ints, s: Ints, d: Ints, out: Ints) -> np.ndarray:
    """The strided view of padded ``xp`` seen by kernel position ``pos``: [N, C, *out]."""
    return xp[trailing(slice(p * di, p * di + (o - 1) * si + 1, si)
                       for p, si, di, o in zip(pos, s, d, out))]


# -- convolution ---------------------------------------------------------------------------

def conv_transpose(x: np.ndarray, w: np.ndarray, strides: Ints | None, pads: Ints | None,
                   dilation: Ints | None, groups: int, output_padding: Ints | None,
                   ) -> np.ndarray:
    """Transposed convolution: one batched matmul, then a col2im scatter-add per tap."""
    n = x.ndim - 2
    n_batch, c = x.shape[:2]
    g, cg, og = groups, c // groups, w.shape[1]
    k = w.shape[2:]
    s, d = per_axis(strides, n, 1, "strides"), per_axis(dilation, n, 1, "dilation")
    p = lo_hi_pads(pads, n)
    op = per_axis(output_padding, n, 0, "output_padding")
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
