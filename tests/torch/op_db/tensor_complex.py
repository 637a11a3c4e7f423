"""Op-database entries (tensor family): the data-movement ops (views, reshapes, splits, creation,
indexing, gather/scatter, masks, padding, embedding), conversions, sums and means on
complex64/complex128 tensors.

Most entries are the real entries of the ``tensor_*`` modules again with complex inputs
(``complex_variants``); the focused entries below cover what those cannot express: Python
complex scalars as fill values, factories with a complex dtype, nonzero of values with only one
non-zero part, and the scatter reductions torch implements for complex (not amax/amin).
"""

from __future__ import annotations

from typing import Any

import attrs
import torch
from hypothesis import strategies as st

from tests.torch.op_db import tensor_counting, tensor_indexing, tensor_shape
from tests.torch.op_db._entry import (
    ALL_DTYPES,
    COMPLEX_NO_HALF,
    EntrySet,
    OpEntry,
    Sample,
    broadcastable,
    by_id,
    complex_variant,
    complex_variants,
    shapes,
    tensors,
)
from tests.torch.op_db.complex import REAL, one

COMPLEX = st.sampled_from((torch.complex64, torch.complex128))
# Python complex scalars (a real and an integer one too: torch promotes them to the complex type)
VALUES = st.sampled_from((1j, 2 - 0.5j, -1.5 + 3j, complex(-0.0, 0.0), 2.25, -3))
# the scatter_reduce reductions torch implements for complex tensors (amax/amin need an order)
COMPLEX_REDUCTIONS = ("sum", "prod", "mean")

ENTRIES = EntrySet(no_half=COMPLEX_NO_HALF)


add = ENTRIES.add


def _by_target(entries: list[OpEntry], target: str) -> OpEntry:
    (entry,) = (e for e in entries if e.target == target)
    return entry


# -- the real entries on complex inputs -----------------------------------------------------------

ENTRIES += complex_variants(tensor_shape.ENTRIES, [
    "aten::alias.default", "aten::clone.default", "aten::detach.default", "aten::copy.default",
    "aten::_unsafe_view.default", "aten::pixel_shuffle.default", "aten::pixel_unshuffle.default",
    "aten::unsqueeze.default", "aten::squeeze.dim", "aten::squeeze.dims",
    "aten::squeeze.default", "aten::transpose.int", "aten::t.default", "aten::repeat.default",
    "aten::select.int", "aten::diagonal.default", "aten::as_strided.default",
    "aten::split_with_sizes.default", "aten::split.Tensor", "aten::unbind.int",
    "aten::roll.default", "aten::zeros_like.default", "aten::ones_like.default",
    "aten::new_zeros.default", "aten::new_ones.default", "aten::empty_like.default",
    "aten::new_empty.default", "aten::full_like.default", "aten::new_full.default",
    "aten::fill.Scalar", "aten::fill.Tensor",
])
ENTRIES += complex_variants(tensor_indexing.ENTRIES, [
    "aten::gather.default", "aten::index_select.default", "aten::index.Tensor",
    "aten::masked_fill.Scalar", "aten::masked_fill.Tensor", "aten::masked_scatter.default",
    "aten::masked_select.default", "aten::nonzero.default", "aten::nonzero_static.default",
    "aten::scatter.src", "aten::scatter.value", "aten::select_scatter.default",
    "aten::slice_scatter.default", "aten::diagonal_scatter.default",
])
# The real entries of the accumulating ops loosen the tolerance for float16/bfloat16 partial
# sums; complex inputs are complex64/complex128, so their variants keep the default tolerance.
_DEFAULT_TOL = {"atol": None, "rtol": None, "tol_reason": ""}
ENTRIES += complex_variants(tensor_indexing.ENTRIES, [
    "aten::index_put.default", "aten::put.default", "aten::scatter.reduce",
    "aten::scatter.value_reduce", "aten::scatter_add.default"], **_DEFAULT_TOL)
_scatter_reduce = _by_target(tensor_indexing.ENTRIES, "aten::scatter_reduce.two")
_complex_reductions = _scatter_reduce.samples.flatmap(  # the same samples, reduce redrawn
    lambda s: st.sampled_from(COMPLEX_REDUCTIONS).map(
        lambda r: Sample((*s.args[:4], r, *s.args[5:]))))
ENTRIES.append(complex_variant(attrs.evolve(_scatter_reduce, samples=_complex_reductions),
                               **_DEFAULT_TOL))
