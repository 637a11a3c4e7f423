"""precision_report refuses arguments that would make its verdict meaningless or its error
unreadable (issue 36): NaN or negative tolerances (NaN made every comparison pass), malformed
``keep`` entries (a raw AttributeError) and a missing entrypoint (a bare KeyError)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from coreai_core import Program, TensorType
from coreai_core.dialects import coreai
from coreai_torch import precision_report


def _overflowing() -> tuple[Program, dict[str, np.ndarray]]:
    """x * 1000 * 1000 * 1e-6: finite in float32, inf in float16 once x exceeds 0.065."""
    program = Program()
    with program.graph("main", inputs={"x": TensorType((5,), "float32")}) as g:
        big = coreai.broadcasting_mul(coreai.broadcasting_mul(g["x"], 1000.0), 1000.0)
        g.outputs({"y": coreai.broadcasting_mul(big, 1e-6)})
    x = np.linspace(0.5, 3.0, 5, dtype=np.float32)
    return program, {"x": x}


def test_the_program_fails_in_float16_with_valid_tolerances() -> None:
    program, inputs = _overflowing()
    report = precision_report(program, inputs, rtol=1e-2, atol=1e-2)
    assert not report.passed and report.first_bad is not None


@pytest.mark.parametrize("name", ["rtol", "atol"])
@pytest.mark.parametrize("value", [math.nan, -1e-3, -math.inf, math.inf])
def test_nan_negative_or_infinite_tolerances_are_refused(name: str, value: float) -> None:
    program, inputs = _overflowing()
    with pytest.raises(ValueError, match=f"{name} must be a finite number >= 0") as e:
        precision_report(program, inputs, **{name: value})
    assert repr(value) in str(e.value)


@pytest.mark.parametrize("value", [None, "0.01", True])
def test_a_tolerance_that_is_not_a_number_is_refused(value: object) -> None:
    program, inputs = _overflowing()
    with pytest.raises(TypeError, match="atol must be a number >= 0"):
        precision_report(program, inputs, atol=value)  # type: ignore[arg-type]


def test_zero_and_integer_tolerances_are_accepted() -> None:
    program, inputs = _overflowing()
    assert not precision_report(program, inputs, rtol=0, atol=0.0).passed


@pytest.mark.parametrize("keep, index", [([None], 0), (["coreai.broadcasting_mul", 3], 1),
                                         ([""], 0), ((b"%1",), 0)])
def test_malformed_keep_entries_are_refused_by_position(keep: list, index: int) -> None:
    program, inputs = _overflowing()
    with pytest.raises(TypeError, match=f"keep entry {index} is .*an entry is a non-empty "
                                        "string"):
        precision_report(program, inputs, keep=keep)


def test_keep_that_is_not_iterable_is_refused() -> None:
    program, inputs = _overflowing()
    with pytest.raises(TypeError, match="keep must be a string or an iterable of strings"):
        precision_report(program, inputs, keep=12)  # type: ignore[arg-type]


def test_a_valid_keep_still_works() -> None:
    program, inputs = _overflowing()
    report = precision_report(program, inputs, keep=("coreai.broadcasting_mul",))
    assert report.passed, str(report)


def test_a_missing_entrypoint_is_named_with_those_available() -> None:
    program, inputs = _overflowing()
    with pytest.raises(KeyError, match=r"no entrypoint 'decode'; its entrypoints are \['main'\]"):
        precision_report(program, inputs, entrypoint="decode")
