"""Op-database entries (random family): random ops — factories, bernoulli, normal, samplers,
multinomial, dropout and rrelu in training mode.

A converted program draws from its own generator (seeded by ``run(..., seed=)``), never
torch's, so values cannot be compared with torch. Each entry's ``compare`` checks, for every
output: the shape and dtype torch gives, then the support of the distribution (range, integer
values, distinct indices...) and its moments or CDF with the tolerance stated in
tests/random_stats.py (5 standard errors of the estimate, whatever the sample size). The
deterministic parts (values kept by dropout, positive inputs of rrelu) are compared exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from tests.random_stats import (
    check_cdf,
    check_frequencies,
    check_mean,
    check_normal,
    check_uniform,
    check_variance,
)
from tests.torch.harness import to_numpy
from tests.torch.op_db._entry import (
    FLOAT_DTYPES,
    FLOATS,
    INT_DTYPES,
    EntrySet,
    OpEntry,
    Sample,
    shapes,
    sizes,
    tensors,
)

aten = torch.ops.aten
ENTRIES = EntrySet()

Check = Callable[[list[np.ndarray], Sample], None]


def same_layout(expected: Sequence[torch.Tensor], got: Sequence[np.ndarray], what: str) -> None:
    """Torch's outputs and ours have the same count, shapes and dtypes."""
    assert len(got) == len(expected), f"{what}: {len(got)} outputs, torch has {len(expected)}"
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        want = to_numpy(e)
        assert tuple(g.shape) == tuple(want.shape), f"{what} output {i}: shape {g.shape} != " \
                                                    f"torch {want.shape}"
        assert g.dtype == want.dtype, f"{what} output {i}: dtype {g.dtype} != torch {want.dtype}"


def add(target: str, fn: Any, samples: st.SearchStrategy[Sample], check: Check,
        name: str = "") -> None:
    """An entry whose compare checks the layout against torch, then ``check(got, sample)``."""
    what = name or target

    def compare(expected: Any, got: Any, sample: Sample) -> None:
        got = [np.asarray(g) for g in got]
        same_layout(expected, got, what)
        check(got, sample)

    ENTRIES.add(target, fn, samples, compare=compare, name=name)


def f64(a: Any) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def ints_only(a: np.ndarray, what: str) -> None:
    assert np.array_equal(f64(a), np.round(f64(a))), f"{what}: non-integer values"


SIZES = shapes(0, 3)
# bounds exactly representable in every float dtype, so ranges need no rounding slack
BOUNDS = st.sampled_from([(0.0, 1.0), (-1.0, 2.0), (-3.5, -0.5), (2.0, 2.0), (0.25, 64.0)])


# -- factories ------------------------------------------------------------------------------------

@st.composite
def factory_samples(draw: Any) -> Sample:
    return Sample((draw(SIZES),), {"dtype": draw(st.sampled_from((None, *FLOAT_DTYPES)))})


def _uniform01(got: list[np.ndarray], sample: Sample) -> None:
    check_uniform(got[0], 0.0, 1.0, "U[0, 1)")


def _std_normal(got: list[np.ndarray], sample: Sample) -> None:
    check_normal(got[0], 0.0, 1.0, "N(0, 1)")


add("aten::rand.default", lambda size, dtype: torch.rand(size, dtype=dtype), factory_samples(),
    _uniform01)
add("aten::randn.default", lambda size, dtype: torch.randn(size, dtype=dtype),
    factory_samples(), _std_normal)


@st.composite
def like_samples(draw: Any) -> Sample:
    x = draw(tensors(draw(SIZES), draw(FLOATS)))
    return Sample((x,), {"dtype": draw(st.sampled_from((None, torch.float64, torch.float16)))})


add("aten::rand_like.default", torch.rand_like, like_samples(), _uniform01)
add("aten::randn_like.default", torch.randn_like, like_samples(), _std_normal)


def _integers(low: int, high: int) -> Check:
    def check(got: list[np.ndarray], sample: Sample) -> None:
        k = f64(got[0])
        ints_only(k, "randint")
        assert k.size == 0 or (k.min() >= low and k.max() < high), (
            f"randint: values outside [{low}, {high}): {k.min()}..{k.max()}")
        if high - low <= 16:
            check_frequencies(k.astype(np.int64) - low, [1 / (high - low)] * (high - low),
                              "randint")
        else:
            n = high - low
            check_mean(k, (low + high - 1) / 2, (n * n - 1) / 12, "randint")

    return check