ENTRIES += complex_variants(tensor_indexing.ENTRIES, ["aten::as_strided_scatter.default"])
ENTRIES += complex_variants(tensor_shape.ENTRIES, ["aten::empty_permuted.default"])


# -- complex fill values -------------------------------------------------------------------------

@st.composite
def _complex_tensor(draw: Any, min_rank: int = 0, max_rank: int = 4) -> torch.Tensor:
    return draw(tensors(draw(shapes(min_rank, max_rank)), draw(COMPLEX)))


@st.composite
def _like(draw: Any, with_size: bool) -> Sample:
    """A complex tensor (dtype kept), or any tensor asked for a complex result dtype."""
    if draw(st.booleans()):
        x, dtype = draw(_complex_tensor()), None
    else:
        x = draw(tensors(draw(shapes()), draw(st.sampled_from(ALL_DTYPES))))
        dtype = draw(COMPLEX)
    kw = {"value": draw(VALUES), "dtype": dtype}
    if with_size:
        kw["size"] = draw(st.lists(st.integers(0, 4), max_size=3))
    return Sample((x,), kw)


add("aten::full_like.default", lambda x, value, dtype: torch.full_like(x, value, dtype=dtype),
    _like(False), name="full_like[complex_value]")
add("aten::new_full.default",
    lambda x, size, value, dtype: x.new_full(size, value, dtype=dtype), _like(True),
    name="new_full[complex_value]")
add("aten::fill.Scalar", lambda x, value: torch.fill(x, value),
    st.builds(lambda x, v: Sample((x,), {"value": v}), _complex_tensor(), VALUES),
    name="fill.Scalar[complex_value]")


@st.composite
def _masked_fill(draw: Any) -> Sample:
    x = draw(_complex_tensor(max_rank=3))
    mask = draw(tensors(draw(broadcastable(tuple(x.shape))), torch.bool))
    return Sample((x, mask, draw(VALUES)))


add("aten::masked_fill.Scalar", lambda x, m, v: x.masked_fill(m, v), _masked_fill(),
    name="masked_fill.Scalar[complex_value]")


@st.composite
def _scatter_value(draw: Any, reduce: bool) -> Sample:
    """scatter of a complex scalar; the index of ``indexing``'s value scatter samples."""
    sample = draw(_by_target(tensor_indexing.ENTRIES, "aten::scatter.value").samples)
    x, dim, index, _ = sample.args
    x = draw(tensors(tuple(x.shape), draw(COMPLEX), low=-2, high=2))
    if not reduce:
        return Sample((x, dim, index, draw(VALUES)))
    return Sample((x, dim, index, draw(VALUES), draw(st.sampled_from(("add", "multiply")))))


add("aten::scatter.value", lambda x, d, i, v: torch.scatter(x, d, i, v), _scatter_value(False),
    name="scatter.value[complex_value]")
add("aten::scatter.value_reduce", lambda x, d, i, v, r: torch.scatter(x, d, i, v, reduce=r),
    _scatter_value(True), name="scatter.value_reduce[complex_value]")

# -- factories with a complex dtype --------------------------------------------------------------

_SIZE = st.lists(st.integers(0, 4), max_size=3)
add("aten::full.default", lambda size, value, dtype: torch.full(size, value, dtype=dtype),
    st.builds(lambda s, v, d: Sample((), {"size": s, "value": v, "dtype": d}), _SIZE, VALUES,
              st.one_of(st.none(), COMPLEX)).filter(
        lambda s: s.kwargs["dtype"] or isinstance(s.kwargs["value"], complex)),
    name="full[complex]")
_COMPLEX_SIZED = st.builds(lambda s, d: Sample((), {"size": s, "dtype": d}), _SIZE, COMPLEX)
add("aten::zeros.default", lambda size, dtype: torch.zeros(size, dtype=dtype), _COMPLEX_SIZED,
    name="zeros[complex]")
add("aten::ones.default", lambda size, dtype: torch.ones(size, dtype=dtype), _COMPLEX_SIZED,
    name="ones[complex]")

# -- nonzero: a complex value is non-zero when either part is ------------------------------------


@st.composite
def _sparse_parts(draw: Any) -> torch.Tensor:
    """Complex values whose real and imaginary parts are each zero (+0.0 or -0.0) half of
    the time, so that some elements have exactly one non-zero part."""
    z = draw(tensors(draw(shapes(0, 3, min_size=0)), draw(COMPLEX), low=-1, high=1))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    zero = torch.where(torch.rand(z.shape, generator=g) < 0.5, 0.0, -0.0).to(z.real.dtype)
    parts = [torch.where(torch.rand(z.shape, generator=g) < 0.5, zero, p)
             for p in (z.real, z.imag)]
    return torch.complex(*parts)


