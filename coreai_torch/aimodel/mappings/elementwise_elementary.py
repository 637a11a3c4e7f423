"""Op mappings (elementwise family): log1p, expm1, log2, log10,
exp2 and atan2 expanded with a stated error bound (``_elementary.py``).
"""

from __future__ import annotations

from coreai_torch.aimodel._context import OpMapping
from coreai_torch.aimodel.mappings._elementary import (
    _F16,
    _INV_LN2,
    _INV_LN10,
    _in_float32,
    _log_times,
    atan2,
    exp2,
    expm1,
    log1p,
)
from coreai_torch.aimodel.mappings._registry import family_mappings

__all__ = ["MAPPINGS"]

MAPPINGS = family_mappings(__name__, {
    "coreai.log1p": OpMapping(
        _in_float32(log1p), f"u = 1 + x; x where u == 1, else log(u) * (x / (u - 1)) "
        f"(<= 3.5 + 2L ulps; {_F16})"),
    "coreai.expm1": OpMapping(
        _in_float32(expm1), f"u = exp(x); x where u == 1, -1 where u - 1 == -1, else "
        f"(u - 1) * (x / log(u)) (<= 2.5 + 2E + 2L ulps; {_F16})"),
    "coreai.log2": OpMapping(_in_float32(_log_times(_INV_LN2)),
                             f"log(x) * (1 / log 2) (<= 1.5 + 2L ulps; {_F16})"),
    "coreai.log10": OpMapping(_in_float32(_log_times(_INV_LN10)),
                              f"log(x) * (1 / log 10) (<= 1.5 + 2L ulps; {_F16})"),
    "coreai.exp2": OpMapping(
        _in_float32(exp2), f"exp((x - n) * log 2) * 2**a * 2**b, n = round(x) = a + b, "
        f"2**k from a table (<= E + 0.7 ulps, + 0.5 subnormal; {_F16})"),
    "coreai.broadcasting_atan2": OpMapping(
        _in_float32(atan2), f"atan(min(|x|,|y|) / max(|x|,|y|)) with quadrant and signed-zero "
        f"fixes (<= A + 4 ulps; {_F16})"),
})
