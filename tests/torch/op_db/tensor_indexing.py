"""Op-database entries (tensor family): indexing, gather/scatter (with as_strided_scatter), masks,
nonzero, embedding.

Index tensors are drawn in range (out-of-range indices are user errors in torch); where torch
accepts negative indices some are drawn negative. Ops whose result with duplicate indices is
unspecified in torch (scatter without reduction, index_put/put without accumulate) get unique
indices.
"""

from __future__ import annotations

from typing import Any

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
INDEX_DTYPES = st.sampled_from((torch.int64, torch.int32))

ENTRIES = EntrySet()


add = ENTRIES.add


def _gen(draw: Any) -> torch.Generator:
    return torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))


def _indices(draw: Any, size: int, shape: tuple[int, ...], *, negative: bool = False,
             dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """Random in-range indices for an axis of ``size`` (some negative if allowed)."""
    g = _gen(draw)
    idx = torch.randint(0, size, shape, generator=g)
    if negative:
        idx = torch.where(torch.rand(shape, generator=g) < 0.5, idx - size, idx)
    return idx.to(dtype)


def _unique(draw: Any, size: int, count: int, *, negative: bool = False) -> torch.Tensor:
    """``count`` distinct positions of an axis of ``size`` (as int64, maybe negative)."""
    g = _gen(draw)
    idx = torch.randperm(size, generator=g)[:count].clone()
    if negative:
        idx = torch.where(torch.rand(idx.shape, generator=g) < 0.5, idx - size, idx)
    return idx


def _per_column_unique(draw: Any, x_shape: tuple[int, ...], axis: int,
                       index_shape: tuple[int, ...]) -> torch.Tensor:
    """Indices of ``index_shape`` whose entries along ``axis`` are distinct in every column."""
    g = _gen(draw)
    big = list(index_shape)
    big[axis] = x_shape[axis]
    order = torch.argsort(torch.rand(big, generator=g), dim=axis)
    return order.narrow(axis, 0, index_shape[axis]).clone()  # not a view: export lifts views


# -- gather / index_select / index.Tensor -------------------------------------------------------

@st.composite
def _gather(draw: Any, broadcast: bool = False) -> Sample:
    shape = draw(shapes(0, 3))
    x = draw(tensors(shape, draw(ANY)))
    if not shape:
        return Sample((x, 0, torch.zeros((), dtype=torch.int64)))
    axis = draw(st.integers(0, len(shape) - 1))
    ishape = tuple(draw(st.integers(1, 5)) if a == axis else
                   draw(st.sampled_from((1, d)) if broadcast else st.integers(1, d))
                   for a, d in enumerate(shape))
    index = _indices(draw, shape[axis], ishape)
    return Sample((x, axis - len(shape) * draw(st.integers(0, 1)), index))


add("aten::gather.default", lambda x, dim, index: torch.gather(x, dim, index), _gather())


@st.composite
def _gather_empty_index(draw: Any) -> Sample:
    """An index with a zero-size dim, of any rank: torch checks nothing against it."""
    x = draw(tensors(draw(shapes(1, 3)), draw(ANY)))
    ishape = list(draw(shapes(1, 3)))
    ishape[draw(st.integers(0, len(ishape) - 1))] = 0
    index = torch.zeros(ishape, dtype=torch.int64)
    return Sample((x, draw(st.integers(-x.dim(), x.dim() - 1)), index))


add("aten::gather.default", lambda x, dim, index: torch.gather(x, dim, index),
    _gather_empty_index(), name="gather[empty index]")


@st.composite
def _index_select(draw: Any) -> Sample:
    shape = draw(shapes(1, 3))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    index = _indices(draw, shape[axis], (draw(st.integers(0, 6)),), dtype=draw(INDEX_DTYPES))
    return Sample((draw(tensors(shape, draw(ANY))), axis, index))


add("aten::index_select.default", torch.index_select, _index_select())


def _place(layout: tuple[int | None, ...], tensors_: tuple[torch.Tensor, ...]) -> list[Any]:
    """The index list: slot k of ``layout`` holds tensor ``layout[k]`` (or None)."""
    return [None if k is None else tensors_[k] for k in layout]


def _index_fn(x: torch.Tensor, layout: tuple[int | None, ...], *idx: torch.Tensor) -> Any:
    return aten.index.Tensor(x, _place(layout, idx))


@st.composite
def _advanced(draw: Any, max_index: int = 3) -> tuple[torch.Tensor, tuple, tuple]:
    """x, a layout with None gaps, and broadcastable int index tensors (negatives too)."""
    shape = draw(shapes(1, 4))
    rank = len(shape)
    count = draw(st.integers(1, min(max_index, rank)))
    axes = sorted(draw(st.lists(st.integers(0, rank - 1), min_size=count, max_size=count,
                                unique=True)))
    block = draw(shapes(0, 2, max_size=4))
    layout: list[int | None] = [None] * (axes[-1] + 1)
    idx = []
    for k, a in enumerate(axes):
        layout[a] = k
        ishape = draw(broadcastable(block))
        if count > 1 and not ishape:  # torch's meta for index.Tensor gets the result shape
            ishape = block  # wrong for a 0-d index next to higher-rank ones (eager is right)
        idx.append(_indices(draw, shape[a], ishape, negative=True, dtype=draw(INDEX_DTYPES)))
    x = draw(tensors(shape, draw(ANY)))
    return x, tuple(layout), tuple(idx)


add("aten::index.Tensor", _index_fn,
    _advanced(1).map(lambda a: Sample((a[0], a[1], *a[2]))), name="index.Tensor[one]")
add("aten::index.Tensor", _index_fn,
    _advanced().map(lambda a: Sample((a[0], a[1], *a[2]))), name="index.Tensor[many]")

@st.composite
def _masked_index(draw: Any) -> Sample:
    """x[..., mask, ...] with a bool mask over 1-2 axes, maybe next to a 1-element int index."""
    shape = draw(shapes(1, 4))
    rank = len(shape)
    start = draw(st.integers(0, rank - 1))
    mrank = draw(st.integers(1, min(2, rank - start)))
    args = [draw(tensors(shape[start:start + mrank], torch.bool))]
    free = [a for a in range(rank) if a < start or a >= start + mrank]
    int_axis = draw(st.sampled_from(free)) if free and draw(st.booleans()) else None
    if int_axis is not None:  # one element: broadcasts with the data-dependent mask length
        # (1,) not (): torch's meta drops the mask's length next to a 0-d index
        args.append(_indices(draw, shape[int_axis], (1,), negative=True))
    layout: list[int | None] = []
    axis = 0
    while axis <= max(start, -1 if int_axis is None else int_axis):
        layout.append(0 if axis == start else 1 if axis == int_axis else None)
        axis += mrank if axis == start else 1
    return Sample((draw(tensors(shape, draw(ANY))), tuple(layout), *args))


add("aten::index.Tensor", _index_fn, _masked_index(), name="index.Tensor[mask]")


# -- index_put / put ----------------------------------------------------------------------------

@st.composite
def _index_put(draw: Any, accumulate: bool, masked: bool = False) -> Sample:
    if masked:
        x, layout, *idx = draw(_masked_index()).args
        idx = tuple(idx)
    elif accumulate:
        x, layout, idx = draw(_advanced())
    else:  # distinct coordinates: unique 1-d indices placed on separate broadcast axes
        shape = draw(shapes(1, 4))
        rank = len(shape)
        count = draw(st.integers(1, min(2, rank)))
        axes = sorted(draw(st.lists(st.integers(0, rank - 1), min_size=count,
                                    max_size=count, unique=True)))
        layout = [None] * (axes[-1] + 1)
        idx = []
        for k, a in enumerate(axes):
            layout[a] = k
            n = draw(st.integers(1, min(shape[a], 4)))
            v = _unique(draw, shape[a], n, negative=True)
            idx.append(v.reshape([n] + [1] * (count - 1 - k)).clone())
        x = draw(tensors(shape, draw(ANY)))
        layout, idx = tuple(layout), tuple(idx)
    out_shape = tuple(aten.index.Tensor(x, _place(layout, idx)).shape)
    if masked and draw(st.booleans()):
        out_shape = out_shape[1:]  # values that broadcast over the masked block
    values = draw(tensors(draw(broadcastable(out_shape)), x.dtype))
    return Sample((x, layout, values, *idx), {"accumulate": accumulate})


def _index_put_fn(x: torch.Tensor, layout: tuple, values: torch.Tensor, *idx: torch.Tensor,
                  accumulate: bool) -> torch.Tensor:
    return aten.index_put(x, _place(layout, idx), values, accumulate)


add("aten::index_put.default", _index_put_fn, _index_put(False), name="index_put")
add("aten::index_put.default", _index_put_fn, _index_put(True), name="index_put[accumulate]",
    atol=1e-2, rtol=1e-2,
    tol_reason="duplicate indices accumulate in a different order than torch (half types)")
add("aten::index_put.default", _index_put_fn, _index_put(False, masked=True),
    name="index_put[mask]")

@st.composite
def _put(draw: Any) -> Sample:
    shape = draw(shapes(0, 3))
    x = draw(tensors(shape, draw(NUMERIC)))
    numel = x.numel() or 1
    accumulate = draw(st.booleans())
    n = draw(st.integers(0, min(numel, 5)))
    index = (_indices(draw, numel, (n,), negative=True) if accumulate else
             _unique(draw, numel, n, negative=True))
    if x.numel() == 0:
        index = index[:0].clone()
    source = draw(tensors(tuple(index.shape), x.dtype))
    return Sample((x, index, source), {"accumulate": accumulate})


add("aten::put.default", lambda x, i, s, accumulate: torch.put(x, i, s, accumulate), _put(),
    atol=1e-2, rtol=1e-2,
    tol_reason="duplicate indices accumulate in a different order than torch (half types)")


# -- masks and nonzero --------------------------------------------------------------------------

@st.composite
def _masked(draw: Any, kind: str) -> Sample:
    dtype = draw(ANY)
    shape = draw(shapes(0, 3))
    x = draw(tensors(shape, dtype))
    mask = draw(tensors(draw(broadcastable(shape)), torch.bool))
    if kind == "scalar":
        value = draw(st.booleans()) if dtype == torch.bool else draw(st.integers(-3, 3))
        return Sample((x, mask, value))
    if kind == "tensor":
        return Sample((x, mask, draw(tensors((), dtype))))
    if draw(st.booleans()):  # masked_select also broadcasts x against a larger mask
        x, mask = draw(tensors(draw(broadcastable(shape)), dtype)), draw(
            tensors(shape, torch.bool))
    if kind == "select":
        return Sample((x, mask))
    n = x.numel() + draw(st.integers(0, 3))
    source = draw(tensors((n,) if draw(st.booleans()) or n == 0 else (1, n), dtype))
    return Sample((x, mask, source))


add("aten::masked_fill.Scalar", lambda x, m, v: x.masked_fill(m, v), _masked("scalar"))
add("aten::masked_fill.Tensor", lambda x, m, v: x.masked_fill(m, v), _masked("tensor"))
add("aten::masked_scatter.default", lambda x, m, s: x.masked_scatter(m, s),
    _masked("scatter").filter(lambda s: s.args[2].numel() >= torch.broadcast_shapes(
        s.args[0].shape, s.args[1].shape).numel()))
add("aten::masked_select.default", torch.masked_select, _masked("select"))


@st.composite
def _nonzero(draw: Any) -> Sample:
    shape = draw(shapes(0, 3, min_size=0))
    dtype = draw(ANY)
    x = draw(tensors(shape, dtype, low=-1, high=1))
    if dtype.is_floating_point:
        x = torch.where(torch.rand(shape, generator=_gen(draw)) < 0.5, torch.zeros_like(x), x)
    return Sample((x,))


add("aten::nonzero.default", torch.nonzero, _nonzero())
add("aten::nonzero_static.default",
    lambda x, size, fill: torch.nonzero_static(x, size=size, fill_value=fill),
    st.builds(lambda s, n, f: Sample((s.args[0], n, f)), _nonzero(), st.integers(0, 8),
              st.sampled_from((-1, 7))))


# -- scatter family -----------------------------------------------------------------------------

@st.composite
def _scatter(draw: Any, unique: bool, dtypes: st.SearchStrategy = ANY, src: str = "tensor",
             low: float = -4.0, high: float = 4.0) -> Sample:
    dtype = draw(dtypes)
    shape = draw(shapes(1, 3))
    x = draw(tensors(shape, dtype, low=low, high=high))
    axis = draw(st.integers(0, len(shape) - 1))
    ishape = tuple(draw(st.integers(1, d)) if a != axis else
                   draw(st.integers(1, d if unique else 6)) for a, d in enumerate(shape))
    index = (_per_column_unique(draw, shape, axis, ishape) if unique else
             _indices(draw, shape[axis], ishape))
    if src == "value":
        value = draw(st.booleans()) if dtype == torch.bool else draw(st.integers(-3, 3))
        return Sample((x, axis, index, value))
    sshape = tuple(d + draw(st.integers(0, 1)) for d in ishape)  # src may be larger
    return Sample((x, axis - len(shape) * draw(st.integers(0, 1)), index,
                   draw(tensors(sshape, dtype, low=low, high=high))))


ACCUMULATE_TOL = dict(atol=1e-2, rtol=1e-2, tol_reason=(
    "duplicate indices accumulate in a different order than torch; half types round each "
    "partial sum"))

add("aten::scatter.src", lambda x, d, i, s: torch.scatter(x, d, i, s), _scatter(True))
add("aten::scatter.value", lambda x, d, i, v: torch.scatter(x, d, i, v),
    _scatter(True, src="value"))
add("aten::scatter.reduce", lambda x, d, i, s, r: torch.scatter(x, d, i, s, reduce=r),
    st.builds(lambda s, r: Sample((*s.args, r)), _scatter(False, NUMERIC, low=-2, high=2),
              st.sampled_from(("add", "multiply"))), **ACCUMULATE_TOL)
add("aten::scatter.value_reduce", lambda x, d, i, v, r: torch.scatter(x, d, i, v, reduce=r),
    st.builds(lambda s, r: Sample((*s.args, r)), _scatter(False, NUMERIC, src="value"),
              st.sampled_from(("add", "multiply"))), **ACCUMULATE_TOL)
add("aten::scatter_add.default", torch.scatter_add, _scatter(False, NUMERIC), **ACCUMULATE_TOL)
add("aten::scatter_reduce.two",
    lambda x, d, i, s, r, inc: torch.scatter_reduce(x, d, i, s, r, include_self=inc),
    st.builds(lambda s, r, inc: Sample((*s.args, r, inc)),
              _scatter(False, NUMERIC, low=-2, high=2),
              st.sampled_from(("sum", "prod", "mean", "amax", "amin")), st.booleans()),
    **ACCUMULATE_TOL)


@st.composite
def _index_reduce(draw: Any) -> Sample:
    shape = draw(shapes(1, 3))
    reduce = draw(st.sampled_from(("prod", "mean", "amax", "amin")))
    dtype = draw(NUMERIC)
    if reduce == "prod" and dtype in (torch.float16, torch.bfloat16):
        dtype = torch.float32  # torch's CPU kernel hits an internal assert on dim 0 for halves
    axis = draw(st.integers(0, len(shape) - 1))
    n = draw(st.integers(1, 6))
    index = _indices(draw, shape[axis], (n,), dtype=draw(INDEX_DTYPES))
    sshape = tuple(n if a == axis else d for a, d in enumerate(shape))
    return Sample((draw(tensors(shape, dtype, low=-2, high=2)), axis, index,
                   draw(tensors(sshape, dtype, low=-2, high=2)), reduce, draw(st.booleans())))


add("aten::index_reduce.default",
    lambda x, d, i, s, r, inc: x.index_reduce(d, i, s, r, include_self=inc), _index_reduce(),
    **ACCUMULATE_TOL)


@st.composite
def _select_scatter(draw: Any) -> Sample:
    shape = draw(shapes(1, 4))
    dtype = draw(ANY)
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    index = draw(st.integers(-shape[axis], shape[axis] - 1))
    src_shape = shape[:axis % len(shape)] + shape[axis % len(shape) + 1:]
    return Sample((draw(tensors(shape, dtype)), draw(tensors(src_shape, dtype)), axis, index))


add("aten::select_scatter.default", torch.select_scatter, _select_scatter())


@st.composite
def _slice_scatter(draw: Any) -> Sample:
    shape = draw(shapes(1, 3))
    dtype = draw(ANY)
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    size = shape[axis]
    bound = st.one_of(st.none(), st.integers(-size - 2, size + 2))
    start, end, step = draw(bound), draw(bound), draw(st.integers(1, 3))
    n = len(range(*slice(start, end, step).indices(size)))
    src_shape = list(shape)
    src_shape[axis] = n
    return Sample((draw(tensors(shape, dtype)), draw(tensors(tuple(src_shape), dtype)), axis,
                   start, end, step))


add("aten::slice_scatter.default", torch.slice_scatter, _slice_scatter())


@st.composite
def _diagonal_scatter(draw: Any) -> Sample:
    shape = draw(shapes(2, 3))
    dtype = draw(ANY)
    d1, d2 = draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=2, max_size=2,
                           unique_by=lambda d: d % len(shape)))
    offset = draw(st.integers(-3, 3))
    x = draw(tensors(shape, dtype))
    src_shape = tuple(torch.diagonal(x, offset, d1, d2).shape)
    return Sample((x, draw(tensors(src_shape, dtype)), offset, d1, d2))


