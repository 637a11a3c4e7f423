"""Shared pieces of built-in lowerings: operand promotion and the unary/binary patterns."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch.fx

from coreai_core import DType, Value
from coreai_torch.utils import cast_to, dtype_of, result_dtype, scalar_constant, scalar_like

ValuesMap = Mapping[str, Value]
Builder = Callable[..., Value]


def _meta_arg(a: Any) -> Any:
    if isinstance(a, torch.fx.Node):
        val = a.meta.get("val")
        if isinstance(val, torch.Tensor):
            return torch.empty([1] * val.dim(), dtype=val.dtype, device="meta")
        if isinstance(val, torch.SymInt):
            return 1
        if isinstance(val, torch.SymFloat):
            return 1.0
        if isinstance(val, torch.SymBool):
            return True
    return a


def computation_dtype(node: torch.fx.Node, arg_indices: tuple[int, int] = (0, 1)) -> DType:
    """``torch.result_type`` of two of the node's arguments (wrapped-number rules included)."""
    a, b = (_meta_arg(node.args[i]) for i in arg_indices)
    if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
        a = torch.tensor(a, device="meta")
    return dtype_of(torch.result_type(a, b))


def lower_unary(builder: Builder, *, float_compute: bool = False) -> Callable[..., Value]:
    """Lowering for an elementwise unary op whose result dtype torch fixes in meta['val'].

    With ``float_compute`` the input is cast to the result dtype first (torch computes e.g.
    sin(int) in the default float type).
    """

    def lowering(self: Value) -> Value:
        out = result_dtype()
        x = self
        # (a complex input keeps its type: abs(complex) is a float computed from both parts)
        if float_compute or (out.is_float and not x.type.element_type.is_float
                             and not x.type.element_type.is_complex):
            x = cast_to(x, out)
        return cast_to(builder(x), out)

    lowering.__doc__ = f"Elementwise unary lowering onto {builder.__name__}."
    return lowering


def lower_binary(builder: Builder, *, compute: str = "result") -> Callable[..., Value]:
    """Lowering for a broadcasting binary op (its two schema arguments, whatever their names).

    ``compute="result"`` casts operands to the node's result dtype (arithmetic);
    ``"promoted"`` to torch's promoted operand dtype (comparisons, logical ops return bool).
    """

    def lowering(*, node: torch.fx.Node, **operands: Value | float) -> Value:
        a, b = operands.values()
        dtype = result_dtype() if compute == "result" else computation_dtype(node)
        return cast_to(builder(cast_to(a, dtype), cast_to(b, dtype)), result_dtype())

    lowering.__doc__ = f"Broadcasting binary lowering onto {builder.__name__}."
    return lowering


__all__ = [
    "ValuesMap", "computation_dtype", "lower_binary", "lower_unary", "scalar_constant",
    "scalar_like",
]
