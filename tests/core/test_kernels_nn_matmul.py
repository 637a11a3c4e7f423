"""``coreai.batch_matmul`` with a shared right operand (a linear layer's weight) against torch.

The kernel multiplies a stack by one matrix as row blocks of one 2-D product, and a few
rows by a transposed weight in the swapped layout (``coreai_core/runtime/kernels/_matmul.py``).
Each case runs the kernel on the layouts a converted model hands it (a transposed weight
view, a transposed sequence) and compares with ``torch.matmul`` in float64 within the
rigorous float32 dot-product bound ``K * 2**-24 * (|a| @ |b|)``.
"""

from __future__ import annotations

import math
from unittest import mock

import numpy as np
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from coreai_core import Program, TensorType
from coreai_core.dialects import coreai
from coreai_core.runtime import Runtime, _threads
from coreai_core.runtime.kernels import _matmul
from coreai_core.runtime.kernels.nn import batch_matmul
from tests.core.kernel_util import seeds

SIZES = st.sampled_from([1, 2, 5, 32, 47])


@st.composite
def shared_weight_case(draw: st.DrawFn) -> dict:
    batch = draw(st.lists(st.sampled_from([1, 3, 47]), max_size=2)
                 .filter(lambda b: math.prod(b) <= 141))
    return {"batch": batch, "m": draw(SIZES), "k": draw(st.sampled_from([1, 47, 256])),
            "n": draw(st.sampled_from([1, 47, 1100])),
            "weight_transposed": draw(st.booleans()), "lhs_transposed": draw(st.booleans()),
            "rhs_leading_ones": draw(st.integers(0, 2)),
            "row_block": draw(st.sampled_from([7, 512]))}


def _operands(case: dict, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    m, k, n = case["m"], case["k"], case["n"]
    if case["lhs_transposed"] and case["batch"]:  # a (seq, batch) view of (batch, seq, k)
        *outer, last = case["batch"]
        lhs = rng.standard_normal((*outer, m, last, k), np.float32).swapaxes(-3, -2)
    else:
        lhs = rng.standard_normal((*case["batch"], m, k), np.float32)
    if case["weight_transposed"]:  # torch's (out, in) weight, as ``weight.T``
        rhs = rng.standard_normal((n, k), np.float32).T
    else:
        rhs = rng.standard_normal((k, n), np.float32)
    return lhs, rhs.reshape((1,) * case["rhs_leading_ones"] + rhs.shape)


SWAPPED = {"batch": [], "m": 32, "k": 256, "n": 1100, "weight_transposed": True,
           "lhs_transposed": False, "rhs_leading_ones": 0, "row_block": 512}
BLOCKED = {"batch": [3, 47], "m": 5, "k": 47, "n": 300, "weight_transposed": True,
           "lhs_transposed": True, "rhs_leading_ones": 2, "row_block": 7}


@given(case=shared_weight_case(), seed=seeds)
@example(case=SWAPPED, seed=0)
@example(case=BLOCKED, seed=1)
def test_shared_weight_matmul_matches_torch(case: dict, seed: int) -> None:
    lhs, rhs = _operands(case, seed)
    with mock.patch.object(_matmul, "MATMUL_ROW_BLOCK", case["row_block"]):
        got = batch_matmul(lhs, rhs)
    a, b = torch.from_numpy(lhs).double(), torch.from_numpy(rhs).double()
    want = torch.matmul(a, b).numpy()
    assert got.shape == want.shape and got.dtype == np.float32
    assert got.flags.c_contiguous
    bound = case["k"] * 2.0**-24 * torch.matmul(a.abs(), b.abs()).numpy()
    assert np.all(np.abs(got - want) <= bound * (1 + 1e-6) + 1e-30)


def _weight_program(rows: int, weight: np.ndarray) -> Program:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((rows, 1, weight.shape[0]), "float32")}) as g:
        g.outputs({"y": coreai.batch_matmul(g["x"], coreai.constant(weight, name="w"))})
    return p


@given(rows=st.sampled_from([1, 2, 47, 600]), seed=seeds)
def test_stacked_rows_same_bits_on_any_thread_count(rows: int, seed: int) -> None:
    """The row blocks are fixed: one thread and two threads give the same bits."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 1, 64), np.float32)
    weight = rng.standard_normal((300, 64), np.float32).T
    p = _weight_program(rows, weight)
    with (mock.patch.object(_matmul, "MATMUL_ROW_BLOCK", 47),
          mock.patch.object(_threads, "BLOCK_WORK", 1)):
        one = Runtime().run(p, {"x": x})["y"]
        two = Runtime(threads=2).run(p, {"x": x})["y"]
    assert one.tobytes() == two.tobytes()
    a, b = torch.from_numpy(x).double(), torch.from_numpy(weight).double()
    want = torch.matmul(a, b).numpy()
    bound = x.shape[-1] * 2.0**-24 * torch.matmul(a.abs(), b.abs()).numpy()  # see the module doc
    assert np.all(np.abs(one - want) <= bound * (1 + 1e-6) + 1e-30)
