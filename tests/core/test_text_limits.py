"""Bounded parsing: linear time on hostile text and a total allocation budget (``max_bytes``).

Issue 18, items 10 and 11: ``parse("9" * 30_000 + "x")`` took 11.5 s (regex backtracking that
retried every split of a run of digits), and a 130-byte text allocated 2-4 GiB. Absolute
timings are not asserted except as a loose bound (see ``test_hostile_tokens_scan_in_linear_time``);
``benchmarks/bench_parse.py`` prints the measured growth.
"""

from __future__ import annotations

import contextlib
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coreai_core import ParseError, Program, TensorType, parse
from coreai_core.dialects import coreai
from coreai_core.text import DEFAULT_MAX_BYTES

# One hostile shape per scanner pattern: a long run the pattern may scan, then what breaks it.
N = 200_000
HOSTILE = {
    "number at the top": "9" * N + "x",
    "number attribute": "coreai.program { graph @g(%x: tensor<f32>) { %0 = coreai.neg(%x) "
                        "{a = " + "9" * N + "x} : tensor<f32>\n coreai.output(%0) } }",
    "fraction attribute": "coreai.program { graph @g(%x: tensor<f32>) { %0 = coreai.neg(%x) "
                          "{a = 1." + "9" * N + "e} : tensor<f32>\n coreai.output(%0) } }",
    "exponent attribute": "coreai.program { graph @g(%x: tensor<f32>) { %0 = coreai.neg(%x) "
                          "{a = 1e" + "9" * N + ".} : tensor<f32>\n coreai.output(%0) } }",
    "dense float": "coreai.program { weight @w : tensor<1xf32> = dense<[1." + "9" * N + "x]> }",
    "dense int": "coreai.program { weight @w : tensor<1xi32> = dense<[" + "9" * N + "x]> }",
    "dense parentheses": "coreai.program { weight @w : tensor<1xc64> = dense<[" + "(" * N + "]> }",
    "dense groups": "coreai.program { weight @w : tensor<1xc64> = dense<[(" + "(1)" * N + "]> }",
    "complex element": "coreai.program { weight @w : tensor<1xc64> = dense<[(1, "
                       + "2" * N + "]> }",
    "string": 'coreai.program { graph @"' + "a" * N,
    "string escapes": 'coreai.program { graph @"' + "\\n" * N,
    "comments": "coreai.program {" + "//" * N,
    "whitespace": "coreai.program {" + " \n" * N + "x",
    "identifier": "coreai.program { " + "a." * N + "(",
    "dimensions": "coreai.program { weight @w : tensor<" + "1x" * N + ">",
    "dimension name": "coreai.program { weight @w : tensor<?" + "a" * N + "[1:",
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=list(HOSTILE))
def test_hostile_tokens_scan_in_linear_time(text: str) -> None:
    # 200 kB of each: linear scanning takes milliseconds; the backtracking patterns took
    # minutes to hours here. The bound is a thousand times the linear time, so it does not flake
    # on a loaded machine and still catches any quadratic pattern.
    start = time.perf_counter()
    with pytest.raises(ParseError):
        parse(text)
    assert time.perf_counter() - start < 5.0


CONTEXTS = {
    "top level": "HERE",
    "attribute": "coreai.program { graph @g(%x: tensor<f32>) { %0 = coreai.neg(%x) {a = HERE} "
                 ": tensor<f32>\n coreai.output(%0) } }",
    "dense data": "coreai.program { weight @w : tensor<2xc64> = dense<[HERE]> }",
    "type": "coreai.program { weight @w : tensor<HERE> }",
    "name": 'coreai.program { graph @"HERE" }',
    "location": "coreai.program { graph @g(%x: tensor<f32>) { %0 = coreai.neg(%x) : "
                "tensor<f32> loc(HERE)\n coreai.output(%0) } }",
}


@given(unit=st.text(alphabet='9.eE-+()"\\/[],<>x ?%@a:n', min_size=1, max_size=6),
       context=st.sampled_from(sorted(CONTEXTS)))
