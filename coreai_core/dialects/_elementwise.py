"""Elementwise ops: constants, casts, unary math, broadcasting binary ops, where."""

from __future__ import annotations

from typing import Literal

from coreai_core._builder import current
from coreai_core._dtypes import DType
from coreai_core._ir import Location, TensorType, Value, WeightRef
from coreai_core._opdef import (
    Array,
    ArrayLike,
    Builder,
    DTypeLike,
    ValueLike,
    build_constant,
    builder_names,
    defop,
)
from coreai_core._shapes import broadcast_shapes, expect, fail, norm_axis, same_dtype

# Which element types an elementwise op accepts.
FLOAT = "float"
INEXACT = "float or complex"
NUMERIC = "numeric"  # ints and floats
NUMBER = "numeric or complex"
INTEGRAL = "integral"  # ints and bool
INTEGER = "integer"  # ints only
BOOL = "bool"
ORDERED = "non-complex"  # every type with an order: all but complex
ANY = "any"


def _accepts(kind: str, dtype: DType) -> bool:
    if kind == ANY:
        return True
    if kind == ORDERED:
        return not dtype.is_complex
    if kind == FLOAT:
        return dtype.is_float
    if kind == INEXACT:
        return dtype.is_float or dtype.is_complex
    if kind == NUMERIC:
        return dtype is not DType.bool and not dtype.is_complex
    if kind == NUMBER:
        return dtype is not DType.bool
    if kind == INTEGRAL:
        return dtype is DType.bool or dtype.is_int
    if kind == INTEGER:
        return dtype.is_int
    return dtype is DType.bool


def _check(kind: str, **operands: Value) -> None:
    for name, v in operands.items():
        if not _accepts(kind, v.type.element_type):
            article = "an" if kind[0] in "aeiou" else "a"
            fail(f"operand {name!r} must be {article} {kind} tensor, got {v.type}")


# -- constants and casts -------------------------------------------------------------------------

@defop(name="coreai.constant")
def _constant(value: Array) -> TensorType:
    """A constant tensor; large ones live in ``Program.weights`` and are referenced by name."""
    if isinstance(value, WeightRef):
        prog = current().graph.program
        if prog is None or value.name not in prog.weight_types:
            fail(f"weight @{value.name} is not declared by the program")
        return prog.weight_types[value.name]
    return TensorType(value.shape, DType.of(value.dtype))


def constant(value: ArrayLike, dtype: DTypeLike | None = None, *, name: str | None = None,
             loc: Location | None = None) -> Value:
    """Build a constant from a Python scalar/list, a numpy array or a program WeightRef.

    ``dtype`` accepts a DType, its name or a numpy dtype; by default Python floats become
    float32, ints int64 and bools bool. Arrays with more than ``INLINE_LIMIT`` elements (or any
    array given a ``name``) are stored in the program's weights under ``name``.
    """
    return build_constant(value, dtype, name=name, loc=loc)


@defop(traits=("elementwise",))
def cast(x: Value, dtype: DType) -> TensorType:
    """Convert element type (float->int truncates toward zero; nonzero->True for bool)."""
    return x.type.with_dtype(dtype)


# -- unary ---------------------------------------------------------------------------------------

def unary_op(name: str, doc: str, accepts: str = FLOAT, result: DType | None = None, *,
             module: str = __name__) -> Builder[Value]:
    """Define ``coreai.<name>``: one operand of the ``accepts`` kind, a result of its shape and
    dtype (or ``result``). ``module`` is the family module that defines the op."""
    def rule(x: Value) -> TensorType:
        _check(accepts, x=x)
        return x.type if result is None else x.type.with_dtype(result)

    rule.__name__ = rule.__qualname__ = name
    rule.__doc__ = doc
    rule.__module__ = module
    return defop(traits=("elementwise", "unary"))(rule)


@defop(traits=("elementwise", "unary"))
def abs_(x: Value) -> TensorType:
    """Absolute value; the modulus of a complex number (a float of the parts' type)."""
    _check(NUMBER, x=x)
    return x.type.with_dtype(x.type.element_type.real_dtype)


