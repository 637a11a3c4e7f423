"""Op-database family: higher-order ops, verified by tests/torch/test_control_flow.py."""

from __future__ import annotations

from coreai_torch.lowerings import control
from tests.torch.op_db._entry import EntrySet

ENTRIES = EntrySet()

COVERED_ELSEWHERE: dict[str, str] = {
    name: "tests/torch/test_control_flow.py" for name in control.LOWERINGS.own_names()}
