"""Random ops: uniform, normal, integers, permutation, bernoulli and multinomial draws.

Every op here carries the ``random`` trait: each execution draws fresh numbers, so the
optimizer never constant-folds or merges (CSE) them, nor an op whose regions or callee
contain one; a random op whose result is unused may still be removed.

**The generator.** A run has one numpy ``Generator`` (PCG64). ``program.run(inputs,
seed=s)`` and ``Runtime.run(..., seed=s)`` create it from ``s``: the same program, inputs and
seed give the same numbers, different seeds give independent streams, and ``seed=None``
(the default) draws fresh OS entropy (inside a ``coreai_core.runtime.seeded(s)`` block: that
block's stream). Random ops draw from it in execution order; a kernel
for a custom op obtains it with ``coreai_core.runtime.current_generator()``. Removing a dead
random op (DCE) or reordering ops changes which numbers later ops receive, never their
distribution.

**Not torch's bits.** Results follow the documented distribution, never PyTorch's
generator: a converted program draws different numbers than ``torch.manual_seed(s)`` would,
and tests compare shapes, dtypes, ranges and moments, not values.

**Exactness.** ``random_uniform`` draws on the grid ``k * 2**-m`` (``m`` = the dtype's
significand bits: 53, 24, 11, 8 for float64/32/16/bfloat16), so every value of ``[0, 1)`` it
returns is exact in the dtype. Other continuous distributions (exponential, Cauchy, log-normal,
geometric) are exact transforms of these ops in the lowerings.
"""

from __future__ import annotations

import math

import numpy as np

from coreai_core._dtypes import DType
from coreai_core._ir import Dim, TensorType, Value
from coreai_core._opdef import builder_names, defop
from coreai_core._shapes import expect, expect_int_vector
from coreai_core.dialects._tensor import shape_from

RANDOM = ("random",)


def _float_dtype(dtype: DType, op: str) -> None:
    expect(dtype.is_float, f"{op} draws floating-point values; dtype must be a float type, "
                           f"got {dtype}")


@defop(traits=RANDOM)
def random_uniform(shape: Value, low: float = 0.0, high: float = 1.0,
                   dtype: DType = DType.float32) -> TensorType:
    """Uniform floats in ``[low, high)`` of ``shape`` (1-d int tensor).

    Draws ``u`` on the dtype's grid ``k * 2**-m`` of ``[0, 1)`` and returns ``low + (high -
    low) * u`` rounded once to ``dtype``; a value that rounds up to ``high`` or above becomes
    the largest dtype value below ``high``. ``low == high`` (or no dtype value in the
    interval) gives ``low`` rounded to dtype.
    """
    _float_dtype(dtype, "random_uniform")
    expect(math.isfinite(low) and math.isfinite(high) and low <= high,
           f"random_uniform needs finite low <= high, got [{low}, {high})")
    return TensorType(shape_from(shape), dtype)


@defop(traits=RANDOM)
def random_normal(shape: Value, mean: float = 0.0, std: float = 1.0,
                  dtype: DType = DType.float32) -> TensorType:
    """Normal floats ``mean + std * z`` of ``shape``, ``z`` standard normal (in float64)."""
    _float_dtype(dtype, "random_normal")
    expect(math.isfinite(mean) and math.isfinite(std) and std >= 0,
           f"random_normal needs a finite mean and std >= 0, got mean={mean}, std={std}")
    return TensorType(shape_from(shape), dtype)


@defop(traits=RANDOM)
def random_integers(shape: Value, low: int, high: int, dtype: DType = DType.int64,
                    bounds: Value | None = None) -> TensorType:
    """Uniform integers in ``[low, high)`` of ``shape``, as ``dtype`` (an int or float type).

    ``bounds`` (a 1-d int tensor ``[lo, hi]``) gives the interval ``[lo, hi)`` at run time
    instead; ``low``/``high`` then bound it: the kernel raises unless
    ``low <= lo < hi <= high``.
    """
    expect(dtype.is_int or dtype.is_float,
           f"random_integers returns integers or floats, got dtype {dtype}")
    expect(low < high, f"random_integers needs low < high, got [{low}, {high})")
    if dtype.is_int:
        info = np.iinfo(dtype.numpy)
        expect(info.min <= low and high - 1 <= info.max,
               f"[{low}, {high}) does not fit in {dtype}")
    if bounds is not None:
        expect_int_vector(bounds, "bounds", 2)
    return TensorType(shape_from(shape), dtype)


@defop(traits=RANDOM)
def random_permutation(n: int, dtype: DType = DType.int64, length: Value | None = None,
                       ) -> TensorType:
    """A uniformly random permutation of ``0 .. n-1`` (1-d, length ``n``).

    ``length`` (a 0-d int tensor) gives ``n`` at run time instead; ``n`` is then -1.
    """
    if length is not None:
        expect(n == -1, f"random_permutation takes n=-1 with a length operand, got n={n}")
        expect(length.type.element_type.is_int and length.type.rank == 0,
               f"length must be a 0-d integer tensor, got {length.type}")
    else:
        expect(n >= 0, f"random_permutation needs n >= 0, got {n}")
    expect(dtype.is_int or dtype.is_float, f"random_permutation dtype must be an int or float "
                                           f"type, got {dtype}")
    return TensorType([Dim() if length is not None else n], dtype)


@defop(traits=RANDOM)
def random_bernoulli(p: Value) -> TensorType:
    """Bool tensor shaped like ``p``: True with probability ``p`` (float, each in [0, 1]).

    Element ``i`` is ``u_i < p_i`` for a float64 uniform ``u_i``; a probability outside
    ``[0, 1]`` (or NaN) makes the kernel raise.
    """
    expect(p.type.element_type.is_float, f"random_bernoulli needs float probabilities, "
                                         f"got {p.type}")
    return TensorType(p.type.shape, DType.bool)


@defop(traits=RANDOM)
def random_multinomial(weights: Value, num_samples: int, replacement: bool = False,
                       samples: Value | None = None) -> TensorType:
    """Category indices drawn from each row of ``weights`` [..., n] -> int64 [..., num_samples].

    Each row holds non-negative, finite weights with a positive sum (they need not sum to 1).
    With ``replacement`` the samples are independent; without, each draw excludes the
    categories already drawn (weights renormalized), so a row needs at least ``num_samples``
    positive weights. Indices are in draw order. ``samples`` (a 0-d int tensor) gives
    ``num_samples`` at run time instead; ``num_samples`` is then -1.
    """
    expect(weights.type.element_type.is_float, f"random_multinomial needs float weights, "
                                               f"got {weights.type}")
    expect(weights.type.rank >= 1, f"random_multinomial needs weights of rank >= 1, "
                                   f"got {weights.type}")
    if samples is not None:
        expect(num_samples == -1, "random_multinomial takes num_samples=-1 with a samples "
                                  f"operand, got {num_samples}")
        expect(samples.type.element_type.is_int and samples.type.rank == 0,
               f"samples must be a 0-d integer tensor, got {samples.type}")
        return TensorType([*weights.type.shape[:-1], Dim()], DType.int64)
    expect(num_samples >= 0, f"num_samples must be >= 0, got {num_samples}")
    n = weights.type.shape[-1]
    if not replacement and isinstance(n, int):
        expect(num_samples <= n, f"cannot draw {num_samples} samples without replacement "
                                 f"from {n} categories")
    return TensorType([*weights.type.shape[:-1], num_samples], DType.int64)


# the builders of the ops defined above (see builder_names)
__all__ = [*builder_names(__name__)]
