"""Op-database entries (tensor family): reductions, arg-reductions, variance, norms, softmax, scans,
sorting."""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from tests import reference
from tests.torch.harness import assert_matches, to_numpy
from tests.torch.op_db._entry import (
    ANY,
    FLOATS,
    INT_DTYPES,
    NUMERIC,
    EntrySet,
    OpEntry,
    Sample,
    complex_variant,
    complex_variants,
    shapes,
    tensors,
)

aten = torch.ops.aten

ENTRIES = EntrySet()


add = ENTRIES.add


# -- strategies ---------------------------------------------------------------------------------

def _tensor(draw: Any, dtypes: st.SearchStrategy, *, min_rank: int = 0, empty: bool = False,
            low: float = -4.0, high: float = 4.0, special: bool = False) -> torch.Tensor:
    """A tensor of a drawn dtype and shape; ``empty`` sometimes zeroes one dim.

    Integer tensors use [low, high] too, so small ranges give many ties.
    """
    dtype = draw(dtypes)
    shape = list(draw(shapes(min_rank=min_rank, max_rank=4)))
    if empty and shape and draw(st.integers(0, 4)) == 0:
        shape[draw(st.integers(0, len(shape) - 1))] = 0
    return draw(tensors(shape, dtype, low=low, high=high,
                        special=special and dtype.is_floating_point))


def _dim(draw: Any, rank: int) -> int:
    """One dim, sometimes negative (rank 0 admits 0 and -1)."""
    r = max(rank, 1)
    return draw(st.integers(-r, r - 1))


def _dims(draw: Any, rank: int, *, none: bool = True, empty_list: bool = True,
          ) -> list[int] | None:
    """A list of distinct dims, or None / [] (which mean every dim for most reductions)."""
    choice = draw(st.integers(0, 5))
    if choice == 0 and none:
        return None
    if choice == 1 and empty_list:
        return []
    if rank == 0:
        return [draw(st.sampled_from((0, -1)))]
    axes = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    return [a - rank if draw(st.booleans()) else a for a in axes]


@st.composite
def _reduce(draw: Any, dtypes: st.SearchStrategy = ANY, *, dims: str = "list",
            empty: bool = False, low: float = -4.0, high: float = 4.0, special: bool = False,
            none: bool = True, empty_list: bool = True, with_keepdim: bool = True,
            min_rank: int = 0, **extra: st.SearchStrategy) -> Sample:
    """x plus ``dim`` (``dims``: "list", "int", "none" for no dim) and ``keepdim`` kwargs."""
    x = _tensor(draw, dtypes, min_rank=min_rank, empty=empty, low=low, high=high,
                special=special)
    kwargs: dict[str, Any] = {}
    if dims == "list":
        kwargs["dim"] = _dims(draw, x.dim(), none=none, empty_list=empty_list)
    elif dims == "int":
        kwargs["dim"] = _dim(draw, x.dim())
    if with_keepdim and dims != "none":
        kwargs["keepdim"] = draw(st.booleans())
    kwargs.update({k: draw(v) for k, v in extra.items()})
    return Sample((x,), kwargs)


def _no_empty_reduced(sample: Sample) -> bool:
    """torch raises for max/min-like reductions over an empty dim: keep only legal samples."""
    x, dim = sample.args[0], sample.kwargs.get("dim")
    if x.numel():
        return True
    if dim is None or dim == []:
        return False
    dims = [dim] if isinstance(dim, int) else dim
    return all(x.shape[d] != 0 for d in dims) if x.dim() else False


# -- comparisons for outputs whose indices are ambiguous under ties -----------------------------

def _picked(x: torch.Tensor, indices: np.ndarray, dim: int, keepdim: bool) -> np.ndarray:
    """x's elements at ``indices`` along ``dim`` (as float64 numpy)."""
    xs = to_numpy(x).astype(np.float64)
    if x.dim() == 0:
        return xs.reshape(indices.shape)
    idx = indices if keepdim else np.expand_dims(indices, dim)
    got = np.take_along_axis(xs, idx, axis=dim % x.dim())
    return got if keepdim else np.squeeze(got, dim % x.dim())


