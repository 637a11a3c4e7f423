"""Export a program, run it on Apple's interpreter and compare with coreai_core's runtime."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from coreai_core import Program, TensorType
from coreai_torch.aimodel import export_aimodel, run_aimodel
from coreai_torch.verify import compare

# float32 kernels of two implementations (transcendentals, summation order) differ by ulps
RTOL, ATOL = 1e-5, 1e-6


def _data(t: TensorType, rng: np.random.Generator) -> np.ndarray:
    dtype = t.element_type.numpy
    if t.element_type.is_float:
        return rng.standard_normal(t.shape).astype(dtype)
    return rng.integers(0, 2, t.shape).astype(dtype)  # valid as indices, bools and counts


def _inputs(program: Program) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {n: _data(v.type, rng) for n, v in program.graphs["main"].inputs.items()}


def check_matches_runtime(program: Program, path: Path,
                          inputs: dict[str, np.ndarray] | None = None) -> None:
    inputs = _inputs(program) if inputs is None else inputs
    export_aimodel(program, path)
    got = run_aimodel(path, inputs)
    want = program.run(inputs)
    assert list(got) == list(want)
    for name in want:
        err = compare(name, got[name], want[name], RTOL, ATOL)
        assert err.passed, f"{name}: {err}"
