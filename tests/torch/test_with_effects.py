"""Effectful ops: torch.export wraps them in ``with_effects`` with a token; the wrapped op is
lowered with its own (built-in or user) lowering and the token passes through."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._higher_order_ops.effects import _EffectType, _register_effectful_op

from coreai_core import Value
from coreai_core.dialects import coreai
from coreai_torch import TorchConverter
from coreai_torch.errors import UnsupportedOpsError
from coreai_torch.utils import scalar_like
from tests.torch.harness import call_targets, convert, export
from tests.torch.op_db._entry import shapes, tensors

_LIB = torch.library.Library("coreai_test_effects", "FRAGMENT")
_LIB.define("record(Tensor x, float scale) -> Tensor")
_LIB.impl("record", lambda x, scale: x * scale, "CompositeExplicitAutograd")
_LIB._register_fake("record", lambda x, scale: torch.empty_like(x))
RECORD = torch.ops.coreai_test_effects.record.default


@pytest.fixture(scope="module", autouse=True)
def effectful_record() -> Iterator[None]:
    """``record`` is an ordered effectful op for the tests of this module only."""
    handle = _register_effectful_op(RECORD, _EffectType.ORDERED)
    yield
    if handle is not None:
        handle.destroy()


class TwoRecords(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = RECORD(x, 2.0)
        z = RECORD(y + 1, -0.5)
        return z - x


def _converter() -> TorchConverter:
    converter = TorchConverter()

    @converter.register_torch_lowering("coreai_test_effects::record.default")
    def record(x: Value, scale: float) -> Value:
        return coreai.broadcasting_mul(x, scalar_like(scale, x))

    return converter


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_effectful_custom_op_lowers_through_its_token(data: st.DataObject) -> None:
    dtype = data.draw(st.sampled_from((torch.float32, torch.float64)))
    x = data.draw(tensors(data.draw(shapes(0, 3)), dtype))
    ep = export(TwoRecords(), (x,))
    assert "higher_order::with_effects.default" in call_targets(ep)
    program = convert(ep, _converter())
    with torch.no_grad():
        expected = TwoRecords()(x)
    got = list(program.run([x.numpy()]).values())
    assert len(got) == 1, "the token is not a program output"
    np.testing.assert_allclose(got[0], expected.numpy(), rtol=1e-6, atol=1e-7)
    program.optimize()
    (optimized,) = program.run([x.numpy()]).values()
    np.testing.assert_allclose(optimized, expected.numpy(), rtol=1e-6, atol=1e-7)


def test_effectful_op_without_a_lowering_is_reported() -> None:
    ep = export(TwoRecords(), (torch.ones(3),))
    with pytest.raises(UnsupportedOpsError, match="coreai_test_effects::record"):
        convert(ep)