def _values_and_indices(dim_of: Any, keepdim_of: Any = lambda s: True,
                        sort_values: bool = False) -> Any:
    """Compare (values, indices) where torch leaves the index of equal values unspecified.

    Values must match torch exactly (they are elements of x), indices must be int64 of the
    right shape, distinct along dim for sort/topk, and select exactly those values from x.
    With ``sort_values`` (topk sorted=False) the values are compared as a set along dim.
    """
    def compare(expected: list[torch.Tensor], got: list[np.ndarray], sample: Sample) -> None:
        x = sample.args[0]
        dim, keepdim = dim_of(sample), keepdim_of(sample)
        ev, ei = expected
        gv, gi = (np.asarray(g) for g in got)
        if sort_values and ev.dim():
            ev = ev.sort(dim).values
            gv = np.sort(gv.astype(np.float64), axis=dim % ev.dim()).astype(gv.dtype)
        assert_matches([ev], [gv], atol=0.0, rtol=0.0, what="values")
        assert gi.shape == tuple(ei.shape) and gi.dtype == np.int64, (gi.shape, gi.dtype)
        np.testing.assert_array_equal(_picked(x, gi, dim, keepdim),
                                      np.asarray(got[0]).astype(np.float64),
                                      err_msg="indices do not select the values")

    return compare


def _distinct_indices(compare: Any, dim_of: Any) -> Any:
    def check(expected: list[torch.Tensor], got: list[np.ndarray], sample: Sample) -> None:
        compare(expected, got, sample)
        gi = np.asarray(got[1])
        if gi.ndim and gi.size:
            s = np.sort(gi, axis=dim_of(sample) % gi.ndim)
            assert (np.diff(s, axis=dim_of(sample) % gi.ndim) != 0).all(), "repeated indices"

    return check


# -- sum, prod, mean ----------------------------------------------------------------------------
SUM_DTYPES = st.sampled_from((None, torch.float64, torch.float32, torch.int32, torch.int64))
add("aten::sum.dim_IntList", lambda x, dim, keepdim: torch.sum(x, dim, keepdim),
    _reduce(ANY, empty=True))
add("aten::sum.dim_IntList", lambda x, dim, keepdim, dtype: torch.sum(x, dim, keepdim,
                                                                      dtype=dtype),
    _reduce(NUMERIC, none=False, dtype=SUM_DTYPES), name="sum.dim_IntList[dtype]")
add("aten::sum.default", lambda x, dtype: torch.sum(x, dtype=dtype),
    _reduce(ANY, dims="none", empty=True, dtype=SUM_DTYPES))
add("aten::prod.dim_int", lambda x, dim, keepdim: torch.prod(x, dim, keepdim),
    _reduce(ANY, dims="int", empty=True, low=-2.0, high=2.0))
add("aten::prod.default", lambda x, dtype: torch.prod(x, dtype=dtype),
    _reduce(ANY, dims="none", empty=True, low=0.5, high=1.5,
            dtype=st.sampled_from((None, torch.float64, torch.int64))))
add("aten::mean.dim", lambda x, dim, keepdim: torch.mean(x, dim, keepdim),
    _reduce(FLOATS, empty=True, special=True))
add("aten::mean.dim", lambda x, dim, keepdim, dtype: torch.mean(x, dim, keepdim, dtype=dtype),
    _reduce(NUMERIC, dtype=st.sampled_from((torch.float32, torch.float64))),
    name="mean.dim[dtype]")
add("aten::mean.default", torch.mean, _reduce(FLOATS, dims="none", special=True))
# integer (and bool) inputs need a float dtype; every float dtype, half ones included. Values
# up to 1e5 overflow float16 and are not all exact in bfloat16: torch sums the integers in
# float32 (or float64) and rounds the mean once.
MEAN_DTYPES = st.sampled_from((torch.float32, torch.float64, torch.float16, torch.bfloat16))
INT_OR_BOOL = st.sampled_from((*INT_DTYPES, torch.bool))
add("aten::mean.dim", lambda x, dim, keepdim, dtype: torch.mean(x, dim, keepdim, dtype=dtype),
    _reduce(INT_OR_BOOL, dtype=MEAN_DTYPES, low=-100000, high=100000),
    name="mean.dim[int, dtype]")
add("aten::mean.default", lambda x, dtype: torch.mean(x, dtype=dtype),
    _reduce(INT_OR_BOOL, dims="none", dtype=MEAN_DTYPES, low=-100000, high=100000),
    name="mean.default[int, dtype]")

# -- max, min, argmax, any, all -----------------------------------------------------------------
def _by_dim(f: Any) -> Any:
    """``f(x, dim, keepdim)`` with dim and keepdim as keyword attributes of the sample."""
    return lambda x, dim, keepdim: f(x, dim, keepdim)


