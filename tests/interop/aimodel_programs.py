"""Random multi-op programs for the differential ``.aimodel`` export test.

The programs come from the optimizer's generator (:func:`tests.core.strategies.programs`:
chains and DAGs of float32 values, broadcasting peers, constants and weights, reductions,
shapes, ``if_``), with extra steps for what the exporter maps beyond it:

- one step per element type (int8/16/32/64, uint8, bool, float16): a sub-chain in it. The
  float32 value is scaled and cast in, up to three ops of that type run on it (arithmetic
  with constants or with other values of the program cast in too, integer division and
  remainders, bitwise ops, comparisons and ``where``, reductions, casts between the integer
  types), and the result is cast back to float32, so the rest of the program goes on;
- ``math``: float32 functions outside the optimizer's total set, on a safe domain (``log`` of
  ``|x| + 1``, division by ``|x| + 1``, ``pow``, rounding, ``erf``, ``gelu``, ...);
- ``shape``: ops that move data (``tile``, ``reverse``, ``pad``, ``gather``, ``scan``, ``sort``,
  ``topk``, ``argmax``, ``batch_matmul`` with a constant).

Inputs are Python identifiers (Core AI's graph builder names inputs after parameters).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

from coreai_core import DType, Program, Value
from coreai_core.dialects import coreai
from tests.core.strategies import Step, programs

__all__ = ["HALF_TYPES", "STEPS", "TYPES", "aimodel_programs", "element_types", "op_names"]

INTEGERS = (DType.int8, DType.int16, DType.int32, DType.int64, DType.uint8)
HALF_TYPES = (DType.float16,)
TYPES = (*INTEGERS, DType.bool, *HALF_TYPES)

# (name, builder) of binary integer ops safe on small values (no overflow for |x| <= 64)
_INT_BINARY = ("broadcasting_add", "broadcasting_sub", "broadcasting_mul",
               "broadcasting_maximum", "broadcasting_minimum", "broadcasting_bitwise_and",
               "broadcasting_bitwise_or", "broadcasting_bitwise_xor")
# integer division by a nonzero constant
_INT_DIVISION = ("broadcasting_floor_divide", "broadcasting_modulo", "broadcasting_remainder",
                 "broadcasting_divide")
_INT_UNARY = ("abs_", "neg", "sign", "bitwise_not")
_COMPARISONS = ("broadcasting_greater", "broadcasting_less", "broadcasting_equal",
                "broadcasting_not_equal", "broadcasting_greater_equal",
                "broadcasting_less_equal")
_HALF_UNARY = ("neg", "abs_", "relu", "tanh", "sigmoid", "sin", "cos", "floor", "ceil", "exp",
               "round_", "trunc", "sign")
_HALF_BINARY = ("broadcasting_add", "broadcasting_sub", "broadcasting_mul",
                "broadcasting_maximum", "broadcasting_minimum")


def _const(dtype: DType, value: Any, shape: tuple = ()) -> Value:
    return coreai.constant(np.full(shape, value, dtype.numpy))


def _scaled_in(draw: Any, v: Value, dtype: DType) -> Value:
    """``v`` (float32 in about [-8, 8] after the optimizer's steps) in ``dtype``: scaled so
    that casts truncate fractions, non-negative for unsigned types, clipped into range."""
    if dtype is DType.bool:
        return coreai.broadcasting_greater(v, 0.0)
    if dtype.is_float:
        return coreai.cast(v, dtype)
    x = coreai.broadcasting_mul(v, float(draw(st.sampled_from([1, 3, 7]))))
    if dtype.name.startswith("u"):
        x = coreai.abs_(x)
    x = coreai.broadcasting_minimum(coreai.broadcasting_maximum(x, -60.0), 60.0)
    return coreai.cast(x, dtype)


def _peer_in(draw: Any, v: Value, pool: list[Value], dtype: DType) -> Value | None:
    """Another value of the program whose shape broadcasts with ``v``'s, in ``dtype``."""
    peers = [p for p in pool if p is not v and p.type.element_type is DType.float32
             and p.type.rank <= v.type.rank
             and all(a == b or a == 1 for a, b in zip(reversed(p.type.shape),
                                                         reversed(v.type.shape)))]
    return _scaled_in(draw, draw(st.sampled_from(peers)), dtype) if peers else None


def _integer_op(draw: Any, x: Value, pool: list[Value], src: Value, dtype: DType) -> Value:
    kind = draw(st.sampled_from(["binary", "peer", "division", "unary", "compare", "reduce",
                                 "recast"]))
    signed = not dtype.name.startswith("u")
    if kind == "binary":
        name = draw(st.sampled_from(_INT_BINARY))
        other = _const(dtype, draw(st.integers(-3 if signed else 0, 3)))
        return getattr(coreai, name)(x, other)
    if kind == "peer":
        other = _peer_in(draw, src, pool, dtype)
        if other is not None:
            return getattr(coreai, draw(st.sampled_from(_INT_BINARY[:5])))(x, other)
    if kind == "division":
        name = draw(st.sampled_from(_INT_DIVISION))
        divisor = draw(st.sampled_from([2, 3, 7] + ([-2, -3] if signed else [])))
        out = getattr(coreai, name)(x, _const(dtype, divisor))
        return out if out.type.element_type is dtype else coreai.cast(out, dtype)
    if kind == "unary" and (signed or draw(st.booleans())):
        name = draw(st.sampled_from(_INT_UNARY if signed else ("bitwise_not",)))
        return getattr(coreai, name)(x)
    if kind == "compare":
        cond = getattr(coreai, draw(st.sampled_from(_COMPARISONS)))(
            x, _const(dtype, draw(st.integers(0, 2))))
        return coreai.where(cond, x, _const(dtype, draw(st.integers(0, 3))))
    if kind == "reduce" and x.type.rank:
        name = draw(st.sampled_from(["reduce_sum", "reduce_max", "reduce_min"]))
        axis = draw(st.integers(0, x.type.rank - 1))
        return getattr(coreai, name)(x, axes=[axis], keep_dims=True)
    if kind == "recast":
        middle = draw(st.sampled_from([t for t in INTEGERS if t is not dtype]))
        return coreai.cast(coreai.cast(x, middle), dtype)
    return coreai.broadcasting_add(x, _const(dtype, 1))


def _bool_op(draw: Any, x: Value, pool: list[Value], src: Value) -> Value:
    kind = draw(st.sampled_from(["not", "logic", "peer", "reduce"]))
    if kind == "not":
        return coreai.not_(x)
    if kind == "logic":
        name = draw(st.sampled_from(["broadcasting_and", "broadcasting_or", "broadcasting_xor"]))
        return getattr(coreai, name)(x, coreai.broadcasting_greater(src, 0.5))
    if kind == "reduce" and x.type.rank:
        name = draw(st.sampled_from(["all_", "any_"]))
        return getattr(coreai, name)(x, axes=[draw(st.integers(0, x.type.rank - 1))],
                                     keep_dims=True)
    other = _peer_in(draw, src, pool, DType.bool)
    return x if other is None else coreai.broadcasting_and(x, other)


def _half_op(draw: Any, x: Value, pool: list[Value], src: Value, dtype: DType) -> Value:
    if draw(st.booleans()):
        return getattr(coreai, draw(st.sampled_from(_HALF_UNARY)))(x)
    other = _peer_in(draw, src, pool, dtype)
    if other is None:
        other = _const(dtype, draw(st.sampled_from([0.5, -1.5, 2.0])))
    return getattr(coreai, draw(st.sampled_from(_HALF_BINARY)))(x, other)


def _typed(dtype: DType) -> Step:
    def step(draw: Any, v: Value, pool: list[Value], weights: bool) -> Value:
        return _typed_chain(draw, v, pool, dtype)
    return step


def _typed_chain(draw: Any, v: Value, pool: list[Value], dtype: DType) -> Value:
    x = _scaled_in(draw, v, dtype)
    for _ in range(draw(st.integers(0, 3))):
        if dtype is DType.bool:
            x = _bool_op(draw, x, pool, v)
        elif dtype.is_float:
            x = _half_op(draw, x, pool, v, dtype)
        else:
            x = _integer_op(draw, x, pool, v, dtype)
    if dtype is DType.bool and draw(st.booleans()):
        return coreai.where(x, v, coreai.neg(v)) if x.type.shape == v.type.shape else \
            coreai.cast(x, DType.float32)
    return coreai.cast(x, DType.float32)


_MATH: dict[str, Callable[[Value], Value]] = {
    "log1p_abs": lambda x: coreai.log(coreai.broadcasting_add(coreai.abs_(x), 1.0)),
    "sqrt_abs": lambda x: coreai.sqrt(coreai.abs_(x)),
    "divide": lambda x: coreai.broadcasting_divide(
        x, coreai.broadcasting_add(coreai.abs_(x), 1.0)),
    "pow": lambda x: coreai.broadcasting_pow(coreai.broadcasting_add(coreai.abs_(x), 0.5), 1.5),
    "exp_tanh": lambda x: coreai.exp(coreai.tanh(x)),
    "erf": coreai.erf,
    "gelu": lambda x: coreai.gelu(x, approximate="tanh"),
    "round": coreai.round_,
    "trunc": coreai.trunc,
    "sign": coreai.sign,
    "floor_divide": lambda x: coreai.broadcasting_floor_divide(x, 0.75),
    "modulo": lambda x: coreai.broadcasting_modulo(x, 0.75),
    "truncation": lambda x: coreai.broadcasting_sub(x, coreai.broadcasting_divide(
        coreai.cast(coreai.cast(coreai.broadcasting_mul(x, 7.0), DType.int32),
                    DType.float32), 7.0)),
}


def _math(draw: Any, v: Value, pool: list[Value], weights: bool) -> Value:
    return _MATH[draw(st.sampled_from(sorted(_MATH)))](v)


def _shape(draw: Any, v: Value, pool: list[Value], weights: bool) -> Value | None:
    rank, shape = v.type.rank, v.type.static_shape
    if not rank or shape is None:
        return None
    axis = draw(st.integers(0, rank - 1))
    kind = draw(st.sampled_from(["tile", "reverse", "pad", "gather", "scan", "sort", "topk",
                                 "argmax", "matmul"]))
    if kind == "tile":
        return coreai.tile(v, [draw(st.integers(1, 2)) for _ in range(rank)])
    if kind == "reverse":
        return coreai.reverse(v, [axis])
    if kind == "pad":
        mode = draw(st.sampled_from(["constant", "replicate"]))
        return coreai.pad(v, [draw(st.integers(0, 2)) for _ in range(2 * rank)], mode=mode)
    if kind == "gather":
        picks = draw(st.lists(st.integers(0, shape[axis] - 1), min_size=1, max_size=3))
        return coreai.gather(v, coreai.constant(np.array(picks, np.int64)), axis=axis)
    if kind == "scan":
        return coreai.scan(v, axis, kind=draw(st.sampled_from(["sum", "max", "min"])))
    if kind == "sort":
        return coreai.sort(v, axis, descending=draw(st.booleans()))[0]
    if kind == "topk":
        return coreai.topk(v, draw(st.integers(1, shape[axis])), axis=axis)[0]
    if kind == "argmax":
        found = coreai.argmax(v, axis=axis, keep_dims=True)
        return coreai.cast(found, DType.float32)
    weight = np.linspace(-1.0, 1.0, shape[-1] * 3, dtype=np.float32).reshape(shape[-1], 3)
    return coreai.batch_matmul(v, coreai.constant(weight))


STEPS: dict[str, Step] = {**{dtype.name: _typed(dtype) for dtype in TYPES},
                          "math": _math, "shape": _shape}


def aimodel_programs(max_steps: int = 6, types: tuple[DType, ...] = TYPES, weight: int = 1,
                     ) -> st.SearchStrategy[Program]:
    """Random exportable-shaped programs: the optimizer's generator with :data:`STEPS`
    (the typed steps of ``types`` only, each drawn ``weight`` times as often as a step of
    the optimizer's generator)."""
    steps = {name: step for name, step in STEPS.items() if name in ("math", "shape")}
    for dtype in types:
        steps.update({f"{dtype.name}#{i}": STEPS[dtype.name] for i in range(weight)})
    return programs(max_steps=max_steps, dynamic=False, control_flow=True, state=False,
                    identifiers=True, extra_steps=steps)


def _ops(program: Program) -> list[Any]:
    return [op for graph in program.graphs.values() for op in graph.walk()]


def op_names(program: Program) -> set[str]:
    """The ops ``program`` uses (nested graphs included)."""
    return {op.name for op in _ops(program)}


def element_types(program: Program) -> set[DType]:
    """The element types of every value ``program`` computes."""
    return {r.type.element_type for op in _ops(program) for r in op.results}
