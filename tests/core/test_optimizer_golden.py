"""Golden before/after text for every optimizer rule, compared as plain strings.

``golden/optimizer.txt`` holds, per case, ``=== <case> [<passes>]``, the program text before,
``---`` and the text after running those passes. Each case below builds its program; the test
checks the text before, runs the passes, checks the text after, verifies the program and
compares its results with the unoptimized program's on random inputs.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from coreai_core import Program, TensorType, Value, WeightRef
from coreai_core.dialects import coreai
from coreai_core.optimizer import canonicalize, optimize

GOLDEN = Path(__file__).with_name("golden") / "optimizer.txt"
F = "float32"


def f32(seed: int, *shape: int) -> np.ndarray:
    """Reproducible data: a case builds the same program every time it is called."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def prog(body: Callable[..., Value | dict], **inputs: tuple) -> Program:
    p = Program()
    with p.graph("main", inputs={k: TensorType(*v) for k, v in inputs.items()}) as g:
        out = body(*[g[k] for k in inputs])
        g.outputs(out if isinstance(out, dict) else {"y": out})
    return p


def _if_twice(x: Value) -> dict:
    pred = coreai.broadcasting_greater(coreai.reduce_sum(x), 0.0)
    (a,) = coreai.if_(pred, [x], lambda v: coreai.neg(v), lambda v: coreai.relu(v))
    (b,) = coreai.if_(pred, [x], lambda v: coreai.neg(v), lambda v: coreai.relu(v))
    (c,) = coreai.if_(pred, [x], lambda v: coreai.neg(v), lambda v: coreai.tanh(v))
    return {"a": a, "b": b, "c": c}


def _dead_in_region(x: Value) -> Value:
    def then(v: Value) -> Value:
        coreai.exp(v)  # dead
        return coreai.neg(v)

    pred = coreai.broadcasting_greater(coreai.reduce_sum(x), 0.0)
    return coreai.if_(pred, [x], then, lambda v: v)[0]


def _dead_ops_and_weights() -> Program:
    p = Program()
    p.add_weight("unused", np.ones(20, np.float32))
    with p.graph("main", inputs={"x": TensorType((2,), F)}) as g:
        coreai.exp(coreai.constant(np.full(20, 2.0, np.float32), name="dead.w"))
        g.outputs({"y": coreai.relu(g["x"])})
    return p


def _identical_weights() -> Program:
    data = np.arange(20, dtype=np.float32)
    p = Program()
    with p.graph("main", inputs={"x": TensorType((20,), F)}) as g:
        a = coreai.broadcasting_add(g["x"], coreai.constant(data, name="a.bias"))
        b = coreai.broadcasting_mul(g["x"], coreai.constant(data.copy(), name="b.bias"))
        g.outputs({"y": coreai.broadcasting_add(a, b)})
    with p.graph("other", inputs={"x": TensorType((20,), F)}) as g:
        g.outputs({"y": coreai.broadcasting_sub(g["x"], coreai.constant(WeightRef("b.bias")))})
    return p


def _conv_bn(shared: bool = False) -> Callable[[Value], Value | dict]:
    def body(x: Value) -> Value | dict:
        y = coreai.conv(x, coreai.constant(f32(1, 4, 3, 3, 3), name="conv.weight"), pads=[1, 1])
        z = coreai.broadcasting_sub(y, coreai.constant(f32(2, 4, 1, 1), name="bn.mean"))
        z = coreai.broadcasting_mul(z, coreai.constant(np.abs(f32(3, 4, 1, 1)) + 0.5,
                                                       name="bn.inv_std"))
        z = coreai.broadcasting_mul(z, coreai.constant(f32(4, 1, 4, 1, 1), name="bn.weight"))
        z = coreai.broadcasting_add(z, coreai.constant(f32(5, 4, 1, 1), name="bn.bias"))
        return {"y": z, "conv": y} if shared else z
    return body


def _linear_affine(t: Value) -> Value:
    w = coreai.constant(f32(6, 6, 4), name="fc.weight")
    z = coreai.batch_matmul(t, coreai.transpose(w, perm=[1, 0]))
    z = coreai.broadcasting_add(z, coreai.constant(f32(7, 6), name="fc.bias"))
    z = coreai.broadcasting_mul(z, coreai.constant(f32(8, 6), name="scale"))
    return coreai.broadcasting_add(z, coreai.constant(f32(9, 6), name="shift"))


def _conv_bn_hard_swish(x: Value) -> Value:
    # the conv has two readers after the batch norm folds: hard-swish's ``+ 3`` and ``*``
    y = coreai.conv(x, coreai.constant(f32(13, 4, 3, 1, 1), name="conv.weight"))
    y = coreai.broadcasting_mul(y, coreai.constant(np.abs(f32(14, 4, 1, 1)) + 0.5,
                                                   name="bn.scale"))
    y = coreai.broadcasting_add(y, coreai.constant(f32(15, 4, 1, 1), name="bn.shift"))
    gate = coreai.broadcasting_minimum(coreai.relu(coreai.broadcasting_add(y, 3.0)), 6.0)
    return coreai.broadcasting_mul(y, gate)


