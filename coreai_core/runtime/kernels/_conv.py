"""Convolution plans: the geometry and the method of a convolution, chosen once per shape.

A :class:`ConvPlan` holds everything about a convolution that depends only on the shape of one
sample, the weight shape, the dtype and the attributes: the window geometry, the padded buffer,
the strides of the windows view and the method that runs it. The ``coreai.conv`` kernel builds
one per call; a plan step builds it once (the kernel's ``prepare``), so that a small
convolution costs a handful of numpy calls.

The methods, picked by shape:

- **pointwise** (1x1 kernel, no padding): one matmul on the input (subsampled for strides);
- **im2col**: a copy of the windows, then one batched matmul; in chunks of output rows, so
  the copy stays near ``_CHUNK_BYTES`` (or the weight's size, if larger) per sample (a 7x7
  stem at 224x224 would otherwise copy 7 MB, and a chunk stays in cache for its matmul).
  Measured against one matmul per kernel position on shifted views of the flattened input
  (no copy at all), chunked im2col was as fast or faster at every 2-d size tried (up to 1.7x
  at 32x224x224, 9x with 3 input channels);
- **depthwise** (one input channel per group): a multiply-accumulate per kernel position
  over the stride phases of the input, so that every tap reads contiguous runs at any stride:
  channel by channel on flattened phases for large planes, channels last for small ones (a
  run then holds every channel of a block); in blocks of samples and channels of about
  ``_DEPTHWISE_BLOCK_BYTES``. numpy has no fused multiply-add, so each tap is two passes:
  per-tap BLAS (im2col + matrix-vector products, or shifted matmuls) measured slower.

Pointwise and im2col cut their work into blocks fixed by the shapes (pointwise: blocks of
pixels; im2col: its chunks, or blocks of output channels when there is one chunk) and run
them on the run's thread pool when there is one, so the result is bit-identical on any number
of threads. Depthwise runs its blocks of samples and channels on the calling thread (see
``_in_blocks``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from coreai_core.runtime import _threads
from coreai_core.runtime.kernels import _windows
from coreai_core.runtime.kernels._windows import Ints

__all__ = ["ConvPlan", "conv_plan"]

Shape = tuple[int, ...]
# run(x, w, bias) -> [N, O, *out]
ConvRun = Callable[[np.ndarray, np.ndarray, np.ndarray | None], np.ndarray]

# Bytes of the windows copy per sample above which im2col runs in chunks of output rows (or
# the weight's bytes, if larger).
_CHUNK_BYTES = 1 << 20
# Depthwise convolutions run every kernel position over a block of samples and channels of
# about this many output bytes before moving on, so the block stays in cache across its taps.
# Each element sees the same operations in the same order whatever the block.
_DEPTHWISE_BLOCK_BYTES = 1 << 18
# Depthwise planes with output rows (at phase width) at least this long run channel by channel;
# smaller ones run channels last, where a row holds every channel of a block.
_PLANAR_MIN_ROW = 1024
# Blocks of a pointwise convolution's pixels and of an im2col's output channels come in
# multiples of these (whole SIMD panels of the BLAS kernel).
_PIXEL_QUANTUM = 64
_CHANNEL_QUANTUM = 16


def _padded(x: np.ndarray, shape: Shape, inner: tuple[slice, ...] | None) -> np.ndarray:
    """``x`` [N, C, *S] zero-padded to ``shape``, contiguous."""
    if inner is None:
        return np.ascontiguousarray(x)
    buf = np.zeros((*x.shape[:2], *shape), x.dtype)
    buf[(slice(None), slice(None), *inner)] = x
    return buf


@dataclass(frozen=True, eq=False)
class ConvPlan:
    """One convolution's shape-only decisions; ``plan(x, w, bias)`` runs it on arrays in the
    accumulation dtype and returns [N, O, *out] (bias added; possibly a view). Its blocks
    run on the pool of the current run, if any."""

    sample: Shape  # [C, *S] of one sample
    weight_shape: Shape
    method: str  # "pointwise", "im2col" or "depthwise"
    run: ConvRun

    def __call__(self, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        return self.run(x, w, bias)


def conv_plan(sample: Sequence[int], weight: Sequence[int], dtype: np.dtype,
              strides: Ints | None, pads: Ints | None, dilation: Ints | None,
              groups: int) -> ConvPlan:
    """The plan of a convolution of samples shaped ``sample`` ([C, *S]) with a weight shaped
    ``weight`` ([O, C/groups, *k]) in ``dtype`` (the accumulation dtype)."""
    sample, weight = tuple(int(v) for v in sample), tuple(int(v) for v in weight)
    c, size = sample[0], sample[1:]
    o, cg = weight[:2]
    g = groups
    og = o // g
    k, s, d, p, out = _windows.geometry((1, *sample), weight[2:], strides, pads, dilation)
    itemsize = np.dtype(dtype).itemsize
    kk = math.prod(k)
    run: ConvRun
    if cg == 1 and g > 1:
        method, run = "depthwise", _depthwise(c, size, k, s, d, p, out, og, itemsize)
    elif kk == 1 and not any(p):
        method, run = "pointwise", _pointwise(c, size, s, out, g, og)
    else:
        method, run = "im2col", _im2col(c, size, k, s, d, p, out, g, og, itemsize)
    return ConvPlan(sample, weight, method, run)


def _add_bias(y: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """``y`` [N, O, *out] (a fresh array) with ``bias`` added in place."""
    if bias is not None:
        np.add(y, bias.reshape((1, -1, *(1,) * (y.ndim - 2))), out=y)
    return y


# -- pointwise ------------------------------------------------------------------------------------

def _pointwise(c: int, size: Shape, s: Shape, out: Shape, g: int, og: int,
               ) -> ConvRun:
    """1x1 kernel without padding: [g, Og, Cg] @ [N, g, Cg, pixels] (strides subsample), in
    fixed blocks of pixels when large."""
    pick = None if all(v == 1 for v in s) else _windows.trailing(
        slice(0, (o - 1) * st + 1, st) for o, st in zip(out, s, strict=True))
    cg, npix = c // g, math.prod(out)

    def run(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        n = x.shape[0]
        xs = (x if pick is None else x[pick]).reshape(n, g, cg, npix)
        w3 = w.reshape(g, og, cg)
        work = n * g * og * cg * npix
        if work < 2 * _threads.BLOCK_WORK:
            y = np.matmul(w3, xs)
        else:
            y = np.empty((n, g, og, npix), np.result_type(x, w))

            def block(a: int, b: int) -> None:
                np.matmul(w3, xs[..., a:b], out=y[..., a:b])

            _threads.parallel_chunks(_threads.fixed_bounds(npix, work, _PIXEL_QUANTUM), block)
        return _add_bias(y.reshape(n, g * og, *out), bias)

    return run


# -- im2col ---------------------------------------------------------------------------------------

def _im2col(c: int, size: Shape, k: Shape, s: Shape, d: Shape, p: Shape, out: Shape, g: int,
            og: int, itemsize: int,
            ) -> ConvRun:
    """Windows copied as [N, g, Cg*K, pixels] (in chunks of output rows), one matmul each."""
    n = len(k)
    padded, inner = _windows.padding(size, k, s, d, p, out)
    elems = [math.prod(padded[i + 1:]) for i in range(n)]
    plane = math.prod(padded)
    # strides of the [N, C, *k, *out] windows view of a contiguous padded buffer (N's per call)
    tail = (plane * itemsize, *(e * di * itemsize for e, di in zip(elems, d, strict=True)),
            *(e * si * itemsize for e, si in zip(elems, s, strict=True)))
    cg, kk, npix = c // g, math.prod(k), math.prod(out)
    rest = npix // out[0]
    # a chunk's matmul reads its windows once and the whole weight once: chunks at least as
    # large as the weight keep re-reading it cheap (wav2vec2's 128-tap grouped conv: 4x)
    budget = max(_CHUNK_BYTES, g * og * cg * kk * itemsize)
    rows = max(1, budget // max(1, c * kk * rest * itemsize))
    chunks = [(a, min(a + rows, out[0])) for a in range(0, out[0], rows)]
    row_axis = 2 + n  # the first output axis of the windows view

    def run(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        nb = x.shape[0]
        xp = _padded(x, padded, inner)
        view = np.ndarray((nb, c, *k, *out), xp.dtype, xp, 0, (c * plane * itemsize, *tail))
        w2 = w.reshape(g, og, cg * kk)
        work = nb * g * og * npix * cg * kk
        if len(chunks) == 1 and work < 2 * _threads.BLOCK_WORK:
            y = np.matmul(w2, view.reshape(nb, g, cg * kk, npix))
            return _add_bias(y.reshape(nb, g * og, *out), bias)
        y = np.empty((nb, g, og, npix), xp.dtype)
        if len(chunks) == 1:  # one windows copy, then blocks of output channels
            cols = view.reshape(nb, g, cg * kk, npix)

            def channels(a: int, b: int) -> None:
                np.matmul(w2[:, a:b], cols, out=y[:, :, a:b])

            _threads.parallel_chunks(_threads.fixed_bounds(og, work, _CHANNEL_QUANTUM),
                                     channels)
            return _add_bias(y.reshape(nb, g * og, *out), bias)

        def some(i: int, j: int) -> None:
            for a, b in chunks[i:j]:
                part = view[(slice(None),) * row_axis + (slice(a, b),)]
                np.matmul(w2, part.reshape(nb, g, cg * kk, (b - a) * rest),
                          out=y[..., a * rest:b * rest])

        _threads.parallel_chunks(_threads.fixed_bounds(len(chunks), work), some)
        return _add_bias(y.reshape(nb, g * og, *out), bias)

    return run


# -- depthwise ------------------------------------------------------------------------------------

def _depthwise(c: int, size: Shape, k: Shape, s: Shape, d: Shape, p: Shape, out: Shape,
               og: int, itemsize: int,
               ) -> ConvRun:
    """One input channel per group: planar for large planes, else channels last."""
    padded, _ = _windows.padding(size, k, s, d, p, out)
    grid = [-(-v // si) for v, si in zip(padded, s, strict=True)]  # the largest stride phase
    row = out[0] * math.prod(grid[1:])
    if row >= _PLANAR_MIN_ROW:
        return _depthwise_planar(c, size, k, s, d, p, out, og, itemsize)
    return _depthwise_interleaved(c, size, k, s, d, p, out, og, itemsize)


def _blocks(nb: int, cc: int, og: int, channel_bytes: int) -> tuple[int, int]:
    """Samples and channels per block of about ``_DEPTHWISE_BLOCK_BYTES`` (channels in whole
    groups of ``og``; several samples only when one holds all channels)."""
    cb = min(cc, max(og, _DEPTHWISE_BLOCK_BYTES // max(1, channel_bytes) // og * og))
    sb = max(1, _DEPTHWISE_BLOCK_BYTES // max(1, channel_bytes * cc)) if cb == cc else 1
    return sb, cb


def _in_blocks(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, cc: int, og: int,
               out: Shape, sb: int, cb: int,
               block: Callable[[np.ndarray, np.ndarray, np.ndarray | None], np.ndarray],
               ) -> np.ndarray:
    """[N, cc, *out] computed by ``block`` over blocks of ``sb`` samples and ``cb`` channels
    (each input channel repeated for its ``og`` outputs), in order on the calling thread."""
    # On the calling thread only: a block is ~20 numpy calls of ~10 us, shorter than a
    # waiting thread takes to wake for the interpreter lock, so two threads took turns at
    # the lock's 5 ms switch interval instead of overlapping (MobileNetV2: 34 ms on one
    # thread, 37-45 ms with its depthwise blocks on two).
    nb = x.shape[0]
    y = np.empty((nb, cc, *out), x.dtype)
    for a in range(0, nb, sb):
        for c0 in range(0, cc, cb):
            c1 = min(c0 + cb, cc)
            xb = x[a:a + sb, c0 // og:c1 // og]
            if og > 1:
                xb = np.repeat(xb, og, axis=1)
            y[a:a + sb, c0:c1] = block(xb, w[c0:c1], None if bias is None else bias[c0:c1])
    return y


def _depthwise_planar(c: int, size: Shape, k: Shape, s: Shape, d: Shape, p: Shape,
                      out: Shape, og: int, itemsize: int,
                      ) -> ConvRun:
    """Depthwise over channel planes: every stride phase of the padded input (zero-padded to
    the largest phase's shape, flattened, with a zero tail) holds, for kernel position ``q``,
    a contiguous run ``flat[off(q) : off(q) + L]`` covering the output rows at full phase
    width; each tap multiplies those runs by one weight per channel (a scalar per row: numpy's
    fastest loop). The output is cropped from the phase-width grid at the end.
    """
    n = len(k)
    cc = c * og
    padded, _ = _windows.padding(size, k, s, d, p, out)
    grid = tuple(-(-v // si) for v, si in zip(padded, s, strict=True))
    elems = [math.prod(grid[i + 1:]) for i in range(n)]
    length = out[0] * elems[0]
    residues: dict[tuple[int, ...], int] = {}
    taps = []
    for pos in _windows.taps(k):
        r = tuple(q * di % si for q, di, si in zip(pos, d, s, strict=True))
        off = sum(q * di // si * e for q, di, si, e in zip(pos, d, s, elems, strict=True))
        taps.append((residues.setdefault(r, len(residues)), off))
    flat_len = max(math.prod(grid), max(off for _, off in taps) + length)
    phases = [_phase(r, size, padded, s, p) for r in residues]
    crop = (slice(None), slice(None), slice(None),
            *(slice(0, v) for v in out[1:]))
    kk = math.prod(k)

    def block(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        nb, cbb = x.shape[:2]
        bufs = []
        for _, dst, src, _ in phases:
            buf = np.zeros((nb, cbb, flat_len), x.dtype)  # padding and the tail read past
            if dst is not None:
                plane = buf[..., :math.prod(grid)].reshape(nb, cbb, *grid)
                plane[(slice(None), slice(None), *dst)] = x[(slice(None), slice(None), *src)]
            bufs.append(buf)
        wt = w.reshape(cbb, kk)
        y = np.empty((nb, cbb, length), x.dtype)
        scratch = np.empty_like(y)
        for i, (phase, off) in enumerate(taps):
            v = bufs[phase][..., off:off + length]
            if i == 0:
                np.multiply(v, wt[:, i:i + 1], out=y)
            else:
                np.multiply(v, wt[:, i:i + 1], out=scratch)
                np.add(y, scratch, out=y)
        if bias is not None:
            np.add(y, bias[:, None], out=y)
        return y.reshape(nb, cbb, out[0], *grid[1:])[crop]

    def run(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        sb, cb = _blocks(x.shape[0], cc, og, length * itemsize)
        return _in_blocks(x, w, bias, cc, og, out, sb, cb, block)

    return run


def _depthwise_interleaved(c: int, size: Shape, k: Shape, s: Shape, d: Shape, p: Shape,
                           out: Shape, og: int, itemsize: int,
                           ) -> ConvRun:
    """Depthwise with channels last (small planes: long rows of all channels), tap by tap.

    The padded input is split into its stride phases (``xp[..., r::s, ...]`` per residue
    ``r``, copied straight from the input): kernel position ``q`` reads phase ``q*d % s`` at
    offset ``q*d // s`` with stride 1. With the last spatial axis and the channels merged, a
    tap is a plain slice of rows of its phase, multiplied by the tap's weights tiled along
    that merged axis. Blocks of samples and channels keep every temporary near
    ``_DEPTHWISE_BLOCK_BYTES``: in cache, and small enough for the allocator to reuse (fresh
    pages of large temporaries cost more than the arithmetic on a virtual machine).
    """
    n = len(k)
    cc = c * og  # channels after repeating each input channel for its og outputs
    padded, _ = _windows.padding(size, k, s, d, p, out)
    lead = n == 1  # a leading unit axis for 1-d convolutions: rows are then always axis 1
    out_rows = (1, *out) if lead else out
    residues: dict[tuple[int, ...], int] = {}
    taps = []
    for pos in _windows.taps(k):
        r = tuple(q * di % si for q, di, si in zip(pos, d, s, strict=True))
        off = tuple(q * di // si for q, di, si in zip(pos, d, s, strict=True))
        phase = residues.setdefault(r, len(residues))
        if lead:
            off = (0, *off)
        mid = tuple(slice(o, o + v) for o, v in zip(off[1:-1], out_rows[1:-1], strict=True))
        taps.append((phase, off[0], mid, off[-1], out_rows[-1]))
    phases = [_phase(r, size, padded, s, p) for r in residues]
    kk = math.prod(k)
    channel_last = (0, *range(2, n + 2), 1)

    def block(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        """[B, cb, *S] (og-repeated channels) -> [B, cb, *out]."""
        nb, cbb = x.shape[:2]
        bufs = []
        for shape, dst, src, zero in phases:
            buf = (np.zeros if zero else np.empty)((nb, *shape, cbb), x.dtype)
            if dst is not None:
                buf[(slice(None), *dst)] = x[(slice(None), slice(None), *src)].transpose(
                    channel_last)
            # merge the last spatial axis with the channels: [B, (1,) *M[:-1], M[-1] * cb]
            bufs.append(buf.reshape(nb, *((1,) if lead else ()), *shape[:-1], -1))
        merged = out_rows[-1] * cbb
        # per tap, its weights tiled along the merged axis: [K, out[-1] * cb]
        wt = np.tile(w.reshape(cbb, kk).T[:, None, :], (1, out_rows[-1], 1)).reshape(kk, -1)
        y = np.empty((nb, *out_rows[:-1], merged), x.dtype)
        scratch = np.empty_like(y)
        for i, (phase, row0, mid, col0, cols) in enumerate(taps):
            v = bufs[phase][(slice(None), slice(row0, row0 + out_rows[0]), *mid,
                             slice(col0 * cbb, (col0 + cols) * cbb))]
            if i == 0:
                np.multiply(v, wt[i], out=y)
            else:
                np.multiply(v, wt[i], out=scratch)
                np.add(y, scratch, out=y)
        if bias is not None:
            np.add(y, np.tile(bias, out_rows[-1]), out=y)
        return np.moveaxis(y.reshape(nb, *out, cbb), -1, 1)

    def run(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        sb, cb = _blocks(x.shape[0], cc, og, math.prod(out) * itemsize)
        return _in_blocks(x, w, bias, cc, og, out, sb, cb, block)

    return run


def _phase(r: Shape, size: Shape, padded: Shape, s: Shape, p: Shape,
           ) -> tuple[Shape, tuple[slice, ...] | None, tuple[slice, ...], bool]:
    """Stride phase ``r`` of the zero-padded input ``xp[..., r0::s0, r1::s1, ...]``: its
    shape, where the input lands in it (None: nowhere), which input elements land there, and
    whether any of it is padding (zeros)."""
    n = len(size)
    shape = tuple(-(-(padded[i] - r[i]) // s[i]) for i in range(n))
    lo = [max(0, -(-(p[2 * i] - r[i]) // s[i])) for i in range(n)]
    hi = [min(shape[i], -(-(p[2 * i] + size[i] - r[i]) // s[i])) for i in range(n)]
    if any(h <= low for low, h in zip(lo, hi, strict=True)):
        return shape, None, (), True
    start = [r[i] + s[i] * lo[i] - p[2 * i] for i in range(n)]
    dst = tuple(slice(lo[i], hi[i]) for i in range(n))
    src = tuple(slice(start[i], start[i] + (hi[i] - lo[i] - 1) * s[i] + 1, s[i])
                for i in range(n))
    zero = any(lo[i] > 0 or hi[i] < shape[i] for i in range(n))
    return shape, dst, src, zero


def prepare_conv(types: Sequence[Any], *, strides: Ints | None = None,
                 pads: Ints | None = None, dilation: Ints | None = None,
                 groups: int = 1) -> ConvPlan | None:
    """The plan of a ``coreai.conv`` op from its operand types, or None when the sample or
    weight shape is dynamic (then the kernel plans each call)."""
    x_type, w_type = types[0], types[1]
    sample, weight = tuple(x_type.shape[1:]), tuple(w_type.shape)
    if not all(isinstance(v, int) for v in (*sample, *weight)):
        return None
    dtype = _windows.acc_dtype(x_type.element_type.numpy)
    return conv_plan(sample, weight, dtype, strides, pads, dilation, groups)

