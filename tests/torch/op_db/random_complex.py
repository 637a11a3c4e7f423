"""Op-database entries (random family): random ops with complex64/complex128 results, and
dropout in eval mode on complex inputs.

torch fills ``view_as_real`` of a complex tensor, so its real and imaginary parts are two
independent draws: uniforms (``rand``, ``uniform_``) draw each part in ``[low, high)``; normals
(``randn``, ``normal_``, ``normal(mean, std)``) draw each part from ``N(mean, std**2 / 2)`` — a
scalar mean applies to both parts, a complex mean tensor is added as it is — so ``randn`` is
the standard complex normal CN(0, 1) of torch's documentation. As in ``random.py``, only the
distribution is checked (tests/random_stats.py: 5 standard errors): each part's moments and
CDF, and that the parts are uncorrelated (E[(re - m)(im - m)] = 0, whose variance is the
product of the parts' variances).

Not here because torch.export (2.13) cannot trace them on complex tensors, although eager
runs them: ``normal.Tensor_float`` (its reference checks ``std >= 0`` after promoting std to
the complex mean's type) and training-mode ``native_dropout`` / ``F.dropout`` (the fake-tensor
decomposition casts the complex product into an integer mask). ``normal.Tensor_float``'s
lowering shares the complex path tested through ``normal.Tensor_Tensor``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from tests.random_stats import check_mean, check_normal, check_uniform
from tests.torch.harness import to_numpy
from tests.torch.op_db import random
from tests.torch.op_db._entry import (
    COMPLEX_NO_HALF,
    EntrySet,
    OpEntry,
    Sample,
    complex_variant,
    tensors,
)
from tests.torch.op_db.random import GEN, SIZES, f64, same_layout

COMPLEX = (torch.complex64, torch.complex128)
ENTRIES = EntrySet(no_half=COMPLEX_NO_HALF)

Check = Callable[[np.ndarray, Sample], None]


def add(target: str, fn: Any, samples: st.SearchStrategy[Sample], check: Check,
        name: str) -> None:
    """An entry whose compare checks the layout against torch, then ``check(out, sample)``
    on the (complex) output."""
    def compare(expected: Any, got: Any, sample: Sample) -> None:
        got = [np.asarray(g) for g in got]
        same_layout(expected, got, name)
        assert np.iscomplexobj(got[0]), f"{name}: {got[0].dtype} result, torch's is complex"
        check(got[0], sample)

    ENTRIES.add(target, fn, samples, compare=compare, name=name)


def _uncorrelated(z: np.ndarray, mean: Any, var: float, what: str) -> None:
    re, im = f64(z.real) - f64(np.real(mean)), f64(z.imag) - f64(np.imag(mean))
    check_mean(re * im, 0.0, var * var, f"{what}: correlation of the parts")


def _uniform_parts(low: float, high: float, what: str) -> Check:
    def check(z: np.ndarray, sample: Sample) -> None:
        if low == high:
            assert np.all(z == complex(low, low)), f"{what}: values other than {low}"
            return
        for part, name in ((z.real, "real"), (z.imag, "imag")):
            check_uniform(part, low, high, f"{what} {name} part")
        m = (low + high) / 2
        _uncorrelated(z, complex(m, m), (high - low) ** 2 / 12, what)

    return check


def _normal_parts(z: np.ndarray, mean: Any, std: Any, what: str) -> None:
    """(z - mean) has parts N(0, std**2 / 2) where std > 0 and is 0 where std == 0; ``mean``
    is complex (a tensor's values, or a scalar applied to both parts)."""
    m = np.broadcast_to(np.asarray(mean, dtype=np.complex128), z.shape)
    s = np.broadcast_to(f64(std), z.shape)
    want = m[s == 0].astype(z.dtype)
    assert np.array_equal(z[s == 0], want), f"{what}: std 0 must give the mean"
    part_std = s[s > 0] / math.sqrt(2.0)
    d = z.astype(np.complex128)[s > 0] - m[s > 0]
    for part, name in ((d.real, "real"), (d.imag, "imag")):
        check_normal(part / part_std, 0.0, 1.0, f"{what} {name} part (standardized)")
    _uncorrelated(d / part_std, 0.0, 1.0, what)


# -- factories: rand/randn(_like) with a complex dtype --------------------------------------------

@st.composite
def factory_samples(draw: Any) -> Sample:
    return Sample((draw(SIZES),), {"dtype": draw(st.sampled_from(COMPLEX))})


@st.composite
def like_samples(draw: Any) -> Sample:
    """A complex input (dtype None or another complex type), or a real one asked for a complex
    dtype."""
    dtype = draw(st.sampled_from((*COMPLEX, torch.float32)))
    x = draw(tensors(draw(SIZES), dtype))
    wanted = draw(st.sampled_from((None, *COMPLEX) if dtype.is_complex else COMPLEX))
    return Sample((x,), {"dtype": wanted})


def _std_normal(z: np.ndarray, sample: Sample) -> None:
    _normal_parts(z, 0.0, 1.0, "CN(0, 1)")


for _suffix, _kw in (("default", {}), ("generator", {"generator": GEN})):
    add(f"aten::rand.{_suffix}", lambda size, dtype, kw=_kw: torch.rand(size, dtype=dtype, **kw),
        factory_samples(), _uniform_parts(0.0, 1.0, "rand"), name=f"rand.{_suffix}[complex]")
    add(f"aten::randn.{_suffix}",
        lambda size, dtype, kw=_kw: torch.randn(size, dtype=dtype, **kw), factory_samples(),
        _std_normal, name=f"randn.{_suffix}[complex]")
    add(f"aten::rand_like.{_suffix}",
        lambda x, dtype, kw=_kw: torch.rand_like(x, dtype=dtype, **kw), like_samples(),
        _uniform_parts(0.0, 1.0, "rand_like"), name=f"rand_like.{_suffix}[complex]")
    add(f"aten::randn_like.{_suffix}",
        lambda x, dtype, kw=_kw: torch.randn_like(x, dtype=dtype, **kw), like_samples(),
        _std_normal, name=f"randn_like.{_suffix}[complex]")


# -- normal ---------------------------------------------------------------------------------------

def _normal_check(z: np.ndarray, sample: Sample) -> None:
    mean, std = (to_numpy(a) if isinstance(a, torch.Tensor) else a for a in sample.args[:2])
    _normal_parts(z, mean, std, "normal")


def _complex_mean_only(sample: Sample) -> Sample:
    """normal's std must be real: the complex variant keeps its real part (the original std)."""
    mean, std = sample.args
    return Sample((mean, std.real.clone() if isinstance(std, torch.Tensor) else std))


def _by_id(entry_id: str) -> OpEntry:
    return next(e for e in random.ENTRIES if e.id == entry_id)


_variant = complex_variant(_by_id("aten::normal.Tensor_Tensor"))
add("aten::normal.Tensor_Tensor", torch.normal, _variant.samples.map(_complex_mean_only),
    _normal_check, name=_variant.name)


@st.composite
def normal_float_float_samples(draw: Any) -> Sample:
    mean, std = draw(st.sampled_from(((0.0, 1.0), (2.0, 0.5), (-1.0, 3.0), (1.0, 0.0))))
    return Sample((mean, std, draw(SIZES)), {"dtype": draw(st.sampled_from(COMPLEX))})


add("aten::normal.float_float", lambda m, s, size, dtype: torch.normal(m, s, size, dtype=dtype),
    normal_float_float_samples(),
    lambda z, s: _normal_parts(z, complex(s.args[0], s.args[0]), s.args[1], "normal"),
    name="normal.float_float[complex]")

# the in-place samplers: the complex variants of random.py's entries
add("aten::normal_functional.default", random._normal_,
    complex_variant(_by_id("aten::normal_functional.default")).samples,
    lambda z, s: _normal_parts(z, complex(s.args[1], s.args[1]), s.args[2], "normal_"),
    name="aten::normal_functional.default[complex]")


def _uniform_check(z: np.ndarray, sample: Sample) -> None:
    low, high = sample.args[1:]
    _uniform_parts(low, high, f"uniform_({low}, {high})")(z, sample)


add("aten::uniform.default", random._uniform_,
    complex_variant(_by_id("aten::uniform.default")).samples, _uniform_check,
    name="aten::uniform.default[complex]")

# dropout in eval mode (or p = 0): deterministic, compared with torch's values
ENTRIES.append(complex_variant(_by_id("aten::native_dropout.default")))