for _name in ("amax", "amin"):
    add(f"aten::{_name}.default", _by_dim(getattr(torch, _name)),
        _reduce(ANY, empty=True, none=False, special=True, low=-2.0, high=2.0)
        .filter(_no_empty_reduced))
for _name in ("max", "min"):
    add(f"aten::{_name}.default", getattr(torch, _name),
        _reduce(ANY, dims="none", special=True, low=-2.0, high=2.0))
    # Small integer ranges give ties: torch returns the first extremum, as we do.
    add(f"aten::{_name}.dim", _by_dim(getattr(torch, _name)),
        _reduce(ANY, dims="int", empty=True, special=True, low=-2.0, high=2.0)
        .filter(_no_empty_reduced))
for _name in ("argmax", "argmin"):
    add(f"aten::{_name}.default", _by_dim(getattr(torch, _name)),
        _reduce(NUMERIC, dims="int", special=True, low=-2.0, high=2.0))
    add(f"aten::{_name}.default", _by_dim(getattr(torch, _name)),
        _reduce(NUMERIC, dims="none", special=True, low=-2.0, high=2.0,
                dim=st.none(), keepdim=st.booleans()),
        name=f"{_name}.default[flat]")


@st.composite
def _truth_values(draw: Any, dims: str) -> Sample:
    """Mostly-zero or mostly-nonzero tensors (and NaN, which is true), so any/all vary."""
    sample = draw(_reduce(ANY, dims=dims, empty=True, special=True, low=0.0, high=1.0))
    x = sample.args[0]
    if x.numel() and x.dtype != torch.bool:
        keep = draw(st.sampled_from((0.1, 0.9, 1.0)))
        g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
        x = torch.where(torch.rand(x.shape, generator=g) < keep, x.ceil(), torch.zeros_like(x))
    return Sample((x,), sample.kwargs)


for _name in ("any", "all"):
    _f = getattr(torch, _name)
    add(f"aten::{_name}.default", _f, _truth_values("none"))
    add(f"aten::{_name}.dim", _by_dim(_f), _truth_values("int"))
    add(f"aten::{_name}.dims", lambda x, dim, keepdim, f=_f: f(x, dim=dim, keepdim=keepdim),
        _truth_values("list").filter(lambda s: s.kwargs["dim"] is None or s.kwargs["dim"]))
    add(f"aten::{_name}.dims", getattr(aten, _name).dims,
        _truth_values("none").map(lambda s: Sample(s.args, {"dim": []})),
        name=f"{_name}.dims[empty]")

# -- variance, std, norms -----------------------------------------------------------------------
CORRECTIONS = st.sampled_from((None, 0, 1, 2, 0.5))
for _name in ("var", "std"):
    _f = getattr(torch, _name)
    add(f"aten::{_name}.correction",
        lambda x, dim, keepdim, correction, f=_f: f(x, dim, correction=correction,
                                                    keepdim=keepdim),
        _reduce(FLOATS, special=True, correction=CORRECTIONS))
    add(f"aten::{_name}.dim", lambda x, dim, keepdim, unbiased, f=_f: f(x, dim, unbiased, keepdim),
        _reduce(FLOATS, none=False, empty_list=False, unbiased=st.booleans()))
    add(f"aten::{_name}.default", lambda x, unbiased, f=_f: f(x, unbiased),
        _reduce(FLOATS, dims="none", unbiased=st.booleans()))
add("aten::var_mean.correction",
    lambda x, dim, keepdim, correction: torch.var_mean(x, dim, correction=correction,
                                                       keepdim=keepdim),
    _reduce(FLOATS, correction=CORRECTIONS))
add("aten::linalg_vector_norm.default",
    lambda x, dim, keepdim, ord, dtype: torch.linalg.vector_norm(x, ord, dim, keepdim,
                                                                 dtype=dtype),
    _reduce(FLOATS, ord=st.sampled_from((2, 1, math.inf, -math.inf, 0, 3, 0.5)),
            dtype=st.sampled_from((None, torch.float64))).filter(_no_empty_reduced),
    atol=1e-5, rtol=1e-4,
    tol_reason="float32 |x|**p sums: numpy's pow and summation order differ from torch's "
               "by a few ulps, which the final **(1/p) keeps")

