"""Random lowerings on large samples: each distribution, exported, converted and run seeded.

The op database checks every random lowering on small hypothesis samples; here each one
draws 20000 values so the moment and CDF checks (tests/random_stats.py, 5 standard errors)
have power. Values are never compared with torch's generator.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import Program
from coreai_core.runtime import KernelError
from tests.random_stats import (
    check_cdf,
    check_frequencies,
    check_mean,
    check_normal,
    check_uniform,
    check_variance,
)
from tests.torch.harness import FnModule, convert, export, to_numpy

N = 20000
HALF_AND_FULL = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def converted(fn: Callable[..., Any], *inputs: torch.Tensor, dynamic: Any = None) -> Program:
    return convert(export(FnModule(fn, inputs, {}), inputs, dynamic_shapes=dynamic))


def sample(fn: Callable[..., Any], *inputs: torch.Tensor, seed: int = 0) -> list[np.ndarray]:
    program = converted(fn, *inputs)
    return list(program.run([to_numpy(t) for t in inputs], seed=seed).values())


def f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


@pytest.mark.parametrize("dtype", HALF_AND_FULL)
def test_rand_and_randn(dtype):
    u, z = sample(lambda: (torch.rand(N, dtype=dtype), torch.randn(N, dtype=dtype)))
    assert u.dtype == to_numpy(torch.zeros(1, dtype=dtype)).dtype
    check_uniform(u, 0.0, 1.0, f"rand {dtype}")
    check_normal(z, 0.0, 1.0, f"randn {dtype}")


def test_rand_like_and_randn_like_follow_the_input():
    x = torch.zeros(100, 200, dtype=torch.float16)
    u, z = sample(lambda t: (torch.rand_like(t), torch.randn_like(t, dtype=torch.float64)), x)
    assert u.shape == (100, 200) and u.dtype == np.float16 and z.dtype == np.float64
    check_uniform(u, 0.0, 1.0, "rand_like")
    check_normal(z, 0.0, 1.0, "randn_like")


@pytest.mark.parametrize(("low", "high", "dtype"), [
    (0, 10, torch.int64), (-3, 4, torch.int8), (0, 256, torch.uint8), (5, 9, torch.float32),
    (0, 2, torch.bool)])
def test_randint(low, high, dtype):
    (k,) = sample(lambda: torch.randint(low, high, (N,), dtype=dtype))
    assert k.dtype == to_numpy(torch.zeros(1, dtype=dtype)).dtype
    values = f64(k).astype(np.int64)
    if dtype == torch.bool:
        check_frequencies(values, [0.5, 0.5], "randint bool")
        return
    assert values.min() >= low and values.max() < high
    n = high - low
    if n <= 16:
        check_frequencies(values - low, [1 / n] * n, f"randint {dtype}")
    check_mean(values, (low + high - 1) / 2, (n * n - 1) / 12, f"randint {dtype}")


def test_randint_like_and_randperm():
    x = torch.zeros(N, dtype=torch.int32)
    k, perm = sample(lambda t: (torch.randint_like(t, 3, 6), torch.randperm(47)), x)
    assert k.dtype == np.int32
    check_frequencies(k - 3, [1 / 3] * 3, "randint_like")
    assert sorted(perm.tolist()) == list(range(47))
    program = converted(lambda: torch.randperm(5))
    firsts = [int(program.run([], seed=s)["randperm"][0]) for s in range(2000)]
    check_frequencies(np.array(firsts), [0.2] * 5, "randperm first element")


def test_bernoulli_forms():
    p = torch.linspace(0, 1, 11).repeat(2000, 1)
    b, bp, bt = sample(lambda q: (torch.bernoulli(q), torch.bernoulli(q, 0.3),
                                  q.clone().bernoulli_(q[0])), p)
    for name, got, prob in (("bernoulli", b, to_numpy(p)), ("bernoulli.p", bp, 0.3),
                            ("bernoulli.Tensor", bt, to_numpy(p))):
        prob = np.broadcast_to(f64(prob), got.shape)
        assert got.dtype == np.float32 and set(np.unique(got)) <= {0.0, 1.0}
        for j in range(11):
            pj = float(prob[0, j])
            check_mean(got[:, j], pj, pj * (1 - pj), f"{name} column {j}")


def test_normal_overloads():
    mean = torch.linspace(-2, 2, 10, dtype=torch.float64).repeat(2000, 1)
    std = torch.linspace(0.5, 3, 10, dtype=torch.float64).repeat(2000, 1)
    tf, ft, tt, ff, fn = sample(
        lambda m, s: (torch.normal(m, 2.0), torch.normal(1.0, s), torch.normal(m, s),
                      torch.normal(3.0, 0.5, (N,)), m.clone().normal_(-1.0, 4.0)), mean, std)
    m, s = to_numpy(mean), to_numpy(std)
    for name, got, mu, sigma in (("Tensor_float", tf, m, 2.0), ("float_Tensor", ft, 1.0, s),
                                 ("Tensor_Tensor", tt, m, s), ("float_float", ff, 3.0, 0.5),
                                 ("normal_functional", fn, -1.0, 4.0)):
        z = (f64(got) - mu) / sigma
        check_normal(z, 0.0, 1.0, f"normal.{name}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_uniform_exponential_geometric_cauchy_log_normal(dtype):
    x = torch.zeros(N, dtype=dtype)
    uni, exp, geo, cau, logn = sample(
        lambda t: (t.clone().uniform_(-2, 3), t.clone().exponential_(2.0),
                   t.clone().geometric_(0.3), t.clone().cauchy_(1.0, 0.5),
                   t.clone().log_normal_(0.5, 0.75)), x)
    for got in (uni, exp, geo, cau, logn):
        assert got.dtype == to_numpy(x).dtype and got.shape == (N,)
    check_uniform(uni, -2.0, 3.0, "uniform_")
    e = f64(exp)
    assert e.min() >= 0
    check_mean(e, 0.5, 0.25, "exponential mean")
    check_variance(e, 0.25, 9 / 16, "exponential variance")
    check_cdf(e, lambda t: 1 - math.exp(-2 * t), (0.1, 0.5, 1.0, 2.0), "exponential")
    g = f64(geo)
    assert g.min() >= 1 and np.array_equal(g, np.round(g))
    check_mean(g, 1 / 0.3, 0.7 / 0.09, "geometric")
    check_cdf(g, lambda t: 1 - 0.7 ** math.floor(t), (1, 2, 3, 5, 10), "geometric")
    check_cdf(cau, lambda t: 0.5 + math.atan((t - 1.0) / 0.5) / math.pi,
              (-1.0, 0.5, 1.0, 1.5, 3.0), "cauchy")
    assert f64(logn).min() > 0
    check_normal(np.log(f64(logn)), 0.5, 0.75, "log(log_normal)")


def test_multinomial():
    w = torch.tensor([[1.0, 0.0, 3.0, 4.0], [2.0, 2.0, 2.0, 2.0]])
    rep, norep = sample(lambda t: (torch.multinomial(t, N // 4, replacement=True),
                                   torch.multinomial(t.repeat(2000, 1), 3)), w)
    assert rep.shape == (2, N // 4) and rep.dtype == np.int64
    check_frequencies(rep[0], [1 / 8, 0.0, 3 / 8, 4 / 8], "multinomial row 0")
    check_frequencies(rep[1], [0.25] * 4, "multinomial row 1")
    rows = norep.reshape(2000, 2, 3)[:, 0]  # the rows drawn from w[0]
    assert all(len(set(r)) == 3 and 1 not in r for r in rows.tolist())
    check_frequencies(rows[:, 0], [1 / 8, 0.0, 3 / 8, 4 / 8], "first draw without replacement")


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_in_training_mode(p):
    x = torch.linspace(-3, 3, N)
    out, keep = sample(lambda t: torch.ops.aten.native_dropout(t, p, True), x)
    assert keep.dtype == np.bool_
    check_mean(keep, 1 - p, p * (1 - p), "keep rate")
    xs = to_numpy(x)
    np.testing.assert_array_equal(out[keep], (xs * np.float32(1 / (1 - p)))[keep])
    assert np.all(out[~keep] == 0)


def test_dropout_module_in_a_training_model():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.25)).train()
    x = torch.randn(N // 8, 8)
    program = convert(export(model, [x]))
    (y,) = program.run([to_numpy(x)], seed=3).values()
    with torch.no_grad():
        dense = model[0](x).numpy()
    zero = y == 0
    check_mean(zero, 0.25, 0.25 * 0.75, "dropout rate")
    np.testing.assert_allclose(y[~zero], dense[~zero] / 0.75, rtol=1e-5, atol=1e-6)


def test_feature_and_alpha_dropout_in_training_mode():
    x = torch.rand(2, 4000, 3, 3) + 1.0  # positive: a zero in the output means dropped
    channel, alpha = sample(lambda t: (F.dropout2d(t, 0.3, training=True),
                                       F.alpha_dropout(t, 0.2, training=True)), x)
    dropped = np.all(channel == 0, axis=(2, 3))
    assert np.all(dropped | np.all(channel != 0, axis=(2, 3)))  # whole channels, or none
    check_mean(dropped, 0.3, 0.21, "dropout2d channel rate")
    xs = to_numpy(x)
    np.testing.assert_allclose(channel[~dropped], (xs / 0.7)[~dropped], rtol=1e-6)
    # alpha dropout (torch's formula): kept x -> a * x + b, dropped -> a * alpha' + b
    p, alpha_p = 0.2, -1.7580993408473766
    a = ((1 - p) * (1 + p * alpha_p ** 2)) ** -0.5
    b = -a * alpha_p * p
    dropped_value = a * alpha_p + b
    is_dropped = np.isclose(alpha, dropped_value, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(alpha[~is_dropped], (a * xs + b)[~is_dropped], rtol=1e-5)
    check_mean(is_dropped, p, p * (1 - p), "alpha dropout rate")


def test_rrelu_in_training_mode():
    x = torch.linspace(-4, 4, N)
    (out,) = sample(lambda t: F.rrelu(t, 0.1, 0.4, training=True), x)
    xs = to_numpy(x)
    neg = xs < 0
    np.testing.assert_array_equal(out[xs >= 0], xs[xs >= 0])
    slopes = f64(out[neg]) / f64(xs[neg])
    check_uniform(slopes, 0.1, 0.4 + 1e-6, "rrelu slopes")  # float32 rounding of x * r


def test_attention_dropout_rate_and_scale():
    q, k = torch.randn(4, 47, 6), torch.randn(4, 6, 6)
    v = torch.eye(6).expand(4, 6, 6)
    (out,) = sample(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, dropout_p=0.4),
                    q, k, v)
    weights = F.scaled_dot_product_attention(q, k, v).numpy()
    kept = out != 0
    np.testing.assert_allclose(out[kept], weights[kept] / 0.6, rtol=1e-5)
    check_mean(~kept, 0.4, 0.24, "attention dropout rate")


def test_same_seed_reproduces_and_optimize_keeps_independent_draws():
    program = converted(lambda: (torch.rand(1000), torch.rand(1000), torch.randn(3, 5) * 2))
    a, b = program.run([], seed=9), program.run([], seed=9)
    for key in a:
        assert np.array_equal(a[key], b[key])
    assert not np.array_equal(a["rand"], a["rand_1"])  # two calls: two independent draws
    assert not np.array_equal(a["rand"], program.run([], seed=10)["rand"])
    program.optimize()
    c = program.run([], seed=9)
    assert not np.array_equal(c["rand"], c["rand_1"])  # CSE did not merge them
    for key in a:
        assert np.array_equal(a[key], c[key])


def test_dynamic_shapes():
    x = torch.zeros(5, 3)
    dim = torch.export.Dim("n", min=2, max=64)
    program = converted(lambda t: (torch.rand_like(t), torch.randn(t.shape[0], 2),
                                   torch.nn.functional.dropout(t + 1, 0.5, training=True)),
                        x, dynamic=(({0: dim},),))
    for n in (2, 47):
        u, z, d = program.run([np.zeros((n, 3), np.float32)], seed=0).values()
        assert u.shape == (n, 3) and z.shape == (n, 2) and d.shape == (n, 3)
        assert set(np.unique(d)) <= {0.0, 2.0}


def test_a_torch_generator_is_accepted_and_the_seed_decides():
    gen = torch.Generator().manual_seed(0)
    program = converted(lambda: (torch.rand(N, generator=gen),
                                 torch.normal(2.0, 0.5, (N,), generator=gen)))
    assert program.input_names == []  # the lifted generator is not an input of the program
    u, z = program.run([], seed=4).values()
    check_uniform(u, 0.0, 1.0, "rand(generator=)")
    check_normal(z, 2.0, 0.5, "normal(generator=)")
    assert np.array_equal(u, program.run([], seed=4)["rand"])


@settings(max_examples=8, deadline=None)
@given(sizes=st.lists(st.sampled_from([1, 2, 3, 47]), min_size=2, max_size=2))
def test_symbolic_bounds_counts_and_samples(sizes):
    """randperm, randint and multinomial whose n, bounds, size and num_samples derive from a
    dynamic dim (exported at 5, run at other sizes, 1 and 47 included): shapes and dtypes
    as torch's at that size, then the support and moments of each draw."""
    dim = torch.export.Dim("n", min=1, max=64)
    program = converted(lambda t: (torch.randperm(t.shape[0]),
                                   torch.randint(-t.shape[0], t.shape[0] + 1, (400, t.shape[0])),
                                   torch.multinomial(t.abs() + 1, t.shape[0], replacement=True)),
                        torch.zeros(5, 5), dynamic=(({0: dim, 1: dim},),))
    for n in sizes:
        x = torch.zeros(n, n)
        perm, k, idx = program.run([x.numpy()], seed=n).values()
        torch_shapes = [(n,), (400, n), (n, n)]
        assert [a.shape for a in (perm, k, idx)] == torch_shapes
        assert all(a.dtype == np.int64 for a in (perm, k, idx))
        assert sorted(perm.tolist()) == list(range(n))
        assert k.min() >= -n and k.max() <= n
        width = 2 * n + 1
        check_mean(k, 0.0, (width * width - 1) / 12, f"randint(-{n}, {n + 1})")
        assert idx.min() >= 0 and idx.max() < n


@pytest.mark.parametrize("dtype", [torch.int64, torch.int16, torch.float32])
def test_randint_like_reads_high_at_run_time(dtype):
    """randint_like.Tensor: ``high`` is a tensor input, so one program serves every bound."""
    x = torch.zeros(N, dtype=dtype)
    program = converted(lambda t, h: torch.ops.aten.randint_like.Tensor(t, h), x,
                        torch.tensor(3))
    for high in (1, 2, 7, 1000):
        (k,) = program.run([x.numpy(), np.array(high)], seed=high).values()
        assert k.shape == (N,) and k.dtype == to_numpy(x).dtype
        assert k.min() >= 0 and k.max() < high and np.array_equal(k, np.round(k))
        if high > 1:
            check_mean(k, (high - 1) / 2, (high * high - 1) / 12, f"randint_like(high={high})")
    with pytest.raises(KernelError, match="low < high"):
        program.run([x.numpy(), np.array(0)], seed=0)