def test_repeated_fragments_parse_in_linear_time(unit: str, context: str) -> None:
    """Any short fragment repeated to 100 kB in any context: parsed (or refused) at linear
    speed, with the same thousandfold margin as above."""
    text = CONTEXTS[context].replace("HERE", unit * (100_000 // len(unit)))
    start = time.perf_counter()
    with contextlib.suppress(ParseError):
        parse(text)
    assert time.perf_counter() - start < 5.0


@given(digits=st.integers(1, 5000), tail=st.sampled_from("xe_$Z"),
       prefix=st.sampled_from(["", "-", "+", "1.", ".5", "1e", "1e-"]))
def test_a_bad_number_is_reported_whole(digits: int, tail: str, prefix: str) -> None:
    """The scanner takes a malformed number as one token (one match, no retry per split) and
    reports it whole, with its length, where it starts."""
    token = prefix + "7" * digits + tail
    text = ("coreai.program { graph @g(%x: tensor<2xf32>) {\n%0 = coreai.softmax(%x) {axis = "
            + token + "} : tensor<2xf32>\n coreai.output(%0) } }")
    with pytest.raises(ParseError) as info:
        parse(text)
    assert (info.value.line, info.value.column) == (2, len("%0 = coreai.softmax(%x) {axis = ") + 1)
    assert f"bad number {token[:40]!r}" in info.value.message
    if len(token) > 40:
        assert f"({len(token):,} characters)" in info.value.message


# -- the allocation budget ----------------------------------------------------------------------

def _peak_bytes(fn: object) -> int:
    tracemalloc.start()
    try:
        fn()  # type: ignore[operator]
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_huge_splat_weight_allocates_nothing() -> None:
    text = "coreai.program { weight @w : tensor<268435456xf64> = dense<1.0> }"  # 2 GiB of data
    box: dict[str, Program] = {}
    peak = _peak_bytes(lambda: box.setdefault("p", parse(text)))
    assert peak < 1 << 20
    w = box["p"].weights["w"]
    assert w is not None
    assert w.shape == (268435456,) and w.dtype == np.float64
    assert not w.flags.writeable  # a read-only broadcast view of the one element
    assert w[0] == 1.0 and w[-1] == 1.0 and w[123_456_789] == 1.0
    # printing it in full does not materialize it either
    printed: dict[str, str] = {}
    assert _peak_bytes(lambda: printed.setdefault("t", box["p"].to_text(full=True))) < 1 << 20
    assert "dense<1.0>" in printed["t"]


def test_a_huge_state_is_refused_before_allocating() -> None:
    text = "coreai.program {\n  state @s : tensor<268435456xf64> = dense<1.0>\n}"
    errors: list[ParseError] = []

    def attempt() -> None:
        try:
            parse(text)
        except ParseError as e:
            errors.append(e)

    assert _peak_bytes(attempt) < 1 << 20
    (e,) = errors
    assert (e.line, e.column) == (2, text.splitlines()[1].index("dense") + 1)
    assert "state @s needs 2,147,483,648 bytes" in e.message
    assert f"max_bytes={DEFAULT_MAX_BYTES:,}" in e.message and "parse(text, max_bytes=" in e.message


def _dense_program(arrays: dict[str, np.ndarray], state: dict[str, np.ndarray]) -> str:
    p = Program()
    for name, a in arrays.items():
        p.add_weight(name, a)
    with p.graph("main", inputs={"x": TensorType((), "float32")}, state=state) as g:
        g.outputs({"y": coreai.neg(g["x"])},
                  state={k: g[k] for k in state})
    return p.to_text(full=True)


_ARRAYS = st.lists(
    st.tuples(st.sampled_from(["float32", "float64", "int8", "int64", "bool", "complex64"]),
              st.lists(st.integers(0, 5), min_size=0, max_size=3), st.booleans()),
    min_size=1, max_size=4)


@given(weights=_ARRAYS, states=_ARRAYS)
def test_the_budget_is_the_total_of_the_data_read(weights: list, states: list) -> None:
    """Exactly the bytes the data needs pass; one byte less is refused. Non-splat data and
    small splats count in full, large splats as nothing, states twice (initial + running)."""
    rng = np.random.default_rng(0)

    def make(dtype: str, shape: list[int], splat: bool) -> np.ndarray:
        if splat:
            return np.full(shape, 1, dtype)
        return (rng.integers(-3, 4, size=shape) + 0.5 * (dtype != "bool")).astype(dtype)

    arrays = {f"w{i}": make(*w) for i, w in enumerate(weights)}
    state = {f"s{i}": make(*s) for i, s in enumerate(states)}
    text = _dense_program(arrays, state)

    def cost(a: np.ndarray) -> int:
        if a.size <= 16:
            return a.nbytes
        rows = a.reshape(-1).view(np.uint8).reshape(a.size, -1)
        return 0 if len(np.unique(rows, axis=0)) == 1 else a.nbytes  # a large splat: a view

    need = sum(cost(a) for a in arrays.values()) + sum(cost(a) + a.nbytes for a in state.values())
    parsed = parse(text, max_bytes=need)
    for name, a in arrays.items():
        np.testing.assert_array_equal(parsed.weights[name], a)
    if need:
        with pytest.raises(ParseError, match="over this parse's limit"):
            parse(text, max_bytes=need - 1)


def test_declarations_add_up_and_the_limit_can_be_raised() -> None:
    a = np.arange(100, dtype=np.float64)  # 800 bytes each
    text = _dense_program({"a": a, "b": a + 1}, {})
    with pytest.raises(ParseError, match=r"weight @b needs 800 bytes after 800 bytes of earlier"):
        parse(text, max_bytes=1000)
    np.testing.assert_array_equal(parse(text, max_bytes=1600).weights["b"], a + 1)
    np.testing.assert_array_equal(parse(text, max_bytes=None).weights["b"], a + 1)


def test_constant_attributes_count() -> None:
    text = """coreai.program { graph @main() {
      %0 = coreai.constant() {value = dense<[1.0, 2.0, 3.0]> : tensor<3xf64>} : tensor<3xf64>
      coreai.output(y = %0) } }"""
    with pytest.raises(ParseError, match=r"attribute 'value' of coreai.constant needs 24 bytes"):
        parse(text, max_bytes=23)
    np.testing.assert_array_equal(parse(text, max_bytes=24).run()["y"], [1.0, 2.0, 3.0])


@pytest.mark.parametrize("bad", [-1, 1.5, "1G", True])
def test_max_bytes_must_be_a_count(bad: object) -> None:
    with pytest.raises(TypeError, match="max_bytes must be a non-negative int or None"):
        parse("coreai.program { }", max_bytes=bad)  # type: ignore[arg-type]


def test_splat_views_run_optimize_and_stay_untouched() -> None:
    """The runtime and the optimizer read a large splat (a read-only broadcast view) and
    never write into it; results match numpy on materialized data."""
    text = """coreai.program {
      weight @w : tensor<32x32xf32> = dense<0.5>
      state @s : tensor<32xf32> = dense<1.0>
      graph @main(%x: tensor<4x32xf32>) state(%s: tensor<32xf32>) {
        %0 = coreai.constant() {value = @w} : tensor<32x32xf32>
        %1 = coreai.batch_matmul(%x, %0) : tensor<4x32xf32>
        %2 = coreai.constant() {value = dense<2.0> : tensor<4x32xf32>} : tensor<4x32xf32>
        %3 = coreai.broadcasting_add(%1, %2) : tensor<4x32xf32>
        %4 = coreai.exp(%2) : tensor<4x32xf32>
        %5 = coreai.broadcasting_add(%3, %4) : tensor<4x32xf32>
        %6 = coreai.broadcasting_add(%s, %s) : tensor<32xf32>
        coreai.output(y = %5) state(s = %6)
      }
    }"""
    p = parse(text)
    x = np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32)
    w = np.full((32, 32), 0.5, np.float32)
    want = x @ w + np.float32(2) + np.exp(np.float32(2))
    np.testing.assert_allclose(p.run({"x": x})["y"], want, rtol=1e-6)
    np.testing.assert_array_equal(p.state["s"], np.full(32, 2, np.float32))
    p.optimize()
    np.testing.assert_allclose(p.run({"x": x})["y"], want, rtol=1e-6)
    np.testing.assert_array_equal(p.state["s"], np.full(32, 4, np.float32))
    np.testing.assert_array_equal(p.weights["w"], w)
    np.testing.assert_array_equal(p.initial_state["s"], np.ones(32, np.float32))
    assert parse(p.to_text(full=True)) == p


def test_error_messages_stay_short_for_huge_names() -> None:
    name = "a" * 1_000_000
    text = ("coreai.program { graph @g(%x: tensor<f32>) { %0 = coreai.neg(%" + name
            + ") : tensor<f32>\n coreai.output(%0) } }")
    with pytest.raises(ParseError) as info:
        parse(text)
    assert info.value.message.startswith("undefined value %aaaa")
    assert "1,000,017 characters in all" in info.value.message
    assert len(str(info.value)) < 2000
