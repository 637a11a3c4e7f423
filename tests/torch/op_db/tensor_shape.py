"""Op-database entries (tensor family): shape, view, layout and creation ops (with empty_permuted,
tril/triu_indices and one_hot), _to_copy over every dtype pair and memory format."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from tests.torch.op_db._entry import (
    ALL_DTYPES,
    ANY,
    FLOATS,
    NUMERIC,
    EntrySet,
    Sample,
    broadcastable,
    shapes,
    sizes,
    tensors,
)

aten = torch.ops.aten

ENTRIES = EntrySet()


add = ENTRIES.add


def same_shape_and_dtype(expected: list[torch.Tensor], got: list[Any], sample: Sample) -> None:
    """For ``empty``-style ops: torch leaves the values unspecified (we produce zeros)."""
    assert len(expected) == len(got)
    for e, g in zip(expected, got, strict=True):
        assert tuple(np.shape(g)) == tuple(e.shape), (np.shape(g), e.shape)
        assert str(np.asarray(g).dtype) == str(e.dtype).removeprefix("torch."), (g.dtype, e.dtype)


def scalar_for(dtype: torch.dtype) -> st.SearchStrategy[Any]:
    if dtype == torch.bool:
        return st.booleans()
    if dtype.is_floating_point:
        return st.sampled_from((0.0, -1.5, 2.25, 3.0))
    return st.integers(0 if dtype == torch.uint8 else -3, 5)


@st.composite
def one(draw: Any, dtypes: st.SearchStrategy = ANY, min_rank: int = 0, max_rank: int = 4,
        min_size: int = 1, **attrs: Any) -> Sample:
    """One tensor; each attribute strategy in ``attrs`` may be a function of the shape."""
    dtype = draw(dtypes)
    shape = draw(shapes(min_rank, max_rank, min_size=min_size))
    x = draw(tensors(shape, dtype))
    kw = {k: draw(v(shape) if callable(v) else v) for k, v in attrs.items()}
    return Sample((x,), kw)


def dim_of(shape: tuple[int, ...]) -> st.SearchStrategy[int]:
    r = max(len(shape), 1)
    return st.integers(-r, r - 1)


# -- identities and casts ------------------------------------------------------------------------

add("aten::alias.default", lambda x: aten.alias(x), one())
add("aten::clone.default", lambda x: x.clone(), one())
add("aten::clone.default", lambda x: x.clone(memory_format=torch.channels_last),
    one(min_rank=4, max_rank=4), name="clone.default[channels_last]")
add("aten::detach.default", lambda x: x.detach(), one())


@st.composite
def _to_copy(draw: Any) -> Sample:
    src = draw(ANY)
    dst = draw(ANY.filter(lambda d: d != src))  # x.to(its own dtype) exports no op
    # float -> unsigned of a negative value is undefined behaviour in C++ (and numpy)
    low = 0.0 if dst == torch.uint8 or src == torch.uint8 else -4.0
    x = draw(tensors(draw(shapes()), src, low=low, high=4.0))
    return Sample((x,), {"dtype": dst})


add("aten::_to_copy.default", lambda x, dtype: x.to(dtype), _to_copy())


@st.composite
def _copy(draw: Any) -> Sample:
    shape = draw(shapes())
    x = draw(tensors(shape, draw(ANY)))
    src = draw(tensors(draw(broadcastable(shape)), draw(ANY), low=0.0))
    return Sample((x, src))


add("aten::copy.default", lambda x, src: aten.copy(x, src), _copy())

# -- reshapes --------------------------------------------------------------------------------------


@st.composite
def _view(draw: Any) -> Sample:
    shape = draw(shapes(0, 4))
    numel = math.prod(shape)
    dims = list(shape)
    kind = draw(st.sampled_from(("reverse", "merge", "flat", "split1")))
    if kind == "reverse":
        dims = dims[::-1]
    elif kind == "merge" and len(dims) >= 2:
        i = draw(st.integers(0, len(dims) - 2))
        dims[i:i + 2] = [dims[i] * dims[i + 1]]
    elif kind == "flat":
        dims = [numel]
    else:
        dims = [1, *dims, 1]
    if dims and draw(st.booleans()):
        dims[draw(st.integers(0, len(dims) - 1))] = -1
    return Sample((draw(tensors(shape, draw(ANY))),), {"size": dims})


add("aten::view.default", lambda x, size: x.view(size), _view())
add("aten::_unsafe_view.default", lambda x, size: aten._unsafe_view(x, size), _view())
add("aten::_unsafe_view.default", lambda x: x.transpose(0, 1).reshape(-1),
    one(min_rank=2, min_size=2), name="_unsafe_view.default[reshape]")


@st.composite
def _pixel(draw: Any, shuffle: bool) -> Sample:
    r = draw(st.integers(1, 4))
    lead = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))
    c, h, w = (draw(st.integers(1, 3)) for _ in range(3))
    shape = [*lead, c * r * r, h, w] if shuffle else [*lead, c, h * r, w * r]
    return Sample((draw(tensors(shape, draw(ANY))),), {"r": r})


add("aten::pixel_shuffle.default", lambda x, r: F.pixel_shuffle(x, r), _pixel(True))
add("aten::pixel_unshuffle.default", lambda x, r: F.pixel_unshuffle(x, r), _pixel(False))
add("aten::unsqueeze.default", lambda x, dim: x.unsqueeze(dim),
    one(dim=lambda s: st.integers(-len(s) - 1, len(s))))


@st.composite
def _with_ones(draw: Any) -> Sample:
    shape = list(draw(shapes(0, 4)))
    for _ in range(draw(st.integers(0, 2))):
        shape.insert(draw(st.integers(0, len(shape))), 1)
    return Sample((draw(tensors(shape, draw(ANY))),))


@st.composite
def _squeeze_dims(draw: Any, many: bool) -> Sample:
    sample = draw(_with_ones())
    r = max(sample.args[0].dim(), 1)
    dims = draw(st.lists(st.integers(-r, r - 1), min_size=1, max_size=r if many else 1,
                         unique_by=lambda d: d % r))
    return Sample(sample.args, {"dim": tuple(dims) if many else dims[0]})


add("aten::squeeze.dim", lambda x, dim: x.squeeze(dim), _squeeze_dims(False))
add("aten::squeeze.dims", lambda x, dim: x.squeeze(dim), _squeeze_dims(True))
add("aten::squeeze.default", lambda x: x.squeeze(), _with_ones())

# -- permutations ----------------------------------------------------------------------------------

add("aten::permute.default", lambda x, dims: x.permute(dims),
    one(dims=lambda s: st.permutations(range(len(s)))))
add("aten::transpose.int", lambda x, a, b: x.transpose(a, b), one(a=dim_of, b=dim_of))
add("aten::t.default", lambda x: x.t(), one(max_rank=2))
add("aten::flip.default", lambda x, dims: x.flip(dims),
    one(dims=lambda s: st.lists(dim_of(s), max_size=len(s), unique_by=lambda d: d % len(s))
        if s else st.just([])))

# -- broadcasting and tiling -----------------------------------------------------------------------


@st.composite
def _expand(draw: Any) -> Sample:
    shape = draw(broadcastable(draw(shapes(0, 3))))
    x = draw(tensors(shape, draw(ANY)))
    size = [draw(st.integers(1, 3)) if d == 1 else draw(st.sampled_from((d, -1))) for d in shape]
    lead = draw(st.lists(st.integers(1, 3), max_size=2))
    return Sample((x,), {"size": [*lead, *size]})


add("aten::expand.default", lambda x, size: x.expand(size), _expand())
add("aten::repeat.default", lambda x, reps: x.repeat(reps),
    one(max_rank=3, reps=lambda s: st.lists(st.integers(0, 3), min_size=len(s),
                                            max_size=len(s) + 2)))

# -- slicing ---------------------------------------------------------------------------------------

BOUND = st.one_of(st.none(), st.integers(-8, 8), st.just(2**63 - 1))
add("aten::slice.Tensor",
    lambda x, dim, start, end, step: aten.slice.Tensor(x, dim, start, end, step),
    one(min_rank=1, dim=dim_of, start=BOUND, end=BOUND, step=st.integers(1, 3)))


@st.composite
def _select(draw: Any) -> Sample:
    sample = draw(one(min_rank=1, dim=dim_of))
    n = sample.args[0].shape[sample.kwargs["dim"]]
    return Sample(sample.args, {**sample.kwargs, "i": draw(st.integers(-n, n - 1))})


add("aten::select.int", lambda x, dim, i: x.select(dim, i), _select())


add("aten::diagonal.default", lambda x, offset, dims: x.diagonal(offset, *dims),
    one(min_rank=2, offset=st.integers(-3, 3),
        dims=lambda s: st.permutations(range(len(s))).map(lambda p: (p[0], p[1] - len(s)))))


@st.composite
def _as_strided(draw: Any) -> Sample:
    size = draw(st.lists(st.integers(0, 4), min_size=0, max_size=3))
    stride = [draw(st.integers(0, 4)) for _ in size]
    offset = draw(st.one_of(st.none(), st.integers(0, 3)))
    span = sum((n - 1) * s for n, s in zip(size, stride, strict=True) if n) + 1
    cols = draw(st.integers(1, 5))
    rows = -(-(span + (offset or 0)) // cols) + draw(st.integers(0, 1))
    x = draw(tensors((rows, cols), draw(ANY)))
    return Sample((x,), {"size": size, "stride": stride, "offset": offset})


add("aten::as_strided.default",
    lambda x, size, stride, offset: x.as_strided(size, stride, offset), _as_strided())
add("aten::as_strided.default",
    lambda x, size, stride, offset: x.t().contiguous().t().as_strided(size, stride, offset),
    _as_strided(), name="as_strided.default[column_major]")
add("aten::as_strided.default",
    lambda x, size, stride, offset: x[1:].as_strided(
        size, stride, None if offset is None else offset + x.shape[1]),
    _as_strided().map(lambda s: Sample((torch.cat([s.args[0][:1].flip(1), s.args[0]]),),
                                       s.kwargs)),
    name="as_strided.default[offset_view]")

# -- joins and splits ------------------------------------------------------------------------------


@st.composite
def _cat(draw: Any) -> Sample:
    shape = list(draw(shapes(1, 3)))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    base = draw(ANY)
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        shape[dim] = draw(st.integers(0, 3))
        dtype = draw(ANY) if draw(st.integers(0, 3)) == 0 else base
        parts.append(draw(tensors(tuple(shape), dtype)))
    return Sample((parts,), {"dim": dim})


add("aten::cat.default", lambda *xs, dim: torch.cat(xs, dim),
    _cat().map(lambda s: Sample(tuple(s.args[0]), s.kwargs)))
add("aten::cat.default", lambda e, x: torch.cat([e, x, e], 1),
    st.builds(lambda e, x: Sample((e, x)), tensors((0,), torch.float32),
              one(min_rank=2, max_rank=3).map(lambda s: s.args[0])),
    name="cat.default[legacy_empty]")


@st.composite
def _split_sizes(draw: Any) -> Sample:
    sample = draw(one(min_rank=1, dim=dim_of))
    n = sample.args[0].shape[sample.kwargs["dim"]]
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
    sizes_ = [b - a for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
    return Sample(sample.args, {**sample.kwargs, "sizes": sizes_})


add("aten::split_with_sizes.default", lambda x, dim, sizes: x.split(sizes, dim), _split_sizes())
add("aten::split.Tensor", lambda x, dim, size: x.split(size, dim),
    one(min_rank=1, dim=dim_of, size=st.integers(1, 4)))
add("aten::unbind.int", lambda x, dim: x.unbind(dim), one(min_rank=1, max_rank=3, dim=dim_of))
add("aten::roll.default", lambda x, shifts, dims: x.roll(shifts, dims),
    one(min_rank=1, shifts=st.integers(-5, 5), dims=dim_of))
add("aten::roll.default", lambda x, shifts: x.roll(shifts), one(shifts=st.integers(-9, 9)),
    name="roll.default[flat]")

# -- padding ---------------------------------------------------------------------------------------


@st.composite
def _constant_pad(draw: Any) -> Sample:
    dtype = draw(NUMERIC)
    shape = draw(shapes(1, 4))
    pads = []
    for d in reversed(shape[len(shape) - draw(st.integers(1, len(shape))):]):
        lo = draw(st.integers(-min(d, 2), 2))
        # torch crops the input before padding: both negative pads must fit in d
        hi = draw(st.integers(-min(d + min(lo, 0), 2), 2))
        pads += [lo, hi]
    return Sample((draw(tensors(shape, dtype)),), {"pad": pads, "value": draw(scalar_for(dtype))})


add("aten::constant_pad_nd.default", lambda x, pad, value: F.pad(x, pad, value=value),
    _constant_pad())


@st.composite
def _mode_pad(draw: Any, n: int, reflect: bool) -> Sample:
    spatial = [draw(sizes(2 if reflect else 1, 5, allow_47=n == 1)) for _ in range(n)]
    lead = [draw(st.integers(1, 3)) for _ in range(draw(st.integers(1, 2)))]
    pads = []
    for d in reversed(spatial):
        top = d - 1 if reflect else 3
        pads += [draw(st.integers(0, min(top, 3))), draw(st.integers(0, min(top, 3)))]
    return Sample((draw(tensors((*lead, *spatial), draw(FLOATS))),), {"pad": pads})


for _n in (1, 2, 3):
    add(f"aten::reflection_pad{_n}d.default", lambda x, pad: F.pad(x, pad, mode="reflect"),
        _mode_pad(_n, True))
    add(f"aten::replication_pad{_n}d.default", lambda x, pad: F.pad(x, pad, mode="replicate"),
        _mode_pad(_n, False))

# -- creation --------------------------------------------------------------------------------------

SIZE = st.lists(st.integers(0, 4), max_size=3)
DTYPE = st.one_of(st.none(), ANY)


@st.composite
def _full(draw: Any) -> Sample:
    dtype = draw(DTYPE)
    value = draw(scalar_for(dtype or draw(st.sampled_from((torch.float32, torch.int64,
                                                            torch.bool)))))
    return Sample((), {"size": draw(SIZE), "value": value, "dtype": dtype})


add("aten::full.default", lambda size, value, dtype: torch.full(size, value, dtype=dtype), _full())
SIZED = st.builds(lambda s, d: Sample((), {"size": s, "dtype": d}), SIZE, DTYPE)
add("aten::zeros.default", lambda size, dtype: torch.zeros(size, dtype=dtype), SIZED)
add("aten::ones.default", lambda size, dtype: torch.ones(size, dtype=dtype), SIZED)
add("aten::zeros_like.default", lambda x, dtype: torch.zeros_like(x, dtype=dtype),
    one(dtype=DTYPE))
add("aten::ones_like.default", lambda x, dtype: torch.ones_like(x, dtype=dtype),
    one(dtype=DTYPE))
add("aten::new_zeros.default", lambda x, size, dtype: x.new_zeros(size, dtype=dtype),
    one(size=SIZE, dtype=DTYPE))
add("aten::new_ones.default", lambda x, size, dtype: x.new_ones(size, dtype=dtype),
    one(size=SIZE, dtype=DTYPE))
add("aten::empty.memory_format", lambda size, dtype: torch.empty(size, dtype=dtype),
    SIZED, compare=same_shape_and_dtype)
add("aten::empty_strided.default",
    lambda size, dtype: torch.empty_strided(size, [1] * len(size), dtype=dtype),
    SIZED, compare=same_shape_and_dtype)
add("aten::empty_like.default", lambda x, dtype: torch.empty_like(x, dtype=dtype),
    one(dtype=DTYPE), compare=same_shape_and_dtype)
add("aten::new_empty.default", lambda x, size: x.new_empty(size), one(size=SIZE),
    compare=same_shape_and_dtype)


@st.composite
def _like_value(draw: Any, with_size: bool) -> Sample:
    sample = draw(one(dtype=DTYPE))
    dtype = sample.kwargs["dtype"] or sample.args[0].dtype
    kw = {**sample.kwargs, "value": draw(scalar_for(dtype))}
    if with_size:
        kw["size"] = draw(SIZE)
    return Sample(sample.args, kw)


add("aten::full_like.default", lambda x, value, dtype: torch.full_like(x, value, dtype=dtype),
    _like_value(False))
add("aten::new_full.default",
    lambda x, size, value, dtype: x.new_full(size, value, dtype=dtype), _like_value(True))


@st.composite
def _fill(draw: Any) -> Sample:
    sample = draw(one())
    return Sample(sample.args, {"value": draw(scalar_for(sample.args[0].dtype))})


add("aten::fill.Scalar", lambda x, value: torch.fill(x, value), _fill())
add("aten::fill.Tensor", lambda x, v: torch.fill(x, v),
    st.builds(lambda s, v: Sample((s.args[0], v)), one(),
              st.sampled_from(ALL_DTYPES).flatmap(lambda d: tensors((), d, low=0.0))))
add("aten::scalar_tensor.default", lambda value, dtype: torch.scalar_tensor(value, dtype=dtype),
    st.builds(lambda v, d: Sample((), {"value": v, "dtype": d}),
              st.sampled_from((0, 3, 2.5, True)), st.one_of(st.none(), NUMERIC)))

ARANGE_DTYPES = st.one_of(st.none(), NUMERIC)
add("aten::arange.default", lambda end, dtype: torch.arange(end, dtype=dtype),
    st.builds(lambda e, d: Sample((), {"end": e, "dtype": d}),
              st.one_of(st.integers(0, 47), st.sampled_from((5.5, 0.25))), ARANGE_DTYPES))
add("aten::arange.start", lambda start, end, dtype: torch.arange(start, end, dtype=dtype),
    st.builds(lambda s, e, d: Sample((), {"start": s, "end": s + e, "dtype": d}),
              st.integers(-5, 5), st.integers(0, 9), ARANGE_DTYPES))
add("aten::arange.start_step",
    lambda start, end, step, dtype: torch.arange(start, end, step, dtype=dtype),
    st.builds(lambda s, n, st_, d: Sample((), {"start": s, "end": s + n * st_, "step": st_,
                                                "dtype": d}),
              st.sampled_from((-3, 0, 2, 0.5, -1.25)), st.integers(0, 9),
              st.sampled_from((1, 2, -1, 0.1, 0.3, -0.7)),
              st.one_of(st.none(), st.sampled_from((torch.float32, torch.float64,
                                                     torch.float16, torch.bfloat16)))))
add("aten::arange.start_step",
    lambda start, end, step, dtype: torch.arange(start, end, step, dtype=dtype),
    st.builds(lambda s, n, st_, d: Sample((), {"start": s, "end": s + n * st_ + 1,
                                               "step": st_, "dtype": d}),
              st.integers(-5, 5), st.integers(0, 9), st.sampled_from((1, 2, 3, -1, -2)),
              st.sampled_from((None, torch.int32, torch.int64, torch.int16))),
    name="arange.start_step[int]")


# -- factories ------------------------------------------------------------------------------------

@st.composite
def _empty_permuted(draw: Any) -> Sample:
    shape = list(draw(shapes(0, 4)))
    layout = list(draw(st.permutations(range(len(shape)))))
    dtype = draw(st.sampled_from(ALL_DTYPES))
    return Sample((draw(tensors(shape, dtype)),), {"layout": layout})


def _empty_permuted_call(x: torch.Tensor, layout: list[int]) -> torch.Tensor:
    # torch leaves the contents unspecified: only the shape and dtype are compared, by
    # filling the result through a mask that keeps x
    e = torch.empty_permuted(x.shape, layout, dtype=x.dtype)
    return torch.where(torch.ones_like(x, dtype=torch.bool), x, e)


add("aten::empty_permuted.default", _empty_permuted_call, _empty_permuted())


@st.composite
def _triangle(draw: Any) -> Sample:
    row, col = draw(sizes(0, 6)), draw(sizes(0, 6))
    offset = draw(st.integers(-row - 1, col + 1))
    dtype = draw(st.sampled_from((torch.int64, torch.int32)))
    return Sample((draw(tensors([], dtype, low=0, high=3)),),
                  {"row": row, "col": col, "offset": offset})


def _tril(x: torch.Tensor, row: int, col: int, offset: int) -> torch.Tensor:
    return torch.tril_indices(row, col, offset, dtype=x.dtype) + x


def _triu(x: torch.Tensor, row: int, col: int, offset: int) -> torch.Tensor:
    return torch.triu_indices(row, col, offset, dtype=x.dtype) + x


add("aten::tril_indices.default", _tril, _triangle())
add("aten::triu_indices.default", _triu, _triangle())


# -- _to_copy: every dtype pair, memory formats ---------------------------------------------------

def _to_all(x: torch.Tensor, dsts: tuple[torch.dtype, ...]) -> tuple[torch.Tensor, ...]:
    return tuple(x.to(d) for d in dsts)


def _to_copy_from(src: torch.dtype) -> st.SearchStrategy[Sample]:
    @st.composite
    def build(draw: Any) -> Sample:
        # float -> uint8 of a negative value is undefined in C++ (and numpy): uint8 is a
        # destination only for non-negative data
        nonneg = src == torch.uint8 or draw(st.booleans())
        x = draw(tensors(draw(shapes()), src, low=0.0 if nonneg else -4.0, high=4.0))
        dsts = tuple(d for d in ALL_DTYPES if d != src and (nonneg or d != torch.uint8))
        return Sample((x,), {"dsts": dsts})
    return build()


for _src in ALL_DTYPES:
    add("aten::_to_copy.default", _to_all, _to_copy_from(_src),
        name=f"_to_copy.from_{str(_src).removeprefix('torch.')}")


@st.composite
def _to_memory_format(draw: Any) -> Sample:
    rank = draw(st.sampled_from((4, 5)))
    src = draw(st.sampled_from(ALL_DTYPES))
    dst = draw(st.sampled_from((None, *(d for d in ALL_DTYPES if d != src))))
    low = 0.0 if torch.uint8 in (src, dst) else -4.0
    x = draw(tensors(draw(shapes(rank, rank, max_size=3)), src, low=low))
    fmt = draw(st.sampled_from((torch.channels_last if rank == 4 else torch.channels_last_3d,
                                torch.preserve_format, torch.contiguous_format)))
    if draw(st.booleans()):
        x = x.to(memory_format=torch.channels_last if rank == 4 else torch.channels_last_3d)
    return Sample((x,), {"dtype": dst, "memory_format": fmt})


def _to_format(x: torch.Tensor, dtype: torch.dtype | None, memory_format: Any) -> torch.Tensor:
    # a clone keeps a _to_copy in the graph even when nothing else changes
    return aten._to_copy(x, dtype=dtype, memory_format=memory_format)


add("aten::_to_copy.default", _to_format, _to_memory_format(), name="_to_copy.memory_format")
