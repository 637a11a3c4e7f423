"""Op mappings (nn family): batched matmul and interpolate (emitters in ``_core.py``
and ``_tensor.py``; the sliding-window ops are in ``nn_windows.py``).
"""

from __future__ import annotations

from coreai_torch.aimodel._context import OpMapping
from coreai_torch.aimodel.mappings._core import _batch_matmul
from coreai_torch.aimodel.mappings._registry import family_mappings
from coreai_torch.aimodel.mappings._tensor import _interpolate

__all__ = ["MAPPINGS"]

MAPPINGS = family_mappings(__name__, {
    "coreai.batch_matmul": OpMapping(_batch_matmul, "broadcasting_batch_matmul (+ reshape)"),
    "coreai.interpolate": OpMapping(
        _interpolate, "per axis: gather_nd of the source taps, broadcasting_mul by the "
        "weights, broadcasting_add (the runtime's indices and weights: torch's rules)"),
})