def _split_then_scale(x: Value) -> Value:
    a, b = coreai.split(x, split_sizes=[2, 2], axis=1)
    return coreai.concat([coreai.broadcasting_mul(a, coreai.constant(f32(16, 2, 1, 1))), b],
                         axis=1)


X23 = {"x": ((2, 3), F)}
CASES: dict[str, Callable[[], Program]] = {
    # canonicalize
    "identity_reshape": lambda: prog(lambda x: coreai.reshape(x, [2, 3]), **X23),
    "reshape_of_reshape": lambda: prog(
        lambda x: coreai.reshape(coreai.reshape(x, [6]), [3, 2]), **X23),
    "reshape_chain_back": lambda: prog(
        lambda x: coreai.reshape(coreai.reshape(x, [6]), [2, 3]), **X23),
    "expand_of_shrink": lambda: prog(
        lambda x: coreai.expand_dims(coreai.shrink_dims(x, axes=[1]), axes=[1]),
        x=((2, 1, 3), F)),
    "identity_transpose": lambda: prog(lambda x: coreai.transpose(x, perm=[0, 1, 2]),
                                       x=((2, 3, 4), F)),
    "transpose_of_transpose": lambda: prog(
        lambda x: coreai.transpose(coreai.transpose(x, perm=[1, 2, 0]), perm=[1, 2, 0]),
        x=((2, 3, 4), F)),
    "transpose_inverse": lambda: prog(
        lambda x: coreai.transpose(coreai.transpose(x, perm=[1, 2, 0]), perm=[2, 0, 1]),
        x=((2, 3, 4), F)),
    "identity_cast": lambda: prog(lambda x: coreai.cast(x, "float32"), x=((2,), F)),
    "exact_cast_chain": lambda: prog(
        lambda x: coreai.cast(coreai.cast(x, "float64"), "float32"), x=((2,), F)),
    "inexact_cast_chain_kept": lambda: prog(
        lambda x: coreai.cast(coreai.cast(x, "float16"), "float32"), x=((2,), F)),
    "int_through_float_chain": lambda: prog(
        lambda x: coreai.cast(coreai.cast(x, "float32"), "int16"), x=((2,), "int16")),
    "identity_broadcast": lambda: prog(lambda x: coreai.broadcast_to(x, [2, 3]), **X23),
    "broadcast_of_broadcast": lambda: prog(
        lambda x: coreai.broadcast_to(coreai.broadcast_to(x, [2, 3]), [4, 2, 3]),
        x=((1, 3), F)),
    "identity_slice": lambda: prog(
        lambda x: coreai.slice_(x, [0], [10], axes=[1], strides=[1]), **X23),
    "reversing_slice_kept": lambda: prog(
        lambda x: coreai.slice_(x, [-1], [-10], axes=[1], strides=[-1]), **X23),
    "identity_pad": lambda: prog(lambda x: coreai.pad(x, pads=[0, 0, 0, 0]), **X23),
    "identity_tile": lambda: prog(lambda x: coreai.tile(x, reps=[1, 1]), **X23),
    "single_concat": lambda: prog(lambda x: coreai.concat([x], axis=0), **X23),
    "identity_reverse": lambda: prog(lambda x: coreai.reverse(x, axes=[0]), x=((1, 3), F)),
    "static_shape": lambda: prog(lambda x: coreai.get_shape(x), **X23),
    "static_shape_type_dependent_user_kept": lambda: prog(lambda x: coreai.broadcast_to(
        coreai.constant(True), coreai.get_shape(x)), x=((1, 2), "uint8")),
    "mul_one": lambda: prog(lambda x: coreai.broadcasting_mul(x, 1.0), **X23),
    "one_mul": lambda: prog(
        lambda x: coreai.mul(coreai.constant(np.ones((2, 3), np.float32)), x), **X23),
    "mul_ones_broadcasting_kept": lambda: prog(
        lambda x: coreai.broadcasting_mul(x, coreai.constant(np.ones((2, 1), np.float32))),
        x=((3,), F)),
    "add_zero": lambda: prog(lambda x: coreai.broadcasting_add(x, 0), x=((2, 3), "int64")),
    "zero_add": lambda: prog(
        lambda x: coreai.broadcasting_add(coreai.constant([0.0, -0.0, 0.0]), x), **X23),
    "sub_zero": lambda: prog(lambda x: coreai.broadcasting_sub(x, 0.0), **X23),
    "zero_sub_kept": lambda: prog(lambda x: coreai.broadcasting_sub(0.0, x), **X23),
    "divide_one": lambda: prog(lambda x: coreai.broadcasting_divide(x, 1), x=((2, 3), "int32")),
    "neg_neg": lambda: prog(lambda x: coreai.neg(coreai.neg(x)), x=((2,), F)),
    "not_not": lambda: prog(lambda x: coreai.not_(coreai.not_(x)), x=((2,), "bool")),
    "where_same": lambda: prog(lambda c, x: coreai.where(c, x, x), c=((2, 3), "bool"),
                               x=((2, 3), F)),
    # constant_folding
    "fold_small": lambda: prog(lambda x: coreai.broadcasting_add(
        x, coreai.broadcasting_mul(coreai.constant([1.0, 2.0, 3.0]), 2.0)), **X23),
    "fold_exclusive_weight": lambda: prog(lambda t: coreai.batch_matmul(
        t, coreai.transpose(coreai.constant(f32(10, 6, 4), name="fc.weight"), perm=[1, 0])),
        t=((2, 4), F)),
    "fold_large_kept": lambda: prog(lambda x: coreai.broadcasting_add(
        x, coreai.broadcast_to(coreai.constant(1.5), [300, 300])), x=((300,), F)),
    "fold_dynamic_type_kept": lambda: prog(
        lambda x: coreai.non_zero(coreai.constant([1, 0, 2])), x=((1,), F)),
    "fold_type_dependent_user_kept": lambda: prog(lambda x: coreai.reshape(
        x, coreai.concat([coreai.constant([3]), coreai.constant([2])], axis=0)), **X23),
    # cse
    "cse_duplicates": lambda: prog(lambda x: coreai.broadcasting_mul(
        coreai.broadcasting_add(x, coreai.exp(x)),
        coreai.broadcasting_add(coreai.exp(x), x)), **X23),
    "cse_constants": lambda: prog(lambda x: coreai.broadcasting_sub(
        coreai.broadcasting_mul(x, 2.0), coreai.broadcasting_mul(x, 2.0)), **X23),
    "cse_identical_weights": _identical_weights,
    "cse_regions": lambda: prog(_if_twice, x=((3,), F)),
    # dce
    "dce_dead_ops_and_weights": _dead_ops_and_weights,
    "dce_dead_in_region": lambda: prog(_dead_in_region, x=((3,), F)),
    # fold_affine
    "affine_conv_batch_norm": lambda: prog(_conv_bn(), x=((2, 3, 5, 5), F)),
    "affine_linear_scale_shift": lambda: prog(_linear_affine, t=((2, 4), F)),
    "affine_shared_conv_kept": lambda: prog(_conv_bn(shared=True),
                                                    x=((2, 3, 5, 5), F)),
    "affine_merge_scales_and_shifts": lambda: prog(lambda x: coreai.broadcasting_sub(
        coreai.broadcasting_add(coreai.broadcasting_divide(
            coreai.broadcasting_mul(coreai.exp(x), 2.0), 4.0), 1.0), 3.0), **X23),
    "affine_conv_with_two_readers_kept": lambda: prog(_conv_bn_hard_swish,
                                                      x=((1, 3, 2, 2), F)),
    "affine_multi_result_producer_kept": lambda: prog(_split_then_scale, x=((1, 4, 2, 2), F)),
    "affine_per_width_scale_kept": lambda: prog(lambda x: coreai.broadcasting_mul(
        coreai.conv(x, coreai.constant(f32(11, 4, 3, 1, 1), name="w")),
        coreai.constant(f32(12, 5), name="per_width")), x=((1, 3, 5, 5), F)),
}