INT_RESULTS = st.sampled_from((None, torch.int64, torch.int32, torch.int16, torch.uint8,
                               torch.float32, torch.float64))


@st.composite
def randint_samples(draw: Any, with_low: bool) -> Sample:
    low = draw(st.integers(-5, 5)) if with_low else 0
    high = low + draw(st.sampled_from((1, 2, 3, 7, 100)))
    dtype = draw(INT_RESULTS)
    if dtype == torch.uint8:
        low, high = abs(low), abs(low) + high - low
    args = (low, high) if with_low else (high,)
    return Sample((*args, draw(SIZES)), {"dtype": dtype})


def _randint_check(sample: Sample) -> Check:
    args = sample.args
    low, high = (args[0], args[1]) if len(args) == 3 else (0, args[0])
    return _integers(low, high)


def _randint(with_low: bool) -> Any:
    if with_low:
        return lambda low, high, size, dtype: torch.randint(low, high, size, dtype=dtype or
                                                            torch.int64)
    return lambda high, size, dtype: torch.randint(high, size, dtype=dtype or torch.int64)


add("aten::randint.default", _randint(False), randint_samples(False),
    lambda got, s: _randint_check(s)(got, s))
add("aten::randint.low", _randint(True), randint_samples(True),
    lambda got, s: _randint_check(s)(got, s))


@st.composite
def randint_like_samples(draw: Any, with_low: bool) -> Sample:
    dtype = draw(st.sampled_from((*FLOAT_DTYPES, *INT_DTYPES)))
    low = draw(st.integers(0, 5)) if with_low else 0
    high = low + draw(st.sampled_from((1, 2, 5, 60)))
    x = draw(tensors(draw(SIZES), dtype))
    return Sample((x, low, high) if with_low else (x, high))


def _randint_like_check(got: list[np.ndarray], sample: Sample) -> None:
    low, high = (sample.args[1], sample.args[2]) if len(sample.args) == 3 else (0, sample.args[1])
    _integers(low, high)(got, sample)


add("aten::randint_like.default", torch.randint_like, randint_like_samples(False),
    _randint_like_check)
add("aten::randint_like.low_dtype", torch.randint_like, randint_like_samples(True),
    _randint_like_check)


@st.composite
def randint_like_tensor_samples(draw: Any) -> Sample:
    """``high`` as a 0-d int64 tensor: an input of the program, read at run time."""
    dtype = draw(st.sampled_from((*FLOAT_DTYPES, *INT_DTYPES)))
    high = draw(st.sampled_from((1, 2, 5, 60)))
    return Sample((draw(tensors(draw(SIZES), dtype)), torch.tensor(high)))


def _randint_like_tensor_check(got: list[np.ndarray], sample: Sample) -> None:
    _integers(0, int(sample.args[1]))(got, sample)


add("aten::randint_like.Tensor", aten.randint_like.Tensor, randint_like_tensor_samples(),
    _randint_like_tensor_check)


@st.composite
def randperm_samples(draw: Any) -> Sample:
    n = draw(st.one_of(sizes(0, 12), st.just(47)))
    return Sample((n,), {"dtype": draw(st.sampled_from((torch.int64, torch.int32,
                                                         torch.float32)))})


def _permutation(got: list[np.ndarray], sample: Sample) -> None:
    n = sample.args[0]
    assert sorted(f64(got[0]).tolist()) == list(range(n)), f"randperm({n}): {got[0]}"


add("aten::randperm.default", lambda n, dtype: torch.randperm(n, dtype=dtype),
    randperm_samples(), _permutation)


# random_(): integers in [0, to), or up to 2**digits (floats) / the dtype's max (ints) without to
TOP = {torch.float64: 2 ** 53, torch.float32: 2 ** 24, torch.float16: 2 ** 11,
       torch.bfloat16: 2 ** 8, torch.bool: 1}


