"""Random ops: distributions of the kernels, seeding of runs, and the optimizer leaving them be.

Distribution checks use tests/random_stats.py (5 standard errors); every run is seeded, so the
tests are deterministic. Values are never compared with torch's generator.
"""

from __future__ import annotations

import math
import threading

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import Dim, Program, TensorType, parse
from coreai_core.dialects import coreai
from coreai_core.errors import TypeRuleError
from coreai_core.optimizer import ConstantFoldingPass, CSEPass, DCEPass
from coreai_core.runtime import KernelError, Runtime, current_generator, evaluate_op, seeded
from tests.random_stats import (
    check_cdf,
    check_frequencies,
    check_mean,
    check_normal,
    check_uniform,
)

FLOATS = ("float32", "float64", "float16", "bfloat16")
GRID_BITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}
N = 20000


def program_of(build, **inputs) -> Program:
    p = Program()
    with p.graph("main", inputs={k: TensorType(*v) for k, v in inputs.items()}) as g:
        out = build(*(g[k] for k in inputs))
        g.outputs({f"y{i}": v for i, v in enumerate(out if isinstance(out, tuple) else (out,))})
    return p


def draw(build, seed: int = 0, **feeds) -> list[np.ndarray]:
    inputs = {k: (a.shape, str(a.dtype)) for k, a in feeds.items()}
    return list(program_of(build, **inputs).run(feeds, seed=seed).values())


# -- distributions ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_uniform_unit_interval_is_exact_on_the_dtype_grid(dtype):
    (u,) = draw(lambda: coreai.random_uniform([N], dtype=dtype), seed=1)
    assert u.shape == (N,) and u.dtype == np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16"
                                                   else dtype)
    scaled = u.astype(np.float64) * 2.0 ** GRID_BITS[dtype]
    assert np.array_equal(scaled, np.floor(scaled)), "values off the k * 2**-m grid"
    check_uniform(u, 0.0, 1.0, f"uniform {dtype}")


@settings(max_examples=10)
@given(dtype=st.sampled_from(FLOATS), low=st.floats(-1e3, 1e3),
       width=st.sampled_from([0.0, 1e-3, 0.5, 3.0, 2e3]), seed=st.integers(0, 2**32 - 1))
def test_uniform_range_stays_below_high(dtype, low, width, seed):
    high = low + width
    (u,) = draw(lambda: coreai.random_uniform([2000], low=low, high=high, dtype=dtype),
                seed=seed)
    lo = float(np.asarray(low, u.dtype))  # low rounded to the dtype
    got = u.astype(np.float64)
    if width == 0.0 or np.all(got == lo):  # the second: no dtype value in [low, high)
        assert np.all(got == lo)
        grid = np.arange(-2**12, 2**12) * 2.0 ** -8  # a superset of the dtype's nearby values
        assert width == 0.0 or not np.any((np.asarray(grid, u.dtype).astype(np.float64) >= low)
                                            & (np.asarray(grid, u.dtype) < high))
    else:
        assert got.min() >= min(lo, low) and got.max() < high, (got.min(), got.max(), low, high)


def test_uniform_moments_on_an_interval():
    (u,) = draw(lambda: coreai.random_uniform([N], low=-2.0, high=3.0, dtype="float64"), seed=2)
    check_uniform(u, -2.0, 3.0, "uniform[-2, 3)")


@pytest.mark.parametrize("dtype", FLOATS)
def test_normal_moments(dtype):
    (z,) = draw(lambda: coreai.random_normal([N], mean=1.5, std=2.0, dtype=dtype), seed=3)
    assert z.shape == (N,) and str(z.dtype) == dtype
    # bfloat16 rounds each value by up to 2**-9 relative: far below the 5-SE tolerance here
    check_normal(z, 1.5, 2.0, f"normal {dtype}")


def test_normal_with_zero_std_is_the_mean():
    (z,) = draw(lambda: coreai.random_normal([7], mean=-0.25, std=0.0, dtype="float32"))
    assert np.all(z == np.float32(-0.25))


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8", "float32", "float16"])
def test_integers_range_and_frequencies(dtype):
    low, high = (0, 6) if dtype == "uint8" else (-3, 3)
    (k,) = draw(lambda: coreai.random_integers([N], low=low, high=high, dtype=dtype), seed=4)
    assert k.dtype == np.dtype(dtype) and k.shape == (N,)
    assert k.min() >= low and k.max() < high
    check_frequencies(k.astype(np.int64) - low, [1 / 6] * 6, f"integers {dtype}")