# -- softmax, logsumexp -------------------------------------------------------------------------
# a row with one +inf: torch gives NaN, the runtime the limit (one-hot; 0 and -inf)
add("aten::_softmax.default", lambda x, dim: aten._softmax(x, dim, False),
    _reduce(FLOATS, dims="int", with_keepdim=False, special=True, low=-20.0, high=20.0),
    reference=reference.with_inf_limits(lambda x, dim: aten._softmax(x, dim, False)))
add("aten::_log_softmax.default", lambda x, dim: aten._log_softmax(x, dim, False),
    _reduce(FLOATS, dims="int", with_keepdim=False, special=True, low=-20.0, high=20.0),
    reference=reference.with_inf_limits(lambda x, dim: aten._log_softmax(x, dim, False)))
for _name, _f in (("softmax", F.softmax), ("log_softmax", F.log_softmax)):
    add(f"aten::{_name}.int", lambda x, dim, dtype, f=_f: f(x, dim, dtype=dtype),
        _reduce(FLOATS, dims="int", with_keepdim=False, low=-20.0, high=20.0,
                dtype=st.sampled_from((None, torch.float32, torch.float64))))
add("aten::logsumexp.default", lambda x, dim, keepdim: torch.logsumexp(x, dim, keepdim),
    _reduce(NUMERIC, none=False, empty_list=False, special=True, low=-20.0, high=20.0))

# -- scans --------------------------------------------------------------------------------------
add("aten::cumsum.default", lambda x, dim, dtype: torch.cumsum(x, dim, dtype=dtype),
    _reduce(ANY, dims="int", with_keepdim=False, empty=True,
            dtype=st.sampled_from((None, None, torch.float64, torch.int32))))
add("aten::cumprod.default", lambda x, dim, dtype: torch.cumprod(x, dim, dtype=dtype),
    _reduce(ANY, dims="int", with_keepdim=False, empty=True, low=-2.0, high=2.0,
            dtype=st.sampled_from((None, None, torch.float64))))
for _name in ("cummax", "cummin"):
    # Small integer ranges give ties: torch moves the index to the latest tie, as we do.
    add(f"aten::{_name}.default", getattr(torch, _name),
        _reduce(ANY, dims="int", with_keepdim=False, empty=True, special=True, low=-2.0,
                high=2.0))
add("aten::logcumsumexp.default", torch.logcumsumexp,
    _reduce(FLOATS, dims="int", with_keepdim=False, empty=True, special=True, low=-30.0,
            high=30.0))


# -- sort, topk, order statistics ---------------------------------------------------------------
def _dim_kw(s: Sample) -> int:
    return s.kwargs.get("dim", -1)


def _keepdim_kw(s: Sample) -> bool:
    return s.kwargs.get("keepdim", False)


# torch.sort without stable=True does not specify the order of equal elements.
add("aten::sort.default", lambda x, dim, descending: torch.sort(x, dim, descending),
    _reduce(ANY, dims="int", with_keepdim=False, empty=True, special=True, low=-2.0, high=2.0,
            descending=st.booleans()),
    compare=_distinct_indices(_values_and_indices(_dim_kw), _dim_kw))
add("aten::sort.stable",
    lambda x, dim, descending: torch.sort(x, dim=dim, descending=descending, stable=True),
    _reduce(ANY, dims="int", with_keepdim=False, empty=True, special=True, low=-2.0, high=2.0,
            descending=st.booleans()))


@st.composite
def _topk(draw: Any) -> Sample:
    sample = draw(_reduce(NUMERIC, dims="int", with_keepdim=False, special=True, low=-2.0, high=2.0,
                          largest=st.booleans(), sorted=st.booleans()))
    x, dim = sample.args[0], sample.kwargs["dim"]
    size = x.shape[dim] if x.dim() else 1
    k = draw(st.integers(1 if x.dim() == 0 else 0, size))
    return Sample((x,), {"k": k, **sample.kwargs})


# topk: torch leaves the index among equal values (and with sorted=False the order)
# unspecified; the runtime reproduces its CPU kernel's choice, so both compare exactly.
add("aten::topk.default",
    lambda x, k, dim, largest, sorted: torch.topk(x, k, dim, largest, sorted), _topk())

# median/kthvalue: torch picks the index of equal values by a selection algorithm.
_ORDER_STAT = _values_and_indices(_dim_kw, _keepdim_kw)
add("aten::median.default", torch.median,
    _reduce(NUMERIC, dims="none", special=True, low=-2.0, high=2.0).filter(
        lambda s: s.args[0].numel() > 0))
