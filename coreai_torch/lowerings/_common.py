"""Shared pieces of built-in lowerings: the unary/binary patterns."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from coreai_core import Value
from coreai_torch.utils import cast_to, promoted_dtype, result_dtype, scalar_constant, scalar_like

ValuesMap = Mapping[str, Value]
Builder = Callable[..., Value]


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

    def lowering(**operands: Value | float) -> Value:
        (a_name, a), (b_name, b) = operands.items()
        dtype = result_dtype() if compute == "result" else promoted_dtype(a_name, b_name)
        return cast_to(builder(cast_to(a, dtype), cast_to(b, dtype)), result_dtype())

    lowering.__doc__ = f"Broadcasting binary lowering onto {builder.__name__}."
    return lowering


__all__ = ["ValuesMap", "lower_binary", "lower_unary", "scalar_constant", "scalar_like"]