add("aten::diagonal_scatter.default", torch.diagonal_scatter, _diagonal_scatter())


# -- embedding ----------------------------------------------------------------------------------

@st.composite
def _embedding(draw: Any) -> Sample:
    vocab, dim = draw(sizes(1, 8)), draw(st.integers(1, 5))
    weight = draw(tensors((vocab, dim), draw(NUMERIC)))
    index = _indices(draw, vocab, draw(shapes(0, 3, min_size=0)), dtype=draw(INDEX_DTYPES))
    return Sample((weight, index))


add("aten::embedding.default", lambda w, i: F.embedding(i, w), _embedding())


@st.composite
def _embedding_backward(draw: Any) -> Sample:
    vocab, dim = draw(sizes(1, 8)), draw(st.integers(1, 5))
    index = _indices(draw, vocab, draw(shapes(0, 2, min_size=0)))
    grad = draw(tensors((*index.shape, dim), draw(FLOATS)))
    padding = draw(st.sampled_from((-1, 0, vocab - 1)))
    return Sample((grad, index, vocab, padding, draw(st.booleans())))


add("aten::embedding_dense_backward.default", aten.embedding_dense_backward,
    _embedding_backward(), **ACCUMULATE_TOL)


@st.composite
def _embedding_bag(draw: Any, mode: str | None = None) -> Sample:
    vocab, dim = draw(sizes(1, 8)), draw(st.integers(1, 4))
    weight = draw(tensors((vocab, dim), draw(FLOATS)))
    n = draw(st.integers(0, 10))
    index = _indices(draw, vocab, (n,))
    bags = draw(st.integers(1, 4))
    offsets = torch.sort(torch.randint(0, n + 1, (bags,), generator=_gen(draw))).values
    offsets[0] = 0
    mode = mode or draw(st.sampled_from(("sum", "mean", "max")))
    last = draw(st.booleans())
    if last:
        offsets = torch.cat([offsets, torch.tensor([n])])
    padding = draw(st.sampled_from((None, 0)))
    psw = (draw(tensors((n,), weight.dtype)) if mode == "sum" and draw(st.booleans()) else None)
    args = (weight, index, offsets) if psw is None else (weight, index, offsets, psw)
    return Sample(args, {"mode": mode, "include_last_offset": last, "padding_idx": padding})