neg = unary_op("neg", "Negation.", NUMBER)
sign = unary_op("sign", "-1, 0 or 1 (NaN gives 0, like torch.sign).", NUMERIC)
floor = unary_op("floor", "Round toward -inf.", NUMERIC)
ceil = unary_op("ceil", "Round toward +inf.", NUMERIC)
round_ = unary_op("round_", "Round half to even.", NUMERIC)
trunc = unary_op("trunc", "Round toward zero.", NUMERIC)
relu = unary_op("relu", "max(x, 0).", NUMERIC)
acos = unary_op("acos", "Inverse cosine.", INEXACT)
acosh = unary_op("acosh", "Inverse hyperbolic cosine.", INEXACT)
asin = unary_op("asin", "Inverse sine.", INEXACT)
asinh = unary_op("asinh", "Inverse hyperbolic sine.", INEXACT)
atan = unary_op("atan", "Inverse tangent.", INEXACT)
atanh = unary_op("atanh", "Inverse hyperbolic tangent.", INEXACT)
cos = unary_op("cos", "Cosine.", INEXACT)
cosh = unary_op("cosh", "Hyperbolic cosine.", INEXACT)
sin = unary_op("sin", "Sine.", INEXACT)
sinh = unary_op("sinh", "Hyperbolic sine.", INEXACT)
tan = unary_op("tan", "Tangent.", INEXACT)
tanh = unary_op("tanh", "Hyperbolic tangent.", INEXACT)
exp = unary_op("exp", "e**x.", INEXACT)
exp2 = unary_op("exp2", "2**x.", INEXACT)
expm1 = unary_op("expm1", "e**x - 1, accurate near 0.", INEXACT)
log = unary_op("log", "Natural logarithm.", INEXACT)
log2 = unary_op("log2", "Base-2 logarithm.", INEXACT)
log10 = unary_op("log10", "Base-10 logarithm.", INEXACT)
log1p = unary_op("log1p", "log(1 + x), accurate near 0.", INEXACT)
sqrt = unary_op("sqrt", "Square root.", INEXACT)
rsqrt = unary_op("rsqrt", "1 / sqrt(x).", INEXACT)
reciprocal = unary_op("reciprocal", "1 / x.", INEXACT)
erf = unary_op("erf", "Gauss error function.")
erfinv = unary_op("erfinv", "Inverse error function.")
lgamma = unary_op("lgamma", "log|Gamma(x)|.")
digamma = unary_op("digamma", "Derivative of lgamma.")
sigmoid = unary_op("sigmoid", "1 / (1 + exp(-x)).", INEXACT)
silu = unary_op("silu", "x * sigmoid(x).", INEXACT)
not_ = unary_op("not_", "Logical not.", BOOL)
bitwise_not = unary_op("bitwise_not", "Bitwise not (logical not for bool).", INTEGRAL)
isnan = unary_op("isnan", "True where x (either part of a complex x) is NaN.", INEXACT, DType.bool)
isinf = unary_op("isinf", "True where x (either part of a complex x) is +-inf.", INEXACT,
               DType.bool)


@defop(traits=("elementwise", "unary"))
def gelu(x: Value, approximate: Literal["none", "tanh"] = "none") -> TensorType:
    """Gaussian error linear unit, exact (erf) or with the tanh approximation."""
    _check(FLOAT, x=x)
    return x.type


def _softmax_rule(x: Value, axis: int = -1) -> TensorType:
    _check(FLOAT, x=x)
    norm_axis(axis, x.type.rank)
    return x.type


@defop()
def softmax(x: Value, axis: int = -1) -> TensorType:
    """exp(x) / sum(exp(x)) along ``axis``, computed stably."""
    return _softmax_rule(x, axis)


@defop()
def log_softmax(x: Value, axis: int = -1) -> TensorType:
    """x - logsumexp(x) along ``axis``."""
    return _softmax_rule(x, axis)


# -- binary --------------------------------------------------------------------------------------

def binary_op(name: str, doc: str, accepts: str = NUMERIC, result: DType | None = None,
              broadcast: bool = True, traits: tuple[str, ...] = (), *,
              module: str = __name__) -> Builder[Value]:
    """Define ``coreai.<name>``: two operands of one dtype of the ``accepts`` kind, broadcast
    (or of one shape), a result of that dtype (or ``result``). ``module`` is the family module
    that defines the op."""
    def rule(lhs: Value, rhs: Value) -> TensorType:
        dtype = same_dtype(lhs, rhs)
        _check(accepts, lhs=lhs, rhs=rhs)
        if broadcast:
            shape = broadcast_shapes(lhs.type.shape, rhs.type.shape)
        else:
            expect(lhs.type.shape == rhs.type.shape,
                   f"operands must have the same shape, got {lhs.type} and {rhs.type} "
                   f"(use broadcasting_{name} to broadcast)")
            shape = lhs.type.shape
        return TensorType(shape, result or dtype)

    rule.__name__ = rule.__qualname__ = name
    rule.__doc__ = doc + (" Numpy broadcasting." if broadcast else " Operands have one shape.")
    rule.__module__ = module
    return defop(traits=("elementwise", "binary", *traits))(rule)


