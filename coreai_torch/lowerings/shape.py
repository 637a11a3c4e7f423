"""Built-in lowerings: shape, view and layout ops (views, slicing, joins, pads, copies).

Tensor factories are the ``creation`` family. Layout-only arguments (``memory_format``,
``device``, ``layout``) are ignored: Core AI tensors are dense row-major
values, so clones, detaches and aliases are the value itself.

Not lowered here: ``view_as_real`` / ``view_as_complex`` (the ``complex`` family),
``reshape`` / ``expand_as`` / ``lift_fresh_copy`` (torch.export always decomposes them to
``view`` / ``expand`` / ``clone`` before the converter sees them), and the composites torch's
default table decomposes cleanly (``stack``, ``tile``, ``hstack``, ``narrow``, ...).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch.fx

from coreai_core import DType, Location, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._common import ValuesMap
from coreai_torch.lowerings.creation import Piece, dim_piece, shape_of, shape_operand, size_piece
from coreai_torch.utils import (
    cast_to,
    get_arg,
    get_operand,
    int_list,
    normalize_dim,
    result_dtype,
    shape_value,
)

LOWERINGS = LoweringSet("shape")
reg = LOWERINGS.register_torch_lowering

_INT64_MAX = 2**63 - 1


def _x(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    return get_operand(values_map, node, 0, loc)


def _in_shape(node: torch.fx.Node, index: int = 0) -> list[Any]:
    """The torch shape of tensor argument ``index`` (ints and SymInts)."""
    return list(node.args[index].meta["val"].shape)


# -- identities and casts -------------------------------------------------------------------------

@reg("aten::alias.default", "aten::clone.default", "aten::detach.default")
def aten_alias_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """alias(Tensor(a) self) -> Tensor(a); also clone (memory_format ignored) and detach"""
    return _x(values_map, node, loc)


@reg("aten::_to_copy.default")
def aten__to_copy_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor"""  # noqa: E501
    return cast_to(_x(values_map, node, loc), result_dtype(node), loc)


@reg("aten::copy.default")
def aten_copy_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor: src broadcast to self"""
    x = _x(values_map, node, loc)
    src = cast_to(get_operand(values_map, node, 1, loc), result_dtype(node), loc)
    if src.type.shape == x.type.shape:
        return src
    return coreai.broadcast_to(src, shape_of(x, loc), loc=loc)


# -- reshapes -------------------------------------------------------------------------------------

@reg("aten::view.default", "aten::_unsafe_view.default")
def aten_view_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """view(Tensor(a) self, SymInt[] size) -> Tensor(a); also _unsafe_view"""
    x = _x(values_map, node, loc)
    sizes = list(get_arg(node, 1, "size"))
    symbolic = [i for i, s in enumerate(sizes) if isinstance(s, torch.fx.Node)]
    if len(symbolic) == 1 and -1 not in sizes:
        # one dynamic entry and no -1: it is implied by the others, so the shape stays constant
        sizes[symbolic[0]] = -1
    if x.type.rank == len(sizes) and all(
            isinstance(s, int) and s == d for s, d in zip(sizes, x.type.shape, strict=True)):
        return x
    return coreai.reshape(x, shape_value(values_map, node, sizes, loc), loc=loc)


def _reshape_lead(x: Value, lead: int, tail: list[int], loc: Location) -> Value:
    """Reshape to ``x.shape[:lead] + tail`` (leading dims may be dynamic)."""
    return coreai.reshape(x, shape_operand(
        [*(dim_piece(x, i, loc) for i in range(lead)), *tail], loc), loc=loc)


def _static_tail(x: Value, n: int, what: str) -> list[int]:
    tail = list(x.type.shape[x.type.rank - n:])
    if not all(isinstance(d, int) for d in tail):
        raise NotImplementedError(f"{what} needs static sizes for the last {n} dims, got "
                                  f"{x.type}")
    return tail


@reg("aten::pixel_shuffle.default")
def aten_pixel_shuffle_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                               ) -> Value:
    """pixel_shuffle(Tensor self, int upscale_factor) -> Tensor"""
    x = _x(values_map, node, loc)
    r = int(get_arg(node, 1, "upscale_factor"))
    c, h, w = _static_tail(x, 3, "pixel_shuffle")
    lead = x.type.rank - 3
    y = _reshape_lead(x, lead, [c // (r * r), r, r, h, w], loc)
    perm = [*range(lead), lead, lead + 3, lead + 1, lead + 4, lead + 2]
    y = coreai.transpose(y, perm, loc=loc)
    return _reshape_lead(y, lead, [c // (r * r), h * r, w * r], loc)


@reg("aten::pixel_unshuffle.default")
def aten_pixel_unshuffle_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                 ) -> Value:
    """pixel_unshuffle(Tensor self, int downscale_factor) -> Tensor"""
    x = _x(values_map, node, loc)
    r = int(get_arg(node, 1, "downscale_factor"))
    c, h, w = _static_tail(x, 3, "pixel_unshuffle")
    lead = x.type.rank - 3
    y = _reshape_lead(x, lead, [c, h // r, r, w // r, r], loc)
    perm = [*range(lead), lead, lead + 2, lead + 4, lead + 1, lead + 3]
    y = coreai.transpose(y, perm, loc=loc)
    return _reshape_lead(y, lead, [c * r * r, h // r, w // r], loc)


@reg("aten::unsqueeze.default")
def aten_unsqueeze_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """unsqueeze(Tensor(a) self, int dim) -> Tensor(a)"""
    x = _x(values_map, node, loc)
    dim = normalize_dim(get_arg(node, 1, "dim"), x.type.rank + 1)
    return coreai.expand_dims(x, [dim], loc=loc)


def _squeeze(x: Value, node: torch.fx.Node, dims: list[int], loc: Location) -> Value:
    # torch squeezes only the listed dims whose size is 1; a dynamic size is never 1 here
    # (export would have specialized it), so the fake input shape decides.
    sizes = _in_shape(node)
    axes = [d for d in dims if isinstance(sizes[d], int) and sizes[d] == 1]
    if not axes:
        return x
    return coreai.shrink_dims(x, axes, loc=loc)


@reg("aten::squeeze.dim")
def aten_squeeze_dim(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)"""
    x = _x(values_map, node, loc)
    if x.type.rank == 0:
        return x
    return _squeeze(x, node, [normalize_dim(get_arg(node, 1, "dim"), x.type.rank)], loc)


