"""Op-database entries (control family): higher-order ops, verified by
tests/torch/test_control_flow.py, and effect tokens (``with_effects``) around a print and around
torch.linalg's error checks."""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from coreai_torch.lowerings import control
from tests.torch.op_db._entry import ALL_DTYPES, EntrySet, Sample, shapes, tensors
from tests.torch.op_db._linalg_inputs import general, spd, symmetric
from tests.torch.op_db.linalg import LAPACK_NO_HALF, matches, matrices, solve_args

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


# -- torch.linalg's checked forms: *_ex plus with_effects(_linalg_check_errors) -----------------

def _checked(fn: Any, samples: st.SearchStrategy[Sample], name: str) -> None:
    """A torch.linalg function whose export wraps its error check in with_effects; compared and
    kept out of half precision as in op_db/linalg.py."""
    add(_WITH_EFFECTS, fn, samples, compare=matches, name=name, no_half=LAPACK_NO_HALF)


_checked(torch.linalg.inv, matrices(general), "linalg.inv")
_checked(lambda a, b, left: torch.linalg.solve(a, b, left=left), solve_args(), "linalg.solve")
_checked(lambda a, upper: torch.linalg.cholesky(a, upper=upper),
         matrices(spd, upper=st.booleans()), "linalg.cholesky")
_checked(torch.linalg.lu_factor, matrices(general, square=False), "linalg.lu_factor")
_checked(torch.linalg.ldl_factor, matrices(
    lambda g, b, m, n, cplx: symmetric(g, b, m, cplx=cplx, hermitian=False)), "linalg.ldl_factor")
