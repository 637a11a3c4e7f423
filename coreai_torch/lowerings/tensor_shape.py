"""Built-in lowerings (tensor family): shape, view and layout ops (views, slicing, joins, copies).

Tensor factories are in ``tensor_creation.py``, pads in ``tensor_padding.py``. Layout-only
arguments (``memory_format``, ``device``, ``layout``) are ignored: Core AI tensors are dense
row-major values, so clones, detaches and aliases are the value itself.

Not lowered here: ``view_as_real`` / ``view_as_complex`` (the ``complex`` family),
``reshape`` / ``expand_as`` / ``lift_fresh_copy`` (torch.export always decomposes them to
``view`` / ``expand`` / ``clone`` before the converter sees them), and the composites torch's
default table decomposes cleanly (``stack``, ``tile``, ``hstack``, ``narrow``, ...).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._nn_utils import STATIC_WORKAROUND, dim_value
from coreai_torch.lowerings.tensor_creation import (
    Piece,
    dim_piece,
    shape_of,
    shape_operand,
    size_piece,
    sizes_operand,
)
from coreai_torch.utils import arg_meta, cast_to, normalize_dim, result_dtype, result_meta

LOWERINGS = LoweringSet("tensor_shape")
reg = LOWERINGS.register_torch_lowering

_INT64_MAX = 2**63 - 1


def _input_val() -> torch.Tensor:
    """torch's (fake) value of the ``self`` argument of the node being lowered."""
    val = arg_meta("self")
    if not isinstance(val, torch.Tensor):
        raise TypeError(f"the self argument is not a tensor: {val!r}")
    return val


# -- identities and casts -------------------------------------------------------------------------

@reg("aten::alias.default")
@reg("aten::clone.default")
@reg("aten::detach.default")
def aten_alias_default(self: Value) -> Value:
    """alias(Tensor(a) self) -> Tensor(a); also clone (memory_format ignored) and detach"""
    return self


@reg("aten::_to_copy.default")
def aten__to_copy_default(self: Value, dtype: DType | None = None) -> Value:
    """_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor"""  # noqa: E501
    return cast_to(self, result_dtype())


@reg("aten::copy.default")
def aten_copy_default(self: Value, src: Value) -> Value:
    """copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor: src broadcast to self"""
    src = cast_to(src, result_dtype())
    if src.type.shape == self.type.shape:
        return src
    return coreai.broadcast_to(src, shape_of(self))


# -- reshapes -------------------------------------------------------------------------------------

@reg("aten::view.default")
@reg("aten::_unsafe_view.default")
def aten_view_default(self: Value, size: list[int | Value]) -> Value:
    """view(Tensor(a) self, SymInt[] size) -> Tensor(a); also _unsafe_view"""
    x = self
    sizes = list(size)
    symbolic = [i for i, s in enumerate(sizes) if isinstance(s, Value)]
    if len(symbolic) == 1 and -1 not in sizes:
        # one dynamic entry and no -1: it is implied by the others, so the shape stays constant
        sizes[symbolic[0]] = -1
    if x.type.rank == len(sizes) and all(
            isinstance(s, int) and s == d for s, d in zip(sizes, x.type.shape, strict=True)):
        return x
    return coreai.reshape(x, sizes_operand(sizes))


def _reshape_lead(x: Value, lead: int, tail: list[Piece]) -> Value:
    """Reshape to ``x.shape[:lead] + tail`` (leading dims may be dynamic)."""
    return coreai.reshape(x, shape_operand(
        [*(dim_piece(x, i) for i in range(lead)), *tail]))


def _scaled(p: Piece, mul: int = 1, div: int = 1) -> Piece:
    """``p * mul // div`` for a static or dynamic size."""
    if isinstance(p, int):
        return p * mul // div
    if mul != 1:
        p = coreai.broadcasting_mul(p, coreai.constant(np.asarray([mul], np.int64)))
    if div != 1:
        p = coreai.broadcasting_floor_divide(p, coreai.constant(np.asarray([div], np.int64)))
    return p


