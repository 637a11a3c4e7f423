"""The ``.aimodel`` export checked like an optimizer pass: random multi-op programs
(tests/interop/aimodel_programs.py: the optimizer's generator plus steps in int8/16/32/64,
uint8, bool and float16, more math and data movement) are exported, run on Apple's
interpreter and compared with coreai_core's runtime on the same inputs.

With the CI profile (derandomized) this exports :data:`EXAMPLES` programs with every step,
and :data:`TYPED_EXAMPLES` programs per element type. The quirks of
Apple's compiler it found are each pinned by a test of test_aimodel_cast_quirks.py.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import DType, Program
from coreai_torch.aimodel import load_aimodel
from coreai_torch.aimodel.export import export_aimodel
from coreai_torch.aimodel.loaded import narrow_input
from coreai_torch.verify import compare
from tests.core.strategies import inputs_for
from tests.interop.aimodel_programs import (
    HALF_TYPES,
    TYPES,
    aimodel_programs,
    element_types,
    op_names,
)
from tests.interop.helpers import ATOL, RTOL

# ~0.2 s per program (export, load, one run): 60 + 7 * 8 programs, ~25 s in CI
EXAMPLES = 60
TYPED_EXAMPLES = 8
# A program with float16 values rounds each of its half ops, and Apple's interpreter and our
# runtime order the float32 work around them differently (fused or not): an error of a few
# float16 ulps (2**-11 relative each) through a chain of up to 6 steps.
HALF_RTOL, HALF_ATOL = 4e-3, 4e-3


def check_program(program: Program, inputs: dict[str, Any]) -> None:
    """Export ``program``, run it on Apple's interpreter and compare with ``program.run``."""
    half = bool(element_types(program) & set(HALF_TYPES))
    rtol, atol = (HALF_RTOL, HALF_ATOL) if half else (RTOL, ATOL)
    with tempfile.TemporaryDirectory() as tmp:
        path = export_aimodel(program, Path(tmp) / "random.aimodel")
        with load_aimodel(path) as asset:
            got = asset.run(inputs)
    want = program.run(inputs)
    assert list(got) == list(want)
    for name in want:
        err = compare(name, narrow_input(name, got[name]), narrow_input(name, want[name]),
                      rtol, atol)
        assert err.passed, f"{name}: {err}\n{program}"


def test_random_programs_match_the_runtime_on_apples_interpreter() -> None:
    seen_ops: set[str] = set()

    @settings(max_examples=EXAMPLES)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        program = data.draw(aimodel_programs(), label="program")
        seen_ops.update(op_names(program))
        check_program(program, data.draw(inputs_for(program), label="inputs"))

    check()
    assert len(seen_ops) >= 35, sorted(seen_ops)  # the breadth the generator reaches


@pytest.mark.parametrize("dtype", TYPES, ids=lambda d: d.name)
def test_programs_with_each_element_type_match_the_runtime(dtype: DType) -> None:
    """Programs whose only typed steps are ``dtype``'s, so that each type is exported."""
    typed: list[bool] = []

    @settings(max_examples=TYPED_EXAMPLES)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        program = data.draw(aimodel_programs(types=(dtype,), weight=4), label="program")
        typed.append(dtype in element_types(program))
        check_program(program, data.draw(inputs_for(program), label="inputs"))

    check()
    assert sum(typed) >= 2, f"{sum(typed)} of {len(typed)} programs hold {dtype.name} values"
