"""Statistical checks for random ops, with one stated tolerance.

Every check compares an estimate with its exact expected value and allows ``Z = 5`` standard
errors of that estimate: a correct sampler fails one check with probability below 6e-7
(two-sided normal tail), so a failure means a wrong distribution, not bad luck. Tests that
also fix the run's ``seed`` are deterministic on top of that.

- :func:`check_mean` / :func:`check_variance`: sample moments against the distribution's
  (standard error from its variance and fourth central moment);
- :func:`check_cdf`: the fraction of samples ``<= t`` against ``F(t)`` at a few points (binomial
  standard error), for distributions without moments (Cauchy) or discrete ones;
- :func:`check_frequencies`: category counts against expected probabilities.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np

Z = 5.0


def _floats(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).reshape(-1)


def check_mean(x: np.ndarray, mean: float, var: float, what: str = "") -> None:
    """``x.mean()`` is within Z standard errors (``sqrt(var / n)``) of ``mean``."""
    s = _floats(x)
    if s.size == 0:
        return
    se = math.sqrt(var / s.size)
    got = float(s.mean())
    assert abs(got - mean) <= Z * se + 1e-12 * max(1.0, abs(mean)), (
        f"{what}: mean {got:.6g} differs from {mean:.6g} by more than {Z} standard errors "
        f"({se:.3g}, n={s.size})")


def check_variance(x: np.ndarray, var: float, mu4: float, what: str = "") -> None:
    """The sample variance is within Z standard errors (``sqrt((mu4 - var**2) / n)``) of
    ``var``; ``mu4`` is the distribution's fourth central moment."""
    s = _floats(x)
    if s.size < 2:
        return
    se = math.sqrt(max(mu4 - var * var, 0.0) / s.size)
    got = float(s.var(ddof=1))
    assert abs(got - var) <= Z * se + 1e-12 * max(1.0, var), (
        f"{what}: variance {got:.6g} differs from {var:.6g} by more than {Z} standard errors "
        f"({se:.3g}, n={s.size})")


def check_cdf(x: np.ndarray, cdf: Callable[[float], float], points: Iterable[float],
              what: str = "") -> None:
    """At each point ``t``, the fraction of samples ``<= t`` is within Z binomial standard
    errors of ``cdf(t)``."""
    s = _floats(x)
    if s.size == 0:
        return
    for t in points:
        p = cdf(t)
        got = float(np.mean(s <= t))
        se = math.sqrt(p * (1 - p) / s.size)
        assert abs(got - p) <= Z * se + 1e-12, (
            f"{what}: P(X <= {t}) is {got:.4g}, expected {p:.4g} (Z={Z}, se={se:.3g}, "
            f"n={s.size})")


def check_frequencies(x: np.ndarray, probabilities: Sequence[float], what: str = "") -> None:
    """Each category ``k`` occurs in ``x`` (ints in [0, len(probabilities))) with frequency
    within Z binomial standard errors of ``probabilities[k]``."""
    s = np.asarray(x).reshape(-1).astype(np.int64)
    assert s.size == 0 or (s.min() >= 0 and s.max() < len(probabilities)), (
        f"{what}: categories outside [0, {len(probabilities)}): {np.unique(s)}")
    counts = np.bincount(s, minlength=len(probabilities))
    for k, p in enumerate(probabilities):
        got = counts[k] / max(s.size, 1)
        se = math.sqrt(p * (1 - p) / max(s.size, 1))
        assert abs(got - p) <= Z * se + 1e-12, (
            f"{what}: category {k} has frequency {got:.4g}, expected {p:.4g} (Z={Z}, "
            f"se={se:.3g}, n={s.size})")


def normal_cdf(mean: float = 0.0, std: float = 1.0) -> Callable[[float], float]:
    return lambda t: 0.5 * (1 + math.erf((t - mean) / (std * math.sqrt(2))))


def check_normal(x: np.ndarray, mean: float, std: float, what: str = "") -> None:
    """Mean, variance and the CDF at mean, mean +- std of a normal sample."""
    var = std * std
    check_mean(x, mean, var, what)
    check_variance(x, var, 3 * var * var, what)
    check_cdf(x, normal_cdf(mean, std), (mean - std, mean, mean + std), what)


def check_uniform(x: np.ndarray, low: float, high: float, what: str = "") -> None:
    """Range ``[low, high)``, mean, variance and quartiles of a continuous uniform sample."""
    s = _floats(x)
    assert s.size == 0 or (s.min() >= low and s.max() < high), (
        f"{what}: values outside [{low}, {high}): min {s.min()}, max {s.max()}")
    w = high - low
    check_mean(s, low + w / 2, w * w / 12, what)
    check_variance(s, w * w / 12, w ** 4 / 80, what)
    check_cdf(s, lambda t: (t - low) / w, (low + w / 4, low + w / 2, low + 3 * w / 4), what)