@st.composite
def random_samples(draw: Any, with_to: bool) -> Sample:
    dtype = draw(st.sampled_from((*FLOAT_DTYPES, *INT_DTYPES, *(() if with_to else (torch.bool,)))))
    x = draw(tensors(draw(SIZES), dtype))
    return Sample((x, draw(st.sampled_from((1, 2, 6, 100)))) if with_to else (x,))


def _random_check(got: list[np.ndarray], sample: Sample) -> None:
    x = sample.args[0]
    top = TOP.get(x.dtype) if len(sample.args) == 1 else sample.args[1] - 1
    if top is None:
        top = torch.iinfo(x.dtype).max
    _integers(0, top + 1)(got, sample)


add("aten::random.default", lambda x: x.clone().random_(), random_samples(False), _random_check)
add("aten::random.to", lambda x, to: x.clone().random_(to), random_samples(True), _random_check)


# -- bernoulli ------------------------------------------------------------------------------------

def _bernoulli(p: np.ndarray, what: str) -> Check:
    def check(got: list[np.ndarray], sample: Sample) -> None:
        b = f64(got[0])
        prob = np.broadcast_to(f64(p), b.shape)
        assert np.all((b == 0) | (b == 1)), f"{what}: values other than 0 and 1"
        assert np.all(b[prob == 0] == 0) and np.all(b[prob == 1] == 1), f"{what}: p=0/1 broken"
        check_mean(b.sum(), float(prob.sum()), float((prob * (1 - prob)).sum()), what)

    return check


