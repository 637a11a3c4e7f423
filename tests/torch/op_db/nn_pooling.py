"""Op-database entries (nn family): average, max and adaptive pooling."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from tests.torch.op_db._entry import FLOAT_DTYPES, EntrySet, Sample, tensors

ENTRIES = EntrySet()
F32_F64 = (torch.float32, torch.float64)


add = ENTRIES.add


def _input(draw: Any, n: int, dtype: torch.dtype, min_sizes: list[int],
           special: bool = False) -> torch.Tensor:
    """[N, C, *spatial] (sometimes unbatched); one spatial axis may be 47 in 1-d/2-d."""
    top = (9, 7, 5)[n - 1]
    spatial = [draw(st.integers(m, max(m, top))) for m in min_sizes]
    if n < 3 and draw(st.integers(0, 5)) == 0:
        spatial[-1] = 47
    lead = (draw(st.integers(1, 3)),) if draw(st.integers(0, 4)) == 0 else (
        draw(st.integers(1, 2)), draw(st.integers(1, 3)))
    low, high = (0, 9) if not dtype.is_floating_point else (-4.0, 4.0)
    return draw(tensors((*lead, *spatial), dtype, low=low, high=high,
                        special=special and dtype.is_floating_point))


# -- average pooling -----------------------------------------------------------------------------

def avg_pool_samples(n: int) -> st.SearchStrategy[Sample]:
    dtypes = (*(F32_F64 if n == 3 else FLOAT_DTYPES), *(() if n == 3 else (torch.int64,)))

    @st.composite
    def build(draw: Any) -> Sample:
        dtype = draw(st.sampled_from(dtypes))
        k = [draw(st.integers(1, 3)) for _ in range(n)]
        stride = None if draw(st.booleans()) else [draw(st.integers(1, 3)) for _ in range(n)]
        pad = [draw(st.integers(0, ki // 2)) for ki in k]
        ceil_mode = draw(st.booleans())
        if ceil_mode and n < 3:
            # the window may be longer than the padded input (HF EfficientNet's final pool):
            # torch keeps one clipped window per axis while the output length is >= 1
            s = stride or k
            mins = [max(1, k[i] - 2 * pad[i] - s[i] + 1) for i in range(n)]
        else:
            mins = k  # torch's avg_pool3d wants input >= kernel
        x = _input(draw, n, dtype, mins)
        kwargs = {"kernel_size": k, "stride": stride, "padding": pad,
                  "ceil_mode": ceil_mode, "count_include_pad": draw(st.booleans())}
        if n > 1:
            kwargs["divisor_override"] = draw(st.sampled_from((None, None, 1, 3)))
        return Sample((x,), kwargs)

    return build()


def oversized_window_samples(n: int) -> st.SearchStrategy[Sample]:
    """ceil_mode windows longer than the padded input on every axis (HF EfficientNet's final
    ``AvgPool2d(kernel_size=1280, ceil_mode=True)`` on a 2x2 map): one clipped window each."""
    @st.composite
    def build(draw: Any) -> Sample:
        dtype = draw(st.sampled_from(F32_F64))
        k = [draw(st.integers(2, 6)) for _ in range(n)]
        pad = [draw(st.integers(0, (ki - 2) // 2)) for ki in k]
        # a stride >= the padded-input excess keeps the first window starting inside
        stride = None if draw(st.booleans()) else [
            draw(st.integers(ki - 2 * pi, ki + 1)) for ki, pi in zip(k, pad, strict=True)]
        spatial = [draw(st.integers(1, ki - 2 * pi - 1)) for ki, pi in zip(k, pad, strict=True)]
        x = draw(tensors((draw(st.integers(1, 2)), 3, *spatial), dtype))
        kwargs = {"kernel_size": k, "stride": stride, "padding": pad, "ceil_mode": True,
                  "count_include_pad": draw(st.booleans())}
        if n > 1:
            kwargs["divisor_override"] = draw(st.sampled_from((None, None, 2)))
        return Sample((x,), kwargs)

    return build()


for _n, _fn in ((1, F.avg_pool1d), (2, F.avg_pool2d), (3, F.avg_pool3d)):
    add(f"aten::avg_pool{_n}d.default", _fn, avg_pool_samples(_n))
for _n, _fn in ((1, F.avg_pool1d), (2, F.avg_pool2d)):
    add(f"aten::avg_pool{_n}d.default", _fn, oversized_window_samples(_n),
        name=f"avg_pool{_n}d[window>input]")


# -- max pooling ---------------------------------------------------------------------------------

MAX_DTYPES = (*FLOAT_DTYPES, torch.int64, torch.int32, torch.uint8, torch.int8)


def max_pool_samples(n: int, return_indices: bool) -> st.SearchStrategy[Sample]:
    # torch's max_pool1d without indices has float kernels only
    dtypes = FLOAT_DTYPES if n == 1 and not return_indices else MAX_DTYPES

    @st.composite
    def build(draw: Any) -> Sample:
        dtype = draw(st.sampled_from(dtypes))
        k = [draw(st.integers(1, 3)) for _ in range(n)]
        d = [draw(st.integers(1, 2)) for _ in range(n)]
        stride = None if draw(st.booleans()) else [draw(st.integers(1, 3)) for _ in range(n)]
        pad = [draw(st.integers(0, ki // 2)) for ki in k]
        x = _input(draw, n, dtype, [max(1, d[i] * (k[i] - 1) + 1 - 2 * pad[i])
                                    for i in range(n)], special=draw(st.booleans()))
        return Sample((x,), {"kernel_size": k, "stride": stride, "padding": pad, "dilation": d,
                             "ceil_mode": draw(st.booleans()),
                             "return_indices": return_indices})

    return build()


for _n, _fn in ((1, F.max_pool1d), (2, F.max_pool2d), (3, F.max_pool3d)):
    add(f"aten::max_pool{_n}d.default", _fn, max_pool_samples(_n, False))
    add(f"aten::max_pool{_n}d_with_indices.default", _fn, max_pool_samples(_n, True))


# -- adaptive pooling ----------------------------------------------------------------------------

def adaptive_samples(n: int, special: bool, dtypes: tuple) -> st.SearchStrategy[Sample]:
    @st.composite
    def build(draw: Any) -> Sample:
        dtype = draw(st.sampled_from(dtypes))
        x = _input(draw, n, dtype, [1] * n, special=special and draw(st.booleans()))
        sizes = x.shape[-n:]
        # divisible (a plain pool), smaller, larger than the input, or 1
        out = [draw(st.sampled_from((1, s, max(1, s // 2), s + 2, draw(st.integers(1, 7)))))
               for s in sizes]
        return Sample((x, out))

    return build()


add("aten::_adaptive_avg_pool2d.default", F.adaptive_avg_pool2d,
    adaptive_samples(2, False, FLOAT_DTYPES))
add("aten::_adaptive_avg_pool3d.default", F.adaptive_avg_pool3d,
    adaptive_samples(3, False, FLOAT_DTYPES))
add("aten::adaptive_max_pool2d.default",
    lambda x, out: F.adaptive_max_pool2d(x, out, return_indices=True),
    adaptive_samples(2, True, FLOAT_DTYPES))
add("aten::adaptive_max_pool3d.default",
    lambda x, out: F.adaptive_max_pool3d(x, out, return_indices=True),
    adaptive_samples(3, True, FLOAT_DTYPES))
