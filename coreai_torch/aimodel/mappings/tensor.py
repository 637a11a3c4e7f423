"""Op mappings (tensor family): reductions, shapes and indexing that Core AI has
(emitters in ``_core.py``).
"""

from __future__ import annotations

from coreai_torch.aimodel._apple import ca
from coreai_torch.aimodel._context import OpMapping
from coreai_torch.aimodel.mappings._core import (
    _argmax,
    _argmin,
    _broadcast_to,
    _concat,
    _expand_dims,
    _gather,
    _gather_along_axis,
    _gather_nd,
    _reduction,
    _reshape,
    _shrink_dims,
    _slice,
    _split,
    _tile,
    _transpose,
)
from coreai_torch.aimodel.mappings._registry import family_mappings

__all__ = ["MAPPINGS"]

MAPPINGS = family_mappings(__name__, {
    "coreai.reduce_sum": OpMapping(_reduction(ca.reduce_sum), "reduce_sum (+ reshape)"),
    "coreai.reduce_mean": OpMapping(_reduction(ca.reduce_mean), "reduce_mean (+ reshape)"),
    "coreai.reduce_max": OpMapping(_reduction(ca.reduce_max), "reduce_max (+ reshape)"),
    "coreai.reduce_min": OpMapping(_reduction(ca.reduce_min), "reduce_min (+ reshape)"),
    "coreai.reduce_product": OpMapping(_reduction(ca.reduce_product),
                                       "reduce_product (+ reshape)"),
    "coreai.all": OpMapping(_reduction(ca.all_, logical=True), "cast to bool + all_ (+ reshape)"),
    "coreai.any": OpMapping(_reduction(ca.any_, logical=True), "cast to bool + any_ (+ reshape)"),
    "coreai.argmax": OpMapping(
        _argmax, "argmax + cast (floats: the first NaN's index where there is one)"),
    "coreai.argmin": OpMapping(_argmin, "argmax of x * -1, as argmax (floats); of ~x "
                               "(integers, bool)"),
    "coreai.reshape": OpMapping(_reshape, "reshape"),
    "coreai.expand_dims": OpMapping(_expand_dims, "reshape (static), else expand_dims"),
    "coreai.shrink_dims": OpMapping(_shrink_dims, "reshape (static), else shrink_dims or a "
                                                  "reshape to get_shape sizes"),
    "coreai.broadcast_to": OpMapping(_broadcast_to, "broadcast_to"),
    "coreai.transpose": OpMapping(_transpose, "transpose"),
    "coreai.concat": OpMapping(_concat, "concat"),
    "coreai.tile": OpMapping(_tile, "tile"),
    "coreai.slice": OpMapping(_slice, "slice_ (constant bounds; a negative stride reverses "
                              "the axis by gather_nd first; run-time bounds or sizes: "
                              "normalised at run time, positive strides)"),
    "coreai.split": OpMapping(_split, "slice_ per piece (dynamic: other axes' sizes by "
                                      "get_shape)"),
    "coreai.gather": OpMapping(_gather, "transpose + gather_nd + transpose"),
    "coreai.gather_nd": OpMapping(_gather_nd, "gather_nd"),
    "coreai.gather_along_axis": OpMapping(_gather_along_axis, "gather_along_axis"),
})