@reg("aten::squeeze.dims")
def aten_squeeze_dims(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)"""
    x = _x(values_map, node, loc)
    if x.type.rank == 0:
        return x
    dims = get_arg(node, 1, "dim")
    return _squeeze(x, node, sorted({normalize_dim(d, x.type.rank) for d in dims}), loc)


@reg("aten::squeeze.default")
def aten_squeeze_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """squeeze(Tensor(a) self) -> Tensor(a)"""
    x = _x(values_map, node, loc)
    return _squeeze(x, node, list(range(x.type.rank)), loc)


# -- permutations ---------------------------------------------------------------------------------

def _permuted(x: Value, perm: list[int], loc: Location) -> Value:
    if perm == list(range(x.type.rank)):
        return x
    return coreai.transpose(x, perm, loc=loc)


@reg("aten::permute.default")
def aten_permute_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """permute(Tensor(a) self, int[] dims) -> Tensor(a)"""
    x = _x(values_map, node, loc)
    return _permuted(x, [normalize_dim(d, x.type.rank) for d in get_arg(node, 1, "dims")], loc)


@reg("aten::transpose.int")
def aten_transpose_int(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)"""
    x = _x(values_map, node, loc)
    if x.type.rank == 0:
        return x
    a = normalize_dim(get_arg(node, 1, "dim0"), x.type.rank)
    b = normalize_dim(get_arg(node, 2, "dim1"), x.type.rank)
    perm = list(range(x.type.rank))
    perm[a], perm[b] = perm[b], perm[a]
    return _permuted(x, perm, loc)


@reg("aten::t.default")
def aten_t_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """t(Tensor(a) self) -> Tensor(a)"""
    x = _x(values_map, node, loc)
    return _permuted(x, [1, 0], loc) if x.type.rank == 2 else x


@reg("aten::flip.default")
def aten_flip_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """flip(Tensor self, int[] dims) -> Tensor"""
    x = _x(values_map, node, loc)
    axes = sorted({normalize_dim(d, x.type.rank) for d in get_arg(node, 1, "dims")})
    if not axes or x.type.rank == 0:
        return x
    return coreai.reverse(x, axes, loc=loc)


# -- broadcasting and tiling ----------------------------------------------------------------------