add("aten::nanmedian.default", torch.nanmedian,
    _reduce(NUMERIC, dims="none", special=True, low=-2.0, high=2.0))
add("aten::median.dim", lambda x, dim, keepdim: torch.median(x, dim, keepdim),
    _reduce(NUMERIC, dims="int", special=True, low=-2.0, high=2.0), compare=_ORDER_STAT)
add("aten::nanmedian.dim", lambda x, dim, keepdim: torch.nanmedian(x, dim, keepdim),
    _reduce(NUMERIC, dims="int", special=True, low=-2.0, high=2.0), compare=_ORDER_STAT)


@st.composite
def _kthvalue(draw: Any) -> Sample:
    sample = draw(_reduce(NUMERIC, dims="int", special=True, low=-2.0, high=2.0))
    x, dim = sample.args[0], sample.kwargs["dim"]
    k = draw(st.integers(1, x.shape[dim] if x.dim() else 1))
    return Sample((x,), {"k": k, **sample.kwargs})


add("aten::kthvalue.default", lambda x, k, dim, keepdim: torch.kthvalue(x, k, dim, keepdim),
    _kthvalue(), compare=_ORDER_STAT)


# -- the same entries on complex inputs ---------------------------------------------------------
_COMPLEX_DTYPE = {torch.float32: torch.complex64, torch.float64: torch.complex128}


def _complex_dtype_kw(sample: Sample) -> Sample:
    """A real floating ``dtype=`` becomes its complex counterpart (torch requires a complex
    dtype for complex norms, and a real one would just drop the imaginary part)."""
    dtype = sample.kwargs.get("dtype")
    if dtype not in _COMPLEX_DTYPE:
        return sample
    return Sample(sample.args, {**sample.kwargs, "dtype": _COMPLEX_DTYPE[dtype]})


def _complex_entries(targets: list[str], **changes: Any) -> list[OpEntry]:
    variants = complex_variants([e for e in ENTRIES if not e.name], targets, **changes)
    return [attrs.evolve(v, samples=v.samples.map(_complex_dtype_kw)) for v in variants]


ENTRIES += _complex_entries([
    "aten::sum.default", "aten::mean.default", "aten::any.default", "aten::any.dim",
    "aten::any.dims", "aten::all.default", "aten::all.dim", "aten::all.dims",
    "aten::var.correction", "aten::var.dim", "aten::var.default", "aten::std.correction",
    "aten::std.dim", "aten::std.default", "aten::var_mean.correction", "aten::cumsum.default"])
# imaginary parts up to 3 make the principal branch of the log (logsumexp) and torch's
# branch (logcumsumexp, see its lowering) matter
ENTRIES += _complex_entries(["aten::logsumexp.default"], imag=3.0)


def _no_pos_inf(sample: Sample) -> Sample:
    """+inf real parts become -inf: with two of them torch's logcumsumexp takes
    log(exp(a) + exp(b)) of infinities, whose NaN-or-inf parts follow the C++ library's
    complex exp; -inf (a zero term) and NaN are kept."""
    (x,) = sample.args
    return Sample((torch.where(x == math.inf, -math.inf, x),), sample.kwargs)


_LOGCUMSUMEXP = next(e for e in ENTRIES if e.target == "aten::logcumsumexp.default")
ENTRIES.append(complex_variant(attrs.evolve(_LOGCUMSUMEXP,
                                            samples=_LOGCUMSUMEXP.samples.map(_no_pos_inf)),
                               imag=3.0))
# small imaginary parts keep products of up to 47 factors within float32's range
ENTRIES += _complex_entries(["aten::prod.dim_int", "aten::prod.default",
                             "aten::cumprod.default"], imag=0.5)
ENTRIES += _complex_entries(["aten::linalg_vector_norm.default"], atol=1e-5, rtol=1e-4,
                            tol_reason="as for real inputs: |z|**p sums round differently")
# long axes with imaginary parts in [-6, 6], where torch's branch is far from the principal one
add("aten::logcumsumexp.default", torch.logcumsumexp,
    st.builds(lambda x, dim: Sample((x,), {"dim": dim}),
              st.sampled_from((torch.complex64, torch.complex128)).flatmap(
                  lambda dt: tensors((3, 47), dt, low=-6.0, high=6.0)),
              st.sampled_from((1, -1))),
    name="logcumsumexp[complex, long axis]")