def _pixel_tail(x: Value) -> list[Piece]:
    """Channels, height and width of ``x`` (static or dynamic)."""
    return [dim_piece(x, x.type.rank - i) for i in (3, 2, 1)]


@reg("aten::pixel_shuffle.default")
def aten_pixel_shuffle_default(self: Value, upscale_factor: int) -> Value:
    """pixel_shuffle(Tensor self, int upscale_factor) -> Tensor"""
    r = upscale_factor
    c, h, w = _pixel_tail(self)
    lead = self.type.rank - 3
    y = _reshape_lead(self, lead, [_scaled(c, div=r * r), r, r, h, w])
    perm = [*range(lead), lead, lead + 3, lead + 1, lead + 4, lead + 2]
    y = coreai.transpose(y, perm)
    return _reshape_lead(y, lead, [_scaled(c, div=r * r), _scaled(h, mul=r), _scaled(w, mul=r)])


@reg("aten::pixel_unshuffle.default")
def aten_pixel_unshuffle_default(self: Value, downscale_factor: int) -> Value:
    """pixel_unshuffle(Tensor self, int downscale_factor) -> Tensor"""
    r = downscale_factor
    c, h, w = _pixel_tail(self)
    lead = self.type.rank - 3
    y = _reshape_lead(self, lead, [c, _scaled(h, div=r), r, _scaled(w, div=r), r])
    perm = [*range(lead), lead, lead + 2, lead + 4, lead + 1, lead + 3]
    y = coreai.transpose(y, perm)
    return _reshape_lead(y, lead, [_scaled(c, mul=r * r), _scaled(h, div=r), _scaled(w, div=r)])


@reg("aten::unsqueeze.default")
def aten_unsqueeze_default(self: Value, dim: int) -> Value:
    """unsqueeze(Tensor(a) self, int dim) -> Tensor(a)"""
    return coreai.expand_dims(self, [normalize_dim(dim, self.type.rank + 1)])


def _squeeze(x: Value, dims: list[int]) -> Value:
    # torch squeezes only the listed dims whose size is 1; a dynamic size is never 1 here
    # (export would have specialized it), so the fake input shape decides.
    sizes = list(_input_val().shape)
    axes = [d for d in dims if isinstance(sizes[d], int) and sizes[d] == 1]
    if not axes:
        return x
    return coreai.shrink_dims(x, axes)


@reg("aten::squeeze.dim")
def aten_squeeze_dim(self: Value, dim: int) -> Value:
    """squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)"""
    if self.type.rank == 0:
        return self
    return _squeeze(self, [normalize_dim(dim, self.type.rank)])


@reg("aten::squeeze.dims")
def aten_squeeze_dims(self: Value, dim: list[int]) -> Value:
    """squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)"""
    if self.type.rank == 0:
        return self
    return _squeeze(self, sorted({normalize_dim(d, self.type.rank) for d in dim}))


@reg("aten::squeeze.default")
def aten_squeeze_default(self: Value) -> Value:
    """squeeze(Tensor(a) self) -> Tensor(a)"""
    return _squeeze(self, list(range(self.type.rank)))


# -- permutations ---------------------------------------------------------------------------------

def _permuted(x: Value, perm: list[int]) -> Value:
    if perm == list(range(x.type.rank)):
        return x
    return coreai.transpose(x, perm)


@reg("aten::permute.default")
def aten_permute_default(self: Value, dims: list[int]) -> Value:
    """permute(Tensor(a) self, int[] dims) -> Tensor(a)"""
    return _permuted(self, [normalize_dim(d, self.type.rank) for d in dims])


@reg("aten::transpose.int")
def aten_transpose_int(self: Value, dim0: int, dim1: int) -> Value:
    """transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)"""
    x = self
    if x.type.rank == 0:
        return x
    a = normalize_dim(dim0, x.type.rank)
    b = normalize_dim(dim1, x.type.rank)
    perm = list(range(x.type.rank))
    perm[a], perm[b] = perm[b], perm[a]
    return _permuted(x, perm)


