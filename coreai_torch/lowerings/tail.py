"""Built-in lowerings (tail family): ops that survive ``get_decomp_table()`` as themselves —
``_trilinear`` (from ``bilinear``), ``addbmm``, ``as_strided_scatter``, ``empty_permuted``,
``tril_indices``/``triu_indices`` — expressed with existing Core AI ops.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.fx

from coreai_core import DType, Location, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._common import ValuesMap
from coreai_torch.lowerings._nn_utils import STATIC_WORKAROUND
from coreai_torch.lowerings.tensor_creation import sizes_operand
from coreai_torch.utils import cast_to, current_context, result_dtype, scalar_like

LOWERINGS = LoweringSet("tail")
reg = LOWERINGS.register_torch_lowering

_HALF = (DType.float16, DType.bfloat16)


def _compute_dtype(dtype: DType) -> DType:
    """Half types accumulate products in float32, like torch's CPU matmul."""
    return DType.float32 if dtype in _HALF else dtype


@reg("aten::_trilinear.default")
def aten__trilinear_default(i1: Value, i2: Value, i3: Value, expand1: list[int],
                            expand2: list[int], expand3: list[int], sumdim: list[int],
                            unroll_dim: int = 1) -> Value:
    """_trilinear(Tensor i1, Tensor i2, Tensor i3, int[] expand1, int[] expand2, int[] expand3, int[] sumdim, int unroll_dim=1) -> Tensor

    Each input gets size-1 dims at its ``expand`` positions, the three are multiplied and
    ``sumdim`` is summed away (``unroll_dim`` only picks torch's loop order).
    """  # noqa: E501
    dtype = result_dtype()
    acc = _compute_dtype(dtype)
    parts = []
    for x, expand in ((i1, expand1), (i2, expand2), (i3, expand3)):
        x = cast_to(x, acc)
        if expand:
            x = coreai.expand_dims(x, sorted(expand))
        parts.append(x)
    product = coreai.broadcasting_mul(coreai.broadcasting_mul(parts[0], parts[1]), parts[2])
    if sumdim:
        product = coreai.reduce_sum(product, axes=sorted(sumdim))
    return cast_to(product, dtype)


@reg("aten::addbmm.default")
def aten_addbmm_default(self: Value, batch1: Value, batch2: Value, beta: float = 1,
                        alpha: float = 1) -> Value:
    """addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor

    ``beta * self + alpha * sum_b batch1[b] @ batch2[b]``; with ``beta == 0`` self is ignored
    (NaN in it does not propagate), like torch.
    """
    dtype = result_dtype()
    acc = _compute_dtype(dtype)
    products = coreai.batch_matmul(cast_to(batch1, acc), cast_to(batch2, acc))
    total = coreai.reduce_sum(products, axes=[0])
    if alpha != 1:
        total = coreai.broadcasting_mul(total, scalar_like(alpha, total))
    if beta != 0:
        base = cast_to(self, acc)
        if beta != 1:
            base = coreai.broadcasting_mul(base, scalar_like(beta, base))
        total = coreai.broadcasting_add(base, total)
    return cast_to(total, dtype)


@reg("aten::as_strided_scatter.default")
def aten_as_strided_scatter_default(self: Value, src: Value, size: list[int | Value],
                                    stride: list[int | Value],
                                    storage_offset: int | Value | None = None) -> Value:
    """as_strided_scatter(Tensor self, Tensor src, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor

    ``self`` is taken as contiguous (a functional program's tensors are): the view's element
    at index ``i`` is storage element ``storage_offset + sum(i_k * stride_k)`` of self's
    row-major flattening. Where view elements overlap, the last one written wins.
    """  # noqa: E501
    sizes = [s for s in size if isinstance(s, int)]
    strides = [s for s in stride if isinstance(s, int)]
    if (len(sizes) != len(size) or len(strides) != len(stride)
            or isinstance(storage_offset, Value) or not self.type.is_static):
        raise NotImplementedError("as_strided_scatter needs static sizes, strides and offset, "
                                  f"got {self.type}; {STATIC_WORKAROUND}")
    offset = int(storage_offset or 0)
    grid = np.indices(sizes)
    flat_index = offset + sum((g.astype(np.int64) * st for g, st in zip(grid, strides,
                                                                        strict=True)),
                              start=np.zeros(sizes, np.int64))
    flat = coreai.reshape(self, [-1])
    updates = coreai.reshape(cast_to(src, self.type.element_type), [-1])
    index = coreai.constant(flat_index.reshape(-1, 1))
    out = coreai.scatter_nd(flat, index, updates)
    return coreai.reshape(out, list(self.type.shape))


@reg("aten::empty_permuted.default")
def aten_empty_permuted_default(size: list[int | Value], physical_layout: list[int],
                                dtype: DType | None = None) -> Value:
    """empty_permuted(SymInt[] size, int[] physical_layout, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    Zeros of the logical ``size`` (the physical layout is a storage order Core AI tensors do
    not have; torch leaves the contents unspecified).
    """  # noqa: E501
    shape = sizes_operand(size)
    zero = cast_to(0, result_dtype())
    if isinstance(shape, np.ndarray) and shape.size == 0:
        return zero
    return coreai.broadcast_to(zero, shape)


def _triangle_indices(pick: Callable[..., tuple[np.ndarray, np.ndarray]]) -> Callable[..., Value]:
    def lowering(row: int, col: int, offset: int = 0, dtype: DType | None = None) -> Value:
        rows, cols = pick(row, offset, col)
        coords = np.stack([rows, cols]).astype(np.int64).reshape(2, len(rows))
        return cast_to(coreai.constant(coords), result_dtype())

    return lowering


for _name, _pick in (("tril_indices", np.tril_indices), ("triu_indices", np.triu_indices)):
    _fn = reg(f"aten::{_name}.default")(_triangle_indices(_pick))
    _fn.__doc__ = (f"{_name}(int row, int col, int offset=0, *, ScalarType? dtype=long, ...) -> "
                   "Tensor: the [2, N] coordinates in row-major order (a constant)")


# -- effect tokens ---------------------------------------------------------------------------------

@reg("higher_order::with_effects.default")
def higher_order_with_effects(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                              ) -> list[Value | None]:
    """with_effects(token, op, *args, **kwargs) -> (token, *op results)

    torch.export wraps effectful ops (``aten._print``, custom ops registered with an effect)
    so a token orders them. The wrapped op is lowered with its own lowering (a print is
    dropped: a Core AI program has no side effects) and the token passes through unchanged:
    Core AI keeps the program order of ops, so nothing needs to thread it further.
    """
    token, op, *args = node.args
    if not isinstance(token, torch.fx.Node):
        raise TypeError(f"with_effects: expected a token node, got {token!r}")
    val = node.meta.get("val")
    results = list(val[1:]) if isinstance(val, (list, tuple)) else [None]
    single = len(results) == 1
    lowered = current_context().lower_call(node, op, args, dict(node.kwargs),
                                           results[0] if single else tuple(results), values_map)
    rest = [lowered] if single else list(lowered or [None] * len(results))
    return [values_map[token.name], *rest]


__all__ = ["LOWERINGS"]