@reg("aten::expand.default")
def aten_expand_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)"""
    x = _x(values_map, node, loc)
    sizes = list(get_arg(node, 1, "size"))
    lead = len(sizes) - x.type.rank
    pieces: list[Piece] = []
    for i, s in enumerate(sizes):
        if isinstance(s, int) and s == -1:
            pieces.append(dim_piece(x, i - lead, loc))
        else:
            pieces.append(size_piece(values_map, s, loc))
    if lead == 0 and all(isinstance(p, int) and p == d
                         for p, d in zip(pieces, x.type.shape, strict=True)):
        return x
    return coreai.broadcast_to(x, shape_operand(pieces, loc), loc=loc)


@reg("aten::repeat.default")
def aten_repeat_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """repeat(Tensor self, SymInt[] repeats) -> Tensor"""
    x = _x(values_map, node, loc)
    reps = int_list(get_arg(node, 1, "repeats"), node, "repeats")
    lead = len(reps) - x.type.rank
    if lead:
        x = coreai.expand_dims(x, list(range(lead)), loc=loc)
    if all(r == 1 for r in reps):
        return x
    return coreai.tile(x, reps, loc=loc)


# -- slicing --------------------------------------------------------------------------------------

def _slice(x: Value, axis: int, begin: Any, end: Any, step: int, loc: Location) -> Value:
    return coreai.slice_(x, begin, end, axes=[axis], strides=[step], loc=loc)


def _bound(values_map: ValuesMap, node: torch.fx.Node, arg: Any, default: int,
           loc: Location) -> Any:
    if arg is None:
        return [default]
    if isinstance(arg, torch.fx.Node):
        return shape_value(values_map, node, [arg], loc)
    return [int(arg)]


@reg("aten::slice.Tensor")
def aten_slice_tensor(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)"""  # noqa: E501
    x = _x(values_map, node, loc)
    axis = normalize_dim(get_arg(node, 1, "dim", 0), x.type.rank)
    start, end = get_arg(node, 2, "start"), get_arg(node, 3, "end")
    step = int_list([get_arg(node, 4, "step", 1)], node, "step")[0]
    size = x.type.shape[axis]
    whole_end = end is None or (isinstance(end, int) and (
        end >= 2**62 or (isinstance(size, int) and end >= size)))
    if step == 1 and start in (None, 0) and whole_end:
        return x
    return _slice(x, axis, _bound(values_map, node, start, 0, loc),
                  _bound(values_map, node, end, _INT64_MAX, loc), step, loc)


@reg("aten::select.int")
def aten_select_int(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)"""
    x = _x(values_map, node, loc)
    axis = normalize_dim(get_arg(node, 1, "dim"), x.type.rank)
    index = get_arg(node, 2, "index")
    if isinstance(index, torch.fx.Node):
        # a 0-d index removes the axis; take semantics wrap negative indices like torch
        idx = cast_to(values_map[index.name], DType.int64, loc)
        return coreai.gather(x, idx, axis=axis, loc=loc)
    size = x.type.shape[axis]
    if index < 0 and isinstance(size, int):
        index += size
    end = index + 1 if index != -1 else _INT64_MAX
    return coreai.shrink_dims(_slice(x, axis, [index], [end], 1, loc), [axis], loc=loc)


@reg("aten::diagonal.default")
def aten_diagonal_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)"""
    x = _x(values_map, node, loc)
    rank = x.type.rank
    offset = int(get_arg(node, 1, "offset", 0))
    d1 = normalize_dim(get_arg(node, 2, "dim1", 0), rank)
    d2 = normalize_dim(get_arg(node, 3, "dim2", 1), rank)
    n1, n2 = x.type.shape[d1], x.type.shape[d2]
    if not (isinstance(n1, int) and isinstance(n2, int)):
        raise NotImplementedError(f"diagonal needs static sizes on dims {d1} and {d2}, got "
                                  f"{x.type}")
    # move (d1, d2) last, flatten them, and take every (n2+1)-th element from the start
    rest = [d for d in range(rank) if d not in (d1, d2)]
    y = _permuted(x, [*rest, d1, d2], loc)
    y = _reshape_lead(y, len(rest), [n1 * n2], loc)
    length = max(0, min(n1 + min(offset, 0), n2 - max(offset, 0)))
    begin = offset if offset >= 0 else -offset * n2
    if length == 0:
        return _slice(y, len(rest), [0], [0], 1, loc)
    end = begin + (length - 1) * (n2 + 1) + 1
    return _slice(y, len(rest), [begin], [end], n2 + 1, loc)


