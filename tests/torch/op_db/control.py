"""Op-database entries (control family): higher-order ops, verified by
tests/torch/test_control_flow.py, and effect tokens (``with_effects``) around a print."""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from coreai_torch.lowerings import control
from tests.torch.op_db._entry import ALL_DTYPES, EntrySet, Sample, shapes, tensors

aten = torch.ops.aten

ENTRIES = EntrySet()
add = ENTRIES.add

_WITH_EFFECTS = "higher_order::with_effects.default"
COVERED_ELSEWHERE: dict[str, str] = {
    name: "tests/torch/test_control_flow.py" for name in control.LOWERINGS.own_names()
    if name != _WITH_EFFECTS}


# -- with_effects ---------------------------------------------------------------------------------

@st.composite
def _printed(draw: Any) -> Sample:
    # bool is left out: aten::add.Tensor's lowering rejects bool + bool (elementwise family)
    dtype = draw(st.sampled_from([d for d in ALL_DTYPES if d != torch.bool]))
    return Sample((draw(tensors(draw(shapes()), dtype)),))


def _print_then_double(x: torch.Tensor) -> torch.Tensor:
    aten._print("converted programs drop prints")
    return x + x


add(_WITH_EFFECTS, _print_then_double, _printed())
