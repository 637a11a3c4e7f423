"""Numpy kernels of the random ops: draws from the run's generator (see ``_rng.seeded``).

Every kernel takes the generator from ``current_generator()`` at call time, so a run seeded
with ``seed=`` is reproducible and concurrent runs never share a stream.
"""

from __future__ import annotations

import numpy as np

from coreai_core._dtypes import DType
from coreai_core.runtime._rng import current_generator
from coreai_core.runtime.kernels._registry import KernelSet

KERNELS = KernelSet("random")
kernel = KERNELS.register

# Significand bits (implicit bit included): k * 2**-bits for k < 2**bits is exact in the dtype.
_GRID_BITS = {DType.float64: 53, DType.float32: 24, DType.float16: 11, DType.bfloat16: 8}


def _shape(shape: np.ndarray) -> tuple[int, ...]:
    dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    if any(d < 0 for d in dims):
        raise ValueError(f"random ops need a shape of sizes >= 0, got {list(dims)}")
    return dims


def _below(value: float, dtype: np.dtype) -> np.ndarray:
    """The largest ``dtype`` value strictly below ``value`` (finite in ``dtype``)."""
    a = np.asarray(value, dtype=dtype)
    if float(a) < value:
        return a[()]
    if a == 0:
        a = -a  # -0.0: one step up in magnitude is the negative subnormal next to zero
    bits = a.reshape(1).view(np.dtype(f"u{dtype.itemsize}"))
    step = -1 if a > 0 else 1  # positive: smaller magnitude; negative: larger magnitude
    return (bits + np.array(step).astype(bits.dtype, casting="unsafe")).view(dtype)[0]


def unit_uniform(shape: tuple[int, ...], dtype: DType, gen: np.random.Generator) -> np.ndarray:
    """Float64 draws on the grid ``k * 2**-m`` of [0, 1) (``m`` = the dtype's significand)."""
    bits = _GRID_BITS[dtype]
    return np.asarray(gen.integers(0, 1 << bits, size=shape, dtype=np.int64)) * (2.0 ** -bits)


@kernel("coreai.random_uniform")
def random_uniform(shape: np.ndarray, *, low: float = 0.0, high: float = 1.0,
                   dtype: DType = DType.float32) -> np.ndarray:
    """``low + (high - low) * u`` rounded once to dtype; kept strictly below ``high``."""
    u = unit_uniform(_shape(shape), dtype, current_generator())
    out = np.asarray(low + (high - low) * u).astype(dtype.numpy)
    if low < high:
        cap = _below(high, dtype.numpy)
        if float(cap) < low:  # no dtype value in [low, high): the nearest to low it is
            cap = np.asarray(low, dtype=dtype.numpy)[()]
        out[out.astype(np.float64) >= high] = cap
    return out


@kernel("coreai.random_normal")
def random_normal(shape: np.ndarray, *, mean: float = 0.0, std: float = 1.0,
                  dtype: DType = DType.float32) -> np.ndarray:
    """``mean + std * z`` (float64 standard normals), rounded once to dtype."""
    z = current_generator().standard_normal(_shape(shape))
    return np.asarray(mean + std * z).astype(dtype.numpy)


@kernel("coreai.random_integers")
def random_integers(shape: np.ndarray, bounds: np.ndarray | None = None, *, low: int, high: int,
                    dtype: DType = DType.int64) -> np.ndarray:
    """Uniform integers in [low, high) (or the run-time ``bounds``), drawn in the integer dtype
    (int64 for float dtypes)."""
    if bounds is not None:
        lo, hi = (int(b) for b in np.asarray(bounds).reshape(-1))
        if not low <= lo < hi <= high:
            raise ValueError(f"random_integers needs run-time bounds with {low} <= low < high "
                             f"<= {high}, got [{lo}, {hi})")
        low, high = lo, hi
    draw_as = dtype.numpy if dtype.is_int else np.dtype(np.int64)
    out = current_generator().integers(low, high, size=_shape(shape), dtype=draw_as)
    return np.asarray(out).astype(dtype.numpy, copy=False)


def _count(value: np.ndarray, what: str) -> int:
    count = int(np.asarray(value))
    if count < 0:
        raise ValueError(f"{what} must be >= 0, got {count}")
    return count


@kernel("coreai.random_permutation")
def random_permutation(length: np.ndarray | None = None, *, n: int,
                       dtype: DType = DType.int64) -> np.ndarray:
    """A uniformly random permutation of 0 .. n-1 (``n`` from ``length`` when given)."""
    if length is not None:
        n = _count(length, "random_permutation's length")
    return current_generator().permutation(n).astype(dtype.numpy)


@kernel("coreai.random_bernoulli")
def random_bernoulli(p: np.ndarray) -> np.ndarray:
    """``u < p`` for float64 uniforms ``u``; probabilities must lie in [0, 1]."""
    prob = np.asarray(p, dtype=np.float64)
    if not np.all((prob >= 0) & (prob <= 1)):  # NaN fails both comparisons
        bad = prob[~((prob >= 0) & (prob <= 1))].reshape(-1)[0]
        raise ValueError(f"random_bernoulli needs probabilities in [0, 1], got {bad}")
    return np.asarray(current_generator().random(prob.shape) < prob)


@kernel("coreai.random_multinomial")
def random_multinomial(weights: np.ndarray, samples: np.ndarray | None = None, *,
                       num_samples: int, replacement: bool = False) -> np.ndarray:
    """Per row, ``num_samples`` (or ``samples``) category indices drawn proportionally to the
    weights."""
    if samples is not None:
        num_samples = _count(samples, "random_multinomial's samples")
    w = np.asarray(weights, dtype=np.float64)
    rows = w.reshape(-1, w.shape[-1]) if w.size or w.shape[-1] else w.reshape(-1, 0)
    gen = current_generator()
    out = np.empty((rows.shape[0], num_samples), dtype=np.int64)
    for i, row in enumerate(rows):
        if not np.all(np.isfinite(row) & (row >= 0)):
            raise ValueError(f"random_multinomial: row {i} has a negative, inf or NaN weight")
        total = row.sum()
        if total <= 0 and num_samples:
            raise ValueError(f"random_multinomial: the weights of row {i} sum to 0")
        if not replacement and np.count_nonzero(row) < num_samples:
            raise ValueError(f"random_multinomial: row {i} has {np.count_nonzero(row)} positive "
                             f"weights, fewer than the {num_samples} samples to draw without "
                             "replacement")
        if num_samples:
            out[i] = gen.choice(row.shape[0], size=num_samples, replace=replacement,
                                p=row / total)
    return out.reshape((*w.shape[:-1], num_samples))
