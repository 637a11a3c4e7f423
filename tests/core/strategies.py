"""Hypothesis strategies that build random *valid* Core AI programs with the dialect builders.

Use them for any property over whole programs::

    from tests.core.strategies import programs, programs_with_inputs, input_types, inputs_for

    @given(programs())
    def test_text_round_trip(program): ...

    @given(programs_with_inputs())
    def test_optimize_keeps_results(case):
        program, inputs = case
        before = program.run(inputs)
        program.optimize()
        ...

What is generated: 1-3 float32 inputs whose shapes broadcast against each other (rank 0-3, dims
1-4; with ``dynamic=True`` the leading axis of the common shape is the symbol ``?batch[1:8]``),
then a few steps drawn from: unary math, broadcasting binary ops against other values, Python
scalars or constants (inline, or stored as named program weights), reductions, reshape,
transpose, concat, slice_, where, cast round trips, softmax, ``if_`` with two branch graphs, and
optionally a state variable updated every call. Every intermediate value is float32 and only
ops that are total on the reals are used (no log, sqrt, division), so running a program on
finite inputs gives finite results (up to overflow in long chains), which makes before/after
comparisons meaningful. Input names include a non-identifier (``in-1``) so the text form's
quoting is exercised.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from coreai_core import Dim, DType, Program, TensorType, Value
from coreai_core._builder import INLINE_LIMIT
from coreai_core.dialects import coreai

__all__ = ["programs", "programs_with_inputs", "input_types", "inputs_for", "BATCH", "Step"]

# An extra generation step (``programs(extra_steps=...)``): ``(draw, v, pool, weights)`` -> a
# new float32 value with ``v``'s shape family, or None when the step does not fit ``v``.
Step = Callable[[Any, Value, list[Value], bool], Value | None]

# The dynamic dimension used when ``dynamic=True``.
BATCH = Dim("batch", 1, 8)
# Unary ops that are finite for every finite float32 input.
SAFE_UNARY = ("neg", "abs_", "relu", "tanh", "sigmoid", "sin", "cos", "silu", "floor", "ceil")
SAFE_BINARY = ("broadcasting_add", "broadcasting_sub", "broadcasting_mul",
               "broadcasting_maximum", "broadcasting_minimum")
REDUCTIONS = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min")
STEPS = ("unary", "binary", "scalar", "reduce", "reshape", "transpose", "concat", "slice",
         "where", "cast", "softmax", "if")
_ELEMENTS = st.floats(-2.0, 2.0, width=32)


def input_types(program: Program, entrypoint: str = "main") -> dict[str, TensorType]:
    """The user inputs of ``entrypoint`` (state excluded): name -> TensorType, in order."""
    return {k: v.type for k, v in program.graphs[entrypoint].inputs.items()}


@st.composite
def inputs_for(draw: Any, program: Program, entrypoint: str = "main",
               elements: st.SearchStrategy[float] = _ELEMENTS) -> dict[str, np.ndarray]:
    """Input arrays for ``entrypoint``; a dynamic dim gets one size shared by all inputs."""
    sizes: dict[str, int] = {}
    out = {}
    for name, t in input_types(program, entrypoint).items():
        shape = []
        for d in t.shape:
            if isinstance(d, Dim):
                if d.name not in sizes:
                    lo, hi = max(d.min or 1, 1), min(d.max or 4, 4)
                    sizes[d.name] = draw(st.integers(lo, max(lo, hi)))
                d = sizes[d.name]
            shape.append(d)
        dtype = t.element_type
        elems = (elements if dtype.is_float else st.booleans() if dtype is DType.bool
                 else st.integers(-3, 3))
        out[name] = draw(hnp.arrays(dtype.numpy, tuple(shape), elements=elems))
    return out


def _partner_shape(draw: Any, shape: tuple) -> tuple:
    """A shape that broadcasts against ``shape`` without changing the result's shape."""
    rank = draw(st.integers(0, len(shape)))
    tail = shape[len(shape) - rank:]
    return tuple(1 if isinstance(d, Dim) or draw(st.booleans()) else d for d in tail)


def _compatible(a: tuple, b: tuple) -> bool:
    return all(x == y or x == 1 or y == 1 for x, y in zip(reversed(a), reversed(b)))


def _constant(draw: Any, shape: tuple, weights: bool) -> Value:
    data = draw(hnp.arrays(np.float32, shape, elements=_ELEMENTS))
    if weights and (data.size > INLINE_LIMIT or draw(st.booleans())):
        return coreai.constant(data, name=draw(st.sampled_from(["w", "fc.weight", "my weight"])))
    return coreai.constant(data)


def _unary_chain(names: list[str]) -> Any:
    def branch(a: Value) -> Value:
        for n in names:
            a = getattr(coreai, n)(a)
        return a
    return branch


