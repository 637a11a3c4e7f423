"""Shared pieces of built-in lowerings: the unary/binary patterns and torch's ``opmath``."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from coreai_core import DType, Value
from coreai_torch.utils import cast_to, promoted_dtype, result_dtype, scalar_constant, scalar_like

ValuesMap = Mapping[str, Value]
Builder = Callable[..., Value]

HALF = (DType.float16, DType.bfloat16)


def opmath(dtype: DType) -> DType:
    """The type torch's CPU kernels compute in (``at::opmath_type``): float32 for
    float16/bfloat16, the dtype itself otherwise."""
    return DType.float32 if dtype in HALF else dtype


def to_opmath(x: Value) -> Value:
    """``x`` cast to its :func:`opmath` type (unchanged unless float16/bfloat16)."""
    return cast_to(x, opmath(x.type.element_type))


def in_opmath(lowering: Callable[..., Any]) -> Callable[..., Any]:
    """A lowering computed like torch's CPU kernel of a composite op on half types: every
    float16/bfloat16 Value argument is cast to float32, the lowering builds its whole
    expansion there, and each floating result is rounded once to the dtype torch gives it.

    Without it each primitive of the expansion rounds to the half type, which loses accuracy
    and overflows where torch does not (softplus(12) = log1p(exp(12)) in float16 is inf).
    The wrapped lowering keeps the schema-bound signature of ``lowering``.
    """
    @functools.wraps(lowering)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        def up(a: Any) -> Any:
            return to_opmath(a) if isinstance(a, Value) else a

        out = lowering(*(up(a) for a in args), **{k: up(v) for k, v in kwargs.items()})
        if isinstance(out, Value):
            return _round_back(out, None)
        return [_round_back(v, i) for i, v in enumerate(out)]

    return wrapper


def _round_back(value: Value, index: int | None) -> Value:
    """A float result of an opmath lowering in the dtype of the node's result ``index``."""
    want = result_dtype(index=index)
    return cast_to(value, want) if value.type.element_type.is_float and want.is_float \
        else value


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


__all__ = ["HALF", "ValuesMap", "in_opmath", "lower_binary", "lower_unary", "opmath",
           "scalar_constant", "scalar_like", "to_opmath"]
