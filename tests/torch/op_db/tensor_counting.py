"""Op-database entries (tensor family): searchsorted/bucketize, histc, bincount, the unique family,
mode and segment_reduce."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from tests.torch.harness import to_numpy
from tests.torch.op_db._entry import (
    FLOAT_DTYPES,
    EntrySet,
    Sample,
    shapes,
    sizes,
    tensors,
)

aten = torch.ops.aten

ENTRIES = EntrySet()

# dtypes torch's searchsorted/unique/mode kernels accept (bool only where noted)
ORDERED = st.sampled_from((*FLOAT_DTYPES, torch.int8, torch.int16, torch.int32, torch.int64,
                           torch.uint8))
HALF_SUM_REASON = ("torch accumulates half-precision sums one element at a time in the half "
                   "type; the runtime sums in float32 and rounds once, so results differ by a "
                   "few half-precision ulps")


add = ENTRIES.add


def _sorted(t: torch.Tensor) -> torch.Tensor:
    return torch.sort(t, dim=-1).values


# -- searchsorted / bucketize ---------------------------------------------------------------------

@st.composite
def _search(draw: Any, scalar: bool = False) -> Sample:
    dtype = draw(ORDERED)
    m = draw(sizes())
    batched = not scalar and draw(st.booleans())
    lead = list(draw(shapes(0, 2, max_size=3))) if batched else []
    special = dtype.is_floating_point and draw(st.booleans())
    seq = draw(tensors([*lead, m], dtype, low=-3, high=3, special=special))
    kwargs: dict[str, Any] = {"out_int32": draw(st.booleans())}
    side = draw(st.sampled_from(("right", "left", None, "flag")))
    if side == "flag":
        kwargs["right"] = draw(st.booleans())
    elif side is not None:
        kwargs["side"] = side
    if draw(st.booleans()):
        # unsorted sequence plus the permutation that sorts it
        kwargs["sorter"] = torch.argsort(seq, dim=-1, stable=True)
    else:
        seq = _sorted(seq)
    if scalar:
        value = draw(st.sampled_from((0, 1, -2, 0.5, 2.25, -7.0)))
        return Sample((seq, value), kwargs)
    vshape = [*lead, draw(sizes())] if batched else list(draw(shapes(0, 3)))
    vdtype = draw(st.sampled_from((dtype, dtype, torch.float32, torch.int64)))
    values = draw(tensors(vshape, vdtype, low=-4, high=4, special=special))
    return Sample((seq, values), kwargs)


def _searchsorted(seq: torch.Tensor, values: Any, sorter: torch.Tensor | None = None,
                  **kw: Any) -> torch.Tensor:
    return torch.searchsorted(seq, values, sorter=sorter, **kw)


def _sorter_as_input(s: Sample) -> Sample:
    """The sorter becomes a module input (a third positional argument)."""
    kwargs = dict(s.kwargs)
    sorter = kwargs.pop("sorter", None)
    return Sample((*s.args, sorter), kwargs) if sorter is not None else s


add("aten::searchsorted.Tensor", _searchsorted, _search().map(_sorter_as_input))
add("aten::searchsorted.Scalar", _searchsorted, _search(True).map(_sorter_as_input))


@st.composite
def _bucketize(draw: Any, scalar: bool = False) -> Sample:
    dtype = draw(ORDERED)
    special = dtype.is_floating_point and draw(st.booleans())
    bounds = _sorted(draw(tensors([draw(sizes())], dtype, low=-3, high=3, special=special)))
    kwargs = {"out_int32": draw(st.booleans()), "right": draw(st.booleans())}
    if scalar:
        return Sample((draw(st.sampled_from((0, 2, -1.5, 0.25))), bounds), kwargs)
    values = draw(tensors(draw(shapes(0, 3)), dtype, low=-4, high=4, special=special))
    return Sample((values, bounds), kwargs)


add("aten::bucketize.Tensor", torch.bucketize, _bucketize())
add("aten::bucketize.Scalar", torch.bucketize, _bucketize(True))


# -- histc / bincount -----------------------------------------------------------------------------

@st.composite
def _histc(draw: Any) -> Sample:
    dtype = draw(st.sampled_from(FLOAT_DTYPES))
    shape = draw(shapes(0, 3))
    data_range = draw(st.booleans())
    x = draw(tensors(shape, dtype, low=-3, high=3, special=not data_range))
    if data_range and draw(st.integers(0, 4)) == 0:
        x = torch.full_like(x, 1.5)  # all equal: torch widens the range by 1 each side
    kwargs: dict[str, Any] = {"bins": draw(st.sampled_from((1, 3, 7, 47, 100)))}
    if not data_range:
        lo = draw(st.sampled_from((-2, -1.5, 0)))
        kwargs.update(min=lo, max=lo + draw(st.sampled_from((1, 2.5, 4))))
    return Sample((x,), kwargs)


add("aten::histc.default", torch.histc, _histc())


@st.composite
def _bincount(draw: Any) -> Sample:
    n = draw(sizes(0))
    x = draw(tensors([n], draw(st.sampled_from((torch.int64, torch.int32, torch.uint8,
                                               torch.int16, torch.int8))), low=0, high=9))
    kwargs: dict[str, Any] = {"minlength": draw(st.sampled_from((0, 0, 3, 12, 47)))}
    if draw(st.booleans()) and n:
        # not empty: for an empty input torch's kernel returns int64 zeros whatever the
        # weights, while its meta (hence the exported graph) says the weights' result type
        wdtype = draw(st.sampled_from((*FLOAT_DTYPES, torch.int64)))
        return Sample((x, draw(tensors([n], wdtype))), kwargs)
    return Sample((x,), kwargs)


add("aten::bincount.default", lambda x, w=None, **kw: torch.bincount(x, w, **kw), _bincount())


# -- unique ---------------------------------------------------------------------------------------

UNIQUE_DTYPES = st.sampled_from((*FLOAT_DTYPES, torch.int8, torch.int16, torch.int32,
                                 torch.int64, torch.uint8, torch.bool))


@st.composite
def _unique(draw: Any, special: bool = True) -> Sample:
    dtype = draw(UNIQUE_DTYPES)
    x = draw(tensors(draw(shapes(0, 3)), dtype, low=-3, high=3,
                     special=special and dtype.is_floating_point and draw(st.booleans())))
    return Sample((x,), {"return_inverse": draw(st.booleans()),
                         "return_counts": draw(st.booleans())})


add("aten::_unique2.default", lambda x, **kw: aten._unique2(x, **kw),
    _unique().map(lambda s: Sample(s.args, {**s.kwargs, "sorted": True})), name="_unique2")


add("aten::_unique2.default",
    lambda x, **kw: torch.unique(x, sorted=False, **kw), _unique(), name="unique.unsorted")


@st.composite
def _unique_consecutive(draw: Any) -> Sample:
    s = draw(_unique())
    x = s.args[0]
    if x.dim() and draw(st.booleans()):
        x = torch.repeat_interleave(x, 2, dim=0)  # guarantee runs
    kwargs = dict(s.kwargs)
    if x.dim() and draw(st.booleans()):
        # a negative dim is left out: torch's fake kernel for unique_consecutive does not wrap
        # it and gives the exported graph wrong shapes (e.g. [u0, 3] for a [3] input, dim=-1)
        kwargs["dim"] = draw(st.integers(0, x.dim() - 1))
    return Sample((x,), kwargs)


add("aten::unique_consecutive.default", torch.unique_consecutive, _unique_consecutive())


@st.composite
def _unique_dim(draw: Any) -> Sample:
    dtype = draw(UNIQUE_DTYPES)
    shape = list(draw(shapes(1, 3, max_size=5)))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    if draw(st.integers(0, 4)) == 0:  # no slices (torch rejects an empty dim elsewhere)
        shape[dim] = 0
    x = draw(tensors(shape, dtype, low=0, high=2))  # few values: many equal slices
    if draw(st.booleans()):
        x = torch.cat([x, x.flip(dim)], dim=dim)
    return Sample((x,), {"dim": dim, "return_inverse": draw(st.booleans()),
                         "return_counts": draw(st.booleans())})


add("aten::unique_dim.default", lambda x, **kw: torch.unique(x, **kw), _unique_dim())


# -- mode -----------------------------------------------------------------------------------------

def _mode_compare(expected: list[torch.Tensor], got: list[np.ndarray], sample: Sample) -> None:
    """Values equal torch's (most frequent, smallest on ties); indices point at that value,
    and equal torch's (the last occurrence) where torch's sort is stable (<= 16 elements)."""
    x, dim, keepdim = sample.args[0], sample.kwargs["dim"], sample.kwargs["keepdim"]
    values, indices = got
    want_v, want_i = (to_numpy(t) for t in expected)
    assert values.shape == want_v.shape and values.dtype == want_v.dtype
    assert indices.shape == want_i.shape and indices.dtype == np.int64
    np.testing.assert_array_equal(values, want_v, err_msg="mode values")
    if x.dim() == 0:
        np.testing.assert_array_equal(indices, want_i)
        return
    d = dim % x.dim()
    idx = indices if keepdim else np.expand_dims(indices, d)
    picked = np.take_along_axis(to_numpy(x), idx, axis=d)
    picked = picked if keepdim else np.squeeze(picked, d)
    np.testing.assert_array_equal(picked, want_v, err_msg="mode indices select the mode")
    if x.shape[d] <= 16:
        np.testing.assert_array_equal(indices, want_i, err_msg="mode indices")


@st.composite
def _mode(draw: Any) -> Sample:
    dtype = draw(UNIQUE_DTYPES)
    x = draw(tensors(draw(shapes(0, 3)), dtype, low=-2, high=2))
    r = max(x.dim(), 1)
    return Sample((x,), {"dim": draw(st.integers(-r, r - 1)), "keepdim": draw(st.booleans())})


add("aten::mode.default", torch.mode, _mode(), compare=_mode_compare)


# -- segment_reduce -------------------------------------------------------------------------------

@st.composite
def _segment(draw: Any, dtypes: st.SearchStrategy[torch.dtype]) -> Sample:
    dtype = draw(dtypes)
    batch = list(draw(shapes(0, 2, max_size=3)))
    nseg = draw(sizes(max_size=5))
    lengths = torch.tensor(draw(st.lists(st.integers(0, 4), min_size=nseg, max_size=nseg)))
    lengths = lengths.expand(*batch, nseg).clone() if batch else lengths
    n = int(lengths.reshape(-1, nseg)[0].sum())
    trailing = list(draw(shapes(0, 2, max_size=3)))
    special = draw(st.booleans())
    data = draw(tensors([*batch, n, *trailing], dtype, low=-3, high=3, special=special))
    kwargs: dict[str, Any] = {"reduce": draw(st.sampled_from(("sum", "mean", "max", "min",
                                                              "prod"))),
                              "axis": len(batch), "unsafe": draw(st.booleans())}
    if draw(st.booleans()):
        kwargs["initial"] = draw(st.sampled_from((0.0, 1.5, -2.0)))
    if draw(st.booleans()):
        zero = torch.zeros(*batch, 1, dtype=lengths.dtype)
        kwargs["offsets"] = torch.cat([zero, lengths.cumsum(-1)], dim=-1)
    else:
        kwargs["lengths"] = lengths
    if draw(st.booleans()):
        key = "offsets" if "offsets" in kwargs else "lengths"
        kwargs[key] = kwargs[key].to(torch.int32)
    return Sample((data,), kwargs)


add("aten::segment_reduce.default", torch.segment_reduce,
    _segment(st.sampled_from((torch.float32, torch.float64))))
add("aten::segment_reduce.default", torch.segment_reduce,
    _segment(st.sampled_from((torch.float16, torch.bfloat16))), name="segment_reduce.half",
    atol=3e-2, rtol=3e-2, tol_reason=HALF_SUM_REASON)
