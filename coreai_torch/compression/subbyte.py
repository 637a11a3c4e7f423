"""Tensors of packed sub-byte data that torch cannot hold natively.

:class:`Float4Tensor` wraps a uint8 tensor holding two float4_e2m1fn codes per byte along the
last axis (element ``2k`` in the low nibble): it presents the logical shape (the last axis
doubled) and hands its packed bytes to ``torch.ops.coreai.constexpr_blockwise_shift_scale``,
so a module can keep it as a buffer and export (torch.export unwraps it to the uint8 bytes,
which the converter reads as float4 through the op's e8m0 scale). Apple's ``coreai-opt``
creates it (``coreai_torch._compression._floatx.Float4Tensor``) for fp4 weights.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.utils._pytree import tree_map

from coreai_torch.compression.ops import unpack_fp4

__all__ = ["Float4Tensor", "SubbyteTensor", "byte_shape_to_fp4_shape",
           "fp4_shape_to_byte_shape"]


def byte_shape_to_fp4_shape(shape: Any) -> torch.Size:
    """Logical float4 shape of packed bytes: the last axis doubled."""
    s = list(shape)
    s[-1] *= 2
    return torch.Size(s)


def fp4_shape_to_byte_shape(shape: Any) -> torch.Size:
    """Shape of the packed bytes of a float4 tensor: the last axis halved."""
    s = list(shape)
    if s[-1] % 2:
        raise ValueError(f"a float4 tensor's last axis must be even to pack, got {list(shape)}")
    s[-1] //= 2
    return torch.Size(s)


class SubbyteTensor(Tensor):
    """Base of wrapper tensors whose ``elem`` holds packed sub-byte data (uint8)."""

    elem: Tensor
    nbits: int = 8

    @property
    def tensor_shape(self) -> torch.Size:
        """The logical shape."""
        return self.shape

    def unpack(self) -> Tensor:
        """The logical values as a float32 tensor."""
        raise NotImplementedError


_SHAPE_OPS = {torch.ops.aten.view.default, torch.ops.aten.reshape.default,
              torch.ops.aten._unsafe_view.default}
_COPY_OPS = {torch.ops.aten.detach.default, torch.ops.aten.clone.default,
             torch.ops.aten.alias.default, torch.ops.aten._to_copy.default}


class Float4Tensor(SubbyteTensor):
    """float4_e2m1fn data packed two per uint8 byte along the last axis (low nibble first)."""

    nbits = 4
    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    @staticmethod
    def __new__(cls, elem: Tensor) -> Float4Tensor:
        if not isinstance(elem, Tensor) or elem.dtype != torch.uint8 or elem.dim() == 0:
            raise TypeError(f"Float4Tensor wraps a uint8 tensor of packed float4 bytes (at "
                            f"least 1-d), got {getattr(elem, 'dtype', type(elem))}")
        t = Tensor._make_wrapper_subclass(
            cls, byte_shape_to_fp4_shape(elem.shape), dtype=torch.uint8, device=elem.device,
            requires_grad=False)
        t.elem = elem
        return t

    def __init__(self, elem: Tensor) -> None:
        # marks the bytes for code reading the unwrapped buffer (as Apple's package does)
        elem.future_dtype = torch.float4_e2m1fn_x2  # type: ignore[attr-defined]

    def __repr__(self) -> str:  # type: ignore[override]
        return f"Float4Tensor(shape={list(self.shape)}, elem={self.elem!r})"

    def __tensor_flatten__(self) -> tuple[list[str], dict[str, Any]]:
        return ["elem"], {}

    @classmethod
    def __tensor_unflatten__(cls, inner: dict[str, Tensor], meta: Any, outer_size: Any,
                             outer_stride: Any) -> Float4Tensor:
        return cls(inner["elem"])

    def unpack(self) -> Tensor:
        return unpack_fp4(self.elem)

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: tuple = (),  # type: ignore[override]
                           kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func in _COPY_OPS:
            return cls(func(args[0].elem, *args[1:], **kwargs))
        if func in _SHAPE_OPS:
            return cls(func(args[0].elem, fp4_shape_to_byte_shape(args[1])))
        if func is torch.ops.aten.unsqueeze.default:
            dim = args[1] if args[1] >= 0 else args[1] + args[0].dim() + 1
            if dim == args[0].dim():
                raise NotImplementedError("Float4Tensor cannot add an axis after its packed "
                                          "last axis")
            return cls(args[0].elem.unsqueeze(dim))
        if getattr(func, "_schema", None) is not None and \
                func._schema.name == "coreai::constexpr_blockwise_shift_scale":
            unwrapped = tree_map(lambda a: a.elem if isinstance(a, Float4Tensor) else a,
                                 (args, kwargs))
            return func(*unwrapped[0], **unwrapped[1])
        raise NotImplementedError(
            f"Float4Tensor supports copies, reshapes and coreai::constexpr_blockwise_shift_scale"
            f", not {func}; call .unpack() for the float32 values")