def read_golden() -> dict[str, tuple[list[str], str, str]]:
    cases = {}
    for block in GOLDEN.read_text().split("\n=== ")[1:]:
        header, body = block.split("\n", 1)
        name, passes = re.fullmatch(r"(\w+) \[([\w, ]+)\]", header.strip()).groups()
        before, after = body.split("\n---\n")
        cases[name] = ([p.strip() for p in passes.split(",")], before.strip(), after.strip())
    return cases


GOLDEN_CASES = read_golden() if GOLDEN.exists() else {}


def test_every_case_has_a_golden_entry() -> None:
    assert sorted(GOLDEN_CASES) == sorted(CASES)


def random_inputs(p: Program) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    out = {}
    for name, v in p.graphs["main"].inputs.items():
        t = v.type
        if t.element_type.is_float:
            out[name] = rng.standard_normal(t.shape).astype(t.element_type.numpy)
        else:
            out[name] = rng.integers(-5, 5, t.shape).astype(t.element_type.numpy)
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str) -> None:
    passes, before, after = GOLDEN_CASES[name]
    p = CASES[name]()
    reference = CASES[name]()
    assert str(p) == before
    optimize(p, passes)
    assert str(p) == after
    p.verify()
    inputs = random_inputs(p)
    expected, got = reference.run(inputs), p.run(inputs)
    assert list(got) == list(expected)
    for k in expected:
        assert got[k].dtype == expected[k].dtype
        np.testing.assert_allclose(got[k], expected[k], rtol=1e-5, atol=1e-5)


def test_every_canonicalization_rule_has_a_golden_case_and_a_comment() -> None:
    rules = {entry.fn for entry in canonicalize.RULES.values()}
    for fn in rules:
        source = inspect.getsource(fn)
        assert re.search(r"# .+ -> .+", source), f"rule {fn.__name__} lacks '# before -> after'"
    golden_rules = {n for n, (passes, _, _) in GOLDEN_CASES.items() if "canonicalize" in passes}
    assert len(golden_rules) >= len(rules)
