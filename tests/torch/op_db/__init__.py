"""The op database: one entry per lowered target, grouped by family.

Modules mirror the lowerings (``coreai_torch/lowerings/``) and the dialect's families: a module
is named ``<family>.py`` or ``<family>_<part>.py``; modules starting with ``_`` are shared
helpers (``tests/test_family_names.py`` checks the rule). Each family module exposes
``ENTRIES``; ``ENTRIES`` here is their concatenation and ``COVERED_ELSEWHERE`` names built-in
lowerings that cannot be reached by exporting a small module and are tested by the named test
instead.
"""

import attrs

from tests.torch.op_db import (
    complex,
    compression,
    control,
    elementwise,
    elementwise_complex,
    fft,
    linalg,
    nn,
    nn_attention,
    nn_backward,
    nn_complex,
    nn_pooling,
    nn_pooling_fractional,
    nn_resample,
    nn_resample_general,
    random,
    random_complex,
    special,
    tensor_complex,
    tensor_counting,
    tensor_indexing,
    tensor_reduction,
    tensor_shape,
    tensor_symbolic,
)
from tests.torch.op_db._entry import OpEntry, Sample

FAMILIES = (
    complex,
    compression,
    control,
    elementwise, elementwise_complex,
    fft,
    linalg,
    nn, nn_attention, nn_backward, nn_complex, nn_pooling, nn_pooling_fractional, nn_resample,
    nn_resample_general,
    random, random_complex,
    special,
    tensor_complex, tensor_counting, tensor_indexing, tensor_reduction, tensor_shape,
    tensor_symbolic,
)

POLYNOMIALS = (
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
    "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
    "laguerre_polynomial_l", "legendre_polynomial_p")

# Entries test_op_db_half.py does not run, by the reason they have no floating input to cast to
# float16/bfloat16 (families without half kernels in torch record theirs in their EntrySet).
_NO_HALF_GROUPS: dict[str, tuple[str, ...]] = {
    "integer or bool inputs only: no value is computed in a half type": (
        "aten::bitwise_not.default", "add.Tensor[bool]", "add.Tensor[bool scalar]",
        "mul.Tensor[bool]", "mul.Tensor[bool scalar]", "div.Tensor[int]",
        "pow.Tensor_Scalar[int]", "aten::bitwise_and.Tensor", "aten::bitwise_and.Scalar",
        "aten::bitwise_or.Tensor", "aten::bitwise_or.Scalar", "aten::bitwise_xor.Tensor",
        "aten::bitwise_xor.Scalar", "aten::where.Scalar", "aten::bitwise_left_shift.Tensor",
        "aten::bitwise_right_shift.Tensor", "fmax[bool]", "aten::gcd.default",
        "aten::lcm.default", "lcm[overflow]", "bitwise_left_shift.Tensor[all dtypes]",
        "aten::bitwise_left_shift.Tensor_Scalar", "aten::bitwise_left_shift.Scalar_Tensor",
        "aten::__lshift__.Tensor", "aten::__lshift__.Scalar",
        "bitwise_right_shift.Tensor[all dtypes]", "aten::bitwise_right_shift.Tensor_Scalar",
        "aten::bitwise_right_shift.Scalar_Tensor", "aten::__rshift__.Tensor",
        "aten::__rshift__.Scalar", "aten::bitwise_and.Scalar_Tensor",
        "aten::bitwise_or.Scalar_Tensor", "aten::bitwise_xor.Scalar_Tensor",
        "mean.dim[int, dtype]", "mean.default[int, dtype]", "one_hot",
        "dequantize_per_tensor.default",
        *(f"_to_copy.from_{t}" for t in ("int8", "int16", "int32", "int64", "uint8", "bool"))),
    "a factory without tensor inputs: its dtype argument is a half type in the main op db": (
        "aten::rand.default", "aten::randn.default", "aten::randint.default",
        "aten::randint.low", "aten::randperm.default", "aten::normal.float_float",
        "aten::rand.generator", "aten::randn.generator", "aten::randint.generator",
        "aten::randint.low_generator", "aten::randperm.generator", "aten::full.default",
        "aten::zeros.default", "aten::ones.default", "aten::empty.memory_format",
        "aten::empty_strided.default", "aten::scalar_tensor.default", "aten::arange.default",
        "aten::arange.start", "aten::arange.start_step", "arange.start_step[int]",
        "aten::tril_indices.default", "aten::triu_indices.default"),
    "torch's CPU kernel has no float16/bfloat16 (\"not implemented for 'Half'\")": (
        "aten::avg_pool3d.default", "aten::rrelu_with_noise_functional.default[train]",
        *(f"aten::_upsample_{mode}2d_aa.{overload}" for mode in ("bilinear", "bicubic")
          for overload in ("vec", "default")),
        *(f"aten::special_{fn}.default" for fn in (
            "erfcx", "modified_bessel_i0", "modified_bessel_i1", "bessel_j0", "bessel_j1",
            "bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1",
            "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0",
            "airy_ai", "ndtri", "log_ndtr")),
        *(f"aten::special_{fn}.{overload}" for fn in (
            "zeta", *POLYNOMIALS) for overload in (
                ("default", "self_scalar", "other_scalar") if fn == "zeta"
                else ("default", "n_scalar", "x_scalar")))),
    "an integer mantissa with a half exponent: torch's meta (the exported graph) says the "
    "result is float32 where eager returns the half type (ldexp(int8, float16))": (
        "ldexp[mixed]",),
    "complex inputs only (a complex log-cumulative sum): torch has no complex half type": (
        "logcumsumexp[complex, long axis]",),
}
NO_HALF: dict[str, str] = {
    entry_id: reason for reason, ids in _NO_HALF_GROUPS.items() for entry_id in ids}


# a unary op's ``[int]`` case (integer inputs, a float result) has nothing to cast either
_INT_CASE = "integer or bool inputs only: no value is computed in a half type"


def _with_half_reason(entry: OpEntry) -> OpEntry:
    reason = NO_HALF.get(entry.id) or (_INT_CASE if entry.id.endswith("[int]") else None)
    return attrs.evolve(entry, no_half=reason) if reason and not entry.no_half else entry


ENTRIES: list[OpEntry] = [_with_half_reason(e) for family in FAMILIES for e in family.ENTRIES]

COVERED_ELSEWHERE: dict[str, str] = {
    k: v for family in FAMILIES for k, v in getattr(family, "COVERED_ELSEWHERE", {}).items()}

__all__ = ["COVERED_ELSEWHERE", "ENTRIES", "FAMILIES", "NO_HALF", "OpEntry", "Sample"]
