"""Heaviness is a trait of the op definition: a rewrite never leaves two heavy ops for one."""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import numpy as np
import pytest

from coreai_core import Operation, Program, TensorType, Value
from coreai_core._opdef import OPS
from coreai_core.dialects import coreai
from coreai_core.optimizer import RewritePass, Rewriter, is_heavy

F = "float32"


class NegateIntoMatmul(RewritePass):
    """``neg(a @ b) -> (-a) @ b``: inserts a matmul, so it is a duplication when ``a @ b`` has
    another reader."""

    name = "negate_into_matmul"

    proposed = 0

    def visit(self, op: Operation, rw: Rewriter) -> Value | None:
        product = rw.producer(op.operands[0], "coreai.batch_matmul") \
            if op.name == "coreai.neg" else None
        if product is None:
            return None
        a, b = product.operands
        self.proposed += 1
        negated = rw.make("coreai.neg", [a], {}, op.location)
        if negated is None:
            return None
        rw.insert(negated)
        out = rw.replacement(op, "coreai.batch_matmul", [negated.result, b], {})
        return None if out is None else out[0]


def _program() -> Program:
    p = Program()
    with p.graph("main", inputs={"a": TensorType((3, 5), F), "b": TensorType((5, 4), F)}) as g:
        product = coreai.batch_matmul(g["a"], g["b"])
        # the product has a second reader: the rewrite of neg cannot make it die
        g.outputs({"neg": coreai.neg(product), "plus": coreai.broadcasting_add(product, 1.0)})
    return p


def _matmuls(p: Program) -> int:
    return sum(op.name == "coreai.batch_matmul" for op in p.graphs["main"].ops)


@pytest.fixture
def light_matmul() -> Iterator[None]:
    """batch_matmul defined without the ``heavy`` trait, for the length of a test."""
    opdef = OPS["coreai.batch_matmul"]
    OPS.register(opdef.name, attrs.evolve(opdef, traits=opdef.traits - {"heavy"}),
                 allow_override=True)
    try:
        yield
    finally:
        OPS.register(opdef.name, opdef, allow_override=True)


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"a": rng.standard_normal((3, 5)).astype(np.float32),
            "b": rng.standard_normal((5, 4)).astype(np.float32)}


def test_a_heavy_op_is_not_duplicated() -> None:
    p = _program()
    before = p.run(_inputs())
    assert is_heavy(p.graphs["main"].ops[0])
    rewrite = NegateIntoMatmul()
    assert not rewrite.run(p).changed
    assert rewrite.proposed == 1 and _matmuls(p) == 1  # proposed, and refused
    after = p.run(_inputs())
    for k in before:
        np.testing.assert_array_equal(after[k], before[k])


def test_the_trait_is_what_the_optimizer_reads(light_matmul: None) -> None:
    # the same rewrite of an op without the trait is accepted: two matmuls, same results
    p = _program()
    before = p.run(_inputs())
    assert not is_heavy(p.graphs["main"].ops[0])
    assert NegateIntoMatmul().run(p).changed
    assert _matmuls(p) == 2
    after = p.run(_inputs())
    for k in before:  # (-a) @ b and -(a @ b) round the same products, negated: exactly equal
        np.testing.assert_array_equal(after[k], before[k])
