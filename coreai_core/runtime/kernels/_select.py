"""``topk`` that picks and orders tied elements exactly as PyTorch's CPU kernel does.

PyTorch's CPU ``topk`` (``aten/src/ATen/native/TopKImpl.h``) fills a vector of
``(value, index)`` pairs in index order and, with a comparator that looks at the value only
(NaN counts as the largest value), calls

- ``std::partial_sort(begin, begin + k, end)`` when ``k * 64 <= n``;
- otherwise ``std::nth_element(begin, begin + k - 1, end)`` and, when ``sorted``,
  ``std::sort(begin, begin + k - 1)``;

and returns the first ``k`` pairs. Neither algorithm is stable, so which of several equal
values is picked, and in which order, is whatever the C++ library's algorithms do with that
input. PyTorch's Linux wheels use GCC's libstdc++, whose algorithms are re-implemented here
step for step (introselect with a median-of-three pivot and an unguarded Hoare partition,
heap select, introsort with a final insertion sort over 16-element runs), so the runtime
returns torch's indices bit for bit, also for ``sorted=False``, whose output order is the
partition's order rather than sorted.

Each row needs a Python-level pass (O(n log n) comparisons) only when the answer depends on
that order: ``sorted=False``, or ties among the top ``k`` values or at the ``k``-th place.
Rows without such ties take a vectorized numpy path that gives the same result.
"""

from __future__ import annotations

import numpy as np

# libstdc++'s _S_threshold: introsort leaves runs of at most 16 to the final insertion sort
_RUN = 16

Row = list[tuple[int, int]]  # (rank, index): rank a < rank b iff a must come before b


def _lg(n: int) -> int:
    return n.bit_length() - 1


