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
- the positions read are looked up in ``x`` itself, and when ``x`` does not cover them all (a
  slice read before its start), in the views it was made from, up to its base tensor;
- the result is one ``gather`` of the flattened tensor with constant indices.

Sizes, strides and offsets must be static. Reading storage that none of those tensors covers
(beyond the base's end, or a gap of a slice's base that nothing holds) is refused by name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.multiprocessing.reductions import StorageWeakRef

from coreai_core import Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._nn_utils import STATIC_WORKAROUND

LOWERINGS = LoweringSet("tensor_strided")
reg = LOWERINGS.register_torch_lowering

# how far back through views of the same storage to look for the elements read
_MAX_VIEW_DEPTH = 64


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


def _views_of_same_storage(node: torch.fx.Node) -> Iterator[torch.fx.Node]:
    """``node``, then the FX nodes it was viewed from (sharing its storage), nearest first."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return
    storage = StorageWeakRef(val.untyped_storage())
    seen = {node}
    todo = [node]
    while todo and len(seen) <= _MAX_VIEW_DEPTH:
        current = todo.pop(0)
        yield current
        for arg in current.all_input_nodes:
            v = arg.meta.get("val")
            if (arg not in seen and isinstance(v, torch.Tensor)
                    and StorageWeakRef(v.untyped_storage()) == storage):
                seen.add(arg)
                todo.append(arg)


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
def aten_as_strided_default(values_map: Any, node: torch.fx.Node, loc: Any) -> Value:
    """as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)

    Exact for any strided input (see the module docstring): the positions read are gathered
    from the input, or from the views it was made from, whichever holds them.
    """  # noqa: E501
    source = node.args[0]
    assert isinstance(source, torch.fx.Node)
    size = _static(node.args[1], "size")
    stride = _static(node.args[2], "stride")
    offset_arg = node.args[3] if len(node.args) > 3 else node.kwargs.get("storage_offset")
    val = source.meta.get("val")
    layout = _layout(val) if isinstance(val, torch.Tensor) else None
    if layout is None:
        raise NotImplementedError(f"as_strided needs static input sizes, strides and storage "
                                  f"offset, got {val!r}; {STATIC_WORKAROUND}")
    offset = layout[2] if offset_arg is None else _static([offset_arg], "storage offset")[0]
    read = storage_positions(size, stride, offset).reshape(-1)
    tried = []
    for view in _views_of_same_storage(source):
        view_layout = _layout(view.meta["val"])
        if view_layout is None or view.name not in values_map:
            continue
        shape, view_stride, view_offset = view_layout
        held = storage_positions(shape, view_stride, view_offset)
        index = _lookup(read, held) if read.size else np.zeros(0, np.int64)
        if index is None:
            tried.append(f"{view.name} (sizes {shape}, strides {view_stride}, offset "
                         f"{view_offset})")
            continue
        x = values_map[view.name]
        flat = coreai.reshape(x, [int(np.prod(shape, dtype=np.int64))], loc=loc)
        gathered = coreai.gather(flat, coreai.constant(index.astype(np.int64), loc=loc),
                                 axis=0, loc=loc)
        return coreai.reshape(gathered, coreai.constant(np.asarray(size, np.int64), loc=loc),
                              loc=loc)
    span = f"[{int(read.min())}, {int(read.max())}]" if read.size else "[]"
    raise NotImplementedError(
        f"as_strided(size={size}, stride={stride}, storage_offset={offset}) reads storage "
        f"positions {span} that no tensor it views holds; looked in {', '.join(tried)}. "
        "Only storage that the input or the tensors it was viewed from cover can be read: "
        "make the base tensor larger, or index it instead of striding past its end")
