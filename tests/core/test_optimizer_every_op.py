"""No optimizer pass raises on, or changes the results of, any dialect op's sample program.

Each op's sample (tests/core/op_samples.py) runs through every pass alone and the default
pipeline twice: as built (its operands are graph inputs) and with its static operands made
constants (so constant folding, and the affine folds for scales and shifts, see every op).
The result must verify and, where the original runs on the drawn data, compute the same.
"""

from __future__ import annotations

import numpy as np
import pytest

from coreai_core import Program, TensorType, parse
from coreai_core.dialects import coreai
from coreai_core.errors import TypeRuleError
from coreai_core.optimizer import default_passes, is_deterministic
from tests.core.op_samples import SAMPLES, build_sample


def _data(t: TensorType, rng: np.random.Generator) -> np.ndarray:
    dtype = t.element_type.numpy
    if t.element_type.is_float:
        return rng.standard_normal(t.shape).astype(dtype)
    if t.element_type.is_complex:
        return (rng.standard_normal(t.shape) + 1j * rng.standard_normal(t.shape)).astype(dtype)
    return rng.integers(0, 2, t.shape).astype(dtype)  # valid as indices, bools and counts


def _with_constant_operands(name: str, data: list[np.ndarray]) -> Program | None:
    """Op ``name``'s sample with constant operands; None when the op rejects them as such."""
    sample = SAMPLES[name]
    program = Program()
    if sample.setup:
        sample.setup(program)
    try:
        with program.graph("main", inputs={}) as g:
            out = sample.build(*[coreai.constant(d) for d in data])
            outs = list(out) if isinstance(out, tuple | list) else [out]
            g.outputs({f"y{i}": v for i, v in enumerate(outs)})
    except TypeRuleError:  # e.g. a type rule that needs a computed operand
        return None
    return program


def _runs(program: Program, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    try:
        return program.run(inputs, seed=0)
    except Exception:  # data the op rejects (a singular matrix, ...): nothing to compare
        return None


def _check_every_pipeline(name: str, program: Program, inputs: dict[str, np.ndarray] | None,
                          ) -> None:
    """Each pass alone and the default pipeline, on copies: they verify and, when ``inputs``
    are given and the original runs on them, compute the same results."""
    program.verify()
    deterministic = all(is_deterministic(op, program) for op in program.graphs["main"].ops)
    before = _runs(program, inputs) if inputs is not None and deterministic else None
    for passes in [[p] for p in default_passes()] + [default_passes()]:
        optimized = parse(str(program), weights=program.weights)
        optimized.optimize(passes)
        optimized.verify()
        if before is not None and inputs is not None:
            after = optimized.run(inputs, seed=0)
            for k, want in before.items():
                # every pass but fold_affine is exact, and fold_affine finds nothing here
                np.testing.assert_allclose(after[k], want, rtol=1e-6, atol=1e-6,
                                           err_msg=f"{name} {[p.name for p in passes]} {k}")


# Ops whose operands must come from another op (LAPACK pivots): random data are invalid pivots,
# which their kernels reject (tests/core/test_kernels_linalg.py), so there is nothing to compare.
NEEDS_VALID_DATA = frozenset({"coreai.ldl_solve", "coreai.lu_solve"})


@pytest.mark.parametrize("op_name", sorted(SAMPLES))
def test_no_pass_raises_or_changes_results(op_name: str) -> None:
    program = build_sample(op_name)
    types = [v.type for v in program.graphs["main"].inputs.values()]
    rng = np.random.default_rng(0)
    static = all(t.is_static for t in types) and op_name not in NEEDS_VALID_DATA
    data = [_data(t, rng) for t in types] if static else []
    inputs = dict(zip(program.graphs["main"].inputs, data, strict=True)) if static else None
    _check_every_pipeline(op_name, program, inputs)
    folded = _with_constant_operands(op_name, data) if static and data else None
    if folded is not None:
        _check_every_pipeline(op_name, folded, {})
