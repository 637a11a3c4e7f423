"""Attribute ranges (``Annotated[..., Range]``): every path that makes an op rejects a value
outside the declared range with an error naming the op, the attribute and the range.

Issue 18, item 14: a stride of 0 reached conv/pool type rules and raised a raw
ZeroDivisionError (a ParseError wrapping it in the text form). The tests are generic over every
op that declares a range, so a new windowed op is covered by declaring its ranges.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from coreai_core import ParseError, Program, TensorType, TypeRuleError, VerificationError, parse
from coreai_core._builder import insertion_point
from coreai_core._opdef import OPS, OpDef, Param, Range, build_operation
from coreai_core.dialects import coreai
from tests.core.op_samples import BUILDERS, build_sample

RANGED = [(name, p) for name, opdef in sorted(OPS.items()) for p in opdef.attributes
          if p.range is not None]


def test_the_window_ops_declare_their_ranges() -> None:
    declared = {(name, p.name): p.range for name, p in RANGED}
    for op in ("coreai.conv", "coreai.conv_transpose"):
        assert declared[(op, "strides")] == Range(lo=1)
        assert declared[(op, "dilation")] == Range(lo=1)
        assert declared[(op, "pads")] == Range(lo=0)
        assert declared[(op, "groups")] == Range(lo=1)
    for op in ("coreai.maxpool", "coreai.sumpool", "coreai.avgpool"):
        assert declared[(op, "kernel_size")] == Range(lo=1)
        assert declared[(op, "strides")] == Range(lo=1)
    assert declared[("coreai.avgpool", "divisor_override")] == Range(nonzero=True)


def _outside(r: Range, shift: int) -> int:
    """A value outside ``r`` (``shift`` >= 0 moves it further away)."""
    if r.lo is not None:
        return int(r.lo) - 1 - shift
    if r.hi is not None:
        return int(r.hi) + 1 + shift
    assert r.nonzero
    return 0


def _bad_value(p: Param, current: object, shift: int) -> object:
    bad = _outside(p.range, shift)  # type: ignore[arg-type]
    if p.kind in ("ints", "floats"):
        n = len(current) if isinstance(current, tuple) and current else 2
        return (*([1] * (n - 1)), bad)  # one bad entry among valid ones is enough
    return bad


def _sample_op(name: str) -> tuple[Program, OpDef, object]:
    program = build_sample(name)
    op = next(o for o in program.graphs["main"].ops if o.name == name)
    return program, OPS[name], op


@pytest.mark.parametrize(("name", "param"), RANGED, ids=[f"{n}.{p.name}" for n, p in RANGED])
@given(shift=st.integers(0, 1000))
def test_builders_reject_values_outside_the_range(name: str, param: Param, shift: int) -> None:
    program, opdef, op = _sample_op(name)
    bad = _bad_value(param, op.attributes[param.name], shift)  # type: ignore[attr-defined]
    operands = opdef.split_operands(op.operands)  # type: ignore[attr-defined]
    attributes = {**op.attributes, param.name: bad}  # type: ignore[attr-defined]
    regions = {p.name for p in opdef.attributes if p.role == "region"}
    with insertion_point(program.graphs["main"]):
        with pytest.raises(TypeRuleError) as info:
            BUILDERS[name](**operands, **{k: v for k, v in attributes.items() if k not in regions})
        message = str(info.value)
        assert message.startswith(name)
        assert f"attribute {param.name!r} must" in message and str(param.range) in message
        with pytest.raises(TypeRuleError, match=re.escape(str(param.range))):
            build_operation(opdef, op.operands, attributes, op.location)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("name", "param"), RANGED, ids=[f"{n}.{p.name}" for n, p in RANGED])
def test_text_and_verifier_reject_values_outside_the_range(name: str, param: Param) -> None:
    program, _, op = _sample_op(name)
    bad = _bad_value(param, op.attributes[param.name], 0)  # type: ignore[attr-defined]
    op.attributes[param.name] = bad  # type: ignore[attr-defined]  # an edit bypassing builders
    with pytest.raises(VerificationError, match=re.escape(f"attribute {param.name!r} must")):
        program.verify()
    text = str(program)
    with pytest.raises(ParseError) as info:
        parse(text)
    e = info.value
    line = text.splitlines()[e.line - 1]
    assert line[e.column - 1:].startswith(str(list(bad) if isinstance(bad, tuple) else bad))
    assert line[:e.column - 1].endswith(f"{param.name} = ")
    assert e.message.startswith(f"{name}: attribute {param.name!r} must")


def test_stride_zero_was_a_zero_division() -> None:
    """The reported case: conv and pooling with a stride of 0."""
    p = Program()
    with p.graph("main", inputs={"x": TensorType((1, 2, 6, 6), "float32")}) as g:
        w = np.ones((3, 2, 3, 3), np.float32)
        with pytest.raises(TypeRuleError, match=r"coreai.conv: attribute 'strides' must have "
                                                r"every entry >= 1, got \[0, 0\]"):
            coreai.conv2d(g["x"], w, strides=[0, 0])
        with pytest.raises(TypeRuleError, match=r"coreai.maxpool: attribute 'strides'"):
            coreai.maxpool2d(g["x"], kernel_size=[2, 2], strides=[1, 0])
        with pytest.raises(TypeRuleError, match=r"coreai.sumpool: attribute 'kernel_size'"):
            coreai.sumpool2d(g["x"], kernel_size=[0, 2])


@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("dilation", [1, 2])
@pytest.mark.parametrize("output_padding", [0, 1, 2, 3])
def test_conv_transpose_output_padding_is_accepted_exactly_as_torch(
        stride: int, dilation: int, output_padding: int) -> None:
    x, w = torch.randn(1, 2, 5), torch.randn(2, 3, 3)
    try:
        want = torch.nn.functional.conv_transpose1d(x, w, stride=stride, dilation=dilation,
                                                    output_padding=output_padding)
    except RuntimeError:
        want = None
    p = Program()
    with p.graph("main", inputs={"x": TensorType((1, 2, 5), "float32")}) as g:
        build = lambda: coreai.conv_transpose(  # noqa: E731
            g["x"], w.numpy(), strides=[stride], dilation=[dilation],
            output_padding=[output_padding])
        if want is None:
            with pytest.raises(TypeRuleError, match="output_padding"):
                build()
            return
        g.outputs({"y": build()})
    # float32 sums of at most 2 channels x 3 taps: torch and numpy may order them differently
    np.testing.assert_allclose(p.run({"x": x.numpy()})["y"], want.numpy(), rtol=1e-5, atol=1e-5)


def test_conv_transpose_checks_channels_and_groups() -> None:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((1, 4, 5), "float32")}) as g:
        with pytest.raises(TypeRuleError, match="input channels 4 != weight's first dim 3"):
            coreai.conv_transpose(g["x"], np.ones((3, 2, 3), np.float32))
        with pytest.raises(TypeRuleError, match="not divisible by groups 3"):
            coreai.conv_transpose(g["x"], np.ones((4, 2, 3), np.float32), groups=3)


def test_interpolate_sizes() -> None:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((1, 1, 4, 4), "float32")}) as g:
        with pytest.raises(TypeRuleError, match=r"'sizes' must have every entry >= -1"):
            coreai.interpolate(g["x"], sizes=[-2, 4])
        with pytest.raises(TypeRuleError, match=r"-1 only with output_size"):
            coreai.interpolate(g["x"], sizes=[-1, 4])
