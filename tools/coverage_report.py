"""Print the coverage summary, counting the lowerings the op database verifies.

Run from the repository root: ``python tools/coverage_report.py``. The op database lives in the
tests, which the library does not import, so this script hands its targets to
:func:`coreai_torch.coverage.report`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coreai_torch.coverage import report
from tests.torch import op_db

if __name__ == "__main__":
    print(report({e.target for e in op_db.ENTRIES}, op_db.COVERED_ELSEWHERE))
