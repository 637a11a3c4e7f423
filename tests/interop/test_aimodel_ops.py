"""Every mapped op's sample (tests/core/op_samples.py): export, run on Apple's interpreter,
compare with coreai_core's runtime. A sample the exporter refuses must be refused by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from coreai_core import TensorType
from coreai_torch.aimodel import MAPPINGS, export_aimodel, load_aimodel
from coreai_torch.aimodel.loaded import narrow_input
from coreai_torch.aimodel.mappings.compression import MAPPINGS as COMPRESSION_MAPPINGS
from coreai_torch.errors import UnexportableOpsError
from coreai_torch.verify import compare
from tests.core.op_samples import SAMPLES, build_sample
from tests.interop.helpers import ATOL, RTOL, check_matches_runtime

# Samples with a feature the exporter refuses, and the reason it gives (tested below).
REFUSED = {
    "coreai.maxpool": "return_indices=True",
}


def _complex_interface(op_name: str) -> bool:
    graph = build_sample(op_name).graphs["main"]
    return any(v.type.element_type.is_complex
               for v in [*graph.inputs.values(), *graph.output_values.values()])


# Complex inputs and outputs are not exported: test_aimodel_fft.py runs these ops inside
# graphs with real interfaces.
COMPLEX_INTERFACE = sorted(n for n in set(MAPPINGS) & set(SAMPLES) if _complex_interface(n))
# Compression ops take constants (compressed weights): test_aimodel_compression.py runs them.
STATIC = sorted(n for n in set(MAPPINGS) & set(SAMPLES) - set(COMPRESSION_MAPPINGS)
                if all(t.is_static for t in SAMPLES[n].inputs) and n not in REFUSED
                and n not in COMPLEX_INTERFACE)
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


@pytest.mark.parametrize("op_name", COMPLEX_INTERFACE)
def test_complex_interface_sample_refused_by_name(op_name: str, tmp_path: Path) -> None:
    with pytest.raises(UnexportableOpsError, match=r"complex (in|out)puts are not exported"):
        export_aimodel(build_sample(op_name), tmp_path / "op.aimodel")
    assert list(tmp_path.iterdir()) == []


def _at(t: TensorType, size: int) -> tuple[int, ...]:
    """``t``'s shape with every dynamic dimension ``size`` (moved into its bounds)."""
    return tuple(d if isinstance(d, int) else
                 min(max(size, d.min or 0), size if d.max is None else d.max) for d in t.shape)


@pytest.mark.parametrize("op_name", DYNAMIC)
def test_dynamic_sample_runs_at_several_sizes_from_one_asset(op_name: str,
                                                             tmp_path: Path) -> None:
    program = build_sample(op_name)
    path = export_aimodel(program, tmp_path / "op.aimodel")
    rng = np.random.default_rng(0)
    with load_aimodel(path) as asset:
        for size in (1, 5):
            inputs = {n: rng.standard_normal(_at(v.type, size)).astype(v.type.element_type.numpy)
                      for n, v in program.graphs["main"].inputs.items()}
            got, want = asset.run(inputs), program.run(inputs)
            assert list(got) == list(want)
            for name in want:
                err = compare(name, narrow_input(name, got[name]),
                              narrow_input(name, want[name]), RTOL, ATOL)
                assert err.passed, f"size {size}: {err}"


def test_every_mapping_is_run_on_apples_interpreter() -> None:
    """Each mapped op runs in a sample above, a case of test_aimodel_export.py,
    test_aimodel_expansions.py or test_aimodel_fft.py, or (the compression ops)
    test_aimodel_compression.py."""
    from tests.interop import test_aimodel_expansions, test_aimodel_export, test_aimodel_fft

    cases = {**test_aimodel_export.CASES, **test_aimodel_expansions.CASES,
             **test_aimodel_fft.CASES}
    in_cases = {op.name for inputs, build in cases.values()
                for op in test_aimodel_export.program_of(inputs, build).graphs["main"].walk()}
    assert sorted(set(MAPPINGS) - set(STATIC) - in_cases - set(COMPRESSION_MAPPINGS)) == []