@reg("aten::as_strided.default")
def aten_as_strided_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)

    Exact when the input is dense and non-overlapping (any dim order, e.g. contiguous or a
    transpose of a contiguous tensor) and every element read lies inside the input: the
    input is laid out in storage order and the strided flat indices are gathered from it.
    """  # noqa: E501
    x = _x(values_map, node, loc)
    val = node.args[0].meta["val"]
    size = int_list(get_arg(node, 1, "size"), node, "size")
    stride = int_list(get_arg(node, 2, "stride"), node, "stride")
    offset = get_arg(node, 3, "storage_offset")
    try:
        in_shape = [int(d) for d in val.shape]
        in_stride = [int(s) for s in val.stride()]
        in_offset = int(val.storage_offset())
        offset = in_offset if offset is None else int(offset)
    except (TypeError, ValueError):
        raise NotImplementedError("as_strided needs static input sizes, strides and "
                                  "storage offset") from None
    order = sorted((d for d in range(len(in_shape)) if in_shape[d] != 1),
                   key=lambda d: -in_stride[d])
    expected = 1
    for d in reversed(order):
        if in_stride[d] != expected:
            raise NotImplementedError(
                f"as_strided of an input with strides {in_stride} (sizes {in_shape}) that is "
                "not dense and non-overlapping")
        expected *= in_shape[d]
    numel = int(np.prod(in_shape, dtype=np.int64))
    flat = offset - in_offset + sum(
        (np.arange(n, dtype=np.int64) * s).reshape([-1 if i == j else 1 for j in range(len(size))])
        for i, (n, s) in enumerate(zip(size, stride, strict=True)))
    flat = np.broadcast_to(np.asarray(flat, dtype=np.int64), size)
    if flat.size and (flat.min() < 0 or flat.max() >= numel):
        raise NotImplementedError(
            f"as_strided reads storage outside its input ({in_shape} at offset {in_offset}); "
            "only views within the input tensor are supported")
    perm = order + [d for d in range(len(in_shape)) if in_shape[d] == 1]
    storage = coreai.reshape(_permuted(x, perm, loc) if x.type.rank > 1 else x, [numel],
                             loc=loc)
    return coreai.gather(storage, coreai.constant(np.array(flat), loc=loc), axis=0,
                         loc=loc)


# -- joins and splits -----------------------------------------------------------------------------

@reg("aten::cat.default")
def aten_cat_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """cat(Tensor[] tensors, int dim=0) -> Tensor"""
    dtype = result_dtype(node)
    tensors = get_arg(node, 0, "tensors")
    vals = [cast_to(values_map[t.name], dtype, loc) for t in tensors]
    rank = max(v.type.rank for v in vals)
    # torch skips legacy 1-d empty tensors of any other rank
    vals = [v for v in vals if not (v.type.rank == 1 and v.type.shape[0] == 0 and rank > 1)]
    axis = normalize_dim(get_arg(node, 1, "dim", 0), rank)
    if len(vals) == 1:
        return vals[0]
    return coreai.concat(vals, axis=axis, loc=loc)


def _split(values_map: ValuesMap, x: Value, sizes: list[Any], axis: int,
           loc: Location) -> list[Value]:
    """Pieces of ``sizes`` along ``axis``; one split op when all sizes are static."""
    if all(isinstance(s, int) for s in sizes) and isinstance(x.type.shape[axis], int):
        if len(sizes) == 1:
            return [x]
        return list(coreai.split(x, sizes, axis=axis, loc=loc))
    out = []
    begin: Piece = 0
    for i, s in enumerate(sizes):
        last = i == len(sizes) - 1
        end = _INT64_MAX if last else _add(begin, size_piece(values_map, s, loc), loc)
        out.append(_slice(x, axis, _pos(begin), _pos(end), 1, loc))
        begin = end
    return out


def _pos(p: Piece) -> Any:
    """A :data:`Piece` as a 1-element slice bound."""
    return [p] if isinstance(p, int) else p


def _add(a: Piece, b: Piece, loc: Location) -> Piece:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    pa, pb = (coreai.constant(np.asarray([p], np.int64), loc=loc) if isinstance(p, int) else p
              for p in (a, b))
    return coreai.broadcasting_add(pa, pb, loc=loc)


@reg("aten::split_with_sizes.default")
def aten_split_with_sizes_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                  ) -> list[Value]:
    """split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]"""
    x = _x(values_map, node, loc)
    axis = normalize_dim(get_arg(node, 2, "dim", 0), x.type.rank)
    return _split(values_map, x, list(get_arg(node, 1, "split_sizes")), axis, loc)


@reg("aten::split.Tensor")
def aten_split_tensor(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                      ) -> list[Value]:
    """split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]"""
    x = _x(values_map, node, loc)
    axis = normalize_dim(get_arg(node, 2, "dim", 0), x.type.rank)
    pieces = node.meta["val"]
    # the number of pieces is fixed by torch; the sizes come from the (fake) results
    sizes = [p.shape[axis] for p in pieces]
    if all(isinstance(s, int) for s in sizes):
        return _split(values_map, x, sizes, axis, loc)
    step = get_arg(node, 1, "split_size")
    return _split(values_map, x, [step] * len(pieces), axis, loc)


@reg("aten::unbind.int")
def aten_unbind_int(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> list[Value]:
    """unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]"""
    x = _x(values_map, node, loc)
    axis = normalize_dim(get_arg(node, 1, "dim", 0), x.type.rank)
    n = len(node.meta["val"])
    if n == 0:
        return []
    return [coreai.shrink_dims(p, [axis], loc=loc)
            for p in _split(values_map, x, [1] * n, axis, loc)]


@reg("aten::roll.default")
def aten_roll_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor"""
    x = _x(values_map, node, loc)
    shifts = int_list(get_arg(node, 1, "shifts"), node, "shifts")
    dims = list(get_arg(node, 2, "dims", []) or [])
    if not dims:
        flat = coreai.reshape(x, [-1], loc=loc)
        return coreai.reshape(_roll(flat, 0, shifts[0], loc), shape_of(x, loc), loc=loc)
    for shift, dim in zip(shifts, dims, strict=True):
        x = _roll(x, normalize_dim(dim, x.type.rank), shift, loc)
    return x


