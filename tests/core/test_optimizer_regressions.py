"""Optimizer regressions found by the model tests."""

from __future__ import annotations

import numpy as np

from coreai_core import Program, TensorType
from coreai_core.dialects import coreai


def test_folding_a_chain_keeps_constants_that_later_users_still_need() -> None:
    # split(const) folds to constants C0, C1; the first user of C0 folds too, which dropped C0
    # before the second user (visited later) was remapped to it: "used before defined".
    program = Program()
    with program.graph("main", inputs={"x": TensorType((2, 16), "float32")}) as g:
        h = coreai.broadcast_to(coreai.constant(0.5), [2, 2, 16])
        h0, h1 = coreai.split(h, split_sizes=[1, 1], axis=0)
        w = coreai.constant(np.arange(16 * 16, dtype=np.float32).reshape(16, 16) / 256)
        x = coreai.expand_dims(g["x"], [0])
        first = coreai.batch_matmul(h0, w)  # all-constant: folds, releasing h0's constant
        a = coreai.broadcasting_add(first, x)  # remapped to the folded value: first dies
        second = coreai.broadcasting_sub(h0, x)  # visited after h0's constant was dropped
        g.outputs({"a": a, "b": second, "c": h1})
    x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    before = program.run({"x": x})
    program.optimize()
    program.verify()
    after = program.run({"x": x})
    for k in before:
        np.testing.assert_allclose(after[k], before[k], rtol=1e-6)