@reg("aten::t.default")
def aten_t_default(self: Value) -> Value:
    """t(Tensor(a) self) -> Tensor(a)"""
    return _permuted(self, [1, 0]) if self.type.rank == 2 else self


@reg("aten::flip.default")
def aten_flip_default(self: Value, dims: list[int]) -> Value:
    """flip(Tensor self, int[] dims) -> Tensor"""
    x = self
    axes = sorted({normalize_dim(d, x.type.rank) for d in dims})
    if not axes or x.type.rank == 0:
        return x
    return coreai.reverse(x, axes)


# -- broadcasting and tiling ----------------------------------------------------------------------

@reg("aten::expand.default")
def aten_expand_default(self: Value, size: list[int | Value], implicit: bool = False) -> Value:
    """expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)"""
    x = self
    sizes = list(size)
    lead = len(sizes) - x.type.rank
    pieces: list[Piece] = []
    for i, s in enumerate(sizes):
        if isinstance(s, int) and s == -1:
            pieces.append(dim_piece(x, i - lead))
        else:
            pieces.append(size_piece(s))
    if lead == 0 and all(isinstance(p, int) and p == d
                         for p, d in zip(pieces, x.type.shape, strict=True)):
        return x
    return coreai.broadcast_to(x, shape_operand(pieces))


@reg("aten::repeat.default")
def aten_repeat_default(self: Value, repeats: list[int | Value]) -> Value:
    """repeat(Tensor self, SymInt[] repeats) -> Tensor"""
    x = self
    lead = len(repeats) - x.type.rank
    if lead:
        x = coreai.expand_dims(x, list(range(lead)))
    if any(isinstance(r, Value) for r in repeats):
        return _repeat_symbolic(x, repeats)
    reps = _static_ints(repeats, "repeats")
    if all(r == 1 for r in reps):
        return x
    return coreai.tile(x, reps)


def _piece_value(piece: Piece) -> Value:
    return piece if isinstance(piece, Value) else coreai.constant(np.asarray([piece], np.int64))


def _repeat_symbolic(x: Value, repeats: list[int | Value]) -> Value:
    """``repeat`` with symbolic counts: [d0, d1, ...] -> broadcast [r0, d0, r1, d1, ...]
    -> reshape [r0 * d0, r1 * d1, ...] (tile's layout: whole copies along each axis)."""
    n = len(repeats)
    spread = coreai.expand_dims(x, [2 * i for i in range(n)])
    pieces: list[Piece] = []
    products: list[Piece] = []
    for i, r in enumerate(repeats):
        count, size = size_piece(r), dim_piece(x, i)
        pieces += [count, size]
        if isinstance(count, int) and isinstance(size, int):
            products.append(count * size)
        else:
            products.append(coreai.broadcasting_mul(_piece_value(count), _piece_value(size)))
    wide = coreai.broadcast_to(spread, shape_operand(pieces))
    return coreai.reshape(wide, shape_operand(products))


# -- slicing --------------------------------------------------------------------------------------

def _slice(x: Value, axis: int, begin: Any, end: Any, step: int) -> Value:
    return coreai.slice_(x, begin, end, axes=[axis], strides=[step])


def _static_ints(values: list[int | Value], what: str) -> list[int]:
    if any(isinstance(v, Value) for v in values):
        raise NotImplementedError(f"{what} must be static, got a symbolic size; "
                                  f"{STATIC_WORKAROUND}")
    return [int(v) for v in values]  # type: ignore[arg-type]


def _bound(arg: int | Value | None, default: int) -> Any:
    if arg is None:
        return [default]
    if isinstance(arg, Value):
        return coreai.reshape(cast_to(arg, DType.int64), [1])
    return [int(arg)]


