"""Built-in lowerings (tensor family): embedding, its dense backward and embedding bags.
"""

from __future__ import annotations

import numpy as np

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._index_utils import INT64, const64, dim_size, int64
from coreai_torch.lowerings._nn_utils import static_sizes
from coreai_torch.lowerings.tensor_creation import shape_operand, size_piece
from coreai_torch.utils import cast_to, result_dtype, result_type

LOWERINGS = LoweringSet("tensor_embedding")
reg = LOWERINGS.register_torch_lowering


def _accumulation_dtype(dtype: DType) -> DType:
    """Half types accumulate in float32, as torch's CPU kernels (opmath) do."""
    return DType.float32 if dtype in (DType.float16, DType.bfloat16) else dtype


def _zeros(shape: list[int | Value], dtype: DType) -> Value:
    """Zeros of ``shape`` (ints, or 0-d int64 Values for sizes known at run time)."""
    return coreai.broadcast_to(coreai.constant(0, dtype=dtype),
                               shape_operand([size_piece(d) for d in shape]))


def _plus(a: int | Value, b: int) -> int | Value:
    return a + b if isinstance(a, int) else coreai.broadcasting_add(a, const64(b))


@reg("aten::embedding.default")
def aten_embedding_default(weight: Value, indices: Value, padding_idx: int | Value = -1,
                           scale_grad_by_freq: bool = False, sparse: bool = False) -> Value:
    """embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor"""  # noqa: E501
    # padding_idx, scale_grad_by_freq and sparse only change the gradient; torch rejects
    # negative indices
    return coreai.gather(weight, int64(indices), axis=0, wrap_negative=False)


@reg("aten::embedding_dense_backward.default")
def aten_embedding_dense_backward_default(grad_output: Value, indices: Value,
                                          num_weights: int | Value, padding_idx: int | Value,
                                          scale_grad_by_freq: bool) -> Value:
    """embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, SymInt padding_idx, bool scale_grad_by_freq) -> Tensor"""  # noqa: E501
    grad, indices, by_freq = grad_output, int64(indices), scale_grad_by_freq
    if not isinstance(num_weights, int) or not isinstance(padding_idx, int):
        raise NotImplementedError("embedding_dense_backward needs static num_weights and "
                                  "padding_idx")
    out_dtype = result_dtype()
    dtype = _accumulation_dtype(out_dtype)
    tail = static_sizes(grad, range(indices.type.rank, grad.type.rank), "embedding gradient")
    grad = coreai.reshape(cast_to(grad, dtype), [-1, *tail])
    flat = coreai.reshape(indices, [-1, 1])
    if by_freq:  # each row's gradient is divided by how often its index occurs
        ones = coreai.broadcast_to(const64(1), coreai.get_shape(flat))
        counts = coreai.scatter_nd(_zeros([num_weights, 1], INT64), flat, ones,
                                   accumulate=True)
        freq = cast_to(coreai.gather_nd(counts, flat), dtype)
        grad = coreai.broadcasting_divide(grad, _trailing(freq, len(tail) - 1))
    if padding_idx >= 0:
        keep = coreai.broadcasting_not_equal(flat, const64(padding_idx))
        grad = coreai.broadcasting_where(_trailing(keep, len(tail) - 1), grad,
                                         coreai.constant(0, dtype=dtype))
    out = coreai.scatter_nd(_zeros([num_weights, *tail], dtype), flat, grad,
                            accumulate=True)
    return cast_to(out, out_dtype)


def _trailing(v: Value, n: int) -> Value:
    """``v`` with ``n`` trailing size-1 axes (to broadcast against extra feature axes)."""
    if n <= 0:
        return v
    return coreai.expand_dims(v, axes=list(range(v.type.rank, v.type.rank + n)))


_SUM, _MEAN, _MAX = 0, 1, 2


@reg("aten::_embedding_bag.default")
def aten__embedding_bag_default(weight: Value, indices: Value, offsets: Value,
                                scale_grad_by_freq: bool = False, mode: int = 0,
                                sparse: bool = False, per_sample_weights: Value | None = None,
                                include_last_offset: bool = False, padding_idx: int = -1,
                                ) -> list[Value]:
    """_embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False, int padding_idx=-1) -> (Tensor, Tensor, Tensor, Tensor)"""  # noqa: E501
    return _embedding_bag(weight, indices, offsets, mode, per_sample_weights,
                          include_last_offset, padding_idx, forward_only=False)


@reg("aten::_embedding_bag_forward_only.default")
def aten__embedding_bag_forward_only_default(
        weight: Value, indices: Value, offsets: Value, scale_grad_by_freq: bool = False,
        mode: int = 0, sparse: bool = False, per_sample_weights: Value | None = None,
        include_last_offset: bool = False, padding_idx: int = -1) -> list[Value]:
    """_embedding_bag_forward_only(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False, int padding_idx=-1) -> (Tensor, Tensor, Tensor, Tensor)"""  # noqa: E501
    return _embedding_bag(weight, indices, offsets, mode, per_sample_weights,
                          include_last_offset, padding_idx, forward_only=True)


