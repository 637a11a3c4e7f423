"""Op mappings (special family): fmax/fmin, gcd/lcm, nextafter, frexp (exact,
``_math.py``), hypot, signbit and copysign (``_elementary.py``).
"""

from __future__ import annotations

from coreai_torch.aimodel._apple import ca
from coreai_torch.aimodel._context import OpMapping
from coreai_torch.aimodel.mappings._elementary import _F16, _copysign, _in_float32, _signbit, hypot
from coreai_torch.aimodel.mappings._math import _frexp, _gcd, _lcm, _nan_ignoring, _nextafter
from coreai_torch.aimodel.mappings._registry import family_mappings

__all__ = ["MAPPINGS"]

MAPPINGS = family_mappings(__name__, {
    "coreai.broadcasting_fmax": OpMapping(
        _nan_ignoring(ca.broadcasting_maximum), "broadcasting_maximum, the other operand where "
        "one is NaN"),
    "coreai.broadcasting_fmin": OpMapping(
        _nan_ignoring(ca.broadcasting_minimum), "broadcasting_minimum, the other operand where "
        "one is NaN"),
    "coreai.broadcasting_gcd": OpMapping(
        _gcd, "Euclid unrolled: 13/24/47 rounds of broadcasting_modulo + where (8/16/32-bit)"),
    "coreai.broadcasting_lcm": OpMapping(
        _lcm, "abs(x // gcd * y), gcd as above (8/16-bit: in int32), 0 where gcd is 0"),
    "coreai.broadcasting_nextafter": OpMapping(
        _nextafter, "x + -(|x| * (2**-p + 2**(1-2p))) (rounds to the neighbour; scaled near "
        "the subnormals, the subnormal step below), infinities, zeros and NaN fixed"),
    "coreai.frexp": OpMapping(
        _frexp, "e = floor(log(|x|) / log 2) + 1, m = |x| * 2**-e from a table, one "
        "correction step (float16: in float32)"),
    "coreai.broadcasting_hypot": OpMapping(
        _in_float32(hypot), f"max * sqrt(1 + (min / max)**2), no overflow (<= 2.75 ulps; "
        f"{_F16})"),
    "coreai.signbit": OpMapping(_signbit, "x < 0 or (x == 0 and 1 / x < 0) (a NaN counts "
                                "as positive)"),
    "coreai.broadcasting_copysign": OpMapping(
        _copysign, "where(y < 0 or y is -0, -|x|, |x|) (a NaN y counts as positive)"),
})
