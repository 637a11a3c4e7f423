"""Fold an inference-time affine normalization into the preceding conv or matmul.

Batch norm in eval mode (and similar per-channel scale/shift ops) lowers to elementwise ops
with constant per-channel operands after a convolution or a linear layer. This pass folds

- ``conv(x, W, b) * s``  -> ``conv(x, W * s, b * s)``     (``/ s`` likewise, as ``* 1/s``)
- ``conv(x, W, b) + t``  -> ``conv(x, W, b + t)``         (``- t`` likewise)
- ``matmul(x, W) * s``   -> ``matmul(x, W * s)``          (W constant, s along the last axis)
- ``(y + b) * s``        -> ``y' + b * s`` when ``y * s`` folds as above (a linear's bias)
- ``(y + b) + t``        -> ``y + (b + t)``               (consecutive shifts merge)
- ``(y * a) * s``        -> ``y * (a * s)``               (consecutive scales merge)

Assumptions, each checked before a fold (a fold whose check fails is skipped):

- **Single use.** Every op folded away (the conv or matmul, an inner shift or scale) has a
  single result whose only reader is the op folded into it, counting the uses the sweep has
  not moved yet (:meth:`Rewriter.single_use_producer`). A conv with another reader (the
  ``x + 3`` and the ``x * ...`` of a hard-swish) is left alone: folding would either copy the
  conv or change what its other reader sees.
- **Constant operands.** ``s``, ``t``, the weights and the bias are bound constants; the
  other operand of the scale or shift is not a constant.
- **Channel axis.** ``s`` and ``t`` vary only along the channel axis (axis 1 of a conv
  result, the last axis of a matmul result whose right operand is a constant matrix) and are
  broadcast against it without changing its type (same shape, same dtype).
- **Dtype.** Only float16, bfloat16, float32 and float64 results are folded (in 8- and 4-bit
  floats, rounding the scaled weights to so few bits would change the results noticeably);
  ``s`` is finite (and non-zero for a division), and so is every new weight, bias and merged
  constant in its dtype (a fold that overflows is refused).

New weights are computed in float64 and rounded once into new constants (weights are never
edited in place); a weight whose old data nothing reads any more passes its name on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from coreai_core._dtypes import DType
from coreai_core._ir import Operation, Value
from coreai_core.optimizer._program_walk import weight_hint
from coreai_core.optimizer._rewriter import RewritePass, Rewriter

FOLDED_DTYPES = frozenset({DType.float16, DType.bfloat16, DType.float32, DType.float64})
SCALES = {"coreai.mul": "mul", "coreai.broadcasting_mul": "mul", "coreai.divide": "div",
          "coreai.broadcasting_divide": "div"}
SHIFTS = {"coreai.add": "add", "coreai.broadcasting_add": "add", "coreai.sub": "sub",
          "coreai.broadcasting_sub": "sub"}
COMMUTATIVE = {"coreai.mul", "coreai.broadcasting_mul", "coreai.add", "coreai.broadcasting_add"}


def channel_vector(c: np.ndarray, rank: int, axis: int, size: int) -> np.ndarray | None:
    """``c`` as a 1-d vector of ``size`` if it varies only along ``axis`` of a rank-``rank``
    tensor it is broadcast against; None otherwise."""
    if c.ndim > rank:
        return None
    padded = c.reshape((1,) * (rank - c.ndim) + c.shape)
    if any(d != 1 for i, d in enumerate(padded.shape) if i != axis):
        return None
    if padded.shape[axis] not in (1, size):
        return None
    return np.broadcast_to(padded.reshape(-1), (size,))


def _affine_operands(op: Operation, rw: Rewriter) -> tuple[Value, np.ndarray, str] | None:
    """(y, constant, kind) for ``y * c``, ``c * y``, ``y / c``, ``y + c``, ``c + y``, ``y - c``
    with a result of ``y``'s type in :data:`FOLDED_DTYPES` (``c`` does not broadcast ``y``) and
    ``y`` computed."""
    kind = SCALES.get(op.name) or SHIFTS.get(op.name)
    if kind is None or len(op.results) != 1 or op.result.type.element_type not in FOLDED_DTYPES:
        return None
    a, b = op.operands
    pairs = [(a, b), (b, a)] if op.name in COMMUTATIVE else [(a, b)]
    for y, c in pairs:
        data = rw.const(c)
        if data is not None and y.type == op.result.type and rw.const(y) is None:
            return y, data, kind
    return None


def _data(rw: Rewriter, v: Value) -> np.ndarray:
    """The data of an operand :func:`_channel_axis` found to be a bound constant."""
    data = rw.const(v)
    if data is None:  # pragma: no cover - _channel_axis checked it
        raise AssertionError(f"{v!r} is not a bound constant")
    return data


HEAVY_PRODUCERS = ("coreai.conv", "coreai.batch_matmul")


def _channel_axis(op: Operation, rw: Rewriter) -> tuple[int, int] | None:
    """(axis, size) of the per-channel axis of a conv with constant weight (and bias) or a
    matmul ``x @ W`` with a constant matrix ``W`` and a computed ``x``; None for other ops."""
    if op.name not in HEAVY_PRODUCERS or len(op.results) != 1:
        return None
    w = rw.const(op.operands[1])
    if w is None or w.dtype != op.result.type.element_type.numpy:
        return None
    if op.name == "coreai.conv":
        if len(op.operands) == 2 or rw.const(op.operands[2]) is not None:
            return 1, w.shape[0]
    elif w.ndim >= 2 and rw.const(op.operands[0]) is None:
        return op.result.type.rank - 1, w.shape[-1]
    return None


def _scaled(w: np.ndarray, v: np.ndarray, axis: int) -> np.ndarray:
    shape = [1] * w.ndim
    shape[axis] = -1
    return (w.astype(np.float64) * v.reshape(shape)).astype(w.dtype)


class FoldAffinePass(RewritePass):
    """Fold constant per-channel scales and shifts into a preceding conv or matmul.

    Assumes what the module docstring lists; each fold checks it first.
    """

    name = "fold_affine"

    def visit(self, op: Operation, rw: Rewriter) -> Sequence[Value] | None:
        found = _affine_operands(op, rw)
        if found is None:
            return None
        y, c, kind = found
        producer = rw.single_use_producer(y)
        if producer is None:
            return None
        c = c.astype(np.float64)
        if not np.all(np.isfinite(c)) or (kind == "div" and not np.all(c != 0)):
            return None  # x * inf or x / 0 is not distributive (0 * inf is NaN)
        with np.errstate(over="ignore"):  # a fold that overflows is refused, not warned about
            if kind in ("mul", "div"):
                return self._fold_scale(op, producer, 1.0 / c if kind == "div" else c, rw)
            return self._fold_shift(op, producer, -c if kind == "sub" else c, rw)

    # -- scale ----------------------------------------------------------------------------------
    def _fold_scale(self, op: Operation, producer: Operation, s: np.ndarray,
                    rw: Rewriter) -> Sequence[Value] | None:
        if producer.name in SHIFTS:
            return self._scale_through_shift(op, producer, s, rw)
        if producer.name in SCALES:
            return self._merge(op, producer, s, rw, scale=True)
        channel = _channel_axis(producer, rw)
        if channel is None:
            return None
        axis, size = channel
        v = channel_vector(s, op.result.type.rank, axis, size)
        if v is None:
            return None
        operands = list(producer.operands)
        w_axis = 0 if producer.name == "coreai.conv" else -1
        new_data = [_scaled(_data(rw, operands[1]), v, w_axis)]
        if len(operands) == 3:
            new_data.append(_scaled(_data(rw, operands[2]), v, 0))
        if not all(np.all(np.isfinite(d)) for d in new_data):
            return None  # the scaled weights overflow their dtype
        for i, data in enumerate(new_data, start=1):
            operands[i] = rw.derived_constant(operands[i], data, producer.location)
        # The operands keep their types, so the new op has the producer's (== op's) type.
        return rw.replacement(op, producer.name, operands, dict(producer.attributes))

    def _scale_through_shift(self, op: Operation, shift: Operation, s: np.ndarray,
                             rw: Rewriter) -> Sequence[Value] | None:
        # (y + b) * s -> (y * s) + b * s, with y * s folded into y's conv / matmul
        # (assumes: the shift reads its conv / matmul alone, see the module docstring)
        found = _affine_operands(shift, rw)
        if found is None:
            return None
        y, b, kind = found
        inner = rw.single_use_producer(y, *HEAVY_PRODUCERS)
        if inner is None:
            return None
        channel = _channel_axis(inner, rw)
        if channel is None:
            return None
        axis, size = channel
        rank = op.result.type.rank
        v = channel_vector(s, rank, axis, size)
        bv = channel_vector(b, rank, axis, size)
        if v is None or bv is None:
            return None
        new_b = (bv * v).astype(b.dtype).reshape(_vector_shape(rank, axis, size))
        if not np.all(np.isfinite(new_b)):
            return None  # the scaled shift overflows its dtype
        scaled = self._fold_scale(shift, inner, s, rw)
        if scaled is None:
            return None
        b_value = rw.constant(new_b, "folded_bias", op.location)
        name = "coreai.broadcasting_add" if kind == "add" else "coreai.broadcasting_sub"
        return rw.replacement(op, name, [scaled[0], b_value], {})

    # -- shift ----------------------------------------------------------------------------------
    def _fold_shift(self, op: Operation, producer: Operation, t: np.ndarray,
                    rw: Rewriter) -> Sequence[Value] | None:
        if producer.name == "coreai.conv":
            channel = _channel_axis(producer, rw)
            if channel is None:
                return None
            v = channel_vector(t, op.result.type.rank, *channel)
            if v is None:
                return None
            operands = list(producer.operands)
            dtype = _data(rw, operands[1]).dtype
            has_bias = len(operands) == 3
            new_bias = ((_data(rw, operands[2]) + v) if has_bias else v).astype(dtype)
            if not np.all(np.isfinite(new_bias)):
                return None  # the shifted bias overflows its dtype
            if has_bias:
                operands[2] = rw.derived_constant(operands[2], new_bias, producer.location)
            else:
                hint = weight_hint(rw.origin_weight_name(operands[1]) or "folded", "bias")
                operands.append(rw.constant(new_bias, hint, producer.location))
            return rw.replacement(op, producer.name, operands, dict(producer.attributes))
        return self._merge(op, producer, t, rw, scale=False)

    def _merge(self, op: Operation, producer: Operation, c: np.ndarray, rw: Rewriter,
               scale: bool) -> Sequence[Value] | None:
        # (y + b) + t -> y + (b + t) ; (y * a) * s -> y * (a * s)
        found = _affine_operands(producer, rw)
        if found is None or (found[2] in ("mul", "div")) != scale:
            return None
        y, first, kind = found
        first64 = first.astype(np.float64)
        if not np.all(np.isfinite(first64)) or (kind == "div" and not np.all(first64 != 0)):
            return None
        if kind == "sub":
            first64 = -first64
        elif kind == "div":
            first64 = 1.0 / first64
        total = (first64 * c if scale else first64 + c).astype(first.dtype)
        if not np.all(np.isfinite(total)):
            return None  # the merged constant overflows its dtype
        hint = "folded_scale" if scale else "folded_shift"
        merged = rw.constant(total, hint, op.location)
        name = "coreai.broadcasting_mul" if scale else "coreai.broadcasting_add"
        return rw.replacement(op, name, [y, merged], {})


def _vector_shape(rank: int, axis: int, size: int) -> tuple[int, ...]:
    shape = [1] * rank
    shape[axis] = size
    return tuple(shape[axis:]) if axis == rank - 1 else tuple(shape[1:])