def _bag_fn(w: torch.Tensor, i: torch.Tensor, o: torch.Tensor, psw: torch.Tensor | None = None,
            **kw: Any) -> torch.Tensor:
    return F.embedding_bag(i, w, o, per_sample_weights=psw, **kw)


add("aten::_embedding_bag_forward_only.default", _bag_fn, _embedding_bag(), **ACCUMULATE_TOL)


def _bag_all(w: torch.Tensor, i: torch.Tensor, o: torch.Tensor, mode: int,
             padding: int) -> tuple:
    out = aten._embedding_bag(w, i, o, False, mode, False, None, False, padding)
    return out if mode == 2 else out[:3]  # max_indices is only defined in max mode


@st.composite
def _embedding_bag_all(draw: Any) -> Sample:
    """Mean/max bags without include_last_offset: all outputs are defined and compared."""
    s = draw(_embedding_bag("mean"))
    w, i, o = s.args[:3]
    if s.kwargs["include_last_offset"]:
        o = o[:-1].clone()
    return Sample((w, i, o, draw(st.sampled_from((1, 2))), draw(st.sampled_from((-1, 0)))))


add("aten::_embedding_bag.default", _bag_all, _embedding_bag_all(), **ACCUMULATE_TOL)


# -- ops torch decomposes onto the ones above ---------------------------------------------------

