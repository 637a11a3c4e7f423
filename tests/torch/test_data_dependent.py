"""Ops whose output size depends on the data (an unbacked size in the export): converted once,
run on inputs selecting none, some and all elements, with the result consumed by later ops."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from coreai_core import Value
from coreai_core.dialects import coreai
from coreai_torch import TorchConverter
from coreai_torch.errors import LoweringError
from tests.torch.harness import FnModule, assert_matches, convert, export, flatten, to_numpy

CASES: dict[str, Callable[[torch.Tensor], Any]] = {
    "nonzero_sum": lambda x: (torch.nonzero(x > 0).float() * 2).sum(0),
    "nonzero_index": lambda x: x.flatten()[torch.nonzero(x.flatten() > 0).squeeze(1)] * 3,
    "nonzero_count": lambda x: torch.nonzero(x > 0).shape[0] + x.sum(),
    "masked_select_add": lambda x: torch.masked_select(x, x > 0) + 1,
    "masked_select_reduce": lambda x: torch.masked_select(x, x.abs() > 0.5).abs().max(0,
                                                                                     keepdim=True),
    "masked_select_cat": lambda x: torch.cat([torch.masked_select(x, x < 0), x[0]]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_data_dependent_size(name: str) -> None:
    module = FnModule(CASES[name], (torch.zeros(1),), {})
    ep = export(module, [torch.randn(5, 4, generator=torch.Generator().manual_seed(0))])
    program = convert(ep)
    g = torch.Generator().manual_seed(1)
    inputs = [torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g),
              -torch.rand(5, 4, generator=g) - 1, torch.rand(5, 4, generator=g) + 1]
    if name == "masked_select_reduce":  # max of an empty selection is an error in torch
        inputs = inputs[:2] + inputs[3:]
    for i, x in enumerate(inputs):
        with torch.no_grad():
            expected = flatten(module(x))
        got = list(program.run([to_numpy(x)]).values())
        assert_matches(expected, got, atol=1e-6, rtol=1e-6, what=f"{name} input {i}")


class _ClippedRange(torch.nn.Module):
    """Funnel-Transformer's old relative positions: an ``arange`` with a data-dependent
    length, clipped to 16 (size ``Min(16, u0)``), broadcast against a static 16 first."""

    def __init__(self, broadcast: bool) -> None:
        super().__init__()
        self.broadcast = broadcast

    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        k = n.item()
        torch._check(k >= 0)
        r = torch.arange(k, dtype=torch.float32)[:16]
        return r * x if self.broadcast else r + 1


def test_static_size_that_torch_proves_is_not_a_specialization() -> None:
    module = _ClippedRange(broadcast=True)
    x, n = torch.randn(16, generator=torch.Generator().manual_seed(0)), torch.tensor(20)
    program = convert(export(module, [x, n]))
    with torch.no_grad():
        expected = flatten(module(x, n))
    got = list(program.run([to_numpy(x), to_numpy(n)]).values())
    assert got[0].shape == (16,)
    assert_matches(expected, got, atol=0.0, rtol=0.0, what="clipped range * x")


def test_a_static_size_torch_cannot_prove_is_reported() -> None:
    converter = TorchConverter()

    @converter.register_torch_lowering("aten::slice.Tensor", allow_override=True)
    def specialized_slice(self: Value, dim: int = 0, start: int | None = None,
                          end: int | None = None, step: int = 1) -> Value:
        return coreai.constant(np.zeros(16, np.float32))

    ep = export(_ClippedRange(broadcast=False), [torch.randn(16), torch.tensor(20)])
    with pytest.raises(LoweringError, match=r"static size 16 where torch has the dynamic size "
                                            r"Min\(16, u\d+\).*specialized"):
        convert(ep, converter)
