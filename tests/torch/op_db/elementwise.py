"""Op-database entries (elementwise family): elementwise math, comparisons, logical ops,
activations, ldexp and the bitwise/shift overloads with a Python number."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from tests import reference
from tests.torch.op_db._entry import (
    ANY,
    FLOATS,
    INT_DTYPES,
    NUMERIC,
    SIGNED,
    EntrySet,
    Sample,
    broadcastable,
    complex_variant,
    complex_variants,
    shapes,
    tensors,
)

aten = torch.ops.aten
INTS = st.sampled_from(INT_DTYPES)


def unary(dtypes: st.SearchStrategy = FLOATS, low: float = -4.0, high: float = 4.0,
          special: bool = True, **kwargs: Any) -> st.SearchStrategy[Sample]:
    @st.composite
    def build(draw: Any) -> Sample:
        dtype = draw(dtypes)
        x = draw(tensors(draw(shapes()), dtype, low=low, high=high,
                         special=special and dtype.is_floating_point))
        return Sample((x,), {k: draw(v) for k, v in kwargs.items()})

    return build()


def binary(dtypes: st.SearchStrategy = NUMERIC, scalar: bool = False, low: float = -4.0,
           high: float = 4.0, rhs_low: float | None = None, mixed: bool = True,
           ) -> st.SearchStrategy[Sample]:
    """Two broadcastable tensors (or a tensor and a Python scalar); sometimes mixed dtypes."""
    @st.composite
    def build(draw: Any) -> Sample:
        dtype = draw(dtypes)
        shape = draw(shapes())
        x = draw(tensors(shape, dtype, low=low, high=high))
        lo = low if rhs_low is None else rhs_low
        if scalar:
            if dtype.is_floating_point:
                # quarter steps: exactly representable in every float type, half included
                y = draw(st.integers(int(lo * 4), int(high * 4))) / 4
            elif dtype == torch.bool:
                y = draw(st.booleans())
            else:
                y = draw(st.integers(int(lo), int(high)))
            return Sample((x, y))
        other = draw(dtypes) if mixed and draw(st.booleans()) else dtype
        y = draw(tensors(draw(broadcastable(shape)), other, low=lo, high=high))
        if draw(st.booleans()):
            x, y = y, x
        return Sample((x, y))

    return build()


def nonzero_rhs(sample: Sample) -> Sample:
    x, y = sample.args
    if isinstance(y, torch.Tensor):
        y = torch.where(y == 0, torch.ones_like(y), y)
    elif y == 0:
        y = 1
    return Sample((x, y), sample.kwargs)


def pair(dtypes: st.SearchStrategy, low: float = -4.0, high: float = 4.0,
         rhs_low: float | None = None, rhs_high: float | None = None, special: bool = True,
         mixed: bool = True) -> st.SearchStrategy[Sample]:
    """Two broadcastable tensors (either may be the larger); sometimes of different dtypes."""
    @st.composite
    def build(draw: Any) -> Sample:
        dtype = draw(dtypes)
        shape = draw(shapes())
        x = draw(tensors(shape, dtype, low=low, high=high, special=special))
        other = draw(dtypes) if mixed and draw(st.booleans()) else dtype
        lo = low if rhs_low is None else rhs_low
        hi = high if rhs_high is None else rhs_high
        y = draw(tensors(draw(broadcastable(shape)), other, low=lo, high=hi, special=special))
        return Sample((x, y))

    return build()


ENTRIES = EntrySet()


add = ENTRIES.add


# -- unary ------------------------------------------------------------------------------------
for name, lo, hi in [
    ("acos", -1.0, 1.0), ("acosh", 1.0, 5.0), ("asin", -1.0, 1.0), ("asinh", -4.0, 4.0),
    ("atan", -4.0, 4.0), ("atanh", -0.99, 0.99), ("cos", -4.0, 4.0), ("cosh", -4.0, 4.0),
    ("sin", -4.0, 4.0), ("sinh", -4.0, 4.0), ("tan", -1.5, 1.5), ("tanh", -4.0, 4.0),
    ("exp", -4.0, 4.0), ("exp2", -4.0, 4.0), ("expm1", -4.0, 4.0), ("log", 0.01, 5.0),
    ("log2", 0.01, 5.0), ("log10", 0.01, 5.0), ("log1p", -0.9, 5.0), ("sqrt", 0.0, 5.0),
    ("rsqrt", 0.01, 5.0), ("reciprocal", 0.1, 5.0), ("erf", -3.0, 3.0),
    ("erfinv", -0.99, 0.99), ("lgamma", 0.1, 6.0), ("digamma", 0.1, 6.0),
    ("sigmoid", -6.0, 6.0),
]:
    add(f"aten::{name}.default", getattr(torch, name), unary(low=lo, high=hi))
    add(f"aten::{name}.default", getattr(torch, name),
        unary(st.sampled_from(INT_DTYPES), low=max(lo, 1), high=max(hi, 3), special=False),
        name=f"{name}[int]")
add("aten::silu.default", F.silu, unary(),
    # torch's silu(-inf) is NaN (-inf * 0); the limit, which the runtime returns, is -0.0
    reference=reference.silu)
for name in ("abs", "neg", "sign", "floor", "ceil", "trunc", "relu"):
    dtypes = SIGNED if name in ("abs", "neg", "sign") else NUMERIC
    add(f"aten::{name}.default", getattr(torch, name), unary(dtypes))
add("aten::round.default", torch.round, unary(low=-6.0, high=6.0))
add("aten::round.decimals", lambda x, decimals: torch.round(x, decimals=decimals),
    unary(FLOATS, low=-60.0, high=60.0, decimals=st.integers(-2, 3)))
add("aten::bitwise_not.default", torch.bitwise_not,
    unary(st.sampled_from((*INT_DTYPES, torch.bool)), special=False))
add("aten::logical_not.default", torch.logical_not, unary(ANY))
for name in ("isnan", "isinf", "isfinite", "isposinf", "isneginf"):
    add(f"aten::{name}.default", getattr(torch, name), unary(NUMERIC))
add("aten::gelu.default", lambda x, approximate: F.gelu(x, approximate=approximate),
    unary(approximate=st.sampled_from(("none", "tanh"))),
    # torch's gelu(+inf) is NaN or +inf depending on the CPU's vector unit, gelu(-inf) NaN
    # where the limit is -0.0
    reference=reference.gelu)
# torch.special functions torch decomposes into this family's ops; the entries check torch's
# special values.
add("aten::sin.default", torch.sinc, unary(low=-5.0, high=5.0), name="sinc[decomposed]")
add("aten::log.default", torch.special.entr, unary(low=-1.0, high=5.0),
    name="special_entr[decomposed]")
add("aten::erf.default", torch.special.ndtr, unary(low=-6.0, high=6.0),
    name="special_ndtr[decomposed]")

# -- binary -----------------------------------------------------------------------------------
for name, fn in [("add", torch.add), ("sub", torch.sub), ("mul", torch.mul)]:
    dtypes = SIGNED if name == "sub" else NUMERIC
    add(f"aten::{name}.Tensor", fn, binary(dtypes))
add("aten::add.Tensor", lambda x, y, alpha: torch.add(x, y, alpha=alpha),
    st.builds(lambda s, a: Sample(s.args, {"alpha": a}),
              binary(st.sampled_from((torch.float32, torch.int64)), mixed=False),
              st.sampled_from((2, -1))), name="add.Tensor[alpha]")
# bool + bool is the logical or, bool * bool the logical and (alpha is a bool there)
add("aten::add.Tensor", lambda x, y, alpha: torch.add(x, y, alpha=alpha),
    st.builds(lambda s, a: Sample(s.args, {"alpha": a}), binary(st.just(torch.bool)),
              st.booleans()), name="add.Tensor[bool]")
add("aten::add.Tensor", torch.add, binary(st.just(torch.bool), scalar=True),
    name="add.Tensor[bool scalar]")
add("aten::mul.Tensor", torch.mul, binary(st.just(torch.bool)), name="mul.Tensor[bool]")
add("aten::mul.Tensor", torch.mul, binary(st.just(torch.bool), scalar=True),
    name="mul.Tensor[bool scalar]")
add("aten::sub.Tensor", lambda x, y, alpha: torch.sub(x, y, alpha=alpha),
    st.builds(lambda s, a: Sample(s.args, {"alpha": a}),
              binary(st.sampled_from((torch.float32, torch.int32)), mixed=False),
              st.sampled_from((2, 3))), name="sub.Tensor[alpha]")
add("aten::rsub.Scalar", lambda x, y: torch.rsub(x, y), binary(SIGNED, scalar=True))
add("aten::div.Tensor", torch.div, binary(FLOATS).map(nonzero_rhs))
add("aten::div.Tensor", torch.div, binary(st.sampled_from(INT_DTYPES)).map(nonzero_rhs),
    name="div.Tensor[int]")
add("aten::div.Tensor_mode", lambda x, y, mode: torch.div(x, y, rounding_mode=mode),
    st.builds(lambda s, m: Sample(s.args, {"mode": m}), binary(SIGNED).map(nonzero_rhs),
              st.sampled_from(("floor", "trunc"))))
for name in ("maximum", "minimum"):
    add(f"aten::{name}.default", getattr(torch, name), binary(NUMERIC, mixed=False))
for name, dtypes in [("fmod", SIGNED), ("remainder", SIGNED)]:
    add(f"aten::{name}.Tensor", getattr(torch, name), binary(dtypes).map(nonzero_rhs))
    add(f"aten::{name}.Scalar", getattr(torch, name),
        binary(dtypes, scalar=True, rhs_low=1).map(nonzero_rhs))
add("aten::floor_divide.default", torch.floor_divide, binary(SIGNED).map(nonzero_rhs))
add("aten::pow.Tensor_Tensor", torch.pow,
    binary(FLOATS, low=0.1, high=3.0, mixed=False))
add("aten::pow.Tensor_Scalar", torch.pow, binary(FLOATS, scalar=True, low=0.1, high=3.0))
add("aten::pow.Tensor_Scalar", torch.pow,
    binary(st.sampled_from((torch.int32, torch.int64)), scalar=True, low=0, high=4),
    name="pow.Tensor_Scalar[int]")
add("aten::pow.Scalar", lambda x, y: torch.pow(y, x),
    binary(FLOATS, scalar=True, low=0.1, high=3.0))
add("aten::atan2.default", torch.atan2, binary(FLOATS, mixed=False))
for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    dtypes = st.sampled_from((*INT_DTYPES, torch.bool))
    add(f"aten::{name}.Tensor", getattr(torch, name), binary(dtypes, mixed=False))
    add(f"aten::{name}.Scalar", getattr(torch, name),
        binary(st.sampled_from(INT_DTYPES), scalar=True))
for name in ("eq", "ne", "lt", "le", "gt", "ge"):
    add(f"aten::{name}.Tensor", getattr(torch, name), binary(NUMERIC))
    add(f"aten::{name}.Scalar", getattr(torch, name), binary(NUMERIC, scalar=True))
for name in ("logical_and", "logical_or", "logical_xor"):
    add(f"aten::{name}.default", getattr(torch, name), binary(ANY))


@st.composite
def _where(draw: Any) -> Sample:
    dtype = draw(ANY)
    shape = draw(shapes())
    cond = draw(tensors(draw(broadcastable(shape)), torch.bool))
    x = draw(tensors(shape, dtype))
    y = draw(tensors(draw(broadcastable(shape)), dtype))
    return Sample((cond, x, y))


add("aten::where.self", torch.where, _where())


@st.composite
def _clamp(draw: Any) -> Sample:
    dtype = draw(NUMERIC)
    x = draw(tensors(draw(shapes()), dtype, special=dtype.is_floating_point))
    lo = draw(st.one_of(st.none(), st.integers(-3, 0)))
    hi = draw(st.one_of(st.none(), st.integers(1, 3))) if lo is not None else 2
    return Sample((x,), {"min": lo, "max": hi})


add("aten::clamp.default", lambda x, min, max: torch.clamp(x, min, max), _clamp())
add("aten::clamp.Tensor", torch.clamp,
    st.builds(lambda s: Sample((s.args[0], torch.minimum(s.args[0], s.args[1]) - 1,
                                torch.maximum(s.args[0], s.args[1]))),
              binary(FLOATS, mixed=False)))

# -- activations ------------------------------------------------------------------------------
add("aten::hardtanh.default", lambda x: F.hardtanh(x, -0.5, 2.0), unary())
add("aten::leaky_relu.default", lambda x, s: F.leaky_relu(x, s),
    unary(s=st.sampled_from((0.01, 0.2))))
add("aten::elu.default", lambda x, a: F.elu(x, a), unary(a=st.sampled_from((1.0, 0.5))))
add("aten::selu.default", F.selu, unary())
add("aten::celu.default", lambda x, a: F.celu(x, a), unary(a=st.sampled_from((1.0, 2.0))))
add("aten::softplus.default", lambda x, b, t: F.softplus(x, b, t),
    unary(low=-30.0, high=30.0, b=st.sampled_from((1.0, 2.0)), t=st.sampled_from((20.0, 5.0))))
add("aten::mish.default", F.mish, unary(), reference=reference.zero_at_minus_inf(F.mish))
add("aten::log_sigmoid_forward.default", F.logsigmoid, unary(low=-30.0, high=30.0))
add("aten::hardsigmoid.default", F.hardsigmoid, unary())
add("aten::hardswish.default", F.hardswish, unary(),
    reference=reference.zero_at_minus_inf(F.hardswish))
add("aten::threshold.default", lambda x: F.threshold(x, 0.5, -2.0), unary())

# -- overloads reached by calling the aten op directly (Python code exports the Tensor form) --
for target, fn, samples in [
    ("aten::add.Scalar", lambda x, y: aten.add.Scalar(x, y), binary(NUMERIC, scalar=True)),
    ("aten::sub.Scalar", lambda x, y: aten.sub.Scalar(x, y), binary(SIGNED, scalar=True)),
    ("aten::mul.Scalar", lambda x, y: aten.mul.Scalar(x, y), binary(NUMERIC, scalar=True)),
    ("aten::div.Scalar", lambda x, y: aten.div.Scalar(x, y),
     binary(FLOATS, scalar=True, rhs_low=1)),
    ("aten::div.Scalar_mode", lambda x, y: aten.div.Scalar_mode(x, y, rounding_mode="floor"),
     binary(SIGNED, scalar=True, rhs_low=1)),
    ("aten::floor_divide.Scalar", lambda x, y: aten.floor_divide.Scalar(x, y),
     binary(SIGNED, scalar=True, rhs_low=1)),
    ("aten::remainder.Scalar_Tensor", lambda x, y: aten.remainder.Scalar_Tensor(y, x),
     binary(SIGNED, scalar=True).map(
         lambda s: Sample((torch.where(s.args[0] == 0, torch.ones_like(s.args[0]), s.args[0]),
                           s.args[1])))),
    ("aten::rsub.Tensor", lambda x, y: aten.rsub.Tensor(x, y), binary(SIGNED)),
    ("aten::true_divide.Tensor", lambda x, y: aten.true_divide.Tensor(x, y),
     binary(FLOATS).map(nonzero_rhs)),
    ("aten::clamp_min.default", lambda x, y: aten.clamp_min.default(x, y),
     binary(NUMERIC, scalar=True)),
    ("aten::clamp_max.default", lambda x, y: aten.clamp_max.default(x, y),
     binary(NUMERIC, scalar=True)),
    ("aten::clip.default", lambda x: aten.clip.default(x, -1.0, 2.0), unary()),
    ("aten::where.ScalarOther", lambda c, x: aten.where.ScalarOther(c, x, 0.5),
     binary(FLOATS, mixed=False).map(lambda s: Sample((s.args[0] > 0, s.args[1])))),
    ("aten::where.ScalarSelf", lambda c, x: aten.where.ScalarSelf(c, -1.5, x),
     binary(FLOATS, mixed=False).map(lambda s: Sample((s.args[0] > 0, s.args[1])))),
    ("aten::where.Scalar", lambda c: aten.where.Scalar(c, 1.0, 0.0),
     unary().map(lambda s: Sample((s.args[0] > 0,)))),
    ("aten::bitwise_left_shift.Tensor", torch.bitwise_left_shift,
     binary(st.sampled_from((torch.int32, torch.int64)), low=0, high=5, mixed=False)),
    ("aten::bitwise_right_shift.Tensor", torch.bitwise_right_shift,
     binary(st.sampled_from((torch.int32, torch.int64)), low=0, high=5, mixed=False)),
]:
    add(target, fn, samples)


@st.composite
def _clip_tensor(draw: Any) -> Sample:
    dtype = draw(FLOATS)
    x = draw(tensors(draw(shapes()), dtype, special=True))
    return Sample((x, x.new_tensor(-0.5), x.new_tensor(1.5)))


add("aten::clip.Tensor", lambda x, lo, hi: aten.clip.Tensor(x, lo, hi), _clip_tensor())

@st.composite
def _one_hot(draw: Any) -> Sample:
    shape = draw(shapes(0, 3))
    classes = draw(st.sampled_from((1, 3, 7, 47)))
    x = draw(tensors(shape, torch.int64, low=0, high=classes - 1))
    return Sample((x,), {"num_classes": classes})


# one_hot is CompositeImplicit: export traces it into eq(x[..., None], arange(num_classes))
add("aten::eq.Tensor", F.one_hot, _one_hot(), name="one_hot")


# -- ldexp: self * 2**other ----------------------------------------------------------------
add("aten::ldexp.Tensor", torch.ldexp,
    pair(FLOATS, low=-4.0, high=4.0, special=False).map(
        lambda s: Sample((s.args[0], s.args[1].round().to(torch.int32)))))
add("aten::ldexp.Tensor", torch.ldexp, pair(NUMERIC, low=-6, high=6, special=False),
    name="ldexp[mixed]")
# integer exponents beyond float32's range: torch scales exactly in the result dtype
add("aten::ldexp.Tensor", torch.ldexp,
    pair(st.sampled_from((torch.float64, torch.complex128)), special=False).map(
        lambda s: Sample((s.args[0], (s.args[1].real * 300).round().to(torch.int64)))),
    name="ldexp[wide exponents]")


# -- bitwise ops on every integer dtype, shift amounts out of range included -----------------------
@st.composite
def _shift(draw: Any, form: str) -> Sample:
    dtype = draw(INTS)
    bits = torch.iinfo(dtype).bits
    shape = draw(shapes())
    x = draw(tensors(shape, dtype, low=-2**63, high=2**63 - 2))
    if form == "scalar":  # wraps to the tensor's dtype, like torch
        return Sample((x, draw(st.integers(-3, 300))))
    s = draw(tensors(draw(broadcastable(shape)), dtype, low=-3, high=bits + 3))
    if form == "scalar_tensor":
        return Sample((draw(st.integers(-100, 100)), s))
    return Sample((x, s) if draw(st.booleans()) else (s, x))


for name, op in [("bitwise_left_shift", "__lshift__"), ("bitwise_right_shift", "__rshift__")]:
    fn = getattr(torch, name)
    add(f"aten::{name}.Tensor", fn, _shift("tensor"), name=f"{name}.Tensor[all dtypes]")
    add(f"aten::{name}.Tensor_Scalar", fn, _shift("scalar"))
    add(f"aten::{name}.Scalar_Tensor", fn, _shift("scalar_tensor"))
    method = getattr(torch.Tensor, op)
    add(f"aten::{op}.Tensor", method, _shift("tensor"))
    add(f"aten::{op}.Scalar", method, _shift("scalar"))


@st.composite
def _scalar_tensor(draw: Any) -> Sample:
    dtype = draw(st.sampled_from((*INT_DTYPES, torch.bool)))
    x = draw(tensors(draw(shapes()), dtype, low=-2**63, high=2**63 - 2))
    return Sample((draw(st.booleans() if dtype == torch.bool else st.integers(-100, 100)), x))


for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    add(f"aten::{name}.Scalar_Tensor", getattr(aten, name).Scalar_Tensor, _scalar_tensor())

# -- the same entries on complex inputs (torch supports these targets on complex tensors) -------
ENTRIES += complex_variants(ENTRIES, [
    "aten::logical_not.default", "aten::logical_and.default", "aten::logical_or.default",
    "aten::logical_xor.default", "aten::rsub.Scalar", "aten::rsub.Tensor", "aten::eq.Scalar",
    "aten::ne.Scalar", "aten::add.Scalar", "aten::sub.Scalar", "aten::mul.Scalar",
    "aten::div.Scalar", "aten::true_divide.Tensor", "aten::where.ScalarOther",
    "aten::where.ScalarSelf"])
ENTRIES += complex_variants(
    ENTRIES, ["aten::pow.Scalar"], atol=1e-4, rtol=1e-4,
    tol_reason="a real base to a complex power is exp(z * log(b)) in both, rounded differently")
# a zero imaginary part, so that exact complex zeros (false) occur
ENTRIES += [complex_variant(e, imag=0.0, name=f"{e.id}[complex, real-valued]")
            for e in ENTRIES if e.target in {"aten::logical_not.default",
                                             "aten::logical_and.default",
                                             "aten::logical_or.default",
                                             "aten::logical_xor.default"}
            and not e.name]
# ldexp of a complex mantissa (the exponent stays an integer tensor)
ENTRIES += complex_variants([e for e in ENTRIES if not e.name], ["aten::ldexp.Tensor"])
