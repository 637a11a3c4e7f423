"""Op-database entries: control."""

from __future__ import annotations

from tests.torch.op_db._entry import OpEntry

ENTRIES: list[OpEntry] = []
