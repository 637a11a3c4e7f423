"""Counting ops with a dynamic input length: one converted program serves every length, and
the data-dependent output lengths (bincount, the unique family) come out of the run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.torch.harness import FnModule, assert_matches, convert, export, flatten, to_numpy

N = torch.export.Dim("n", min=2, max=200)

Maker = Callable[[torch.Generator, int], list[torch.Tensor]]
CASES: dict[str, tuple[Callable[..., Any], Maker]] = {
    "bincount": (lambda x: torch.bincount(x, minlength=3),
                 lambda g, n: [torch.randint(0, 9, (n,), generator=g)]),
    "bincount_weights": (lambda w, x: torch.bincount(x, w),
                         lambda g, n: [torch.rand(n, generator=g, dtype=torch.float64),
                                       torch.randint(0, 9, (n,), generator=g)]),
    "unique": (lambda x: torch.unique(x, return_inverse=True, return_counts=True),
               lambda g, n: [torch.randint(-3, 4, (n, 2), generator=g)]),
    "unique_consecutive": (lambda x: torch.unique_consecutive(x, return_inverse=True,
                                                              return_counts=True),
                           lambda g, n: [torch.randint(0, 2, (n,), generator=g)]),
    "searchsorted": (lambda s, v: torch.searchsorted(s, v, right=True),
                     lambda g, n: [torch.sort(torch.randn(9, generator=g)).values,
                                   torch.randn(n, generator=g)]),
    "histc": (lambda x: torch.histc(x, 7), lambda g, n: [torch.randn(n, generator=g)]),
    "mode_values": (lambda x: torch.mode(x, 0).values,
                    lambda g, n: [torch.randint(0, 3, (n, 4), generator=g)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), sizes=st.lists(st.sampled_from((2, 5, 47, 120)),
                                                      min_size=2, max_size=2))
def test_one_program_serves_every_length(name: str, seed: int, sizes: list[int]) -> None:
    fn, make = CASES[name]
    g = torch.Generator().manual_seed(seed)
    example = make(g, 20)
    module = FnModule(fn, example, {})
    # every input's first dim is the length n, except searchsorted's sorted sequence
    dims = tuple(None if (name == "searchsorted" and i == 0) else {0: N}
                 for i in range(len(example)))
    program = convert(export(module, example, dynamic_shapes=(dims,)))
    for n in sizes:
        inputs = make(g, n)
        if name == "searchsorted":
            inputs[0] = example[0]  # the sequence has a static length
        expected = flatten(module(*inputs))
        got = list(program.run([to_numpy(t) for t in inputs]).values())
        assert_matches(expected, [np.asarray(v) for v in got], atol=1e-12, rtol=1e-12,
                       what=f"{name} n={n}")