@reg("aten::slice.Tensor")
def aten_slice_tensor(self: Value, dim: int = 0, start: int | Value | None = None,
                      end: int | Value | None = None, step: int | Value = 1) -> Value:
    """slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)"""  # noqa: E501
    x = self
    axis = normalize_dim(dim, x.type.rank)
    step = _static_ints([step], "step")[0]
    size = x.type.shape[axis]
    whole_end = end is None or (isinstance(end, int) and (
        end >= 2**62 or (isinstance(size, int) and end >= size)))
    if step == 1 and start in (None, 0) and whole_end:
        return x
    return _slice(x, axis, _bound(start, 0), _bound(end, _INT64_MAX), step)


@reg("aten::select.int")
def aten_select_int(self: Value, dim: int, index: int | Value) -> Value:
    """select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)"""
    x = self
    axis = normalize_dim(dim, x.type.rank)
    if isinstance(index, Value):
        # a 0-d index removes the axis; take semantics wrap negative indices like torch
        return coreai.gather(x, cast_to(index, DType.int64), axis=axis)
    size = x.type.shape[axis]
    if index < 0 and isinstance(size, int):
        index += size
    end = index + 1 if index != -1 else _INT64_MAX
    return coreai.shrink_dims(_slice(x, axis, [index], [end], 1), [axis])


