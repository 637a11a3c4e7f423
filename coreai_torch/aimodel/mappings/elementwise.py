"""Op mappings (elementwise family): the ops Core AI has almost as they are
(unary and binary functions, comparisons, casts; emitters in ``_core.py``).
"""

from __future__ import annotations

from coreai_torch.aimodel._apple import ca
from coreai_torch.aimodel._context import OpMapping
from coreai_torch.aimodel.mappings._core import (
    _BINARY,
    _UNARY,
    _bitwise_not,
    _cast,
    _constant,
    _direct,
    _fn_name,
    _gelu,
    _isinf,
    _isnan,
    _less,
    _neg,
    _or_equal,
    _reciprocal,
    _sign,
    _softmax,
    _where,
)
from coreai_torch.aimodel.mappings._registry import family_mappings

__all__ = ["MAPPINGS"]

MAPPINGS = family_mappings(__name__, {
    "coreai.constant": OpMapping(_constant, "constant (int64/float64 narrowed, checked)"),
    "coreai.cast": OpMapping(_cast, "cast (to the narrowed type)"),
    **{f"coreai.{name}": OpMapping(_direct(fn), _fn_name(fn)) for name, fn in _UNARY.items()},
    **{f"coreai.{name}": OpMapping(_direct(fn), _fn_name(fn)) for name, fn in _BINARY.items()},
    "coreai.neg": OpMapping(_neg, "broadcasting_mul(x, -1)"),
    "coreai.reciprocal": OpMapping(_reciprocal, "broadcasting_divide(1, x)"),
    "coreai.broadcasting_less": OpMapping(_less, "broadcasting_greater(y, x)"),
    "coreai.broadcasting_greater_equal": OpMapping(
        _or_equal(lambda xs: ca.broadcasting_greater(xs[0], xs[1])),
        "broadcasting_or(broadcasting_greater(x, y), broadcasting_equal(x, y))"),
    "coreai.broadcasting_less_equal": OpMapping(
        _or_equal(lambda xs: ca.broadcasting_greater(xs[1], xs[0])),
        "broadcasting_or(broadcasting_greater(y, x), broadcasting_equal(x, y))"),
    "coreai.isnan": OpMapping(_isnan, "broadcasting_not_equal(x, x)"),
    "coreai.sign": OpMapping(_sign, "broadcasting_where(x > 0, 1, where(0 > x, -1, 0))"),
    "coreai.bitwise_not": OpMapping(_bitwise_not,
                                    "broadcasting_bitwise_xor(x, all ones) (bool: not_)"),
    "coreai.isinf": OpMapping(_isinf, "broadcasting_or(x == inf, x == -inf)"),
    "coreai.broadcasting_where": OpMapping(_where, "broadcasting_where"),
    "coreai.gelu": OpMapping(_gelu, "gelu"),
    "coreai.softmax": OpMapping(_softmax, "softmax"),
})
