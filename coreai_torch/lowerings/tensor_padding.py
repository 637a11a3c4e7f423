"""Built-in lowerings (tensor family): padding (``constant_pad_nd`` and the reflection / replication
pads).

Static widths lower onto ``coreai.pad``; a symbolic width is applied at run time (filled blocks
concatenated for a constant pad, gathered source indices for reflect / replicate).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._nn_utils import dim_value
from coreai_torch.lowerings.tensor_creation import dim_piece, shape_operand, size_piece
from coreai_torch.utils import cast_to

LOWERINGS = LoweringSet("tensor_padding")
reg = LOWERINGS.register_torch_lowering


def _torch_pads(pad: list[int], rank: int) -> list[int]:
    """torch's (last dim first) pad pairs as Core AI's per-axis [before, after, ...] list."""
    if len(pad) % 2 or len(pad) // 2 > rank:
        raise ValueError(f"pad {pad} must hold pairs for at most {rank} dims")
    pads = [0] * (2 * rank)
    for i in range(len(pad) // 2):
        axis = rank - 1 - i
        pads[2 * axis], pads[2 * axis + 1] = pad[2 * i], pad[2 * i + 1]
    return pads


def _split_widths(pad: list[int | Value], rank: int,
                  ) -> tuple[list[int], list[tuple[int, int | Value, int | Value]]]:
    """torch's pad pairs split into static widths (a pair with a symbolic width zeroed) and
    the (axis, before, after) of each pair holding a symbolic width."""
    if len(pad) % 2:
        raise ValueError(f"pad {pad} must hold pairs for at most {rank} dims")
    static_pad: list[int] = []
    symbolic: list[tuple[int, int | Value, int | Value]] = []
    for i in range(0, len(pad), 2):
        before, after = pad[i], pad[i + 1]
        if isinstance(before, int) and isinstance(after, int):
            static_pad += [before, after]
        else:
            symbolic.append((rank - 1 - i // 2, before, after))
            static_pad += [0, 0]
    return static_pad, symbolic


@reg("aten::constant_pad_nd.default")
def aten_constant_pad_nd_default(self: Value, pad: list[int | Value],
                                 value: complex | Value = 0) -> Value:
    """constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor (negative pads crop)"""
    x = self
    if isinstance(value, Value):
        raise NotImplementedError("constant_pad_nd with a symbolic pad value")
    if isinstance(value, complex):
        # a complex fill value (aten.constant_pad_nd only; F.pad takes floats): the pad
        # attribute is real, so each part is padded with its own part of the value
        if not x.type.element_type.is_complex:
            raise NotImplementedError(
                f"constant_pad_nd: complex pad value {value} on a {x.type.element_type} "
                "tensor; torch rejects it too (pad a complex tensor instead)")
        return coreai.complex_(aten_constant_pad_nd_default(coreai.real(x), pad, value.real),
                               aten_constant_pad_nd_default(coreai.imag(x), pad, value.imag))
    if isinstance(value, int) and abs(value) > 2**53:
        raise NotImplementedError(f"pad value {value} is not exactly representable as float")
    # an axis with a symbolic width is padded by concatenating filled blocks below
    static_pad, symbolic = _split_widths(pad, x.type.rank)
    pads = _torch_pads(static_pad, x.type.rank)
    if any(pads):
        x = coreai.pad(x, pads, mode="constant", value=float(value))
    for axis, before, after in symbolic:
        x = _pad_by_concat(x, axis, before, after, value)
    return x


def _pad_by_concat(x: Value, axis: int, before: Value | int, after: Value | int,
                   value: float) -> Value:
    """``x`` with blocks of ``value`` of widths ``before``/``after`` (non-negative at run
    time; a symbolic negative width, i.e. a crop, fails when run) on ``axis``."""
    parts: list[Value | None] = []
    for width in (before, after):
        if isinstance(width, int) and width == 0:
            parts.append(None)
            continue
        pieces = [dim_piece(x, a) for a in range(x.type.rank)]
        pieces[axis] = size_piece(width)
        block = coreai.broadcast_to(coreai.constant(value, dtype=x.type.element_type),
                                    shape_operand(pieces))
        parts.append(block)
    blocks = [b for b in (parts[0], x, parts[1]) if b is not None]
    return coreai.concat(blocks, axis=axis)


def _mode_pad(mode: Literal["reflect", "replicate"]) -> Any:
    def lowering(self: Value, padding: list[int | Value]) -> Value:
        x = self
        # axes with a symbolic width are gathered below (the modes are separable)
        static_pad, symbolic = _split_widths(padding, x.type.rank)
        pads = _torch_pads(static_pad, x.type.rank)
        if any(pads):
            x = coreai.pad(x, pads, mode=mode)
        for axis, before, after in symbolic:
            x = coreai.gather(x, _pad_source(x, axis, before, after, mode), axis=axis)
        return x

    lowering.__doc__ = f"{mode} padding of the last 1-3 dims onto coreai.pad."
    return lowering


def _pad_source(x: Value, axis: int, before: int | Value, after: int | Value,
                mode: Literal["reflect", "replicate"]) -> Value:
    """Source index of each output position on ``axis`` padded by run-time widths: position
    ``t`` in ``[-before, size + after)`` reads ``clip(t)`` (replicate) or its mirror image
    (reflect); a negative width crops."""
    def i64(v: int | Value) -> Value:
        return coreai.constant(np.asarray(v, np.int64)) if isinstance(v, int) else \
            cast_to(v, DType.int64)

    size = i64(dim_value(x, axis))
    t = coreai.range_(coreai.neg(i64(before)), coreai.broadcasting_add(size, i64(after)),
                      i64(1))
    top = coreai.broadcasting_sub(size, i64(1))
    if mode == "replicate":
        return coreai.broadcasting_minimum(coreai.broadcasting_maximum(t, i64(0)), top)
    mirrored = coreai.broadcasting_sub(coreai.broadcasting_add(top, top), t)  # 2(n-1) - t
    return coreai.broadcasting_where(coreai.broadcasting_greater(t, top), mirrored,
                                     coreai.abs_(t))


for _n in (1, 2, 3):
    reg(f"aten::reflection_pad{_n}d.default")(_mode_pad("reflect"))
    reg(f"aten::replication_pad{_n}d.default")(_mode_pad("replicate"))
