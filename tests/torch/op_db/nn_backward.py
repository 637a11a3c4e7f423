"""Op-database entries (nn family): backward (training) ops of pooling, normalization and
convolution.

Each entry calls the aten backward op directly. Saved forward results the op consumes
(max-pool indices, normalization mean/rstd) are computed by torch in the strategy and passed
as inputs, so the exported graph holds the backward op alone. Outputs switched off by
``output_mask`` are left out of the compared outputs.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from tests.torch.op_db._entry import FLOAT_DTYPES, FLOATS, EntrySet, Sample, sizes, tensors

aten = torch.ops.aten
EPS = 1e-5

ENTRIES = EntrySet()


add = ENTRIES.add


def masked(op: Any) -> Any:
    """Calls ``op`` and keeps the outputs its ``output_mask`` (the last argument) selects.

    Exported graphs give None for the others; eager torch sometimes computes them anyway
    (CPU convolution_backward returns grad_weight for the mask [False, False, True]).
    """
    def fn(*args: Any) -> list[torch.Tensor]:
        return [t for t, keep in zip(op(*args), args[-1], strict=True) if keep]

    return fn


def batch_dims(draw: Any, empty: bool = True) -> tuple[int, ...]:
    """Leading (N, C) or unbatched (C,); N is sometimes 0 (an empty batch)."""
    c = draw(st.integers(1, 3))
    if draw(st.integers(0, 3)) == 0:
        return (c,)
    n = 0 if empty and draw(st.integers(0, 7)) == 0 else draw(st.integers(1, 2))
    return (n, c)


def mask(draw: Any, allowed: tuple[bool, bool, bool]) -> list[bool]:
    """A non-empty output_mask over the outputs torch can produce here."""
    chosen = [a and draw(st.booleans()) for a in allowed]
    if not any(chosen):
        chosen[0] = True
    return chosen


# -- pooling --------------------------------------------------------------------------------------

def window(draw: Any, dilation: bool = False) -> tuple[list[int], list[int], list[int], list[int]]:
    """kernel, stride, padding (at most half the kernel) and dilation for a 2-d window."""
    k = [draw(st.integers(1, 3)) for _ in range(2)]
    s = [draw(st.integers(1, 3)) for _ in range(2)]
    p = [draw(st.integers(0, kk // 2)) for kk in k]
    d = [draw(st.integers(1, 2)) if dilation else 1 for _ in range(2)]
    return k, s, p, d


def spatial(draw: Any, k: list[int], p: list[int], d: list[int]) -> list[int]:
    """Input sizes at least as large as the (padded, dilated) window; at most one 47."""
    dims = [draw(sizes(max(1, dd * (kk - 1) + 1 - 2 * pp), 7, allow_47=False))
            for kk, pp, dd in zip(k, p, d, strict=True)]
    if draw(st.integers(0, 5)) == 0:
        dims[draw(st.integers(0, 1))] = 47
    return dims


def _padding_only_window(size: int, k: int, s: int, p: int, d: int) -> bool:
    """Whether some max-pool window (ceil_mode included) sees only padding on this axis."""
    for ceil_mode in (False, True):
        span = size + 2 * p - d * (k - 1) - 1
        out = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (out - 1) * s >= size + p:
            out -= 1
        for o in range(out):
            if not any(0 <= o * s - p + j * d < size for j in range(k)):
                return True
    return False


@st.composite
def max_pool_backward_samples(draw: Any) -> Sample:
    dtype = draw(FLOATS)
    k, s, p, d = window(draw, dilation=True)
    ceil_mode = draw(st.booleans())
    dims = spatial(draw, k, p, d)
    if any(_padding_only_window(*a) for a in zip(dims, k, s, p, d, strict=True)):
        # torch saves an out-of-range index for such a window and its eager backward then
        # writes out of bounds (heap corruption): keep every window on the input
        p = [0, 0]
        dims = [max(v, dd * (kk - 1) + 1) for v, dd, kk in zip(dims, d, k, strict=True)]
    x = draw(tensors((*batch_dims(draw), *dims), dtype))
    _, indices = aten.max_pool2d_with_indices(x, k, s, p, d, ceil_mode)
    grad = draw(tensors(indices.shape, dtype))
    return Sample((grad, x, k, s, p, d, ceil_mode, indices))


add("aten::max_pool2d_with_indices_backward.default",
    lambda *a: aten.max_pool2d_with_indices_backward(*a), max_pool_backward_samples())


@st.composite
def avg_pool_backward_samples(draw: Any) -> Sample:
    dtype = draw(st.sampled_from((*FLOAT_DTYPES, torch.int64)))
    k, s, p, _ = window(draw)
    ceil_mode, include_pad = draw(st.booleans()), draw(st.booleans())
    override = draw(st.sampled_from((None, None, 1, 2, 5)))
    x = draw(tensors((*batch_dims(draw), *spatial(draw, k, p, [1, 1])), dtype))
    stride = [] if s == k and draw(st.booleans()) else s  # [] means the kernel size
    out = aten.avg_pool2d(x.double(), k, stride, p, ceil_mode, include_pad, override)
    # integer gradients spread over [-20, 20] so that torch's truncating division shows
    grad = draw(tensors(out.shape, dtype, low=-20, high=20) if dtype == torch.int64
                else tensors(out.shape, dtype))
    return Sample((grad, x, k, stride, p, ceil_mode, include_pad, override))


add("aten::avg_pool2d_backward.default", lambda *a: aten.avg_pool2d_backward(*a),
    avg_pool_backward_samples())


@st.composite
def adaptive_avg_pool_backward_samples(draw: Any) -> Sample:
    """Output sizes below, equal to and above the input size (windows then overlap)."""
    dtype = draw(FLOATS)
    x = draw(tensors((*batch_dims(draw), *spatial(draw, [1, 1], [0, 0], [1, 1])), dtype))
    out = [draw(st.integers(1, 7)) for _ in range(2)]
    grad = draw(tensors((*x.shape[:-2], *out), dtype))
    return Sample((grad, x))


add("aten::_adaptive_avg_pool2d_backward.default",
    lambda g, x: aten._adaptive_avg_pool2d_backward(g, x),
    adaptive_avg_pool_backward_samples())


# -- normalization --------------------------------------------------------------------------------

@st.composite
def layer_norm_backward_samples(draw: Any) -> Sample:
    """Rank 1-4 inputs normalized over their last 1..rank dims, with torch's saved mean and
    rstd; grad_weight needs a weight and grad_bias a bias."""
    dtype = draw(FLOATS)
    rank = draw(st.integers(1, 4))
    shape = [draw(sizes(1, 5, allow_47=False)) for _ in range(rank)]
    if draw(st.integers(0, 4)) == 0:
        shape[-1] = 47
    k = draw(st.integers(1, rank))
    if k < rank and draw(st.integers(0, 7)) == 0:
        shape[0] = 0  # empty batch: no rows to normalize
    norm = shape[rank - k:]
    weight = draw(tensors(norm, dtype)) if draw(st.booleans()) else None
    bias = draw(tensors(norm, dtype)) if draw(st.booleans()) else None
    x = draw(tensors(shape, dtype))
    grad = draw(tensors(shape, dtype))
    _, mean, rstd = aten.native_layer_norm(x, norm, weight, bias, EPS)
    output_mask = mask(draw, (True, weight is not None, bias is not None))
    return Sample((grad, x, norm, mean, rstd, weight, bias, output_mask))


add("aten::native_layer_norm_backward.default",
    masked(aten.native_layer_norm_backward), layer_norm_backward_samples())


@st.composite
def group_norm_backward_samples(draw: Any) -> Sample:
    """[N, C, *spatial] with 0-2 spatial dims; grad_weight and grad_bias need a weight."""
    dtype = draw(FLOATS)
    groups, per_group = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    n = 0 if draw(st.integers(0, 7)) == 0 else draw(st.integers(1, 3))
    dims = [draw(sizes(1, 5, allow_47=False)) for _ in range(draw(st.integers(0, 2)))]
    if dims and draw(st.integers(0, 4)) == 0:
        dims[-1] = 47
    shape = (n, groups * per_group, *dims)
    hw = 1
    for v in dims:
        hw *= v
    weight = draw(tensors((shape[1],), dtype)) if draw(st.booleans()) else None
    x = draw(tensors(shape, dtype))
    grad = draw(tensors(shape, dtype))
    _, mean, rstd = aten.native_group_norm(x, weight, None, n, shape[1], hw, groups, EPS)
    has_weight = weight is not None
    output_mask = mask(draw, (True, has_weight, has_weight))
    return Sample((grad, x, mean, rstd, weight, n, shape[1], hw, groups, output_mask))


add("aten::native_group_norm_backward.default",
    masked(aten.native_group_norm_backward), group_norm_backward_samples())


# -- convolution ----------------------------------------------------------------------------------

@st.composite
def convolution_backward_samples(draw: Any, transposed: bool) -> Sample:
    """1-3 spatial dims, groups, stride, padding, dilation (and output_padding when
    transposed). Values in [-1, 1]: grad_weight sums up to a few hundred products."""
    dtype = draw(FLOATS)
    n = draw(st.sampled_from((1, 2, 2, 3)))
    groups, cg, og = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    k = [draw(st.integers(1, 3)) for _ in range(n)]
    s = [draw(st.integers(1, 3)) for _ in range(n)]
    d = [draw(st.integers(1, 2)) for _ in range(n)]
    max_size = 6 if n < 3 else 4
    dims = [draw(st.integers(1, max_size)) for _ in range(n)]
    if n == 1 and draw(st.integers(0, 4)) == 0:
        dims[0] = 47
    if transposed:
        p = [draw(st.integers(0, min(2, ((v - 1) * ss + dd * (kk - 1)) // 2)))
             for v, ss, dd, kk in zip(dims, s, d, k, strict=True)]
        out_pad = [draw(st.integers(0, max(ss, dd) - 1)) for ss, dd in zip(s, d, strict=True)]
        w_shape = (groups * cg, og, *k)
    else:
        p = [draw(st.integers(0, 2)) for _ in range(n)]
        dims = [max(v, dd * (kk - 1) + 1 - 2 * pp)
                for v, dd, kk, pp in zip(dims, d, k, p, strict=True)]
        out_pad = [0] * n
        w_shape = (groups * og, cg, *k)
    batch = draw(st.integers(1, 2))
    x = draw(tensors((batch, groups * cg, *dims), dtype, low=-1, high=1))
    w = draw(tensors(w_shape, dtype, low=-1, high=1))
    y = aten.convolution(x, w, None, s, p, d, transposed, out_pad, groups)
    grad = draw(tensors(y.shape, dtype, low=-1, high=1))
    output_mask = mask(draw, (True, True, True))
    # torch's meta function needs bias_sizes to produce grad_bias
    bias_sizes = [y.shape[1]] if output_mask[2] or draw(st.booleans()) else None
    return Sample((grad, x, w, bias_sizes, s, p, d, transposed, out_pad, groups, output_mask))


add("aten::convolution_backward.default",
    masked(aten.convolution_backward), convolution_backward_samples(False))
add("aten::convolution_backward.default",
    masked(aten.convolution_backward), convolution_backward_samples(True),
    name="aten::convolution_backward.default[transposed]")