add("aten::nonzero.default", torch.nonzero, _sparse_parts().map(lambda z: Sample((z,))),
    name="nonzero[complex_parts]")
add("aten::nonzero_static.default",
    lambda x, size, fill: torch.nonzero_static(x, size=size, fill_value=fill),
    st.builds(lambda z, n, f: Sample((z, n, f)), _sparse_parts(), st.integers(0, 8),
              st.sampled_from((-1, 7))), name="nonzero_static[complex_parts]")


# -- conversions, reductions and views drawing one complex dtype each -------------------------
add("aten::_to_copy.default", lambda z, d: z.to(d), st.one_of(
    one(st.just(torch.complex64), d=st.just(torch.complex128)),
    one(st.just(torch.complex128), d=st.just(torch.complex64))), name="to[complex]")
add("aten::_to_copy.default", lambda x, d: x.to(d),
    one(REAL, d=st.sampled_from((torch.complex64, torch.complex128))), name="to[real->complex]")
add("aten::_to_copy.default", lambda z, d: z.to(d),  # keeps the real part (torch warns)
    one(d=st.sampled_from((torch.float32, torch.float64, torch.int32, torch.bool))),
    name="to[complex->real]")

# -- reductions and data movement -----------------------------------------------------------------
add("aten::sum.dim_IntList", lambda z, d: z.sum(d), one(min_rank=1, d=st.just(-1)),
    name="sum[complex]")
add("aten::mean.dim", lambda z, d: z.mean(d), one(min_rank=1, d=st.just(0)),
    name="mean[complex]")
add("aten::permute.default", lambda z: z.permute(*reversed(range(z.dim()))).contiguous(),
    one(min_rank=1), name="permute[complex]")
add("aten::view.default", lambda z: z.reshape(-1), one(min_rank=1), name="view[complex]")
add("aten::cat.default", lambda a, b: torch.cat([a, b], 0), st.builds(
    lambda a, b: Sample((a, b)), tensors((2, 47), torch.complex128),
    tensors((1, 47), torch.complex128)), name="cat[complex]")
add("aten::slice.Tensor", lambda z: z[..., 1::2], one(min_rank=1), name="slice[complex]")
add("aten::flip.default", lambda z: z.flip(0), one(min_rank=1), name="flip[complex]")
add("aten::expand.default", lambda z: z.expand(3, *z.shape), one(), name="expand[complex]")
# the general cat entries on complex inputs
ENTRIES += complex_variants([e for e in tensor_shape.ENTRIES if not e.name], ["aten::cat.default"])


# -- padding, embedding and bincount's weights, as complex variants of the real entries --------
ENTRIES += [complex_variant(e) for e in by_id(tensor_shape.ENTRIES, (
    "aten::constant_pad_nd.default",
    *(f"aten::{mode}_pad{n}d.default" for mode in ("reflection", "replication")
      for n in (1, 2, 3))))]
ENTRIES += [complex_variant(e) for e in by_id(tensor_indexing.ENTRIES, (
    "aten::embedding.default", "aten::embedding_dense_backward.default"))]


def _complex_fill(sample: Sample) -> Sample:
    return Sample(sample.args, {**sample.kwargs,
                                "value": complex(sample.kwargs["value"], -1.25)})


# a complex fill value: aten.constant_pad_nd takes any Scalar (F.pad only floats)
_pad = by_id(ENTRIES, ["aten::constant_pad_nd.default[complex]"])[0]
ENTRIES.append(attrs.evolve(
    _pad, name="constant_pad_nd[complex value]", samples=_pad.samples.map(_complex_fill),
    fn=lambda x, pad, value: torch.ops.aten.constant_pad_nd(x, pad, value)))

# torch casts complex weights to float64, discarding the imaginary part (with a warning): the
# lowering does the same, and this entry pins it. Not on an empty input: there torch's eager
# kernel returns int64 zeros whatever the weights while its meta (which the exported graph
# and so the lowering follow) says float64.
_bincount = complex_variant(by_id(tensor_counting.ENTRIES, ["aten::bincount.default"])[0])
ENTRIES.append(attrs.evolve(
    _bincount, samples=_bincount.samples.filter(lambda s: s.args[0].numel() > 0)))