def test_integers_cover_the_whole_int64_range():
    info = np.iinfo(np.int64)
    (k,) = draw(lambda: coreai.random_integers([N], low=int(info.min), high=int(info.max)),
                seed=5)
    check_cdf(k.astype(np.float64), lambda t: (t - info.min) / (2.0 ** 64), [0.0], "int64 range")


def test_permutation_is_a_uniform_permutation():
    rows = [draw(lambda: coreai.random_permutation(4), seed=s)[0] for s in range(2000)]
    for r in rows[:50]:
        assert sorted(r.tolist()) == [0, 1, 2, 3]
    firsts = np.array([r[0] for r in rows])
    check_frequencies(firsts, [0.25] * 4, "permutation[0]")
    (big,) = draw(lambda: coreai.random_permutation(47, dtype="float32"), seed=6)
    assert big.dtype == np.float32 and sorted(big.tolist()) == list(range(47))
    (empty,) = draw(lambda: coreai.random_permutation(0))
    assert empty.shape == (0,)


def test_bernoulli_frequencies_and_edges():
    p = np.array([0.0, 0.1, 0.5, 0.9, 1.0], np.float32)
    feeds = {"p": np.broadcast_to(p, (4000, 5)).copy()}
    (b,) = draw(lambda x: coreai.random_bernoulli(x), seed=7, **feeds)
    assert b.dtype == np.bool_ and b.shape == (4000, 5)
    assert not b[:, 0].any() and b[:, 4].all()
    for j in (1, 2, 3):
        check_mean(b[:, j], float(p[j]), float(p[j] * (1 - p[j])), f"bernoulli({p[j]})")


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan])
def test_bernoulli_rejects_probabilities_outside_the_unit_interval(bad):
    with pytest.raises(KernelError, match=r"probabilities in \[0, 1\]"):
        draw(lambda x: coreai.random_bernoulli(x), p=np.array([0.5, bad], np.float32))


