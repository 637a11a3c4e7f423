"""Built-in lowerings (tensor family): ``as_strided`` over any strided view.

torch's ``as_strided(x, size, stride, offset)`` reads ``x``'s *storage*: element ``i`` of the
result is storage position ``offset + sum(i_k * stride_k)``, whatever view ``x`` is of that
storage (transposed, sliced, expanded, or itself an ``unfold``, as HaloNet's blocks with halos
are). Core AI tensors are values with no storage, so the lowering maps each position read back
to an element that holds it:

- the export traced every tensor with its strides and storage offset, and views share their
  base's storage; so each storage position an FX value covers is known: position
  ``offset_x + sum(j_k * stride_x_k)`` is element ``j`` of ``x`` (several elements of an
  overlapping view, such as an ``unfold`` or an ``expand``, hold the same position and the
  same value);
- the positions read are looked up among those ``x`` holds, and the result is one ``gather``
  of the flattened ``x`` with constant indices.

Sizes, strides and offsets must be static. A read of a storage position that ``x`` does not
hold (before a slice's start, say) is refused by name: that element belongs to the tensor ``x``
was viewed from, which a converted program does not keep (values have no storage); the error
says to take ``as_strided`` of that base instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from coreai_core import Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._nn_utils import STATIC_WORKAROUND
from coreai_torch.utils import arg_meta

LOWERINGS = LoweringSet("tensor_strided")
reg = LOWERINGS.register_torch_lowering

def _static(values: Any, what: str) -> list[int]:
    try:
        return [int(v) for v in values]
    except (TypeError, ValueError):
        raise NotImplementedError(f"as_strided needs a static {what}, got {values!r}; "
                                  f"{STATIC_WORKAROUND}") from None


def storage_positions(shape: list[int], stride: list[int], offset: int) -> np.ndarray:
    """The storage position of every element of a strided tensor, in row-major order."""
    positions = np.full(shape, offset, dtype=np.int64)
    for axis, (n, s) in enumerate(zip(shape, stride, strict=True)):
        positions += (np.arange(n, dtype=np.int64) * s).reshape(
            [-1 if a == axis else 1 for a in range(len(shape))])
    return positions


def _layout(val: torch.Tensor) -> tuple[list[int], list[int], int] | None:
    try:
        return ([int(d) for d in val.shape], [int(s) for s in val.stride()],
                int(val.storage_offset()))
    except (TypeError, ValueError, RuntimeError):
        return None  # symbolic


def _lookup(read: np.ndarray, held: np.ndarray) -> np.ndarray | None:
    """Row-major indices into a tensor whose elements hold storage positions ``held`` of the
    positions ``read``; None when some position is not held."""
    order = np.argsort(held.reshape(-1), kind="stable")
    ordered = held.reshape(-1)[order]
    at = np.searchsorted(ordered, read)
    inside = at < ordered.size
    if not np.all(inside) or not np.array_equal(ordered[at], read):
        return None
    return order[at]


@reg("aten::as_strided.default")
def aten_as_strided_default(self: Value, size: list[int | Value], stride: list[int | Value],
                            storage_offset: int | Value | None = None) -> Value:
    """as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)

    Exact for any strided input whose elements hold every storage position read (see the
    module docstring): those positions are gathered from the input.
    """  # noqa: E501
    sizes = _static(size, "size")
    strides = _static(stride, "stride")
    val = arg_meta("self")
    layout = _layout(val) if isinstance(val, torch.Tensor) else None
    if layout is None:
        raise NotImplementedError(f"as_strided needs static input sizes, strides and storage "
                                  f"offset, got {val!r}; {STATIC_WORKAROUND}")
    shape, view_stride, view_offset = layout
    offset = view_offset if storage_offset is None else _static([storage_offset],
                                                                "storage offset")[0]
    read = storage_positions(sizes, strides, offset).reshape(-1)
    held = storage_positions(shape, view_stride, view_offset)
    index = _lookup(read, held) if read.size else np.zeros(0, np.int64)
    if index is None:
        missing = np.setdiff1d(read, held.reshape(-1))
        raise NotImplementedError(
            f"as_strided(size={sizes}, stride={strides}, storage_offset={offset}) of a view "
            f"with sizes {shape}, strides {view_stride} and storage offset {view_offset} reads "
            f"{missing.size} storage position(s) the view does not hold (first: "
            f"{int(missing[0])}): they belong to the tensor it was viewed from, which a "
            "converted program does not keep. Take as_strided of that base tensor instead "
            "(with the view's offset added to storage_offset)")
    flat = coreai.reshape(self, [int(np.prod(shape, dtype=np.int64))])
    gathered = coreai.gather(flat, coreai.constant(index.astype(np.int64)), axis=0)
    return coreai.reshape(gathered, coreai.constant(np.asarray(sizes, np.int64)))