COMMUTATIVE = ("commutative",)
broadcasting_add = binary_op("broadcasting_add", "lhs + rhs.", NUMBER, traits=COMMUTATIVE)
broadcasting_sub = binary_op("broadcasting_sub", "lhs - rhs.", NUMBER)
broadcasting_mul = binary_op("broadcasting_mul", "lhs * rhs.", NUMBER, traits=COMMUTATIVE)
broadcasting_divide = binary_op(
    "broadcasting_divide", "lhs / rhs (integers: rounded toward zero, like C).", NUMBER)
broadcasting_floor_divide = binary_op("broadcasting_floor_divide", "floor(lhs / rhs).")
broadcasting_modulo = binary_op(
    "broadcasting_modulo", "C-style remainder, sign of lhs (torch.fmod).")
broadcasting_remainder = binary_op(
    "broadcasting_remainder", "Python-style remainder, sign of rhs (torch.remainder).")
broadcasting_pow = binary_op(
    "broadcasting_pow", "lhs ** rhs (complex: the principal value).", NUMBER)
broadcasting_atan2 = binary_op("broadcasting_atan2", "atan2(lhs, rhs).", FLOAT)
broadcasting_maximum = binary_op(
    "broadcasting_maximum", "Elementwise max, NaN propagates.", ORDERED, traits=COMMUTATIVE)
broadcasting_minimum = binary_op(
    "broadcasting_minimum", "Elementwise min, NaN propagates.", ORDERED, traits=COMMUTATIVE)
broadcasting_equal = binary_op(
    "broadcasting_equal", "lhs == rhs.", ANY, DType.bool, traits=COMMUTATIVE)
broadcasting_not_equal = binary_op(
    "broadcasting_not_equal", "lhs != rhs.", ANY, DType.bool, traits=COMMUTATIVE)
broadcasting_greater = binary_op("broadcasting_greater", "lhs > rhs.", ORDERED, DType.bool)
broadcasting_greater_equal = binary_op(
    "broadcasting_greater_equal", "lhs >= rhs.", ORDERED, DType.bool)
broadcasting_less = binary_op("broadcasting_less", "lhs < rhs.", ORDERED, DType.bool)
broadcasting_less_equal = binary_op("broadcasting_less_equal", "lhs <= rhs.", ORDERED, DType.bool)
broadcasting_and = binary_op("broadcasting_and", "Logical and.", BOOL, traits=COMMUTATIVE)
broadcasting_or = binary_op("broadcasting_or", "Logical or.", BOOL, traits=COMMUTATIVE)
broadcasting_xor = binary_op("broadcasting_xor", "Logical xor.", BOOL, traits=COMMUTATIVE)
broadcasting_bitwise_and = binary_op(
    "broadcasting_bitwise_and", "Bitwise and.", INTEGRAL, traits=COMMUTATIVE)
broadcasting_bitwise_or = binary_op(
    "broadcasting_bitwise_or", "Bitwise or.", INTEGRAL, traits=COMMUTATIVE)
broadcasting_bitwise_xor = binary_op(
    "broadcasting_bitwise_xor", "Bitwise xor.", INTEGRAL, traits=COMMUTATIVE)
broadcasting_shift_left = binary_op("broadcasting_shift_left", "lhs << rhs.", INTEGRAL)
broadcasting_shift_right = binary_op(
    "broadcasting_shift_right", "lhs >> rhs (arithmetic for signed types).", INTEGRAL)
add = binary_op("add", "lhs + rhs.", NUMBER, broadcast=False, traits=COMMUTATIVE)
sub = binary_op("sub", "lhs - rhs.", NUMBER, broadcast=False)
mul = binary_op("mul", "lhs * rhs.", NUMBER, broadcast=False, traits=COMMUTATIVE)
divide = binary_op("divide", "lhs / rhs (integers: rounded toward zero).", NUMBER,
                 broadcast=False)


def broadcasting_bitwise_not(x: ValueLike, *, loc: Location | None = None) -> Value:
    """Alias of :func:`bitwise_not`, listed with the broadcasting family."""
    return bitwise_not(x, loc=loc)


@defop(traits=("elementwise",))
def broadcasting_where(condition: Value, lhs: Value, rhs: Value) -> TensorType:
    """``lhs`` where ``condition`` else ``rhs``, all three broadcast together."""
    expect(condition.type.element_type is DType.bool,
           f"condition must be bool, got {condition.type}")
    dtype = same_dtype(lhs, rhs)
    shape = broadcast_shapes(condition.type.shape, lhs.type.shape, rhs.type.shape)
    return TensorType(shape, dtype)


where = broadcasting_where


# the builders of the ops defined above (see builder_names), and the conveniences this module adds
__all__ = ["constant", *builder_names(__name__), "broadcasting_bitwise_not", "where"]
