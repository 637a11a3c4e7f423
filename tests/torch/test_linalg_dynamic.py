"""Linear-algebra lowerings with a dynamic batch dim: converted once, run on several batch
sizes, compared with torch eager. The op database covers static shapes.

Inputs are ``I + E / 8`` with |E| <= 1 (diagonally dominant, condition number < 2), so float64
results agree with torch to 1e-10.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from coreai_core import Dim
from tests.torch.harness import FnModule, assert_matches, convert, export, flatten, to_numpy

N = 4
CASES: dict[str, Callable[[torch.Tensor], Any]] = {
    "solve": lambda a: torch.linalg.solve_ex(a, a[..., :2]),
    "inv": torch.linalg.inv_ex,
    "det": torch.linalg.det,
    "slogdet": torch.linalg.slogdet,
    "lu": torch.linalg.lu,
    "cholesky": lambda a: torch.linalg.cholesky_ex(a @ a.mT),
    "svdvals": torch.linalg.svdvals,
    "eigvalsh": torch.linalg.eigvalsh,
    "pinv": torch.linalg.pinv,
    "solve_triangular": lambda a: torch.linalg.solve_triangular(a, a, upper=True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dynamic_batch(name: str) -> None:
    g = torch.Generator().manual_seed(0)

    def matrices(batch: int) -> torch.Tensor:
        e = torch.rand((batch, N, N), generator=g, dtype=torch.float64) * 2 - 1
        return torch.eye(N, dtype=torch.float64) + e / 8

    module = FnModule(CASES[name], (torch.zeros(1),), {})
    ep = export(module, [matrices(3)],
                dynamic_shapes=(({0: torch.export.Dim("batch", min=2, max=16)},),))
    program = convert(ep)
    (a_in,) = program.graphs["main"].inputs.values()
    assert isinstance(a_in.type.shape[0], Dim)
    for batch in (2, 5):
        a = matrices(batch)
        expected = flatten(module(a))
        got = list(program.run([to_numpy(a)]).values())
        assert_matches(expected, got, atol=1e-10, rtol=1e-10, what=f"{name}[batch={batch}]")
