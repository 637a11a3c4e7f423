"""Built-in lowerings (indexing family): embedding, its dense backward and embedding bags.

Merged into ``coreai_torch.lowerings.indexing.LOWERINGS``.
"""

from __future__ import annotations

import numpy as np
import torch.fx

from coreai_core import DType, Location, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._common import ValuesMap
from coreai_torch.lowerings._index_utils import INT64, const64, dim_size, int64
from coreai_torch.utils import cast_to, get_arg, get_operand, result_dtype, result_type

LOWERINGS = LoweringSet("embedding")
reg = LOWERINGS.register_torch_lowering


def _accumulation_dtype(dtype: DType) -> DType:
    """Half types accumulate in float32, as torch's CPU kernels (opmath) do."""
    return DType.float32 if dtype in (DType.float16, DType.bfloat16) else dtype


def _zeros(shape: list[int], dtype: DType, loc: Location) -> Value:
    return coreai.broadcast_to(coreai.constant(0, dtype=dtype, loc=loc), shape, loc=loc)


@reg("aten::embedding.default")
def aten_embedding_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor"""  # noqa: E501
    weight = get_operand(values_map, node, 0, loc)
    indices = int64(get_operand(values_map, node, 1, loc), loc)
    return coreai.gather(weight, indices, axis=0, loc=loc)


@reg("aten::embedding_dense_backward.default")
def aten_embedding_dense_backward_default(values_map: ValuesMap, node: torch.fx.Node,
                                          loc: Location) -> Value:
    """embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, SymInt padding_idx, bool scale_grad_by_freq) -> Tensor"""  # noqa: E501
    grad = get_operand(values_map, node, 0, loc)
    indices = int64(get_operand(values_map, node, 1, loc), loc)
    num_weights, padding_idx, by_freq = node.args[2], node.args[3], bool(node.args[4])
    if not isinstance(num_weights, int) or not isinstance(padding_idx, int):
        raise NotImplementedError("embedding_dense_backward needs static num_weights and "
                                  "padding_idx")
    out_dtype = result_dtype(node)
    dtype = _accumulation_dtype(out_dtype)
    tail = [int(d) for d in grad.type.shape[indices.type.rank:]]
    grad = coreai.reshape(cast_to(grad, dtype, loc), [-1, *tail], loc=loc)
    flat = coreai.reshape(indices, [-1, 1], loc=loc)
    if by_freq:  # each row's gradient is divided by how often its index occurs
        ones = coreai.broadcast_to(const64(1, loc), coreai.get_shape(flat, loc=loc), loc=loc)
        counts = coreai.scatter_nd(_zeros([num_weights, 1], INT64, loc), flat, ones,
                                   accumulate=True, loc=loc)
        freq = cast_to(coreai.gather_nd(counts, flat, loc=loc), dtype, loc)
        grad = coreai.broadcasting_divide(grad, _trailing(freq, len(tail) - 1, loc), loc=loc)
    if padding_idx >= 0:
        keep = coreai.broadcasting_not_equal(flat, const64(padding_idx, loc), loc=loc)
        grad = coreai.broadcasting_where(_trailing(keep, len(tail) - 1, loc), grad,
                                         coreai.constant(0, dtype=dtype, loc=loc), loc=loc)
    out = coreai.scatter_nd(_zeros([num_weights, *tail], dtype, loc), flat, grad,
                            accumulate=True, loc=loc)
    return cast_to(out, out_dtype, loc)


def _trailing(v: Value, n: int, loc: Location) -> Value:
    """``v`` with ``n`` trailing size-1 axes (to broadcast against extra feature axes)."""
    if n <= 0:
        return v
    return coreai.expand_dims(v, axes=list(range(v.type.rank, v.type.rank + n)), loc=loc)


_SUM, _MEAN, _MAX = 0, 1, 2


@reg("aten::_embedding_bag.default", "aten::_embedding_bag_forward_only.default")
def aten__embedding_bag_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                ) -> list[Value]:
    """_embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False, int padding_idx=-1) -> (Tensor, Tensor, Tensor, Tensor)"""  # noqa: E501
    # Bags are indices[offsets[b]:offsets[b+1]] (with include_last_offset the last offset must
    # equal len(indices)); empty bags give zeros; padding_idx entries are skipped. The
    # bookkeeping outputs follow torch's meta shapes and CPU values (see _bookkeeping).
    weight = get_operand(values_map, node, 0, loc)
    indices = int64(get_operand(values_map, node, 1, loc), loc)
    offsets = int64(get_operand(values_map, node, 2, loc), loc)
    mode = get_arg(node, 4, "mode", _SUM)
    psw = get_arg(node, 6, "per_sample_weights")
    last_offset = bool(get_arg(node, 7, "include_last_offset", False))
    padding_idx = get_arg(node, 8, "padding_idx", -1)
    if indices.type.rank != 1 or offsets.type.rank != 1:
        raise NotImplementedError("_embedding_bag expects 1-d indices and offsets")
    n_offsets = offsets.type.shape[0]
    if not isinstance(n_offsets, int):
        raise NotImplementedError("_embedding_bag needs a static number of offsets")
    if mode not in (_SUM, _MEAN, _MAX):
        raise NotImplementedError(f"_embedding_bag mode {mode} is not supported")
    nb = n_offsets - 1 if last_offset else n_offsets
    dim = int(weight.type.shape[1])
    n = dim_size(indices, 0, loc)
    if isinstance(n, int):
        pos = const64(np.arange(n), loc)
    else:
        pos = coreai.range_(const64(0, loc), n, const64(1, loc), loc=loc)
    # bag of each index position: how many bag starts precede it, minus one
    starts = coreai.slice_(offsets, [0], [nb], axes=[0], strides=[1], loc=loc)
    started = coreai.broadcasting_less_equal(coreai.reshape(starts, [1, nb], loc=loc),
                                             coreai.reshape(pos, [-1, 1], loc=loc), loc=loc)
    bag = coreai.broadcasting_sub(coreai.reduce_sum(int64(started, loc), axes=[1], loc=loc),
                                  const64(1, loc), loc=loc)
    target = bag  # padding entries go to an extra bag nb that is dropped at the end
    if padding_idx is not None and padding_idx >= 0:
        pad = coreai.broadcasting_equal(indices, const64(padding_idx, loc), loc=loc)
        target = coreai.broadcasting_where(pad, const64(nb, loc), bag, loc=loc)
    target_col = coreai.reshape(target, [-1, 1], loc=loc)
    rows = coreai.gather(weight, indices, axis=0, loc=loc)
    wdtype = weight.type.element_type
    ones = coreai.broadcast_to(const64(1, loc), coreai.get_shape(pos, loc=loc), loc=loc)
    counts = coreai.scatter_nd(_zeros([nb + 1], INT64, loc), target_col, ones,
                               accumulate=True, loc=loc)
    if mode == _MAX:
        out, max_indices = _bag_max(rows, indices, pos, target, n, nb, dim, loc)
    else:
        dtype = _accumulation_dtype(wdtype)
        rows = cast_to(rows, dtype, loc)
        if psw is not None:
            w = cast_to(values_map[psw.name], dtype, loc)
            rows = coreai.broadcasting_mul(rows, coreai.reshape(w, [-1, 1], loc=loc), loc=loc)
        out = coreai.scatter_nd(_zeros([nb + 1, dim], dtype, loc), target_col, rows,
                                accumulate=True, loc=loc)
        if mode == _MEAN:
            denom = coreai.broadcasting_maximum(counts, const64(1, loc), loc=loc)
            denom = coreai.reshape(cast_to(denom, dtype, loc), [-1, 1], loc=loc)
            out = coreai.broadcasting_divide(out, denom, loc=loc)
        out = cast_to(out, wdtype, loc)
        max_indices = None
    out = coreai.slice_(out, [0], [nb], axes=[0], strides=[1], loc=loc)
    return [out, *_bookkeeping(node, mode, bag, counts, max_indices, nb, loc)]


def _bookkeeping(node: torch.fx.Node, mode: int, bag: Value, counts: Value,
                 max_indices: Value | None, nb: int, loc: Location) -> list[Value]:
    """offset2bag, bag_size, max_indices with the shapes torch's meta function declares.

    Torch's CPU kernel skips offset2bag on its sum fast path (empty), leaves bag_size zero in
    sum mode and max_indices zero outside max mode; bag_size of the forward-only op has one
    entry per offset.
    """
    shapes = [result_type(node, i).shape for i in (1, 2, 3)]
    if not all(isinstance(d, int) for shape in shapes[1:] for d in shape):
        raise NotImplementedError("_embedding_bag bookkeeping outputs need static shapes")
    offset2bag = bag if shapes[0][0] != 0 else const64(np.zeros((0,), np.int64), loc)
    n_sizes = shapes[1][0]
    if mode == _SUM:
        bag_size = _zeros([n_sizes], INT64, loc)
    else:
        bag_size = coreai.slice_(counts, [0], [min(nb, n_sizes)], axes=[0], strides=[1],
                                 loc=loc)
        if n_sizes > nb:
            bag_size = coreai.concat([bag_size, const64([0] * (n_sizes - nb), loc)], axis=0,
                                     loc=loc)
    if max_indices is None:
        max_indices = _zeros([int(d) for d in shapes[2]], INT64, loc)
    return [offset2bag, bag_size, max_indices]


def _bag_max(rows: Value, indices: Value, pos: Value, target: Value, n: int | Value, nb: int,
             dim: int, loc: Location) -> tuple[Value, Value]:
    """Per-bag maxima (0 for empty bags) and the weight row of each (first occurrence)."""
    dtype = rows.type.element_type
    shape = coreai.concat([coreai.get_shape(target, loc=loc), const64([dim], loc)], axis=0,
                          loc=loc)
    target_nd = coreai.broadcast_to(coreai.reshape(target, [-1, 1], loc=loc), shape, loc=loc)
    maxima = coreai.scatter_along_axis(_zeros([nb + 1, dim], dtype, loc), target_nd, rows,
                                       axis=0, reduction="max", include_self=False, loc=loc)
    # the first position of each bag whose value equals the bag's maximum
    hit = coreai.broadcasting_equal(rows, coreai.gather(maxima, target, axis=0, loc=loc),
                                    loc=loc)
    n_value = const64(n, loc) if isinstance(n, int) else n
    cand = coreai.broadcasting_where(hit, coreai.reshape(pos, [-1, 1], loc=loc), n_value,
                                     loc=loc)
    none = coreai.broadcast_to(n_value, [nb + 1, dim], loc=loc)
    first = coreai.scatter_along_axis(none, target_nd, cand, axis=0, reduction="min", loc=loc)
    first = coreai.slice_(first, [0], [nb], axes=[0], strides=[1], loc=loc)
    rows_of = coreai.concat([indices, const64([0], loc)], axis=0, loc=loc)  # empty bag -> 0
    return maxima, coreai.gather(rows_of, first, axis=0, loc=loc)
