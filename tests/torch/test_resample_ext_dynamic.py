"""grid_sampler_3d on dynamic (torch.export.Dim) batch and grid sizes: converted once, run on
several sizes, compared with torch eager."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from coreai_core import Dim
from tests.torch.harness import FnModule, assert_matches, convert, export, flatten, to_numpy


@pytest.mark.parametrize(("mode", "padding", "corners"), list(itertools.product(
    ("bilinear", "nearest"), ("zeros", "border", "reflection"), (False, True))))
def test_grid_sampler_3d_dynamic_grid(mode: str, padding: str, corners: bool) -> None:
    kwargs = {"mode": mode, "padding_mode": padding, "align_corners": corners}
    module = FnModule(F.grid_sample, (torch.zeros(1), torch.zeros(1)), kwargs)
    batch, depth, width = (torch.export.Dim(k, min=2, max=16) for k in ("batch", "d", "w"))
    g = torch.Generator().manual_seed(0)

    def inputs(n: int, d: int, w: int) -> list[torch.Tensor]:
        x = torch.randn(n, 2, 3, 4, 5, generator=g)
        grid = torch.rand(n, d, 3, w, 3, generator=g) * 2.6 - 1.3
        return [x, grid]

    ep = export(module, inputs(2, 2, 2),
                dynamic_shapes=(({0: batch}, {0: batch, 1: depth, 3: width}),))
    program = convert(ep)
    grid_in = list(program.graphs["main"].inputs.values())[1]
    assert isinstance(grid_in.type.shape[1], Dim) and isinstance(grid_in.type.shape[3], Dim)
    for n, d, w in ((2, 2, 2), (3, 5, 2), (2, 4, 11)):
        feeds = inputs(n, d, w)
        with torch.no_grad():
            expected = flatten(module(*feeds))
        got = list(program.run([to_numpy(t) for t in feeds]).values())
        assert_matches(expected, got, atol=1e-5, rtol=1e-5, what=f"{mode}/{padding} {n, d, w}")
