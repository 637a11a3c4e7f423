"""The whole op database in float16 and bfloat16, with inputs scaled into the overflow ranges.

Each entry's samples have their floating tensors cast to the half type and (mostly) scaled by
one common factor so that the largest magnitude is one of ``PEAKS``: where exp, squares and
sums overflow a half type computed naively (float16: exp(x) from x ~ 11, x*x from ~ 256, sums
of squares of 47 values from ~ 37; bfloat16: exp(x) from ~ 89, x*x from ~ 1.8e19). The
converted program runs on those inputs, and each floating output's error against the exact
answer (``half_accuracy``) must be no worse than twice torch's own CPU error on the same
inputs plus ``SLACK_ULPS``. Where torch's result depends on the vector unit or is NaN where
the function has a limit, the exact answer is the judge, so the correct value passes.

Entries that are not run say why in their ``no_half`` field (data in the op database).
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.torch import op_db
from tests.torch.half_accuracy import HALF_DTYPES, exact_result, ulp_error, widened
from tests.torch.harness import FnModule, convert, export, flatten, to_numpy
from tests.torch.op_db._entry import OpEntry, Sample

# Few examples per entry (each exports a module): a quarter of the profile's count, 25 with
# HYPOTHESIS_PROFILE=dev, the half type and peak drawn with the sample. The CI profile keeps the
# suite's time bounded with one example per entry, its half type and peak rotated across the
# entries by a stable hash of the entry's id, so every (type, peak) pair is run on about an
# eighth of the database in every CI run.
HALF_EXAMPLES = 1 if settings.default.max_examples <= 12 else settings.default.max_examples // 4
SEED = 0

# The largest input magnitude a sample is scaled to (None: the entry's own range).
PEAKS = {
    torch.float16: (None, 12.0, 300.0, 60000.0),
    torch.bfloat16: (None, 100.0, 1e5, 1e30),
}

# Our error may exceed twice torch's by this many ulps of the half type: our float32
# intermediate differs from torch's in its last float32 bits (a different but equally exact
# formula, or numpy's transcendental functions), and its one rounding to the half type can
# then land one ulp from torch's; a relative error measured against the rounded exact value
# counts that ulp up to twice.
SLACK_ULPS = 2.0

RUN = [e for e in op_db.ENTRIES if not e.no_half]


CASTABLE = (torch.float64, torch.float32, *HALF_DTYPES)


def _floats(sample: Sample) -> list[torch.Tensor]:
    """The sample's tensors the test casts (float8 and complex ones stay as they are)."""
    return [a for a in (*sample.args, *sample.kwargs.values())
            if isinstance(a, torch.Tensor) and a.dtype in CASTABLE]


def to_half(sample: Sample, dtype: torch.dtype, peak: float | None) -> Sample:
    """``sample`` with its floating tensors cast to ``dtype``, all scaled by one factor so that
    the largest finite magnitude among them is ``peak`` (order and signs are kept)."""
    finite = [t[t.isfinite()].abs().max().item() for t in _floats(sample)
              if t.isfinite().any()]
    top = max(finite, default=0.0)
    factor = peak / top if peak is not None and top > 0 else 1.0

    def convert(a: Any) -> Any:
        if isinstance(a, torch.Tensor) and a.dtype in CASTABLE:
            return (a.to(torch.float64) * factor).to(dtype)
        return a

    return Sample(tuple(convert(a) for a in sample.args),
                  {k: convert(v) for k, v in sample.kwargs.items()})


def _call(fn: Any, args: Any, kwargs: dict[str, Any]) -> list[torch.Tensor]:
    with torch.no_grad():
        return flatten(fn(*args, **kwargs))


def _exact(entry: OpEntry, sample: Sample) -> list[torch.Tensor]:
    """The op on the half inputs widened to float64 (float32 where torch has no float64)."""
    fn = entry.reference or entry.fn
    try:
        return _call(fn, *widened(sample.args, sample.kwargs, torch.float64))
    except Exception:  # an op (or its wrapper's dtype check) without float64
        return _call(fn, *widened(sample.args, sample.kwargs, torch.float32))


def check_half(entry: OpEntry, sample: Sample) -> None:
    """Converts and runs ``sample`` (half inputs) and judges each output as described above."""
    try:
        torch_half = _call(entry.fn, sample.args, sample.kwargs)
    except Exception as e:  # torch's kernels raise several types
        if any(word in str(e) for word in ("Half", "BFloat16", "dtype")):
            raise AssertionError(
                f"{entry.id}: torch has no half kernel ({e}); record the reason as the "
                "entry's no_half in the op database") from e
        assume(False)  # an input the scaling made invalid for torch (e.g. a probability > 1)
        raise
    exact = _exact(entry, sample)
    module = FnModule(entry.fn, sample.args, sample.kwargs)
    inputs = [a for a in sample.args if isinstance(a, torch.Tensor)]
    program = convert(export(module, inputs))
    feeds = [to_numpy(t) for t in inputs]
    for stage in ("converted", "optimized"):
        if stage == "optimized":
            program.optimize()
        got = list(program.run(feeds, seed=SEED).values())
        assert len(got) == len(torch_half), f"{entry.id}: {len(got)} outputs, torch has " \
                                             f"{len(torch_half)}"
        if entry.compare is not None:
            entry.compare(torch_half, got, sample)
            continue
        for i, (t, e, g) in enumerate(zip(torch_half, exact, got, strict=True)):
            _judge(f"{entry.id} ({stage}) output {i}", t, e, np.asarray(g))


