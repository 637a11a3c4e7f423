"""A dim named by an expression over other dims' symbols is a relation ``run()`` enforces."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from coreai_core import Dim, Program, RuntimeInputError, TensorType, parse
from coreai_core.dialects import coreai
from coreai_core.runtime._dims import relation_of


def _sum_of(shapes: dict[str, list[object]]) -> Program:
    """The sum of every input (1-d, float32): runs for any sizes, so only checks reject."""
    p = Program()
    with p.graph("main", inputs={k: TensorType(s, "float32") for k, s in shapes.items()}) as g:
        total = coreai.constant(np.float32(0))
        for k in shapes:
            total = coreai.broadcasting_add(total, coreai.reduce_sum(g[k], axes=[0]))
        g.outputs({"s": total})
    return p


def _accepts(p: Program, sizes: dict[str, int]) -> bool:
    try:
        p.run({k: np.ones(n, np.float32) for k, n in sizes.items()})
    except RuntimeInputError:
        return False
    return True


@pytest.mark.parametrize("expr,fn", [
    ("2*n", lambda n: 2 * n), ("n + 1", lambda n: n + 1), ("2*n - 1", lambda n: 2 * n - 1),
    ("(n//2)", lambda n: n // 2), ("Mod(n, 3)", lambda n: n % 3), ("n**2", lambda n: n * n),
    ("Max(1, n - 2)", lambda n: max(1, n - 2)),
])
def test_an_expression_dim_must_equal_its_value(expr: str, fn) -> None:
    p = _sum_of({"x": ["n"], "y": [expr]})
    for n, m in itertools.product(range(0, 7), range(0, 40)):
        assert _accepts(p, {"x": n, "y": m}) == (m == fn(n)), (expr, n, m)


def test_products_of_two_symbols() -> None:
    p = _sum_of({"a": ["r"], "b": ["c"], "flat": ["r*c"]})
    for r, c, n in itertools.product(range(4), range(4), range(12)):
        assert _accepts(p, {"a": r, "b": c, "flat": n}) == (n == r * c)


def test_an_unknown_symbol_is_solved_for_and_checked_against_its_bounds() -> None:
    # n appears only inside the expression: its value is solved from y's size
    p = _sum_of({"y": [Dim("2*n + 1", 3, 21)], "z": [Dim("n", 1, 10)]})
    for m, k in itertools.product(range(0, 25), range(0, 12)):
        n, rest = divmod(m - 1, 2)
        want = rest == 0 and 1 <= k <= 10 and n == k and 3 <= m <= 21
        assert _accepts(p, {"y": m, "z": k}) == want, (m, k)
    only = _sum_of({"y": ["2*n"]})
    assert [m for m in range(10) if _accepts(only, {"y": m})] == [0, 2, 4, 6, 8]
    with pytest.raises(RuntimeInputError, match=r'\?"2\*n" = 5, which 2\*n equals for no '
                                                r"integer n"):
        only.run({"y": np.ones(5, np.float32)})


def test_relations_survive_the_text_form() -> None:
    p = _sum_of({"x": [Dim("n", 1, 8)], "y": [Dim("3*n", 3, 24)]})
    q = parse(str(p))
    assert q == p
    for n, m in itertools.product(range(1, 6), range(0, 18)):
        assert _accepts(q, {"x": n, "y": m}) == (m == 3 * n)


@pytest.mark.parametrize("name", ["n", "batch_size", "?", "s0 s1", "f(n)", "n.x", "'a'",
                                  "__import__('os')", "2", "n ** n"])
def test_names_that_are_no_relation_stay_opaque(name: str) -> None:
    assert relation_of(name) is None