def test_multinomial_with_replacement_follows_the_weights():
    w = np.array([[1.0, 0.0, 3.0, 4.0], [0.0, 0.0, 5.0, 0.0]], np.float32)
    (idx,) = draw(lambda x: coreai.random_multinomial(x, num_samples=N // 2, replacement=True),
                  seed=8, w=w)
    assert idx.shape == (2, N // 2) and idx.dtype == np.int64
    check_frequencies(idx[0], [1 / 8, 0.0, 3 / 8, 4 / 8], "multinomial row 0")
    assert np.all(idx[1] == 2)


def test_multinomial_without_replacement_draws_distinct_categories_in_order():
    w = np.broadcast_to(np.array([1.0, 2.0, 0.0, 7.0], np.float64), (3000, 4)).copy()
    (idx,) = draw(lambda x: coreai.random_multinomial(x, num_samples=3), seed=9, w=w)
    assert all(len(set(r)) == 3 and 2 not in r for r in idx.tolist())
    check_frequencies(idx[:, 0], [0.1, 0.2, 0.0, 0.7], "first draw")
    # the second draw excludes the first: P(second = 1) = P(0 then 1) + P(3 then 1)
    second = 0.1 * 2 / 9 + 0.7 * 2 / 3
    check_frequencies((idx[:, 1] == 1).astype(np.int64), [1 - second, second], "second draw")


def test_multinomial_errors_speak_to_the_user():
    with pytest.raises(KernelError, match="fewer than the 2 samples"):
        draw(lambda x: coreai.random_multinomial(x, num_samples=2),
             w=np.array([0.0, 1.0, 0.0], np.float32))
    with pytest.raises(KernelError, match="sum to 0"):
        draw(lambda x: coreai.random_multinomial(x, num_samples=1, replacement=True),
             w=np.zeros((2, 3), np.float32))
    with pytest.raises(KernelError, match="negative, inf or NaN"):
        draw(lambda x: coreai.random_multinomial(x, num_samples=1, replacement=True),
             w=np.array([1.0, -1.0], np.float32))
    with pytest.raises(TypeRuleError, match="without replacement from 3"):
        program_of(lambda x: coreai.random_multinomial(x, num_samples=4), w=((3,), "float32"))


def test_type_rules_reject_bad_attributes():
    cases = [
        (lambda: coreai.random_uniform([2], dtype="int32"), "must be a float type"),
        (lambda: coreai.random_uniform([2], low=1.0, high=0.0), "low <= high"),
        (lambda: coreai.random_normal([2], std=-1.0), "std >= 0"),
        (lambda: coreai.random_integers([2], low=0, high=300, dtype="uint8"), "does not fit"),
        (lambda: coreai.random_integers([2], low=3, high=3), "low < high"),
        (lambda: coreai.random_permutation(-1), "n >= 0"),
        (lambda: coreai.random_integers([2], low=0, high=2, dtype="bool"), "integers or floats"),
    ]
    for build, message in cases:
        with pytest.raises(TypeRuleError, match=message):
            program_of(build)


@pytest.mark.parametrize("build", [
    lambda: coreai.random_uniform([], low=-1.0, high=1.0, dtype="float16"),
    lambda: coreai.random_normal([], dtype="bfloat16"),
    lambda: coreai.random_integers([], low=0, high=3, dtype="int8"),
    lambda: coreai.random_bernoulli(coreai.constant(0.5, dtype="float32")),
    lambda: coreai.random_uniform([0, 3]),
    lambda: coreai.random_multinomial(coreai.constant([1.0, 2.0]), num_samples=0),
])
def test_zero_d_and_empty_results(build):
    (y,) = draw(build)
    t = program_of(build).graphs["main"].output_values["y0"].type
    assert y.shape == t.shape and y.dtype == t.element_type.numpy


def test_dynamic_shapes_are_drawn_at_run_time():
    p = program_of(lambda x: coreai.random_normal(coreai.get_shape(x), dtype="float32"),
                   x=((Dim("n"), 3), "float32"))
    for n in (1, 47):
        (z,) = p.run({"x": np.zeros((n, 3), np.float32)}, seed=0).values()
        assert z.shape == (n, 3)


def _runtime_counts(bounds, n, samples):
    """random_integers / random_permutation / random_multinomial with run-time operands."""
    w = coreai.broadcast_to(coreai.constant(np.array([1.0, 2.0, 0.0, 5.0, 2.0])),
                            [3, 5])
    return (coreai.random_integers([N], low=-100, high=100, bounds=bounds),
            coreai.random_permutation(-1, length=n, dtype="int32"),
            coreai.random_multinomial(w, num_samples=-1, samples=samples))


@settings(max_examples=10, deadline=None)
@given(low=st.integers(-100, 95), width=st.sampled_from([1, 2, 5, 99]),
       n=st.sampled_from([0, 1, 2, 47]), samples=st.integers(0, 4))
def test_run_time_bounds_counts_and_samples(low, width, n, samples):
    """The operands replace the attributes at run time: the range, permutation length and
    sample count follow the fed values (types are dynamic), with the same distributions."""
    high = min(low + width, 100)
    p = program_of(_runtime_counts, b=((2,), "int64"), n=((), "int64"), s=((), "int64"))
    outs = p.graphs["main"].output_values
    assert all(isinstance(outs[f"y{i}"].type.shape[-1], Dim) for i in (1, 2))
    feeds = {"b": np.array([low, high]), "n": np.array(n), "s": np.array(samples)}
    k, perm, idx = p.run(feeds, seed=low & 0xFF).values()
    assert k.shape == (N,) and k.min() >= low and k.max() < high
    if high - low > 1:
        check_mean(k, (low + high - 1) / 2, ((high - low) ** 2 - 1) / 12, "run-time bounds")
    assert perm.dtype == np.int32 and sorted(perm.tolist()) == list(range(n))
    assert idx.shape == (3, samples) and idx.dtype == np.int64
    assert all(len(set(r)) == samples and 2 not in r for r in idx.tolist())
    again = parse(str(p)).run(feeds, seed=low & 0xFF)
    assert all(np.array_equal(a, b) for a, b in zip(again.values(), (k, perm, idx)))


def test_run_time_operands_are_checked():
    p = program_of(_runtime_counts, b=((2,), "int64"), n=((), "int64"), s=((), "int64"))
    ok = {"b": np.array([0, 3]), "n": np.array(2), "s": np.array(1)}
    for change, message in [({"b": np.array([-101, 0])}, "-100 <= low < high <= 100"),
                            ({"b": np.array([3, 3])}, "low < high"),
                            ({"n": np.array(-1)}, "length must be >= 0"),
                            ({"s": np.array(5)}, "fewer than the 5 samples")]:
        with pytest.raises(KernelError, match=message):
            p.run({**ok, **change}, seed=0)
    for build, message in [
            (lambda: coreai.random_permutation(3, length=coreai.constant(3)), "n=-1"),
            (lambda: coreai.random_multinomial(coreai.constant([1.0]), num_samples=1,
                                               samples=coreai.constant(1)), "num_samples=-1"),
            (lambda: coreai.random_integers([2], low=0, high=3,
                                            bounds=coreai.constant([0, 1, 2])), "2 elements")]:
        with pytest.raises(TypeRuleError, match=message):
            program_of(build)


# -- seeding ------------------------------------------------------------------------------------

def _mixed(x):
    shape = coreai.get_shape(x)
    return (coreai.random_uniform(shape, dtype="float32"), coreai.random_normal(shape),
            coreai.random_integers([5], low=0, high=100), coreai.random_permutation(9),
            coreai.random_bernoulli(coreai.sigmoid(x)),
            coreai.random_multinomial(coreai.abs_(x), num_samples=2, replacement=True))


def test_same_seed_same_numbers_different_seeds_different_streams():
    p = program_of(_mixed, x=((6, 5), "float32"))
    x = {"x": np.linspace(-2, 2, 30, dtype=np.float32).reshape(6, 5)}
    a, b, c = p.run(x, seed=11), p.run(x, seed=11), p.run(x, seed=12)
    for k in a:
        assert np.array_equal(a[k], b[k]), k
    assert not np.array_equal(a["y0"], c["y0"]) and not np.array_equal(a["y1"], c["y1"])
    # a text round trip is the same program: it draws the same numbers
    again = parse(str(p)).run(x, seed=11)
    for k in a:
        assert np.array_equal(a[k], again[k]), k


def test_no_seed_draws_fresh_entropy_every_run():
    p = program_of(lambda: coreai.random_uniform([64], dtype="float64"))
    first, second = p.run()["y0"], p.run()["y0"]
    assert not np.array_equal(first, second)


def test_a_generator_as_seed_continues_its_stream():
    p = program_of(lambda: coreai.random_uniform([8], dtype="float64"))
    gen = np.random.default_rng(3)
    one, two = p.run(seed=gen)["y0"], p.run(seed=gen)["y0"]
    assert not np.array_equal(one, two)
    gen = np.random.default_rng(3)
    assert np.array_equal(p.run(seed=gen)["y0"], one)


@pytest.mark.parametrize("seed", [-1, 1.5, "7", True])
def test_bad_seeds_are_rejected(seed):
    p = program_of(lambda: coreai.random_uniform([2]))
    with pytest.raises((TypeError, ValueError), match="seed must be"):
        p.run(seed=seed)


def test_runtime_run_and_run_collect_take_the_seed():
    p = program_of(_mixed, x=((2, 3), "float32"))
    x = {"x": np.ones((2, 3), np.float32)}
    rt = Runtime()
    out, record = rt.run_collect(p, x, seed=5)
    assert all(np.array_equal(out[k], v) for k, v in rt.run(p, x, seed=5).items())
    assert all(np.array_equal(out[k], v) for k, v in p.run(x, seed=5).items())
    assert len(record) == len(p.graphs["main"].ops)


def test_concurrent_runs_keep_their_own_streams():
    p = program_of(lambda: coreai.random_normal([2000], dtype="float64"))
    expected = {s: p.run(seed=s)["y0"] for s in range(4)}
    got: dict[int, list[np.ndarray]] = {s: [] for s in range(4)}

    def work(s: int) -> None:
        for _ in range(5):
            got[s].append(p.run(seed=s)["y0"])

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in range(4):
        assert all(np.array_equal(a, expected[s]) for a in got[s])


def test_the_generator_is_scoped_to_the_run():
    with seeded(1) as gen:
        assert current_generator() is gen
        with seeded(2) as inner:
            assert current_generator() is inner
        assert current_generator() is gen
    assert current_generator() is not gen  # outside any run: a fresh generator
    assert current_generator() is not current_generator()
    p = program_of(lambda: coreai.random_uniform([8], dtype="float64"))
    with seeded(5):  # an unseeded run inside a seeded block draws from the block's stream
        inside = p.run()["y0"]
    assert np.array_equal(inside, p.run(seed=5)["y0"])


def test_ops_in_a_loop_body_draw_fresh_numbers_each_iteration():
    def build(i, acc):
        def body(k, a):  # a[k] = a fresh uniform
            u = coreai.random_uniform([1], low=1.0, high=2.0, dtype="float64")
            at = coreai.expand_dims(k, [0])
            return (coreai.broadcasting_add(k, 1),
                    coreai.slice_update(a, u, at, coreai.broadcasting_add(at, 1), axes=[0],
                                        strides=[1]))
        return coreai.while_([i, acc], lambda k, a: coreai.broadcasting_less(k, 5), body)[1]

    p = program_of(build, i=((), "int64"), acc=((5,), "float64"))
    (vals,) = p.run({"i": np.int64(0), "acc": np.zeros((5,), np.float64)}, seed=0).values()
    assert np.all(vals >= 1.0) and len(set(vals.tolist())) == 5


def test_a_saved_program_draws_the_same_numbers(tmp_path):
    from coreai_core import load

    p = program_of(_mixed, x=((4, 3), "float32"))
    x = {"x": np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)}
    p.save(tmp_path / "random.coreai")
    before, after = p.run(x, seed=3), load(tmp_path / "random.coreai").run(x, seed=3)
    for k in before:
        assert np.array_equal(before[k], after[k]), k


def test_evaluate_op_on_a_random_op_draws_from_fresh_entropy():
    p = program_of(lambda: coreai.random_uniform([16], dtype="float64"))
    op = p.graphs["main"].ops[-1]
    (a,), (b,) = evaluate_op(op, [np.array([16])]), evaluate_op(op, [np.array([16])])
    assert a.shape == (16,) and not np.array_equal(a, b)


# -- the optimizer ------------------------------------------------------------------------------

def _names(p: Program) -> list[str]:
    return [op.name for op in p.graphs["main"].ops]


def test_cse_never_merges_random_ops():
    p = program_of(lambda: (coreai.random_uniform([3]), coreai.random_uniform([3]),
                            coreai.random_bernoulli(coreai.constant([0.5, 0.5], dtype="float32")),
                            coreai.random_bernoulli(coreai.constant([0.5, 0.5], dtype="float32"))))
    p.optimize([CSEPass()])
    assert _names(p).count("coreai.random_uniform") == 2
    assert _names(p).count("coreai.random_bernoulli") == 2
    out = p.run(seed=0)
    assert not np.array_equal(out["y0"], out["y1"])


def test_constant_folding_never_folds_random_ops():
    p = program_of(lambda: (coreai.random_bernoulli(coreai.constant([0.5], dtype="float32")),
                            coreai.random_integers([4], low=0, high=10),
                            coreai.random_multinomial(coreai.constant([1.0, 2.0]), num_samples=1)))
    report = p.optimize()
    names = _names(p)
    assert {"coreai.random_bernoulli", "coreai.random_integers",
            "coreai.random_multinomial"} <= set(names), report
    runs = [p.run()["y1"] for _ in range(3)]
    assert any(not np.array_equal(runs[0], r) for r in runs[1:])


def test_dead_random_ops_are_removed():
    def build(x):
        coreai.random_normal([1000])  # nobody reads it
        return coreai.neg(x)

    p = program_of(build, x=((2,), "float32"))
    p.optimize([DCEPass()])
    assert "coreai.random_normal" not in _names(p)


def test_ops_whose_regions_or_callees_draw_are_not_merged_or_folded():
    def branch(a):
        return coreai.broadcasting_add(a, coreai.random_uniform([2], dtype="float32"))

    def build(pred, x):
        one = coreai.if_(pred, [x], branch, branch)[0]
        two = coreai.if_(pred, [x], branch, branch)[0]
        return one, two, coreai.invoke([x], callee="noise")[0], coreai.invoke([x],
                                                                             callee="noise")[0]

    p = Program()
    with p.graph("noise", inputs={"a": TensorType((2,), "float32")}) as g:
        g.outputs({"b": branch(g["a"])})
    with p.graph("main", inputs={"pred": TensorType((), "bool"),
                                 "x": TensorType((2,), "float32")}) as g:
        outs = build(g["pred"], g["x"])
        g.outputs({f"y{i}": v for i, v in enumerate(outs)})
    p.optimize([CSEPass(), ConstantFoldingPass()])
    assert _names(p).count("coreai.if") == 2 and _names(p).count("coreai.invoke") == 2
    out = p.run({"pred": np.bool_(True), "x": np.zeros(2, np.float32)}, seed=0)
    assert not np.array_equal(out["y0"], out["y1"])
    assert not np.array_equal(out["y2"], out["y3"])


def test_deterministic_invokes_and_ifs_are_still_merged():
    p = Program()
    with p.graph("twice", inputs={"a": TensorType((2,), "float32")}) as g:
        g.outputs({"b": coreai.broadcasting_mul(g["a"], 2.0)})
    with p.graph("main", inputs={"x": TensorType((2,), "float32")}) as g:
        one = coreai.invoke([g["x"]], callee="twice")[0]
        two = coreai.invoke([g["x"]], callee="twice")[0]
        g.outputs({"y0": one, "y1": two})
    p.optimize([CSEPass()])
    assert _names(p).count("coreai.invoke") == 1


def test_optimize_keeps_the_stream_of_a_program_without_dead_random_ops():
    p = program_of(_mixed, x=((3, 4), "float32"))
    x = {"x": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)}
    before = p.run(x, seed=21)
    p.optimize()
    after = p.run(x, seed=21)
    for k in before:
        assert np.array_equal(before[k], after[k]), k
