"""Every mapped op's sample (tests/core/op_samples.py): export, run on Apple's interpreter,
compare with coreai_core's runtime. A sample the exporter refuses must be refused by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from coreai_core import Program, TensorType
from coreai_torch.aimodel import MAPPINGS, export_aimodel, run_aimodel
from coreai_torch.errors import UnexportableOpsError
from coreai_torch.verify import compare
from tests.core.op_samples import SAMPLES, build_sample

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


# Samples with a feature the exporter refuses, and the reason it gives (tested below).
REFUSED = {
    "coreai.maxpool": "return_indices=True",
    "coreai.avgpool": "ceil_mode=True",
    "coreai.slice": "negative slice strides",
}
STATIC = sorted(n for n in set(MAPPINGS) & set(SAMPLES)
                if all(t.is_static for t in SAMPLES[n].inputs) and n not in REFUSED)
DYNAMIC = sorted(n for n in set(MAPPINGS) & set(SAMPLES)
                 if not all(t.is_static for t in SAMPLES[n].inputs))


@pytest.mark.parametrize("op_name", STATIC)
def test_mapped_op_sample_matches_runtime(op_name: str, tmp_path: Path) -> None:
    check_matches_runtime(build_sample(op_name), tmp_path / "op.aimodel")


@pytest.mark.parametrize("op_name", sorted(REFUSED))
def test_refused_sample_names_the_op_and_reason(op_name: str, tmp_path: Path) -> None:
    with pytest.raises(UnexportableOpsError) as info:
        export_aimodel(build_sample(op_name), tmp_path / "op.aimodel")
    assert [(op.op, REFUSED[op_name] in op.reason) for op in info.value.ops] == [(op_name, True)]
    assert 'model.py":7' in str(info.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("op_name", DYNAMIC)
def test_dynamic_sample_refused_at_its_input(op_name: str, tmp_path: Path) -> None:
    with pytest.raises(UnexportableOpsError, match="dynamic shape"):
        export_aimodel(build_sample(op_name), tmp_path / "op.aimodel")
    assert list(tmp_path.iterdir()) == []