def _embedding_bag(weight: Value, indices: Value, offsets: Value, mode: int,
                   per_sample_weights: Value | None, include_last_offset: bool,
                   padding_idx: int | None, *, forward_only: bool) -> list[Value]:
    # scale_grad_by_freq and sparse shape only the backward pass.
    # Bags are indices[offsets[b]:offsets[b+1]] (with include_last_offset the last offset must
    # equal len(indices)); empty bags give zeros; padding_idx entries are skipped. The
    # bookkeeping outputs follow torch's meta shapes and CPU values (see _bookkeeping).
    indices, offsets = int64(indices), int64(offsets)
    last_offset = include_last_offset
    if indices.type.rank != 1 or offsets.type.rank != 1:
        raise NotImplementedError("_embedding_bag expects 1-d indices and offsets")
    n_offsets = dim_size(offsets, 0)
    if mode not in (_SUM, _MEAN, _MAX):
        raise NotImplementedError(f"_embedding_bag mode {mode} is not supported")
    nb = _plus(n_offsets, -1) if last_offset else n_offsets  # bags (dynamic with offsets)
    dim = static_sizes(weight, [1], "_embedding_bag weight")[0]
    n = dim_size(indices, 0)
    pos = const64(np.arange(n)) if isinstance(n, int) else coreai.range_(const64(0), n, const64(1))
    # bag of each index position: how many bag starts precede it, minus one
    starts = _head(offsets, nb)
    started = coreai.broadcasting_less_equal(coreai.reshape(starts, [1, -1]),
                                             coreai.reshape(pos, [-1, 1]))
    bag = coreai.broadcasting_sub(coreai.reduce_sum(int64(started), axes=[1]),
                                  const64(1))
    target = bag  # padding entries go to an extra bag nb that is dropped at the end
    if padding_idx is not None and padding_idx >= 0:
        pad = coreai.broadcasting_equal(indices, const64(padding_idx))
        target = coreai.broadcasting_where(pad, nb if isinstance(nb, Value) else const64(nb), bag)
    target_col = coreai.reshape(target, [-1, 1])
    rows = coreai.gather(weight, indices, axis=0)
    wdtype = weight.type.element_type
    ones = coreai.broadcast_to(const64(1), coreai.get_shape(pos))
    counts = coreai.scatter_nd(_zeros([_plus(nb, 1)], INT64), target_col, ones,
                               accumulate=True)
    if mode == _MAX:
        out, max_indices = _bag_max(rows, indices, pos, target, n, nb, dim)
    else:
        dtype = _accumulation_dtype(wdtype)
        rows = cast_to(rows, dtype)
        if per_sample_weights is not None:
            w = cast_to(per_sample_weights, dtype)
            rows = coreai.broadcasting_mul(rows, coreai.reshape(w, [-1, 1]))
        out = coreai.scatter_nd(_zeros([_plus(nb, 1), dim], dtype), target_col, rows,
                                accumulate=True)
        if mode == _MEAN:
            denom = coreai.broadcasting_maximum(counts, const64(1))
            denom = coreai.reshape(cast_to(denom, dtype), [-1, 1])
            out = coreai.broadcasting_divide(out, denom)
        out = cast_to(out, wdtype)
        max_indices = None
    out = _head(out, nb)
    return [out, *_bookkeeping(mode, bag, counts, max_indices, nb, n_offsets, forward_only)]


def _head(x: Value, count: int | Value) -> Value:
    """``x[:count]`` (``count`` an int or a 0-d int64 Value)."""
    end = [count] if isinstance(count, int) else coreai.reshape(count, [1])
    return coreai.slice_(x, [0], end, axes=[0], strides=[1])


def _bookkeeping(mode: int, bag: Value, counts: Value, max_indices: Value | None,
                 nb: int | Value, n_offsets: int | Value, forward_only: bool) -> list[Value]:
    """offset2bag, bag_size, max_indices with the shapes torch's meta function declares.

    Torch's CPU kernel skips offset2bag on its sum fast path (empty), leaves bag_size zero in
    sum mode and max_indices zero outside max mode. bag_size has one entry per bag, or per
    offset for the forward-only op; max_indices is [bags, dim] in max mode, else [bags].
    """
    offset2bag = bag if result_type(index=1).shape[0] != 0 else const64(np.zeros((0,), np.int64))
    n_sizes = n_offsets if forward_only else nb
    if mode == _SUM:
        bag_size = _zeros([n_sizes], INT64)
    else:  # the bags' counts, then 0 for the last offset of the forward-only op
        padded = coreai.concat([_head(counts, nb), const64([0])], axis=0)
        bag_size = _head(padded, n_sizes)
    if max_indices is None:
        max_indices = _zeros([nb], INT64)
    return [offset2bag, bag_size, max_indices]


def _bag_max(rows: Value, indices: Value, pos: Value, target: Value, n: int | Value,
             nb: int | Value,
             dim: int) -> tuple[Value, Value]:
    """Per-bag maxima (0 for empty bags) and the weight row of each (first occurrence)."""
    dtype = rows.type.element_type
    shape = coreai.concat([coreai.get_shape(target), const64([dim])], axis=0)
    target_nd = coreai.broadcast_to(coreai.reshape(target, [-1, 1]), shape)
    maxima = coreai.scatter_along_axis(_zeros([_plus(nb, 1), dim], dtype), target_nd, rows,
                                       axis=0, reduction="max", include_self=False)
    # the first position of each bag whose value equals the bag's maximum
    hit = coreai.broadcasting_equal(rows, coreai.gather(maxima, target, axis=0))
    n_value = const64(n) if isinstance(n, int) else n
    cand = coreai.broadcasting_where(hit, coreai.reshape(pos, [-1, 1]), n_value)
    none = coreai.broadcast_to(n_value, shape_operand([size_piece(_plus(nb, 1)), dim]))
    first = coreai.scatter_along_axis(none, target_nd, cand, axis=0, reduction="min")
    first = _head(first, nb)
    rows_of = coreai.concat([indices, const64([0])], axis=0)  # empty bag -> 0
    return maxima, coreai.gather(rows_of, first, axis=0)