def _judge(what: str, torch_out: torch.Tensor, exact: torch.Tensor, got: np.ndarray) -> None:
    assert tuple(got.shape) == tuple(torch_out.shape), \
        f"{what}: shape {got.shape} != torch {tuple(torch_out.shape)}"
    want = to_numpy(torch_out)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != torch {want.dtype}"
    if torch_out.dtype not in HALF_DTYPES:
        # integers, bools, indices, float32 statistics: equal to torch's or the exact answer
        if np.array_equal(got, want, equal_nan=want.dtype.kind == "f"):
            return
        if torch_out.dtype.is_floating_point:
            ref = exact.to(torch.float64).numpy()
            theirs = ulp_error(want, ref, torch_out.dtype)
            ours = ulp_error(got, ref, torch_out.dtype)
            assert ours <= 2 * theirs + SLACK_ULPS, \
                f"{what}: error {ours:.3g} ulps, torch's {theirs:.3g} ulps"
            return
        np.testing.assert_array_equal(got, exact.to(torch_out.dtype).numpy(), err_msg=what)
        return
    ref = exact_result(exact, torch_out.dtype)
    theirs = ulp_error(want.astype(np.float64), ref, torch_out.dtype)
    ours = ulp_error(got.astype(np.float64), ref, torch_out.dtype)
    assert ours <= 2 * theirs + SLACK_ULPS, (
        f"{what}: error {ours:.3g} ulps of {torch_out.dtype}, torch's {theirs:.3g} ulps")


@pytest.mark.parametrize("entry", RUN, ids=lambda e: e.id)
def test_half_as_accurate_as_torch(entry: OpEntry) -> None:
    pairs = [(d, p) for d in HALF_DTYPES for p in PEAKS[d]]
    if HALF_EXAMPLES == 1:  # the CI profile: one pair per entry, rotated (see HALF_EXAMPLES);
        # the entry's own range at that type too, for entries a scaled peak cannot satisfy
        # (probabilities of bernoulli)
        dtype, peak = pairs[zlib.crc32(entry.id.encode()) % len(pairs)]
        pairs = [(dtype, peak), (dtype, None)]

    @settings(max_examples=HALF_EXAMPLES, suppress_health_check=[HealthCheck.filter_too_much])
    @given(sample=entry.samples.filter(lambda s: bool(_floats(s))),
           dtype_peak=st.sampled_from(pairs))
    def check(sample: Sample, dtype_peak: tuple[torch.dtype, float | None]) -> None:
        check_half(entry, to_half(sample, *dtype_peak))

    check()


def test_entries_not_run_say_why() -> None:
    """A reason names what is missing (a torch kernel, a floating input), not just "skip"."""
    short = [e.id for e in op_db.ENTRIES if e.no_half and len(e.no_half.split()) < 6]
    assert not short, f"no_half reasons too short to explain anything: {short}"


# Composite activations over a grid through each half type's whole range (torch computes
# them in float32 and rounds once; a lowering that rounds each step overflows: softplus(12)
# in float16 would be log1p(inf)).
COMPOSITES = {
    "softplus": torch.nn.functional.softplus,
    "softplus(beta=2, threshold=5)": lambda x: torch.nn.functional.softplus(x, 2.0, 5.0),
    "mish": torch.nn.functional.mish,
    "elu": torch.nn.functional.elu,
    "selu": torch.nn.functional.selu,
    "celu(alpha=2)": lambda x: torch.nn.functional.celu(x, 2.0),
    "logsigmoid": torch.nn.functional.logsigmoid,
    "hardswish": torch.nn.functional.hardswish,
    "hardsigmoid": torch.nn.functional.hardsigmoid,
    "xlogy": lambda x: torch.xlogy(x, x.abs()),
}


def _grid(dtype: torch.dtype) -> torch.Tensor:
    """0, +-[2**-10, largest finite] log-spaced, and the integers 8..20 (softplus's cliff)."""
    top = torch.finfo(dtype).max
    mags = torch.logspace(-10, float(np.log2(top)), 97, base=2, dtype=torch.float64)
    cliff = torch.arange(8, 21, dtype=torch.float64)
    return torch.cat([mags, -mags, cliff, -cliff, torch.zeros(1, dtype=torch.float64)]).to(dtype)


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite_activation_over_the_half_range(name: str, dtype: torch.dtype) -> None:
    fn = COMPOSITES[name]
    x = _grid(dtype)
    program = convert(export(FnModule(fn, (x,), {}), [x]))
    (got,) = program.run([to_numpy(x)]).values()
    _judge(f"{name} on {dtype}", fn(x), fn(x.to(torch.float64)), np.asarray(got))