@st.composite
def probabilities(draw: Any, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    p = draw(tensors(shape, dtype, low=0.0, high=1.0))
    if p.numel() and draw(st.booleans()):
        p.view(-1)[0] = 0.0
        p.view(-1)[-1] = 1.0
    return p


@st.composite
def bernoulli_samples(draw: Any) -> Sample:
    return Sample((draw(probabilities(draw(SIZES), draw(FLOATS))),))


@st.composite
def bernoulli_p_samples(draw: Any) -> Sample:
    dtype = draw(st.sampled_from((*FLOAT_DTYPES, torch.int64, torch.uint8, torch.bool)))
    x = draw(tensors(draw(SIZES), dtype))
    return Sample((x, draw(st.sampled_from((0.0, 0.2, 0.5, 0.7, 1.0)))))


@st.composite
def bernoulli_tensor_samples(draw: Any) -> Sample:
    shape = draw(shapes(1, 3))
    x = draw(tensors(shape, draw(FLOATS)))
    p_shape = shape[draw(st.integers(0, len(shape))):]  # broadcasts against x
    return Sample((x, draw(probabilities(p_shape, draw(FLOATS)))))


add("aten::bernoulli.default", torch.bernoulli, bernoulli_samples(),
    lambda got, s: _bernoulli(to_numpy(s.args[0]), "bernoulli(p)")(got, s))
add("aten::bernoulli.p", lambda x, p: torch.bernoulli(x, p), bernoulli_p_samples(),
    lambda got, s: _bernoulli(np.array(s.args[1]), "bernoulli(x, p)")(got, s))
add("aten::bernoulli.Tensor", aten.bernoulli.Tensor, bernoulli_tensor_samples(),
    lambda got, s: _bernoulli(to_numpy(s.args[1]), "bernoulli(x, p_tensor)")(got, s))


# -- normal ---------------------------------------------------------------------------------------

def _standardized(got: np.ndarray, mean: Any, std: Any, what: str) -> None:
    """(x - mean) / std is standard normal, checked where std > 0; x == mean where std == 0."""
    x = f64(got)
    m, s = np.broadcast_to(f64(mean), x.shape), np.broadcast_to(f64(std), x.shape)
    # half dtypes round x: the standardized error is below 2**-8 * |x| / std, far below 5 SE
    assert np.all(x[s == 0] == m[s == 0].astype(got.dtype).astype(np.float64)), what
    z = (x - m)[s > 0] / s[s > 0]
    check_normal(z, 0.0, 1.0, what)


@st.composite
def normal_samples(draw: Any, mean_tensor: bool, std_tensor: bool) -> Sample:
    dtype = draw(FLOATS)
    shape = draw(SIZES)
    mean = draw(tensors(shape, dtype, low=-3, high=3)) if mean_tensor else \
        draw(st.sampled_from((0.0, 1.5, -2.0)))
    std_shape = shape if not mean_tensor or draw(st.booleans()) else \
        shape[draw(st.integers(0, len(shape))):]
    std = draw(tensors(std_shape, dtype, low=0.0, high=3.0)) if std_tensor else \
        draw(st.sampled_from((1.0, 0.5, 2.0, 0.0)))
    return Sample((mean, std))


def _normal_check(got: list[np.ndarray], sample: Sample) -> None:
    mean, std = (to_numpy(a) if isinstance(a, torch.Tensor) else a for a in sample.args[:2])
    _standardized(got[0], mean, std, "normal")


add("aten::normal.Tensor_float", torch.normal, normal_samples(True, False), _normal_check)
add("aten::normal.float_Tensor", torch.normal, normal_samples(False, True), _normal_check)
add("aten::normal.Tensor_Tensor", torch.normal, normal_samples(True, True), _normal_check)


@st.composite
def normal_float_float_samples(draw: Any) -> Sample:
    mean, std = draw(st.sampled_from(((0.0, 1.0), (2.0, 0.5), (-1.0, 3.0), (1.0, 0.0))))
    return Sample((mean, std, draw(SIZES)), {"dtype": draw(st.sampled_from((None,
                                                                            *FLOAT_DTYPES)))})


add("aten::normal.float_float", lambda m, s, size, dtype: torch.normal(m, s, size, dtype=dtype),
    normal_float_float_samples(), _normal_check)


# -- the in-place samplers (exported as functional ops) -------------------------------------------

@st.composite
def sampler_samples(draw: Any, params: st.SearchStrategy[tuple[float, ...]]) -> Sample:
    x = draw(tensors(draw(SIZES), draw(FLOATS)))
    return Sample((x, *draw(params)))


def _normal_(x: torch.Tensor, mean: float, std: float) -> torch.Tensor:
    return x.clone().normal_(mean, std)


def _uniform_(x: torch.Tensor, low: float, high: float) -> torch.Tensor:
    return x.clone().uniform_(low, high)


def _uniform_check(got: list[np.ndarray], sample: Sample) -> None:
    low, high = sample.args[1:]
    if low == high:
        assert np.all(f64(got[0]) == low)
    else:
        check_uniform(got[0], low, high, f"uniform({low}, {high})")


def _exponential(got: list[np.ndarray], sample: Sample) -> None:
    lam = sample.args[1]
    x = f64(got[0])
    assert np.all(x >= 0), "exponential: negative values"
    check_mean(x, 1 / lam, 1 / lam ** 2, "exponential")
    check_variance(x, 1 / lam ** 2, 9 / lam ** 4, "exponential")
    check_cdf(x, lambda t: 1 - math.exp(-lam * t), (0.5 / lam, 1 / lam, 2 / lam), "exponential")


def _geometric(got: list[np.ndarray], sample: Sample) -> None:
    p = sample.args[1]
    k = f64(got[0])
    ints_only(k, "geometric")
    assert np.all(k >= 1), "geometric: values below 1"
    check_mean(k, 1 / p, (1 - p) / p ** 2, "geometric")
    check_cdf(k, lambda t: 1 - (1 - p) ** math.floor(t), (1, 2, 3), "geometric")


def _cauchy(got: list[np.ndarray], sample: Sample) -> None:
    median, sigma = sample.args[1:]
    check_cdf(got[0], lambda t: 0.5 + math.atan((t - median) / sigma) / math.pi,
              (median - sigma, median, median + sigma), "cauchy")


def _log_normal(got: list[np.ndarray], sample: Sample) -> None:
    mean, std = sample.args[1:]
    x = f64(got[0])
    assert np.all(x > 0), "log_normal: non-positive values"
    check_normal(np.log(x), mean, std, "log(log_normal)")


add("aten::normal_functional.default", _normal_,
    sampler_samples(st.sampled_from(((0.0, 1.0), (1.0, 2.0), (-3.0, 0.25)))),
    lambda got, s: _standardized(got[0], s.args[1], s.args[2], "normal_"))
add("aten::uniform.default", _uniform_, sampler_samples(BOUNDS), _uniform_check)
add("aten::exponential.default", lambda x, lam: x.clone().exponential_(lam),
    sampler_samples(st.tuples(st.sampled_from((1.0, 0.5, 4.0)))), _exponential)
add("aten::geometric.default", lambda x, p: x.clone().geometric_(p),
    sampler_samples(st.tuples(st.sampled_from((0.2, 0.5, 0.9)))), _geometric)
add("aten::cauchy.default", lambda x, m, s: x.clone().cauchy_(m, s),
    sampler_samples(st.sampled_from(((0.0, 1.0), (2.0, 0.5)))), _cauchy)
add("aten::log_normal.default", lambda x, m, s: x.clone().log_normal_(m, s),
    sampler_samples(st.sampled_from(((0.0, 0.5), (1.0, 0.25), (-1.0, 1.0)))), _log_normal)


# -- multinomial ----------------------------------------------------------------------------------

@st.composite
def multinomial_samples(draw: Any) -> Sample:
    rows = draw(st.sampled_from(((), (1,), (3,), (47,))))
    n = draw(st.one_of(sizes(1, 6), st.just(47)))
    w = draw(tensors((*rows, n), draw(FLOATS), low=0.0, high=3.0))
    if n > 2 and draw(st.booleans()):
        w[..., 1] = 0.0  # a category that must never be drawn
    w[..., 0] += 0.5  # every row has a positive weight
    replacement = draw(st.booleans())
    positive = int((w > 0).sum(-1).min())
    samples = draw(st.integers(1, 8 if replacement else positive))
    return Sample((w, samples, replacement))


def _multinomial(got: list[np.ndarray], sample: Sample) -> None:
    w = f64(to_numpy(sample.args[0]))
    num, replacement = sample.args[1:]
    idx = got[0].reshape(-1, num)
    rows = w.reshape(-1, w.shape[-1])
    assert idx.min() >= 0 and idx.max() < w.shape[-1], "multinomial: index out of range"
    for r, row in zip(idx, rows, strict=True):
        assert np.all(row[r] > 0), "multinomial: drew a category of weight 0"
        if not replacement:
            assert len(set(r.tolist())) == num, "multinomial: repeated index without replacement"
    # the first draw of every row follows the row's weights: pool the rows' indicator sums
    hits = np.array([row[r[0]] for r, row in zip(idx, rows, strict=True)])
    probs = rows / rows.sum(-1, keepdims=True)
    # E[p(first draw)] = sum_k p_k^2 per row; its variance is sum p^3 - (sum p^2)^2
    m2, m3 = (probs ** 2).sum(-1), (probs ** 3).sum(-1)
    check_mean((hits / rows.sum(-1)).sum(), float(m2.sum()), float((m3 - m2 ** 2).sum()),
               "multinomial first draw")


add("aten::multinomial.default", torch.multinomial, multinomial_samples(), _multinomial)


# -- dropout, rrelu ----------------------------------------------------------------------------

# eval mode (or p = 0) is deterministic: compared with torch's values like any other entry
@st.composite
def dropout_samples(draw: Any) -> Sample:
    x = draw(tensors(tuple(draw(sizes(1, 6)) for _ in range(draw(st.integers(0, 3)))),
                     draw(FLOATS)))
    p, train = draw(st.sampled_from(((0.5, False), (0.0, False), (0.0, True), (1.0, True))))
    return Sample((x, p, train))


ENTRIES.append(OpEntry("aten::native_dropout.default", aten.native_dropout, dropout_samples()))


@st.composite
def dropout_train_samples(draw: Any) -> Sample:
    x = draw(tensors(draw(SIZES), draw(FLOATS), special=True))
    return Sample((x, draw(st.sampled_from((0.1, 0.3, 0.5, 0.9))), True))


def _dropout(got: list[np.ndarray], sample: Sample) -> None:
    x, p = sample.args[0], sample.args[1]
    out, keep = got
    assert keep.dtype == np.bool_
    # kept values: x * 1/(1-p) computed in float32 (float64 for float64) and rounded once
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    scaled = to_numpy((x.to(compute) * (1.0 / (1.0 - p))).to(x.dtype))
    np.testing.assert_array_equal(f64(out[keep]), f64(scaled[keep]))
    # dropped values are x * 0: zero, or NaN where x is NaN or infinite (like torch)
    dropped = f64(to_numpy(x))[~keep]
    want = np.where(np.isfinite(dropped), 0.0, np.nan)
    np.testing.assert_array_equal(f64(out[~keep]), want)
    check_mean(keep, 1 - p, p * (1 - p), "dropout keep rate")


add("aten::native_dropout.default", aten.native_dropout, dropout_train_samples(), _dropout,
    name="aten::native_dropout.default[train]")


# torch's CPU rrelu has no float16 kernel in training mode (eval mode is a leaky relu)
RRELU_DTYPES = st.sampled_from((torch.float32, torch.float64, torch.bfloat16))


@st.composite
def rrelu_samples(draw: Any) -> Sample:
    x = draw(tensors(draw(SIZES), draw(RRELU_DTYPES)))
    lower, upper = draw(st.sampled_from(((0.125, 1 / 3), (0.1, 0.3), (0.5, 0.5), (0.0, 1.0))))
    noise = torch.full_like(x, 7.0)
    return Sample((x, noise, lower, upper, True))


def _rrelu(got: list[np.ndarray], sample: Sample) -> None:
    x, _, lower, upper, _ = sample.args
    out, noise = f64(got[0]), f64(got[1])
    xs = f64(to_numpy(x))
    pos = xs > 0
    assert np.array_equal(out[pos], xs[pos]) and np.all(noise[pos] == 1), "rrelu: x > 0 changed"
    r = noise[~pos]
    # noise is r rounded to the dtype: within [lower, upper] up to one rounding
    eps = 2.0 ** -7
    assert np.all((r >= lower - eps * lower) & (r <= upper + eps * upper)), (lower, upper, r)
    np.testing.assert_allclose(out[~pos], xs[~pos] * r, rtol=2 * eps, atol=0)
    if upper > lower:
        check_mean(r, (lower + upper) / 2, (upper - lower) ** 2 / 12, "rrelu slope")


add("aten::rrelu_with_noise_functional.default", aten.rrelu_with_noise_functional,
    rrelu_samples(), _rrelu, name="aten::rrelu_with_noise_functional.default[train]")


@st.composite
def rrelu_eval_samples(draw: Any) -> Sample:
    x = draw(tensors(draw(SIZES), draw(FLOATS), special=True))
    noise = draw(tensors(tuple(x.shape), x.dtype))
    return Sample((x, noise, 0.1, 0.3, False))


# eval mode is deterministic: compared with torch's values like any other entry
ENTRIES.append(OpEntry("aten::rrelu_with_noise_functional.default",
                       aten.rrelu_with_noise_functional, rrelu_eval_samples(),
                       name="aten::rrelu_with_noise_functional.default[eval]"))


# -- the generator= overloads: torch's Generator is lifted to an input the program ignores ------

GEN = torch.Generator().manual_seed(0)

add("aten::rand.generator", lambda size, dtype: torch.rand(size, generator=GEN, dtype=dtype),
    factory_samples(), _uniform01)
add("aten::randn.generator", lambda size, dtype: torch.randn(size, generator=GEN, dtype=dtype),
    factory_samples(), _std_normal)
add("aten::rand_like.generator",
    lambda x, dtype: torch.rand_like(x, generator=GEN, dtype=dtype), like_samples(), _uniform01)
add("aten::randn_like.generator",
    lambda x, dtype: torch.randn_like(x, generator=GEN, dtype=dtype), like_samples(),
    _std_normal)
add("aten::randint.generator",
    lambda high, size, dtype: torch.randint(high, size, generator=GEN,
                                            dtype=dtype or torch.int64),
    randint_samples(False), lambda got, s: _randint_check(s)(got, s))
add("aten::randint.low_generator",
    lambda low, high, size, dtype: torch.randint(low, high, size, generator=GEN,
                                                 dtype=dtype or torch.int64),
    randint_samples(True), lambda got, s: _randint_check(s)(got, s))
add("aten::randint_like.generator",
    lambda x, high: torch.randint_like(x, high, generator=GEN), randint_like_samples(False),
    _randint_like_check)
add("aten::randint_like.low_generator_dtype",
    lambda x, low, high: torch.randint_like(x, low, high, generator=GEN),
    randint_like_samples(True), _randint_like_check)
add("aten::randperm.generator", lambda n, dtype: torch.randperm(n, generator=GEN, dtype=dtype),
    randperm_samples(), _permutation)
