"""as_strided over any strided view matches torch eager (issue 36, HaloNet).

torch's as_strided reads its input's *storage*: the positions read are set by the call's
size, stride and offset, and the input view's own strides and storage offset (a transpose, a
slice, an expand, an unfold) say which of its elements hold them. Inputs here are views of a
base tensor (a graph input or a computed one). A read the view holds converts exactly; a read
of base storage the view does not hold is refused by name (a converted program keeps no
storage), while eager computes it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_torch.errors import LoweringError
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


def _held(view: torch.Tensor, size: list[int], stride: list[int], offset: int) -> bool:
    held = storage_positions(list(view.shape), list(view.stride()), view.storage_offset())
    return bool(np.isin(storage_positions(size, stride, offset), held).all())


def _check(module: StridedView, x: torch.Tensor) -> bool:
    """Converted == eager when the view holds every position read, else a refusal that says
    so; returns whether it converted."""
    want = module(x)
    base = x * 2.0 + 1.0 if module.computed else x
    if _held(module.view(base), module.size, module.stride, module.offset):
        got = list(convert(export(module, [x])).run([x.numpy()]).values())
        assert_matches([want], got, atol=1e-6, rtol=1e-6, what=f"as_strided{module.size}")
        return True
    with pytest.raises(LoweringError, match="the view does not hold"):
        convert(export(module, [x]))
    return False


@settings(max_examples=15)
@given(case=cases())
def test_as_strided_of_a_view_matches_eager(case: tuple) -> None:
    view, computed, size, stride, offset, x = case
    if int(storage_positions(size, stride, offset).max(initial=0)) >= x.numel():
        return  # the base is too small for this read (the strategy keeps this rare)
    _check(StridedView(view, computed, size, stride, offset), x)


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_each_view_read_within_itself(view: str) -> None:
    """A read of positions the view holds: its first, middle and last ones."""
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(1))
    v = VIEWS[view](x * 2.0 + 1.0)
    held = np.unique(storage_positions(list(v.shape), list(v.stride()), v.storage_offset()))
    picks = held[[0, held.size // 2, -1]]
    # three positions as one strided read: offset picks[0], strides to the others
    size, stride = [2], [int(picks[-1] - picks[0])]
    assert _check(StridedView(view, True, size, stride, int(picks[0])), x)
    if picks[1] > picks[0]:
        assert _check(StridedView(view, True, [2], [int(picks[1] - picks[0])], int(picks[0])), x)


def test_a_read_the_view_does_not_hold_is_refused_by_name() -> None:
    class BeforeTheSlice(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x * 2.0)[1:].as_strided((3,), (1,), 0)  # row 0 is not in the slice

    x = torch.randn(4, 3)
    np.testing.assert_array_equal(BeforeTheSlice()(x).numpy(), (x * 2.0)[0].numpy())
    with pytest.raises(LoweringError, match=r"reads 3 storage position\(s\) the view does not "
                                            r"hold \(first: 0\).*as_strided of that base"):
        convert(export(BeforeTheSlice(), [x]))