def _adjust_heap(a: Row, first: int, hole: int, length: int, value: tuple[int, int]) -> None:
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if a[first + child][0] < a[first + child - 1][0]:
            child -= 1
        a[first + hole] = a[first + child]
        hole = child
    if length % 2 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        a[first + hole] = a[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and a[first + parent][0] < value[0]:
        a[first + hole] = a[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[first + hole] = value


def _make_heap(a: Row, first: int, last: int) -> None:
    length = last - first
    if length < 2:
        return
    for parent in range((length - 2) // 2, -1, -1):
        _adjust_heap(a, first, parent, length, a[first + parent])


def _pop_heap(a: Row, first: int, last: int, result: int) -> None:
    value = a[result]
    a[result] = a[first]
    _adjust_heap(a, first, 0, last - first, value)


def _heap_select(a: Row, first: int, middle: int, last: int) -> None:
    _make_heap(a, first, middle)
    for i in range(middle, last):
        if a[i][0] < a[first][0]:
            _pop_heap(a, first, middle, i)


def _partial_sort(a: Row, first: int, middle: int, last: int) -> None:
    _heap_select(a, first, middle, last)
    while middle - first > 1:  # sort_heap
        middle -= 1
        _pop_heap(a, first, middle, middle)


def _median(a: Row, i: int, j: int, k: int) -> int:
    """Position of the median of a[i], a[j], a[k], by libstdc++'s comparison sequence."""
    x, y, z = a[i][0], a[j][0], a[k][0]
    if x < y:
        return j if y < z else (k if x < z else i)
    return i if x < z else (k if y < z else j)


def _partition_pivot(a: Row, first: int, last: int) -> int:
    """Median of (first + 1, middle, last - 1) moved to ``first``, then an unguarded Hoare
    partition of ``[first + 1, last)`` around it; returns the cut."""
    pick = _median(a, first + 1, first + (last - first) // 2, last - 1)
    a[first], a[pick] = a[pick], a[first]
    pivot = a[first][0]
    lo, hi = first + 1, last
    while True:
        while a[lo][0] < pivot:
            lo += 1
        hi -= 1
        while pivot < a[hi][0]:
            hi -= 1
        if lo >= hi:
            return lo
        a[lo], a[hi] = a[hi], a[lo]
        lo += 1


def _linear_insert(a: Row, last: int) -> None:
    value = a[last]
    prev = last - 1
    while value[0] < a[prev][0]:
        a[last] = a[prev]
        last = prev
        prev -= 1
    a[last] = value


def _insertion_sort(a: Row, first: int, last: int) -> None:
    for i in range(first + 1, last):
        if a[i][0] < a[first][0]:
            value = a[i]
            a[first + 1:i + 1] = a[first:i]
            a[first] = value
        else:
            _linear_insert(a, i)


def _introsort_loop(a: Row, first: int, last: int, depth: int) -> None:
    while last - first > _RUN:
        if depth == 0:
            _partial_sort(a, first, last, last)
            return
        depth -= 1
        cut = _partition_pivot(a, first, last)
        _introsort_loop(a, cut, last, depth)
        last = cut


def _sort(a: Row, first: int, last: int) -> None:
    if first == last:
        return
    _introsort_loop(a, first, last, _lg(last - first) * 2)
    if last - first > _RUN:
        _insertion_sort(a, first, first + _RUN)
        for i in range(first + _RUN, last):
            _linear_insert(a, i)
    else:
        _insertion_sort(a, first, last)


def _nth_element(a: Row, first: int, nth: int, last: int) -> None:
    if first == last or nth == last:
        return
    depth = _lg(last - first) * 2
    while last - first > 3:
        if depth == 0:
            _heap_select(a, first, nth + 1, last)
            a[first], a[nth] = a[nth], a[first]
            return
        depth -= 1
        cut = _partition_pivot(a, first, last)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(a, first, last)


def torch_topk_order(ranks: list[int], k: int, sorted: bool) -> list[int]:
    """The indices torch's CPU topk returns for one row, given each element's rank
    (``rank[i] < rank[j]`` iff element ``i`` comes before ``j``; equal ranks are ties)."""
    n = len(ranks)
    a: Row = list(zip(ranks, range(n), strict=True))
    if k == 0:
        return []
    if k * 64 <= n:
        _partial_sort(a, 0, k, n)
    else:
        _nth_element(a, 0, k - 1, n)
        if sorted:
            _sort(a, 0, k - 1)
    return [index for _, index in a[:k]]


def _ranks(x: np.ndarray, largest: bool) -> np.ndarray:
    """Dense ranks along the last axis in the comparator's order: largest (or smallest) first,
    NaN the largest value, equal values (and -0.0 / 0.0) sharing a rank."""
    _, inverse = np.unique(x, return_inverse=True, equal_nan=True)
    inverse = inverse.reshape(x.shape)
    return (inverse.max(initial=0) - inverse) if largest else inverse


def topk_indices(x: np.ndarray, k: int, largest: bool, sorted: bool) -> np.ndarray:
    """int64 indices of torch's CPU ``topk(x, k, dim=-1, largest, sorted)``."""
    ranks = _ranks(x, largest).reshape(-1, x.shape[-1])
    n = ranks.shape[1]
    out = np.empty((ranks.shape[0], k), np.int64)
    if k == 0 or ranks.shape[0] == 0:
        return out.reshape(*x.shape[:-1], k)
    order = np.argsort(ranks, axis=1, kind="stable")
    out[:] = order[:, :k]
    if sorted or k * 64 <= n:
        # a sorted result is unique when the top k ranks are distinct and the k-th is not
        # shared with the (k+1)-th: those rows need no emulation
        top = np.take_along_axis(ranks, order[:, :min(k + 1, n)], axis=1)
        tied = np.any(top[:, 1:] == top[:, :-1], axis=1)
        rows = np.flatnonzero(tied)
    else:
        rows = np.arange(ranks.shape[0])
    for r in rows:
        out[r] = torch_topk_order(ranks[r].tolist(), k, sorted)
    return out.reshape(*x.shape[:-1], k)
