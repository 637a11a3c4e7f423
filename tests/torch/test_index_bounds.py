"""Index-taking ops reject exactly the indices torch rejects (issue 18, item 6).

numpy wraps -1 (and ``np.where(i < 0, i + n, i)`` wraps -n-1 to -1, then again); torch
rejects negative indices in embedding, index_select, gather and scatter, and accepts
[-n, n) in index, take, index_put. For each op and index the converted program either
matches torch's result or raises a ``KernelError`` naming the index and the valid range
where torch raises.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from coreai_core.runtime import KernelError
from coreai_torch import TorchConverter, get_decomp_table

Op = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
OPS: dict[str, tuple[Op, Callable[[int], torch.Tensor]]] = {
    "embedding": (lambda x, i: F.embedding(i, x), lambda v: torch.tensor([v, 0])),
    "index_select": (lambda x, i: torch.index_select(x, 0, i), lambda v: torch.tensor([v, 0])),
    "gather": (lambda x, i: torch.gather(x, 0, i), lambda v: torch.tensor([[v, 0]])),
    "scatter": (lambda x, i: x.scatter(0, i, 5.0), lambda v: torch.tensor([[v, 0]])),
    "scatter_add": (lambda x, i: x.scatter_add(0, i, torch.ones(1, 2)),
                    lambda v: torch.tensor([[v, 0]])),
    "index": (lambda x, i: x[i], lambda v: torch.tensor([v, 0])),
    "index_put": (lambda x, i: x.index_put((i,), torch.tensor(9.0)),
                  lambda v: torch.tensor([v, 0])),
    "take": (lambda x, i: torch.take(x, i), lambda v: torch.tensor([v, 0])),
}

WRAPPING = {"index", "index_put", "take"}  # torch counts negative indices from the end


class Indexing(torch.nn.Module):
    def __init__(self, fn: Op) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return self.fn(x, i)


@pytest.mark.parametrize("name", list(OPS))
def test_out_of_range_and_negative_indices_follow_torch(name: str) -> None:
    fn, index = OPS[name]
    x = torch.arange(6.0).reshape(3, 2)
    ep = torch.export.export(Indexing(fn), (x, index(1)))
    program = TorchConverter().add_exported_program(
        ep.run_decompositions(get_decomp_table())).to_coreai()
    size = 6 if name == "take" else 3  # take indexes the flattened tensor
    for v in (-size - 1, -size, -1, 0, size - 1, size):
        i = index(v)
        inputs = {"x": x.numpy(), "i": i.numpy()}
        try:
            want = fn(x, i)
        except (IndexError, RuntimeError):
            valid = rf"\[{-size if name in WRAPPING else 0}, {size}\)"
            with pytest.raises(KernelError, match=rf"index {v} is out of range for axis \d+ "
                                                  rf"of size {size}; valid indices: {valid}"):
                program.run(inputs)
            continue
        (got,) = program.run(inputs).values()
        np.testing.assert_array_equal(got, want.numpy(), err_msg=f"{name} with index {v}")
