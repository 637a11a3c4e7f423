"""Op-database entries (tensor family): symbolic sizes and Python operators.

These targets appear only around dynamic shapes; each is verified by the dedicated tests named
in ``COVERED_ELSEWHERE`` (hand-built FX nodes compared with Python arithmetic, and dynamic
programs compared with torch).
"""

from __future__ import annotations

from coreai_torch.lowerings import tensor_symbolic
from tests.torch.op_db._entry import EntrySet

ENTRIES = EntrySet()

_TEST = "tests/torch/test_symbolic_lowerings.py"
COVERED_ELSEWHERE: dict[str, str] = {name: _TEST for name in tensor_symbolic.LOWERINGS.own_names()}
