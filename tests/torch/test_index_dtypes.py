"""Integer index inputs of dtype int32 or int64 (named index / idx / row_idx like user code):
the program's input type is the dtype the exported program declared, run() accepts exactly that
dtype, and the result matches torch eager, for index_select, gather, index.Tensor and embedding,
decomposed or not and with static or dynamic (Dim.AUTO) sizes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core.errors import RuntimeInputError
from coreai_torch import TorchConverter
from tests.torch.harness import assert_matches, to_numpy


class _IndexSelect(torch.nn.Module):
    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.index_select(x, 1, index)


class _Gather(torch.nn.Module):
    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return torch.gather(x, 1, idx)


class _Index(torch.nn.Module):
    def forward(self, x: torch.Tensor, row_idx: torch.Tensor) -> torch.Tensor:
        return x[row_idx] + x[:, row_idx % x.shape[1]].sum()


class _Embedding(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(7, 3, padding_idx=2)

    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return self.table(idx) * x.sum() + F.embedding(idx, x[:, :3])


def _index(draw: Any, shape: tuple[int, ...], high: int, dtype: torch.dtype) -> torch.Tensor:
    seed = draw(st.integers(0, 2**31 - 1))
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# name -> (module, name of the index input, index for x of shape [rows, cols])
CASES: dict[str, tuple[Callable[[], torch.nn.Module], str,
                       Callable[[Any, int, int, torch.dtype], torch.Tensor]]] = {
    "index_select": (_IndexSelect, "index", lambda d, r, c, t: _index(d, (3,), c, t)),
    "gather": (_Gather, "idx", lambda d, r, c, t: _index(d, (r, 2), c, t)),
    "index.Tensor": (_Index, "row_idx", lambda d, r, c, t: _index(d, (2, 2), min(r, c), t)),
    "embedding": (_Embedding, "idx", lambda d, r, c, t: _index(d, (2, 3), min(r, 7), t)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
@settings(max_examples=6, deadline=None)
@given(data=st.data(), decompose=st.booleans(), dynamic=st.booleans())
def test_index_input_dtype(case: str, dtype: torch.dtype, data: st.DataObject,
                           decompose: bool, dynamic: bool) -> None:
    make, name, draw_index = CASES[case]
    rows, cols = data.draw(st.integers(3, 6)), data.draw(st.integers(3, 6))
    x = torch.randn(rows, cols)
    index = draw_index(data.draw, rows, cols, dtype)
    module = make()
    auto = torch.export.Dim.AUTO
    dynamic_shapes = ({0: auto, 1: auto}, {i: auto for i in range(index.dim())}) \
        if dynamic else None
    ep = torch.export.export(module, (x, index), dynamic_shapes=dynamic_shapes)
    declared = {s.arg.name: s for s in ep.graph_signature.input_specs}
    assert name in declared
    program = TorchConverter().add_pytorch_module(
        module, export_fn=lambda m: ep, decompose=decompose).to_coreai()
    in_type = program.graphs["main"].inputs[name].type
    assert in_type.element_type.numpy == to_numpy(index).dtype
    with torch.no_grad():
        expected = [module(x, index)]
    got = list(program.run({"x": x.numpy(), name: index.numpy()}).values())
    assert_matches(expected, got, atol=1e-5, rtol=1e-5, what=f"{case} {dtype}")
    other = index.numpy().astype(np.int64 if dtype == torch.int32 else np.int32)
    with pytest.raises(RuntimeInputError, match=name):
        program.run({"x": x.numpy(), name: other})
