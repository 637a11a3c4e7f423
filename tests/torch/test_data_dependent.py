"""Ops whose output size depends on the data (an unbacked size in the export): converted once,
run on inputs selecting none, some and all elements, with the result consumed by later ops."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

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
