"""topk over tied values picks and orders them as torch's CPU kernel does (issue 36, Doge).

Inputs draw from a handful of values (NaN, +-inf, both zeros and ``finfo.min`` among them), so
most rows hold long runs of ties; sizes include 1 and odd ones, and both of torch's code
paths (``partial_sort`` when ``k * 64 <= n``, ``nth_element`` + ``sort`` otherwise).
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core.runtime.kernels.tensor import topk
from tests.torch.harness import FnModule, assert_matches, convert, export

FMIN = float(np.finfo(np.float32).min)
POOL = [0.0, -0.0, 1.0, 1.0, 2.0, FMIN, FMIN, FMIN, float("nan"), float("inf"), -float("inf")]


@st.composite
def tied_rows(draw: st.DrawFn, max_n: int = 200) -> tuple[np.ndarray, int, int]:
    """(x, k, axis): x drawn from a few values, k in [0, n] with 0, 1 and n favoured."""
    n = draw(st.sampled_from([1, 2, 3, 5, 17, 47, 64, 65, 129]) | st.integers(1, max_n))
    lead = draw(st.sampled_from([1, 3]))
    pool = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=5))
    picks = draw(st.lists(st.integers(0, len(pool) - 1), min_size=lead * n, max_size=lead * n))
    x = np.asarray([pool[i] for i in picks], np.float32).reshape(lead, n)
    k = draw(st.sampled_from([0, 1, n, max(0, n // 64)]) | st.integers(0, n))
    axis = draw(st.sampled_from([-1, 0]))
    if axis == 0:
        x = np.ascontiguousarray(x.T)
    return x, k, axis


@settings(max_examples=150)
@given(case=tied_rows(), largest=st.booleans(), is_sorted=st.booleans())
def test_kernel_matches_torch_indices_and_values(case: tuple[np.ndarray, int, int],
                                                 largest: bool, is_sorted: bool) -> None:
    x, k, axis = case
    want = torch.topk(torch.from_numpy(x), k, dim=axis, largest=largest, sorted=is_sorted)
    values, indices = topk(x, k=k, axis=axis, largest=largest, sorted=is_sorted)
    np.testing.assert_array_equal(indices, want.indices.numpy())
    np.testing.assert_array_equal(values, want.values.numpy())


@settings(max_examples=60)
@given(n=st.integers(1, 300), distinct=st.integers(1, 4), dtype=st.sampled_from(
    [np.int32, np.int64, np.uint8, np.float16]), largest=st.booleans(), is_sorted=st.booleans(),
    seed=st.integers(0, 2**16), data=st.data())
def test_kernel_matches_torch_for_integer_and_half_ties(n: int, distinct: int, dtype: type,
                                                        largest: bool, is_sorted: bool,
                                                        seed: int, data: st.DataObject) -> None:
    x = np.random.default_rng(seed).integers(0, distinct, (2, n)).astype(dtype)
    k = data.draw(st.sampled_from([1, n]) | st.integers(0, n))
    want = torch.topk(torch.from_numpy(x), k, largest=largest, sorted=is_sorted)
    values, indices = topk(x, k=k, axis=-1, largest=largest, sorted=is_sorted)
    np.testing.assert_array_equal(indices, want.indices.numpy())
    np.testing.assert_array_equal(values, want.values.numpy())


def _adversary_input(n: int, k: int, is_sorted: bool) -> np.ndarray:
    """McIlroy's "killer adversary" against the emulation: values are fixed lazily, each
    comparison of two unfixed elements fixing one as small as possible, which drives
    introselect to its depth limit and onto its heap-select fallback."""
    from coreai_core.runtime.kernels import _select

    unset = n
    value = [unset] * n
    state = {"fixed": 0, "candidate": -1}

    class Lazy:
        def __init__(self, i: int) -> None:
            self.i = i

        def __lt__(self, other: Lazy) -> bool:
            x, y = self.i, other.i
            if value[x] == unset and value[y] == unset:
                z = x if x == state["candidate"] else y
                value[z], state["fixed"] = state["fixed"], state["fixed"] + 1
            if value[x] == unset:
                state["candidate"] = x
            elif value[y] == unset:
                state["candidate"] = y
            return value[x] < value[y]

    row: list = [(Lazy(i), i) for i in range(n)]
    _select._nth_element(row, 0, k - 1, n)
    if is_sorted:
        _select._sort(row, 0, k - 1)
    rest = iter(range(state["fixed"], n))
    return np.asarray([v if v != unset else next(rest) for v in value], np.float32)


def test_adversarial_rows_reach_the_heap_fallback() -> None:
    # introsort's own depth-limit fallback (reached only by inputs adversarial to both stages)
    # calls the same partial sort that the k * 64 <= n path runs in the tests above
    for n, k, is_sorted in [(300, 150, False), (301, 7, True), (1000, 999, True)]:
        x = _adversary_input(n, k, is_sorted)
        for largest in (True, False):
            want = torch.topk(torch.from_numpy(x), k, largest=largest, sorted=is_sorted)
            _, indices = topk(x, k=k, axis=0, largest=largest, sorted=is_sorted)
            np.testing.assert_array_equal(indices, want.indices.numpy())


@settings(max_examples=5)
@given(case=tied_rows(max_n=80), largest=st.booleans(), is_sorted=st.booleans())
def test_converted_topk_matches_torch(case: tuple[np.ndarray, int, int], largest: bool,
                                      is_sorted: bool) -> None:
    x, k, axis = case
    module = FnModule(torch.topk, [torch.from_numpy(x), k],
                      {"dim": axis, "largest": largest, "sorted": is_sorted})
    t = torch.from_numpy(x)
    want = list(module(t))
    got = list(convert(export(module, [t])).run([x]).values())
    assert_matches(want, got, atol=0.0, rtol=0.0, what="topk")