@reg("aten::diagonal.default")
def aten_diagonal_default(self: Value, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Value:
    """diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)"""
    x = self
    rank = x.type.rank
    d1 = normalize_dim(dim1, rank)
    d2 = normalize_dim(dim2, rank)
    n1, n2 = x.type.shape[d1], x.type.shape[d2]
    rest = [d for d in range(rank) if d not in (d1, d2)]
    y = _permuted(x, [*rest, d1, d2])
    if not (isinstance(n1, int) and isinstance(n2, int)):
        return _diagonal_gathered(y, offset)
    # move (d1, d2) last, flatten them, and take every (n2+1)-th element from the start
    y = _reshape_lead(y, len(rest), [n1 * n2])
    length = max(0, min(n1 + min(offset, 0), n2 - max(offset, 0)))
    begin = offset if offset >= 0 else -offset * n2
    if length == 0:
        return _slice(y, len(rest), [0], [0], 1)
    end = begin + (length - 1) * (n2 + 1) + 1
    return _slice(y, len(rest), [begin], [end], n2 + 1)


def _diagonal_gathered(y: Value, offset: int) -> Value:
    """The diagonal at ``offset`` of ``y``'s last two (run-time sized) dims, the last dim of
    the result: element ``i`` is ``y[..., i + max(-offset, 0), i + max(offset, 0)]``."""
    lead = y.type.rank - 2
    rows, cols = (cast_to(dim_value(y, lead + i), DType.int64) for i in (0, 1))
    row0 = coreai.constant(np.asarray(max(-offset, 0), np.int64))
    col0 = coreai.constant(np.asarray(max(offset, 0), np.int64))
    zero = coreai.constant(np.asarray(0, np.int64))
    length = coreai.broadcasting_maximum(zero, coreai.broadcasting_minimum(
        coreai.broadcasting_sub(rows, row0), coreai.broadcasting_sub(cols, col0)))
    i = coreai.range_(zero, length, coreai.constant(np.asarray(1, np.int64)))
    flat_index = coreai.broadcasting_add(
        coreai.broadcasting_mul(coreai.broadcasting_add(i, row0), cols),
        coreai.broadcasting_add(i, col0))
    area = coreai.reshape(coreai.broadcasting_mul(rows, cols), [1])
    flat = _reshape_lead(y, lead, [area])
    return coreai.gather(flat, flat_index, axis=lead)


# -- joins and splits -----------------------------------------------------------------------------

@reg("aten::cat.default")
def aten_cat_default(tensors: list[Value], dim: int = 0) -> Value:
    """cat(Tensor[] tensors, int dim=0) -> Tensor"""
    dtype = result_dtype()
    vals = [cast_to(t, dtype) for t in tensors]
    rank = max(v.type.rank for v in vals)
    # torch skips legacy 1-d empty tensors of any other rank
    vals = [v for v in vals if not (v.type.rank == 1 and v.type.shape[0] == 0 and rank > 1)]
    axis = normalize_dim(dim, rank)
    if len(vals) == 1:
        return vals[0]
    return coreai.concat(vals, axis=axis)


def _split(x: Value, sizes: list[int | Value], axis: int) -> list[Value]:
    """Pieces of ``sizes`` along ``axis``; one split op when all sizes are static."""
    static = [s for s in sizes if isinstance(s, int)]
    if len(static) == len(sizes) and isinstance(x.type.shape[axis], int):
        if len(static) == 1:
            return [x]
        return list(coreai.split(x, static, axis=axis))
    out = []
    begin: Piece = 0
    for i, s in enumerate(sizes):
        last = i == len(sizes) - 1
        end = _INT64_MAX if last else _add(begin, size_piece(s))
        out.append(_slice(x, axis, _pos(begin), _pos(end), 1))
        begin = end
    return out


def _pos(p: Piece) -> Any:
    """A :data:`Piece` as a 1-element slice bound."""
    return [p] if isinstance(p, int) else p


def _add(a: Piece, b: Piece) -> Piece:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    pa, pb = (coreai.constant(np.asarray([p], np.int64)) if isinstance(p, int) else p
              for p in (a, b))
    return coreai.broadcasting_add(pa, pb)


@reg("aten::split_with_sizes.default")
def aten_split_with_sizes_default(self: Value, split_sizes: list[int | Value],
                                  dim: int = 0) -> list[Value]:
    """split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]"""
    return _split(self, list(split_sizes), normalize_dim(dim, self.type.rank))


@reg("aten::split.Tensor")
def aten_split_tensor(self: Value, split_size: int | Value, dim: int = 0) -> list[Value]:
    """split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]"""
    axis = normalize_dim(dim, self.type.rank)
    pieces = result_meta()
    # the number of pieces is fixed by torch; the sizes come from the (fake) results
    sizes = [p.shape[axis] for p in pieces]
    if all(isinstance(s, int) for s in sizes):
        return _split(self, sizes, axis)
    return _split(self, [split_size] * len(pieces), axis)


@reg("aten::unbind.int")
def aten_unbind_int(self: Value, dim: int = 0) -> list[Value]:
    """unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]"""
    axis = normalize_dim(dim, self.type.rank)
    n = len(result_meta())
    if n == 0:
        return []
    return [coreai.shrink_dims(p, [axis]) for p in _split(self, [1] * n, axis)]


@reg("aten::roll.default")
def aten_roll_default(self: Value, shifts: list[int | Value], dims: list[int] | None = None,
                      ) -> Value:
    """roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor"""
    x = self
    if not dims:
        flat = coreai.reshape(x, [-1])
        return coreai.reshape(_roll(flat, 0, shifts[0]), shape_of(x))
    for shift, dim in zip(shifts, dims, strict=True):
        x = _roll(x, normalize_dim(dim, x.type.rank), shift)
    return x


def _roll(x: Value, axis: int, shift: int | Value) -> Value:
    size = x.type.shape[axis]
    if not (isinstance(size, int) and isinstance(shift, int)):
        return _roll_gathered(x, axis, shift)
    k = shift % size if size else 0
    if k == 0:
        return x
    tail = _slice(x, axis, [size - k], [size], 1)
    head = _slice(x, axis, [0], [size - k], 1)
    return coreai.concat([tail, head], axis=axis)


def _roll_gathered(x: Value, axis: int, shift: int | Value) -> Value:
    """Roll by a run-time size or shift: position ``i`` reads ``(i - shift) mod size``."""
    def i64(v: int | Value) -> Value:
        return coreai.constant(np.asarray(v, np.int64)) if isinstance(v, int) else \
            cast_to(v, DType.int64)

    size = i64(dim_value(x, axis))
    positions = coreai.range_(i64(0), size, i64(1))
    # an empty axis has no positions; the divisor is kept positive so nothing divides by 0
    modulus = coreai.broadcasting_maximum(size, i64(1))
    source = coreai.broadcasting_remainder(coreai.broadcasting_sub(positions, i64(shift)),
                                           modulus)
    return coreai.gather(x, source, axis=axis)
