"""as_strided over any strided view matches torch eager (issue 36, HaloNet).

torch's as_strided reads its input's *storage*: the input's own strides and storage offset
(a transpose, a slice, an expand, an unfold) decide nothing about which positions are read,
only which storage they come from. Inputs here are views of a base tensor (a graph input or a
computed one); the positions read stay inside the base's storage, inside or outside the view.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_torch.lowerings.tensor_strided import storage_positions
from tests.torch.harness import assert_matches, convert, export

VIEWS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "contiguous": lambda b: b,
    "transposed": lambda b: b.t(),
    "sliced": lambda b: b[1:, 1::2],
    "expanded": lambda b: b[:, :1].expand(-1, 3),
    "unfolded": lambda b: b.unfold(1, 2, 1),
    "unfold_of_unfold": lambda b: b.unfold(0, 2, 1).unfold(1, 2, 2),
    "strided_of_strided": lambda b: b.as_strided((2, 2), (1, 2), 1),
}


class StridedView(torch.nn.Module):
    def __init__(self, view: str, computed: bool, size: list[int], stride: list[int],
                 offset: int) -> None:
        super().__init__()
        self.view, self.computed = VIEWS[view], computed
        self.size, self.stride, self.offset = size, stride, offset

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        base = x * 2.0 + 1.0 if self.computed else x
        return self.view(base).as_strided(self.size, self.stride, self.offset) * 3.0


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, bool, list[int], list[int], int, torch.Tensor]:
    rows, cols = draw(st.integers(3, 7)), draw(st.integers(3, 7))
    view = draw(st.sampled_from(sorted(VIEWS)))
    rank = draw(st.integers(0, 3))
    size = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    stride = draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank))
    reach = int(storage_positions(size, stride, 0).max(initial=0))
    numel = rows * cols
    offset = draw(st.integers(0, max(0, numel - 1 - reach)))
    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(draw(st.integers(0, 99))))
    return view, draw(st.booleans()), size, stride, offset, x


@settings(max_examples=15)
@given(case=cases())
def test_as_strided_of_a_view_matches_eager(case: tuple) -> None:
    view, computed, size, stride, offset, x = case
    if int(storage_positions(size, stride, offset).max(initial=0)) >= x.numel():
        return  # the base is too small for this read (the strategy keeps this rare)
    module = StridedView(view, computed, size, stride, offset)
    want = module(x)
    program = convert(export(module, [x]))
    got = list(program.run([x.numpy()]).values())
    assert_matches([want], got, atol=1e-6, rtol=1e-6, what=f"{view} as_strided{size, stride}")


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_each_view_with_a_read_outside_the_view(view: str) -> None:
    """Offset 0, stride 1 over 6 positions: before a slice's start, inside an expand's gaps."""
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(1))
    module = StridedView(view, True, [2, 3], [3, 1], 0)
    got = list(convert(export(module, [x])).run([x.numpy()]).values())
    assert_matches([module(x)], got, atol=1e-6, rtol=1e-6, what=view)


def test_a_read_past_the_view_comes_from_its_base() -> None:
    class PastEnd(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            big = torch.zeros(40)
            big[:30] = x.reshape(-1)  # storage of 40, the view below holds positions 0..29
            return big[:30].as_strided((4,), (9,), 10)  # reads 37 > 29 but < 40

    x = torch.randn(5, 6)
    np.testing.assert_array_equal(PastEnd()(x)[:2].numpy(), x.reshape(-1)[[10, 19]].numpy())
    program = convert(export(PastEnd(), [x]))  # the base (big) holds all 40 positions
    got = list(program.run([x.numpy()]).values())
    assert_matches([PastEnd()(x)], got, atol=0, rtol=0, what="past the view, inside the base")
