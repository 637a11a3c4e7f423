"""Op mappings (fft family): transforms of static size as DFT products (the
emitters and their error bound are in ``_complex.py``).
"""

from __future__ import annotations

from coreai_torch.aimodel._context import OpMapping
from coreai_torch.aimodel.mappings._complex import _DFT, _fft_c2c, _fft_c2r, _fft_r2c
from coreai_torch.aimodel.mappings._registry import family_mappings

__all__ = ["MAPPINGS"]

MAPPINGS = family_mappings(__name__, {
    "coreai.fft_c2c": OpMapping(_fft_c2c, f"{_DFT} (<= (2n + 1) u sum|x| per axis)"),
    "coreai.fft_r2c": OpMapping(_fft_r2c, f"{_DFT} (the real signal: [cos, sin] only)"),
    "coreai.fft_c2r": OpMapping(_fft_c2r, f"{_DFT} (the Hermitian half, weighted 1 or 2)"),
})