@st.composite
def _index_copy(draw: Any) -> Sample:
    x, axis, index, source = draw(_index_reduce()).args[:4]
    index = torch.unique(index.long())  # index_copy with duplicates is unspecified
    source = source.narrow(axis, 0, index.numel()).clone()
    return Sample((x, axis, index, source))


add("aten::index_put.default", lambda x, d, i, s: x.index_copy(d, i, s), _index_copy(),
    name="index_put[index_copy]")
add("aten::gather.default", lambda x, d, i: torch.take_along_dim(x, i, d),
    _gather(broadcast=True).filter(lambda s: s.args[0].dim() > 0),
    name="gather[take_along_dim]")


# -- as_strided_scatter ---------------------------------------------------------------------------

@st.composite
def _as_strided_scatter(draw: Any) -> Sample:
    """A non-overlapping strided view: a sub-grid of a contiguous tensor, possibly transposed."""
    dtype = draw(st.sampled_from(ALL_DTYPES))
    shape = list(draw(shapes(1, 3)))
    x = draw(tensors(shape, dtype))
    contiguous = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        contiguous[i] = contiguous[i + 1] * shape[i + 1]
    view = [draw(st.integers(1, s)) for s in shape]
    step = [draw(st.integers(1, max(1, s // v))) for s, v in zip(shape, view, strict=True)]
    stride = [c * k for c, k in zip(contiguous, step, strict=True)]
    spans = [(v - 1) * k for v, k in zip(view, step, strict=True)]
    offset_dims = [draw(st.integers(0, s - 1 - sp)) for s, sp in zip(shape, spans, strict=True)]
    offset = sum(o * c for o, c in zip(offset_dims, contiguous, strict=True))
    order = draw(st.permutations(range(len(shape))))
    size = [view[i] for i in order]
    stride = [stride[i] for i in order]
    src = draw(tensors(size, dtype))
    kwargs: dict[str, Any] = {"size": size, "stride": stride}
    if offset or draw(st.booleans()):
        kwargs["storage_offset"] = offset
    return Sample((x, src), kwargs)


add("aten::as_strided_scatter.default", torch.as_strided_scatter, _as_strided_scatter())
