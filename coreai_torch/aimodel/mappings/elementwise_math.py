"""Op mappings (elementwise family): floor, ceil, trunc, remainder,
shifts and log_softmax expressed exactly (emitters in ``_math.py``).
"""

from __future__ import annotations

from coreai_torch.aimodel._context import OpMapping
from coreai_torch.aimodel.mappings._math import (
    _ceil_of,
    _floor_of,
    _log_softmax,
    _remainder,
    _rounding,
    _shift,
    _trunc_of,
)
from coreai_torch.aimodel.mappings._registry import family_mappings

__all__ = ["MAPPINGS"]

MAPPINGS = family_mappings(__name__, {
    "coreai.floor": OpMapping(_rounding(_floor_of),
                              "broadcasting_floor_divide(x, 1), x where x is +-inf"),
    "coreai.ceil": OpMapping(_rounding(_ceil_of), "-floor(-x), floor as above"),
    "coreai.trunc": OpMapping(_rounding(_trunc_of),
                              "broadcasting_where(x < 0, ceil(x), floor(x)), as above"),
    "coreai.broadcasting_remainder": OpMapping(
        _remainder, "broadcasting_modulo, + y where the signs differ (floats: zero signed "
        "like y)"),
    "coreai.broadcasting_shift_left": OpMapping(
        _shift(True), "broadcasting_mul by 2**n from a table (wrapping); out-of-range "
        "shifts: 0"),
    "coreai.broadcasting_shift_right": OpMapping(
        _shift(False), "broadcasting_floor_divide by 2**n from a table; out-of-range shifts: "
        "the sign fill"),
    "coreai.log_softmax": OpMapping(
        _log_softmax, "x - max - log(reduce_sum(exp(x - max))) (a row's single +inf: 0 there, "
        "-inf elsewhere)"),
})