def _step(draw: Any, kind: str, v: Value, pool: list[Value], weights: bool) -> Value | None:
    """Apply one generation step to ``v``; None when the step does not fit ``v``."""
    shape, rank = v.type.shape, v.type.rank
    static_axes = [i for i, d in enumerate(shape) if isinstance(d, int)]
    if kind == "unary":
        return getattr(coreai, draw(st.sampled_from(SAFE_UNARY)))(v)
    if kind == "binary":
        op = getattr(coreai, draw(st.sampled_from(SAFE_BINARY)))
        peers = [p for p in pool if _compatible(p.type.shape, shape)]
        if peers and draw(st.booleans()):
            other = draw(st.sampled_from(peers))
        else:
            other = _constant(draw, _partner_shape(draw, shape), weights)
        return op(v, other) if draw(st.booleans()) else op(other, v)
    if kind == "scalar":
        op = getattr(coreai, draw(st.sampled_from(SAFE_BINARY)))
        return op(v, draw(st.sampled_from([0.5, -1.0, 2.0, 3])))
    if kind == "reduce":
        axes = draw(st.none() | st.lists(st.integers(0, max(rank - 1, 0)), unique=True,
                                         max_size=rank))
        return getattr(coreai, draw(st.sampled_from(REDUCTIONS)))(
            v, axes=axes if rank else None, keep_dims=draw(st.booleans()))
    if kind == "softmax" and rank:
        return coreai.softmax(v, axis=draw(st.integers(-rank, rank - 1)))
    if kind == "transpose" and rank:
        return coreai.transpose(v, draw(st.permutations(range(rank))))
    if kind == "reshape" and v.type.is_static:
        n = v.type.numel
        target = draw(st.sampled_from([[n], [-1], [1, n], [n, 1], list(reversed(shape))]))
        # an int64 array, not a list: an empty Python list would become a float constant
        return coreai.reshape(v, np.array(target, np.int64))
    if kind == "concat" and static_axes:  # joining dynamic axes would make unrelated `?` dims
        other = coreai.neg(v) if draw(st.booleans()) else v
        return coreai.concat([v, other], axis=draw(st.sampled_from(static_axes)))
    if kind == "slice" and static_axes:
        axis = draw(st.sampled_from(static_axes))
        begin = draw(st.integers(0, shape[axis] - 1))
        end = draw(st.integers(begin + 1, shape[axis]))
        stride = draw(st.sampled_from([1, 2]))
        return coreai.slice_(v, [begin], [end], axes=[axis], strides=[stride])
    if kind == "where":
        cond = coreai.broadcasting_greater(v, 0.0)
        other = _constant(draw, _partner_shape(draw, shape), weights)
        return coreai.where(cond, v, other)
    if kind == "cast":
        # no integer types: casting an overflowed inf to int is undefined behaviour
        middle = draw(st.sampled_from([DType.float16, DType.float64, DType.bfloat16]))
        return coreai.cast(coreai.cast(v, middle), np.float32)
    if kind == "if":
        pred = coreai.broadcasting_greater(coreai.reduce_sum(v), 0.0)
        chains = [draw(st.lists(st.sampled_from(SAFE_UNARY), max_size=2)) for _ in range(2)]
        (out,) = coreai.if_(pred, [v], _unary_chain(chains[0]), _unary_chain(chains[1]))
        return out
    return None


@st.composite
def programs(draw: Any, *, max_steps: int = 6, dynamic: bool = False, control_flow: bool = True,
             state: bool = True, weights: bool = True, identifiers: bool = False,
             extra_steps: Mapping[str, Step] | None = None) -> Program:
    """A random valid single-entrypoint program ``main`` with float32 inputs.

    ``dynamic`` puts the ``?batch`` symbol in the leading axis of the inputs' common shape;
    ``control_flow`` allows ``if_``; ``state`` sometimes adds a state variable ``acc`` updated
    by every run; ``weights`` lets constants become named program weights; ``identifiers``
    names every input a Python identifier; ``extra_steps`` adds generation steps by name.
    """
    rank = draw(st.integers(1 if dynamic else 0, 3))
    common: list[int | Dim] = [draw(st.integers(1, 4)) for _ in range(rank)]
    if dynamic and rank:
        common[0] = BATCH
    inputs = {}
    for i in range(draw(st.integers(1, 3))):
        shape = _partner_shape(draw, tuple(common)) if i else tuple(common)
        if dynamic and i and len(shape) == rank and rank:
            shape = (BATCH, *shape[1:])
        names = [f"x{i}"] if identifiers else [f"x{i}", f"in-{i}"]
        inputs[draw(st.sampled_from(names))] = TensorType(shape, DType.float32)
    init = {}
    if state and draw(st.booleans()):
        init["acc"] = draw(hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=2,
                                                                   max_side=3),
                                      elements=_ELEMENTS))
    added = dict(extra_steps or {})
    steps = [s for s in STEPS if control_flow or s != "if"] + list(added)
    program = Program()
    with program.graph("main", inputs=inputs, state=init) as g:
        pool: list[Value] = [*g.inputs.values(), *g.state_inputs.values()]
        for _ in range(draw(st.integers(1, max_steps))):
            v = draw(st.sampled_from(pool))
            kind = draw(st.sampled_from(steps))
            result = (added[kind](draw, v, pool, weights) if kind in added
                      else _step(draw, kind, v, pool, weights))
            pool.append(result if result is not None else coreai.neg(v))
        last = pool[-1]
        extra = draw(st.lists(st.sampled_from(pool), max_size=2))
        outputs = {f"y{i}": v for i, v in enumerate([last, *extra])}
        new_state = {}
        if init:
            acc = g["acc"]
            new_state["acc"] = coreai.broadcasting_add(coreai.broadcasting_mul(acc, 0.5),
                                                       coreai.reduce_mean(last))
        g.outputs(outputs, state=new_state)
    return program


@st.composite
def programs_with_inputs(draw: Any, **kwargs: Any) -> tuple[Program, dict[str, np.ndarray]]:
    """``(program, inputs)``: a program from :func:`programs` (same keywords) and its inputs."""
    program = draw(programs(**kwargs))
    return program, draw(inputs_for(program))
