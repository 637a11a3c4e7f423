"""Op mappings (complex family): building, taking apart and viewing complex tensors
(Core AI ``complex<f32>`` values inside a graph; see ``_complex.py``).
"""

from __future__ import annotations

from coreai_torch.aimodel._context import OpMapping
from coreai_torch.aimodel.mappings._complex import (
    _complex,
    _conj,
    _imag,
    _real,
    _view_as_complex,
    _view_as_real,
)
from coreai_torch.aimodel.mappings._registry import family_mappings

__all__ = ["MAPPINGS"]

MAPPINGS = family_mappings(__name__, {
    "coreai.complex": OpMapping(_complex, "create_complex (+ broadcast_to)"),
    "coreai.real": OpMapping(_real, "real_part"),
    "coreai.imag": OpMapping(_imag, "imaginary_part"),
    "coreai.conj": OpMapping(_conj, "create_complex(real_part, imaginary_part * -1)"),
    "coreai.view_as_real": OpMapping(_view_as_real,
                                     "concat of real_part and imaginary_part on a new axis"),
    "coreai.view_as_complex": OpMapping(_view_as_complex, "create_complex of two slices"),
})
