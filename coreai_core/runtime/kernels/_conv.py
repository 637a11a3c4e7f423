"""Convolution plans: the geometry and the method of a convolution, chosen once per shape.

A :class:`ConvPlan` holds everything about a convolution that depends only on the shape of one
sample, the weight shape, the dtype and the attributes: the window geometry, the padded buffer,
the strides of the windows view and the method that runs it. The ``coreai.conv`` kernel builds
one per call; a plan step builds it once (the kernel's ``prepare``), so that a small
convolution costs a handful of numpy calls.

The methods, picked by shape:

- **pointwise** (1x1 kernel, no padding): one matmul on the input (subsampled for strides);
- **im2col**: a copy of the windows, then one batched matmul; in chunks of output rows, so
  the copy stays near ``_CHUNK_BYTES`` per sample (a 7x7 stem at 224x224 would otherwise copy
  7 MB, and a chunk stays in cache for its matmul). Measured against one matmul per kernel
  position on shifted views of the flattened input (no copy at all), chunked im2col was as
  fast or faster at every size tried (up to 1.7x at 32x224x224, 9x with 3 input channels);
- **depthwise** (one input channel per group): channels-last multiply-accumulate per kernel
  position over the stride phases of the input, so every tap reads contiguous rows of all
  channels (long inner loops at any spatial size and stride).

Each sample's result depends only on its own shape: chunking and blocking are fixed per
sample, so a batch split over threads gives bit-identical results.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from coreai_core.runtime.kernels import _windows
from coreai_core.runtime.kernels._windows import Ints

__all__ = ["ConvPlan", "conv_plan"]

Shape = tuple[int, ...]

# Bytes of the windows copy per sample above which im2col runs in chunks of output rows.
_CHUNK_BYTES = 1 << 20
# Depthwise convolutions run every kernel position over a block of output rows of about this
# many bytes before moving on, so the block stays in cache across its taps. Each element sees
# the same operations in the same order whatever the block.
_DEPTHWISE_BLOCK_BYTES = 1 << 18


def _padded(x: np.ndarray, shape: Shape, inner: tuple[slice, ...] | None,
            channels_last: bool = False) -> np.ndarray:
    """``x`` [N, C, *S] zero-padded to ``shape``, contiguous ([N, *shape, C] if
    ``channels_last``)."""
    if channels_last:
        src = np.moveaxis(x, 1, -1)
        if inner is None:
            return np.ascontiguousarray(src)
        buf = np.zeros((x.shape[0], *shape, x.shape[1]), x.dtype)
        buf[(slice(None), *inner)] = src
        return buf
    if inner is None:
        return np.ascontiguousarray(x)
    buf = np.zeros((*x.shape[:2], *shape), x.dtype)
    buf[(slice(None), slice(None), *inner)] = x
    return buf


@dataclass(frozen=True, eq=False)
class ConvPlan:
    """One convolution's shape-only decisions; ``plan(x, w, bias)`` runs it on arrays in the
    accumulation dtype and returns [N, O, *out] (bias added; possibly a transposed view)."""

    sample: Shape  # [C, *S] of one sample
    weight_shape: Shape
    groups: int
    k: Shape
    s: Shape
    d: Shape
    p: Shape
    out: Shape
    run: Callable[[np.ndarray, np.ndarray, np.ndarray | None], np.ndarray]
    method: str

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
    run: Callable[[np.ndarray, np.ndarray, np.ndarray | None], np.ndarray]
    if cg == 1 and g > 1:
        method, run = "depthwise", _depthwise(c, size, k, s, d, p, out, og, itemsize)
    elif kk == 1 and not any(p):
        method, run = "pointwise", _pointwise(c, size, s, out, g, og)
    else:
        method, run = "im2col", _im2col(c, size, k, s, d, p, out, g, og, itemsize)
    return ConvPlan(sample, weight, g, k, s, d, p, out, run, method)


def _add_bias(y: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """``y`` [N, O, *out] (a fresh array) with ``bias`` added in place."""
    if bias is not None:
        np.add(y, bias.reshape((1, -1, *(1,) * (y.ndim - 2))), out=y)
    return y


# -- pointwise ------------------------------------------------------------------------------------

def _pointwise(c: int, size: Shape, s: Shape, out: Shape, g: int, og: int,
               ) -> Callable[[np.ndarray, np.ndarray, np.ndarray | None], np.ndarray]:
    """1x1 kernel without padding: [g, Og, Cg] @ [N, g, Cg, pixels] (strides subsample)."""
    pick = None if all(v == 1 for v in s) else _windows.trailing(
        slice(0, (o - 1) * st + 1, st) for o, st in zip(out, s, strict=True))
    cg, npix = c // g, math.prod(out)

    def run(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        n = x.shape[0]
        xs = x if pick is None else x[pick]
        y = np.matmul(w.reshape(g, og, cg), xs.reshape(n, g, cg, npix))
        return _add_bias(y.reshape(n, g * og, *out), bias)

    return run


# -- im2col ---------------------------------------------------------------------------------------

def _im2col(c: int, size: Shape, k: Shape, s: Shape, d: Shape, p: Shape, out: Shape, g: int,
            og: int, itemsize: int,
            ) -> Callable[[np.ndarray, np.ndarray, np.ndarray | None], np.ndarray]:
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
    rows = max(1, _CHUNK_BYTES // max(1, c * kk * rest * itemsize))
    chunks = [(a, min(a + rows, out[0])) for a in range(0, out[0], rows)]
    row_axis = 2 + n  # the first output axis of the windows view

    def run(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        nb = x.shape[0]
        xp = _padded(x, padded, inner)
        view = np.ndarray((nb, c, *k, *out), xp.dtype, xp, 0, (c * plane * itemsize, *tail))
        w2 = w.reshape(g, og, cg * kk)
        if len(chunks) == 1:
            y = np.matmul(w2, view.reshape(nb, g, cg * kk, npix))
        else:
            y = np.empty((nb, g, og, npix), xp.dtype)
            for a, b in chunks:
                part = view[(slice(None),) * row_axis + (slice(a, b),)]
                np.matmul(w2, part.reshape(nb, g, cg * kk, (b - a) * rest),
                          out=y[..., a * rest:b * rest])
        return _add_bias(y.reshape(nb, g * og, *out), bias)

    return run


# -- depthwise ------------------------------------------------------------------------------------

def _depthwise(c: int, size: Shape, k: Shape, s: Shape, d: Shape, p: Shape, out: Shape,
               og: int, itemsize: int,
               ) -> Callable[[np.ndarray, np.ndarray, np.ndarray | None], np.ndarray]:
    """One input channel per group (``og`` outputs each), channels last, tap by tap.

    The padded input is split into its stride phases (``xp[..., r::s, ...]`` per residue
    ``r``): kernel position ``q`` reads phase ``q*d % s`` at offset ``q*d // s`` with stride 1.
    With the last spatial axis and the channels merged, a tap is a plain slice of rows of its
    phase, multiplied by the tap's weights tiled along that merged axis.
    """
    n = len(k)
    cc = c * og  # channels after repeating each input channel for its og outputs
    padded, inner = _windows.padding(size, k, s, d, p, out)
    # a leading unit axis for 1-d convolutions: rows are then always axis 1
    lead = n == 1
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
        taps.append((phase, off[0], mid,
                     slice(off[-1] * cc, (off[-1] + out_rows[-1]) * cc)))
    phase_index = [(slice(None), *(slice(ri, None, si) for ri, si in zip(r, s, strict=True)))
                   for r in residues]
    unit_stride = all(v == 1 for v in s)
    merged = out_rows[-1] * cc
    row_bytes = math.prod(out_rows[1:]) * cc * itemsize
    rows = max(1, _DEPTHWISE_BLOCK_BYTES // max(1, row_bytes))
    kk = math.prod(k)

    def run(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        nb = x.shape[0]
        if og > 1:
            x = np.repeat(x, og, axis=1)
        xl = _padded(x, padded, inner, channels_last=True)  # [N, *P, C]
        phases = [xl if unit_stride else np.ascontiguousarray(xl[idx]) for idx in phase_index]
        # merge the last spatial axis with the channels: [N, (1,) *P[:-1], P[-1] * C]
        phases = [ph.reshape(nb, *((1,) if lead else ()), *ph.shape[1:-2],
                              ph.shape[-2] * cc) for ph in phases]
        # per tap, its weights tiled along the merged axis: [K, out[-1] * C]
        wt = np.tile(w.reshape(cc, kk).T[:, None, :], (1, out_rows[-1], 1)).reshape(kk, merged)
        y = np.empty((nb, *out_rows[:-1], merged), x.dtype)
        scratch = np.empty((nb, min(rows, out_rows[0]), *out_rows[1:-1], merged), x.dtype)
        for a in range(0, out_rows[0], rows):
            b = min(a + rows, out_rows[0])
            yb, sb = y[:, a:b], scratch[:, :b - a]
            for i, (phase, row0, mid, last) in enumerate(taps):
                v = phases[phase][(slice(None), slice(row0 + a, row0 + b), *mid, last)]
                if i == 0:
                    np.multiply(v, wt[i], out=yb)
                else:
                    np.multiply(v, wt[i], out=sb)
                    np.add(yb, sb, out=yb)
        if bias is not None:
            np.add(y, np.tile(bias, out_rows[-1]), out=y)
        return np.moveaxis(y.reshape(nb, *out, cc), -1, 1)

    return run


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

