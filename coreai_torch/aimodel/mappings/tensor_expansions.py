"""Op mappings (tensor family): pad, reverse, get_shape, range,
sort, topk, scan, scatter and slice_update built from Core AI ops (emitters in ``_tensor.py``).
"""

from __future__ import annotations

from coreai_torch.aimodel._context import OpMapping
from coreai_torch.aimodel.mappings._registry import family_mappings
from coreai_torch.aimodel.mappings._tensor import (
    _argsort,
    _get_shape,
    _pad,
    _range,
    _reverse,
    _scan,
    _scatter_along_axis,
    _scatter_nd,
    _slice_update,
    _sort,
    _topk,
)

__all__ = ["MAPPINGS"]

MAPPINGS = family_mappings(__name__, {
    "coreai.pad": OpMapping(_pad, "pad (constant, reflect, replicate) + slice_ for negative "
                            "amounts; circular: slice_ + concat"),
    "coreai.reverse": OpMapping(_reverse, "gather_nd of n-1 ... 0 per axis"),
    "coreai.get_shape": OpMapping(_get_shape, "constant (static shapes), else get_shape"),
    "coreai.range": OpMapping(_range, "constant (constant bounds; the runtime's values), "
                                      "else range_ (integers)"),
    "coreai.sort": OpMapping(_sort, "argsort (stable) + gather_along_axis; descending floats: "
                             "a second stable argsort puts NaN first"),
    "coreai.argsort": OpMapping(_argsort, "argsort (stable), NaN handled as for sort"),
    "coreai.topk": OpMapping(_topk, "argsort as for sort + slice_ + gather_along_axis"),
    "coreai.scan": OpMapping(_scan, "scan (max/min: NaN propagated by a scan of isnan; "
                             "exclusive: concat of the identity and slice_)"),
    "coreai.scatter_along_axis": OpMapping(
        _scatter_along_axis, "scatter_along_axis (update, add, mul, max, min; include_self="
        "False: the identity scattered first; max/min floats: NaN propagated; no mean)"),
    "coreai.scatter_nd": OpMapping(
        _scatter_nd, "scatter_nd; accumulate: scatter_along_axis(add) on rows of the "
        "flattened tensor"),
    "coreai.slice_update": OpMapping(_slice_update, "slice_update (constant bounds; a "
                                     "negative stride: upwards, the update reversed)"),
})
