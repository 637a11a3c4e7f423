"""Shape-family lowerings on dynamic (torch.export.Dim) sizes: converted once, run on several
sizes, compared with torch eager. Complements the op database, which exports static shapes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import Dim
from tests.torch.harness import FnModule, assert_matches, convert, export, flatten, to_numpy
from tests.torch.op_db._entry import tensors

aten = torch.ops.aten

# name -> (fn of x with a dynamic dim 0, trailing static shape, dtype)
CASES: dict[str, tuple[Callable[[torch.Tensor], Any], tuple[int, ...], torch.dtype]] = {
    "view_symint": (lambda x: x.view(x.shape[0], 2, 3), (6,), torch.float32),
    "view_symint_and_minus1": (lambda x: x.view(x.shape[0] * 2, -1), (2, 3), torch.float32),
    "view_two_symints": (lambda x: x.view(x.shape[0], x.shape[1] * x.shape[2]), (2, 3),
                         torch.float32),
    "flatten": (lambda x: x.flatten(), (2, 3), torch.int32),
    "expand_minus1": (lambda x: x.expand(3, -1, -1, 4), (2, 1), torch.float32),
    "expand_symint": (lambda x: x[:, :1].expand(x.shape[0], 5), (3,), torch.float32),
    "slice": (lambda x: x[1:-1, ::2], (5,), torch.float32),
    "select_negative": (lambda x: x[-1], (3,), torch.float32),
    "select_symint": (lambda x: x[x.shape[0] - 2], (3,), torch.int64),
    "split_static_dim": (lambda x: x.split(2, 1)[1], (5,), torch.float32),
    "split_last": (lambda x: torch.split(x, [1, x.shape[0] - 1])[1], (3,), torch.float32),
    "cat": (lambda x: torch.cat([x, x * 2], 0), (3,), torch.float32),
    "permute_unsqueeze": (lambda x: x.permute(1, 0).unsqueeze(0), (3,), torch.float32),
    "squeeze": (lambda x: x.unsqueeze(1).squeeze(1), (3,), torch.float32),
    "flip": (lambda x: x.flip(0), (3,), torch.float32),
    "constant_pad": (lambda x: F.pad(x, (1, 2, 0, 1), value=-1.0), (3,), torch.float32),
    "constant_pad_symbolic": (lambda x: F.pad(x, (x.shape[0] - 3, 1, 0, x.shape[0]), value=2.0),
                              (3,), torch.float32),
    "constant_pad_symbolic_int": (lambda x: F.pad(x, (1, x.shape[0])), (2, 3), torch.int64),
    "reflection_pad": (lambda x: F.pad(x, (1, 2), mode="reflect"), (2, 4), torch.float32),
    "zeros": (lambda x: x + torch.zeros(x.shape[0], 3), (3,), torch.float32),
    "full": (lambda x: torch.full((x.shape[0], 2), 7, dtype=torch.int8), (3,), torch.float32),
    "new_ones": (lambda x: x.new_ones(2, x.shape[0]), (3,), torch.float16),
    "full_like": (lambda x: torch.full_like(x, 2.5), (3,), torch.float32),
    "arange": (lambda x: torch.arange(x.shape[0]), (3,), torch.float32),
    "arange_float": (lambda x: torch.arange(1, x.shape[0], dtype=torch.float32), (3,),
                     torch.float32),
    "copy": (lambda x: aten.copy(x, x[:1] + 1), (3,), torch.float32),
    "repeat": (lambda x: x.repeat(2, 1), (3,), torch.float32),
    "repeat_symbolic": (lambda x: x.repeat(x.shape[0] - 2, 2), (3,), torch.float32),
    "repeat_symbolic_lead": (lambda x: x.repeat(2, x.shape[0], 1, 3), (2, 3), torch.int32),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dynamic_dim0(name: str) -> None:
    fn, tail, dtype = CASES[name]
    module = FnModule(fn, (torch.zeros(1),), {})
    batch = torch.export.Dim("batch", min=4, max=32)
    example = (torch.arange(4 * torch.Size(tail).numel()).reshape(4, *tail) - 5).to(dtype)
    ep = export(module, [example], dynamic_shapes=(({0: batch},),))
    program = convert(ep)
    (x_in,) = program.graphs["main"].inputs.values()
    assert isinstance(x_in.type.shape[0], Dim)
    for n in (4, 5, 9):
        x = (torch.randn(n, *tail) * 4).to(dtype)
        with torch.no_grad():
            expected = flatten(module(x))
        got = list(program.run([to_numpy(x)]).values())
        assert_matches(expected, got, atol=1e-6, rtol=1e-6, what=f"{name} batch={n}")


@settings(max_examples=20, deadline=None)
@given(data=st.data(), r=st.integers(1, 4), lead=st.integers(0, 2), shuffle=st.booleans())
def test_pixel_shuffle_every_dim_dynamic(data: st.DataObject, r: int, lead: int,
                                         shuffle: bool) -> None:
    """pixel_(un)shuffle exported with Dim.AUTO on every dim (batch dims or none): channels,
    height and width are dynamic, constrained by torch to multiples of r (r^2 channels)."""
    def draw_shape() -> list[int]:
        batch = [data.draw(st.integers(2, 3)) for _ in range(lead)]
        c, h, w = (data.draw(st.integers(2, 4)) for _ in range(3))
        return [*batch, c * r * r, h, w] if shuffle else [*batch, c, h * r, w * r]

    fn = F.pixel_shuffle if shuffle else F.pixel_unshuffle
    shape = draw_shape()
    dtype = data.draw(st.sampled_from((torch.float32, torch.int64, torch.bool)))
    module = FnModule(lambda x: fn(x, r), (torch.zeros(1),), {})
    auto = torch.export.Dim.AUTO
    ep = export(module, [torch.zeros(shape, dtype=dtype)],
                dynamic_shapes=(({i: auto for i in range(len(shape))},),))
    program = convert(ep)
    for _ in range(3):
        x = data.draw(tensors(draw_shape(), dtype))
        assert_matches([fn(x, r)], list(program.run([to_numpy(x)]).values()), atol=0, rtol=0,
                       what=f"{fn.__name__} r={r} {list(x.shape)}")
