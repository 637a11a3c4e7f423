"""Built-in lowerings (random family): random — rand/randn/randint/randperm/random_ factories,
bernoulli, normal, the in-place samplers export makes functional (uniform, exponential, geometric,
cauchy, log_normal), multinomial, dropout in training mode and rrelu.

Every lowering draws from the dialect's random ops (``coreai.random_*``, see the Random
section of docs/dialect.md): the converted program is seeded by ``program.run(..., seed=)``,
never by torch's generator, so its numbers differ from torch's. Distributions torch samples
by a transform of a uniform or normal draw are lowered to the same *exact* transform computed
in float64 and rounded once to the result dtype:

- exponential(lambd) = -log1p(-U) / lambd                  (U uniform in [0, 1))
- geometric(p)       = max(1, ceil(log1p(-U) / log1p(-p)))  (support 1, 2, ...)
- cauchy(m, s)       = m + s * tan(pi * (U - 1/2))
- log_normal(m, s)   = exp(m + s * Z)                       (Z standard normal)
- normal(mean, std)  = mean + std * Z                       (tensor mean/std broadcast)

Complex results follow torch, which fills both parts of ``view_as_real(out)``: uniforms draw
each part in [low, high); normals draw each part from N(mean, std**2 / 2) (a scalar mean
applies to both parts; a complex mean tensor is added as it is), so ``randn`` has variance 1.

What export leaves in the graph: the factories, ``bernoulli``, ``normal`` and ``multinomial``
as themselves; the in-place samplers (``x.uniform_()``, ``normal_``, ``exponential_``, ...) as
their functional forms; ``F.dropout`` as ``native_dropout``; ``F.rrelu`` (decomposed by
torch's table) as ``rrelu_with_noise_functional`` with an ``empty_like`` noise; alpha and
feature dropout as ``bernoulli.p`` plus arithmetic. ``bernoulli.default`` is in torch's default
decomposition table (``rand < p``, with a float32 uniform); it is lowered natively instead,
so ``p`` is compared with a float64 uniform.

A ``torch.Generator`` passed as ``generator=`` (export lifts it to an input of its own) is
accepted and ignored: the program's random ops draw from the run's generator instead.
Factory options (``dtype``, ``layout``, ``device``, ``pin_memory``, ``memory_format``) arrive
in ``**options`` and are not read: the result type comes from torch's metadata.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._nn_utils import opmath
from coreai_torch.lowerings.tensor_creation import shape_of, shape_operand, size_piece
from coreai_torch.utils import cast_to, result_dtype, result_type

LOWERINGS = LoweringSet("random")
reg = LOWERINGS.register_torch_lowering

F64 = DType.float64


# -- shapes and bounds ----------------------------------------------------------------------------

def _size(size: Sequence[int | Value]) -> Any:
    """A ``SymInt[] size`` argument (symbolic entries arrive as 0-d Values) as a shape operand."""
    pieces = [s if isinstance(s, int) else coreai.reshape(cast_to(s, DType.int64), [1])
              for s in size]
    return shape_operand(pieces)


def _result_shape() -> np.ndarray | None:
    """The shape of the node being lowered, when torch knows it statically."""
    t = result_type()
    return np.asarray(t.shape, np.int64).reshape(t.rank) if t.is_static else None


def _integers(shape: Any, low: int | Value, high: int | Value, dtype: DType) -> Value:
    """Uniform integers in [low, high) as ``dtype`` (bool goes through int64). Symbolic bounds
    are passed at run time (the op's ``bounds``), limited to the dtype's range."""
    draw = DType.int64 if dtype is DType.bool else dtype
    if isinstance(low, int) and isinstance(high, int):
        if low >= high:
            raise ValueError(f"random integers need low < high, got [{low}, {high})")
        out = coreai.random_integers(shape, low=low, high=high, dtype=draw)
    else:
        info = np.iinfo(draw.numpy if draw.is_int else np.int64)
        bounds = shape_operand([size_piece(low), size_piece(high)])
        out = coreai.random_integers(shape, low=int(info.min), high=int(info.max),
                                     dtype=draw, bounds=bounds)
    return cast_to(out, dtype)


def _unit_uniform(shape: Any) -> Value:
    """Float64 uniforms in [0, 1) (the source of the exact transforms)."""
    return coreai.random_uniform(shape, low=0.0, high=1.0, dtype=F64)


def _f64(value: float) -> Value:
    return coreai.constant(value, dtype=F64)


# -- complex results: torch fills view_as_real(out), i.e. both parts, independently ---------------

def _parts(draw: Callable[[DType], Value], dtype: DType) -> Value:
    """``draw(dtype)``; for a complex dtype, ``draw`` of its part type twice, as the real and
    the imaginary part."""
    if not dtype.is_complex:
        return draw(dtype)
    return coreai.complex_(draw(dtype.real_dtype), draw(dtype.real_dtype))


def _uniform(shape: Any, low: float = 0.0, high: float = 1.0, *, dtype: DType) -> Value:
    """Uniforms in [low, high); on complex dtypes each part is (as torch's uniform_)."""
    return _parts(lambda d: coreai.random_uniform(shape, low=low, high=high, dtype=d), dtype)


def _normal_fill(shape: Any, mean: float = 0.0, std: float = 1.0, *, dtype: DType) -> Value:
    """``mean + std * z``. On complex dtypes, as torch's normal_: each part is
    N(mean, std**2 / 2) (so randn's complex values have variance 1)."""
    part_std = std / math.sqrt(2.0) if dtype.is_complex else std
    return _parts(lambda d: coreai.random_normal(shape, mean=mean, std=part_std, dtype=d), dtype)


# -- factories ------------------------------------------------------------------------------------

@reg("aten::rand.default")
@reg("aten::rand.generator")
def aten_rand_default(size: list[int | Value], **options: Any) -> Value:
    """rand(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor"""
    return _uniform(_size(size), dtype=result_dtype())


@reg("aten::randn.default")
@reg("aten::randn.generator")
def aten_randn_default(size: list[int | Value], **options: Any) -> Value:
    """randn(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor"""
    return _normal_fill(_size(size), dtype=result_dtype())


@reg("aten::rand_like.default")
@reg("aten::rand_like.generator")
def aten_rand_like_default(self: Value, **options: Any) -> Value:
    """rand_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"""
    return _uniform(shape_of(self), dtype=result_dtype())


@reg("aten::randn_like.default")
@reg("aten::randn_like.generator")
def aten_randn_like_default(self: Value, **options: Any) -> Value:
    """randn_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"""
    return _normal_fill(shape_of(self), dtype=result_dtype())


@reg("aten::randint.default")
@reg("aten::randint.generator")
def aten_randint_default(high: int | Value, size: list[int | Value], **options: Any) -> Value:
    """randint(SymInt high, SymInt[] size, *, ScalarType? dtype=4, Layout? layout=None,
    Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _integers(_size(size), 0, high, result_dtype())


@reg("aten::randint.low")
@reg("aten::randint.low_generator")
def aten_randint_low(low: int | Value, high: int | Value, size: list[int | Value],
                     **options: Any) -> Value:
    """randint.low(SymInt low, SymInt high, SymInt[] size, *, ScalarType? dtype=4,
    Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _integers(_size(size), low, high, result_dtype())


@reg("aten::randint_like.default")
@reg("aten::randint_like.generator")
def aten_randint_like_default(self: Value, high: int | Value, **options: Any) -> Value:
    """randint_like(Tensor self, SymInt high, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"""
    return _integers(shape_of(self), 0, high, result_dtype())


# randint_like.Tensor_generator is not registered: torch 2.13 cannot export it (its fake
# kernel fails with "high must be a scalar tensor and on CPU"), so no test could reach it.
@reg("aten::randint_like.Tensor")
def aten_randint_like_tensor(self: Value, high: Value, **options: Any) -> Value:
    """randint_like.Tensor(Tensor self, Tensor high, *, ScalarType? dtype=None,
    Layout? layout=None, Device? device=None, bool? pin_memory=None,
    MemoryFormat? memory_format=None) -> Tensor (``high``: a 0-d integer tensor, read at run
    time)"""
    if high.type.rank != 0 or not high.type.element_type.is_int:
        raise ValueError(f"randint_like expects high as a 0-d integer tensor, got {high.type}")
    return _integers(shape_of(self), 0, high, result_dtype())


@reg("aten::randint_like.low_dtype")
@reg("aten::randint_like.low_generator_dtype")
def aten_randint_like_low_dtype(self: Value, low: int | Value, high: int | Value,
                                **options: Any) -> Value:
    """randint_like.low_dtype(Tensor self, SymInt low, SymInt high, *, ScalarType? dtype=None,
    Layout? layout=None, Device? device=None, bool? pin_memory=None,
    MemoryFormat? memory_format=None) -> Tensor"""
    return _integers(shape_of(self), low, high, result_dtype())


@reg("aten::randperm.default")
@reg("aten::randperm.generator")
def aten_randperm_default(n: int | Value, **options: Any) -> Value:
    """randperm(SymInt n, *, ScalarType? dtype=4, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor"""
    if isinstance(n, Value):
        return coreai.random_permutation(-1, dtype=result_dtype(),
                                         length=cast_to(n, DType.int64))
    return coreai.random_permutation(n, dtype=result_dtype())


# Significand digits: random_() on a float tensor draws from [0, 2**digits], all exact.
_DIGITS = {DType.float64: 53, DType.float32: 24, DType.float16: 11, DType.bfloat16: 8}


def _random_top(dtype: DType) -> int:
    """The inclusive upper bound of ``random_()`` without ``to`` (torch's random kernel)."""
    if dtype is DType.bool:
        return 1
    if dtype.is_float:
        return 1 << _DIGITS[dtype]
    return int(np.iinfo(dtype.numpy).max)


@reg("aten::random.default")
def aten_random_default(self: Value) -> Value:
    """random(Tensor self, *, Generator? generator=None) -> Tensor"""
    dtype = result_dtype()
    return _integers(shape_of(self), 0, _random_top(dtype) + 1, dtype)


@reg("aten::random.to")
def aten_random_to(self: Value, to: int) -> Value:
    """random.to(Tensor self, int to, *, Generator? generator=None) -> Tensor"""
    return _integers(shape_of(self), 0, to, result_dtype())


# -- bernoulli ------------------------------------------------------------------------------------

def _bernoulli(p: Value) -> Value:
    """0/1 in the node's result dtype, 1 with probability ``p`` (elementwise)."""
    return cast_to(coreai.random_bernoulli(p), result_dtype())


@reg("aten::bernoulli.default")
def aten_bernoulli_default(self: Value) -> Value:
    """bernoulli(Tensor self, *, Generator? generator=None) -> Tensor"""
    return _bernoulli(self)


@reg("aten::bernoulli.p")
def aten_bernoulli_p(self: Value, p: float) -> Value:
    """bernoulli.p(Tensor self, float p, *, Generator? generator=None) -> Tensor"""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"bernoulli expects p in [0, 1], got {p}")
    return _bernoulli(coreai.broadcast_to(_f64(p), shape_of(self)))


@reg("aten::bernoulli.Tensor")
def aten_bernoulli_tensor(self: Value, p: Value) -> Value:
    """bernoulli.Tensor(Tensor self, Tensor p, *, Generator? generator=None) -> Tensor"""
    prob = p if p.type.element_type.is_float else cast_to(p, F64)
    return _bernoulli(coreai.broadcast_to(prob, shape_of(self)))


# -- normal and the functional samplers ----------------------------------------------------------

def _normal(mean: Value | float, std: Value | float, shape: Any) -> Value:
    """``mean + std * Z`` in float64 (complex128 for a complex mean: Z's parts are then
    N(0, 1/2), as torch's), rounded once to the result dtype."""
    compute = DType.complex128 if result_dtype().is_complex else F64
    z = _normal_fill(shape, dtype=compute)
    m = cast_to(mean, compute)
    s = cast_to(std, compute)
    return cast_to(coreai.broadcasting_add(m, coreai.broadcasting_mul(s, z)), result_dtype())


def _check_std(std: float) -> None:
    if not std >= 0.0:
        raise ValueError(f"normal expects std >= 0, got {std}")


def _broadcast_shape(a: Value, b: Value) -> Any:
    known = _result_shape()
    if known is not None:
        return known
    return coreai.get_shape(coreai.broadcasting_add(cast_to(a, F64), cast_to(b, F64)))


@reg("aten::normal.Tensor_float")
def aten_normal_tensor_float(mean: Value, std: float = 1.0) -> Value:
    """normal.Tensor_float(Tensor mean, float std=1., *, Generator? generator=None) -> Tensor"""
    _check_std(std)
    return _normal(mean, std, shape_of(mean))


@reg("aten::normal.float_Tensor")
def aten_normal_float_tensor(mean: float, std: Value) -> Value:
    """normal.float_Tensor(float mean, Tensor std, *, Generator? generator=None) -> Tensor"""
    return _normal(mean, std, shape_of(std))


@reg("aten::normal.Tensor_Tensor")
def aten_normal_tensor_tensor(mean: Value, std: Value) -> Value:
    """normal.Tensor_Tensor(Tensor mean, Tensor std, *, Generator? generator=None) -> Tensor"""
    return _normal(mean, std, _broadcast_shape(mean, std))


@reg("aten::normal.float_float")
def aten_normal_float_float(mean: float, std: float, size: list[int | Value],
                            **options: Any) -> Value:
    """normal.float_float(float mean, float std, SymInt[] size, *, Generator? generator=None,
    ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None)
    -> Tensor"""
    _check_std(std)
    return _normal_fill(_size(size), mean, std, dtype=result_dtype())


@reg("aten::normal_functional.default")
def aten_normal_functional_default(self: Value, mean: float = 0.0, std: float = 1.0) -> Value:
    """normal_functional(Tensor self, float mean=0., float std=1., *,
    Generator? generator=None) -> Tensor"""
    _check_std(std)
    return _normal_fill(shape_of(self), mean, std, dtype=result_dtype())


@reg("aten::uniform.default")
def aten_uniform_default(self: Value, from_: float = 0.0, to: float = 1.0) -> Value:
    """uniform(Tensor self, float from=0., float to=1., *, Generator? generator=None) -> Tensor"""
    if not from_ <= to:
        raise ValueError(f"uniform expects from <= to, got from={from_}, to={to}")
    return _uniform(shape_of(self), from_, to, dtype=result_dtype())


@reg("aten::exponential.default")
def aten_exponential_default(self: Value, lambd: float = 1.0) -> Value:
    """exponential(Tensor self, float lambd=1., *, Generator? generator=None) -> Tensor"""
    if not lambd > 0.0:
        raise ValueError(f"exponential expects lambd > 0, got {lambd}")
    u = _unit_uniform(shape_of(self))
    e = coreai.broadcasting_divide(coreai.neg(coreai.log1p(coreai.neg(u))), _f64(lambd))
    return cast_to(e, result_dtype())


@reg("aten::geometric.default")
def aten_geometric_default(self: Value, p: float) -> Value:
    """geometric(Tensor self, float p, *, Generator? generator=None) -> Tensor"""
    if not 0.0 < p <= 1.0:
        raise ValueError(f"geometric expects p in (0, 1], got {p}")
    u = _unit_uniform(shape_of(self))
    k = coreai.ceil(coreai.broadcasting_divide(coreai.log1p(coreai.neg(u)),
                                               _f64(math.log1p(-p))))
    return cast_to(coreai.broadcasting_maximum(k, _f64(1.0)), result_dtype())


@reg("aten::cauchy.default")
def aten_cauchy_default(self: Value, median: float = 0.0, sigma: float = 1.0) -> Value:
    """cauchy(Tensor self, float median=0., float sigma=1., *, Generator? generator=None)
    -> Tensor"""
    if not sigma > 0.0:
        raise ValueError(f"cauchy expects sigma > 0, got {sigma}")
    u = _unit_uniform(shape_of(self))
    t = coreai.tan(coreai.broadcasting_mul(coreai.broadcasting_sub(u, _f64(0.5)), _f64(math.pi)))
    c = coreai.broadcasting_add(_f64(median), coreai.broadcasting_mul(_f64(sigma), t))
    return cast_to(c, result_dtype())


@reg("aten::log_normal.default")
def aten_log_normal_default(self: Value, mean: float = 1.0, std: float = 2.0) -> Value:
    """log_normal(Tensor self, float mean=1., float std=2., *, Generator? generator=None)
    -> Tensor"""
    if not std > 0.0:
        raise ValueError(f"log_normal expects std > 0, got {std}")
    z = coreai.random_normal(shape_of(self), mean=mean, std=std, dtype=F64)
    return cast_to(coreai.exp(z), result_dtype())


@reg("aten::multinomial.default")
def aten_multinomial_default(self: Value, num_samples: int | Value,
                             replacement: bool = False) -> Value:
    """multinomial(Tensor self, SymInt num_samples, bool replacement=False, *,
    Generator? generator=None) -> Tensor"""
    if isinstance(num_samples, Value):
        return coreai.random_multinomial(self, num_samples=-1, replacement=replacement,
                                         samples=cast_to(num_samples, DType.int64))
    return coreai.random_multinomial(self, num_samples=num_samples, replacement=replacement)


# -- dropout and rrelu ---------------------------------------------------------------------------

def dropout(x: Value, p: float) -> tuple[Value, Value]:
    """Training-mode dropout, as torch's CPU kernel: keep = bernoulli(1 - p), out = x * keep *
    1/(1-p) in opmath (so NaN and inf stay NaN where dropped, like torch). Returns (out, keep)."""
    dtype = x.type.element_type
    compute = opmath(dtype)
    keep = coreai.random_bernoulli(coreai.broadcast_to(_f64(1.0 - p), shape_of(x)))
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    kept = coreai.broadcasting_mul(cast_to(x, compute), cast_to(keep, compute))
    out = coreai.broadcasting_mul(kept, coreai.constant(scale, dtype=compute))
    return cast_to(out, dtype), keep


@reg("aten::native_dropout.default")
def aten_native_dropout_default(input: Value, p: float, train: bool | None) -> tuple[Value, Value]:
    """native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)

    Inference (``train=False``) is the identity with an all-True mask; training (True or None,
    like torch) drops each element with probability ``p`` and scales the rest by 1/(1-p).
    """
    if train is False:
        shape = shape_of(input)
        return input, coreai.broadcast_to(coreai.constant(True, dtype=DType.bool), shape)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, got {p}")
    if p == 0.0:  # keeps everything: no draw needed
        shape = shape_of(input)
        return input, coreai.broadcast_to(coreai.constant(True, dtype=DType.bool), shape)
    out, keep = dropout(input, p)
    return out, cast_to(keep, result_dtype(index=1))


@reg("aten::rrelu_with_noise_functional.default")
def aten_rrelu_with_noise_functional_default(
        self: Value, noise: Value, lower: float = 0.125, upper: float = 1.0 / 3.0,
        training: bool = False) -> tuple[Value, Value]:
    """rrelu_with_noise_functional(Tensor self, Tensor noise, Scalar lower=0.125,
    Scalar upper=0.33333333333333331, bool training=False, Generator? generator=None)
    -> (Tensor, Tensor noise_out)

    Training: where ``self <= 0`` a slope ``r ~ U[lower, upper)`` multiplies it and becomes
    the noise; elsewhere the output is ``self`` and the noise 1 (torch's CPU kernel). Eval:
    leaky_relu with slope (lower + upper) / 2 and the noise passed through.
    """
    dtype = self.type.element_type
    compute = opmath(dtype)
    x = cast_to(self, compute)
    if not training:
        slope = coreai.constant((lower + upper) / 2, dtype=compute)
        neg = coreai.broadcasting_less(x, coreai.constant(0, dtype=compute))
        out = coreai.broadcasting_where(neg, coreai.broadcasting_mul(x, slope), x)
        return cast_to(out, dtype), noise
    r = coreai.random_uniform(shape_of(self), low=lower, high=upper, dtype=compute)
    hit = coreai.broadcasting_less_equal(x, coreai.constant(0, dtype=compute))
    out = coreai.broadcasting_where(hit, coreai.broadcasting_mul(x, r), x)
    new_noise = coreai.broadcasting_where(hit, r, coreai.constant(1, dtype=compute))
    return cast_to(out, dtype), cast_to(new_noise, result_dtype(index=1))


__all__ = ["LOWERINGS", "dropout"]
