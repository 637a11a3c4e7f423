"""The decomposition table to run before conversion: decompose only what we cannot lower."""

from __future__ import annotations

import functools
from typing import Any

import torch

from coreai_torch._table import qualified_name

__all__ = ["get_decomp_table", "kept_ops", "CANONICAL_REWRITES"]

aten = torch.ops.aten


def _adaptive_avg_pool1d(x: torch.Tensor, output_size: Any) -> torch.Tensor:
    return aten._adaptive_avg_pool2d(x.unsqueeze(-2), [1, *list(output_size)]).squeeze(-2)


def _adaptive_avg_pool2d(x: torch.Tensor, output_size: Any) -> torch.Tensor:
    return aten._adaptive_avg_pool2d(x, output_size)


def _adaptive_avg_pool3d(x: torch.Tensor, output_size: Any) -> torch.Tensor:
    return aten._adaptive_avg_pool3d(x, output_size)


# Composite wrappers that torch's default table expands *around* a Core ATen op we lower
# (adaptive_avg_pool2d with output 1x1 becomes mean, bypassing any override of
# _adaptive_avg_pool2d). We rewrite them to that Core ATen op instead.
CANONICAL_REWRITES = {
    aten.adaptive_avg_pool1d.default: _adaptive_avg_pool1d,
    aten.adaptive_avg_pool2d.default: _adaptive_avg_pool2d,
    aten.adaptive_avg_pool3d.default: _adaptive_avg_pool3d,
}


def _lowered_names(converter: Any) -> set[str]:
    if converter is not None:
        return set(converter.supported_ops())
    from coreai_torch.lowerings import default_table

    return set(default_table().names())


def get_decomp_table(converter: Any = None) -> Any:
    """torch.export's default decompositions minus every op we lower natively.

    Pass the ``converter`` whose lowerings (built-in and user) should be kept; by default the
    built-in table is used. Composites such as ``scaled_dot_product_attention``, ``silu`` or
    ``pixel_shuffle`` therefore reach the converter intact, and the adaptive average pools
    are rewritten to ``_adaptive_avg_pool{2,3}d`` (see ``CANONICAL_REWRITES``).
    """
    return _table_for(frozenset(_lowered_names(converter))).copy()


@functools.lru_cache(maxsize=8)
def _table_for(lowered: frozenset[str]) -> Any:
    # Building torch's default table is slow (hundreds of ms); callers get a copy.
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if op in CANONICAL_REWRITES:
            continue
        if qualified_name(op) in lowered:
            table.pop(op)
    for op, fn in CANONICAL_REWRITES.items():
        table[op] = fn
    return table


def kept_ops(converter: Any = None) -> list[str]:
    """Qualified names torch's default table would decompose but we keep (sorted)."""
    lowered = _lowered_names(converter)
    table = torch.export.default_decompositions()
    return sorted(qualified_name(op) for op in table.keys()  # noqa: SIM118 (not a dict)
                  if qualified_name(op) in lowered and op not in CANONICAL_REWRITES)