def _roll(x: Value, axis: int, shift: int, loc: Location) -> Value:
    size = x.type.shape[axis]
    if not isinstance(size, int):
        raise NotImplementedError(f"roll needs a static size on axis {axis}, got {x.type}")
    k = shift % size if size else 0
    if k == 0:
        return x
    tail = _slice(x, axis, [size - k], [size], 1, loc)
    head = _slice(x, axis, [0], [size - k], 1, loc)
    return coreai.concat([tail, head], axis=axis, loc=loc)


# -- padding --------------------------------------------------------------------------------------

def _torch_pads(pad: list[int], rank: int) -> list[int]:
    """torch's (last dim first) pad pairs as Core AI's per-axis [before, after, ...] list."""
    if len(pad) % 2 or len(pad) // 2 > rank:
        raise ValueError(f"pad {pad} must hold pairs for at most {rank} dims")
    pads = [0] * (2 * rank)
    for i in range(len(pad) // 2):
        axis = rank - 1 - i
        pads[2 * axis], pads[2 * axis + 1] = pad[2 * i], pad[2 * i + 1]
    return pads


@reg("aten::constant_pad_nd.default")
def aten_constant_pad_nd_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                 ) -> Value:
    """constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor (negative pads crop)"""
    x = _x(values_map, node, loc)
    pads = _torch_pads(int_list(get_arg(node, 1, "pad"), node, "pad"), x.type.rank)
    value = get_arg(node, 2, "value", 0)
    if isinstance(value, torch.fx.Node):
        raise NotImplementedError("constant_pad_nd with a symbolic pad value")
    if isinstance(value, int) and abs(value) > 2**53:
        raise NotImplementedError(f"pad value {value} is not exactly representable as float")
    if not any(pads):
        return x
    return coreai.pad(x, pads, mode="constant", value=float(value), loc=loc)


def _mode_pad(mode: str) -> Any:
    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
        x = _x(values_map, node, loc)
        pads = _torch_pads(int_list(get_arg(node, 1, "padding"), node, "padding"), x.type.rank)
        return coreai.pad(x, pads, mode=mode, loc=loc) if any(pads) else x

    lowering.__doc__ = f"{mode} padding of the last 1-3 dims onto coreai.pad."
    return lowering


for _n in (1, 2, 3):
    reg(f"aten::reflection_pad{_n}d.default")(_mode_pad("reflect"))
    reg(f"aten::replication_pad{_n}d.default")(_mode_pad("replicate"))
