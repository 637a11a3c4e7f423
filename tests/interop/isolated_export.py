"""Export a saved program and run it on Apple's interpreter in a child process, so that a
crash inside Apple's compiler (a segfault, an illegal instruction) fails one test instead of
killing the test run.

``python -m tests.interop.isolated_export PROGRAM INPUTS.npz`` exports the program saved at
PROGRAM, runs it on the inputs with Apple's interpreter and with ``Program.run``, and prints
one JSON line: ``{"refused": [op names]}`` or ``{"max_abs": {output: error}}``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from coreai_core import Program

__all__ = ["export_in_child"]


def export_in_child(program: Program, inputs: dict[str, np.ndarray], tmp: Path,
                    timeout: float = 600) -> dict[str, Any]:
    """Export and run ``program`` in a child process; its JSON result. Fails (assertion)
    naming the signal when the child dies."""
    program.save(tmp / "program")
    np.savez(tmp / "inputs.npz", **inputs)
    done = subprocess.run(
        [sys.executable, "-m", "tests.interop.isolated_export", str(tmp / "program"),
         str(tmp / "inputs.npz")], capture_output=True, text=True, timeout=timeout,
        cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, (f"the export's child process ended with {done.returncode} "
                                  f"(a negative code is the signal):\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _main(program_path: str, inputs_path: str) -> None:
    import coreai_core
    from coreai_torch.aimodel import export_aimodel, run_aimodel
    from coreai_torch.errors import UnexportableOpsError

    program = coreai_core.load(program_path)
    with np.load(inputs_path) as data:
        inputs = {k: data[k] for k in data.files}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = export_aimodel(program, Path(tmp) / "model.aimodel")
        except UnexportableOpsError as e:
            print(json.dumps({"refused": sorted({op.op for op in e.ops})}))
            return
        got = run_aimodel(path, inputs)
    want = program.run(inputs)
    print(json.dumps({"max_abs": {k: float(np.abs(got[k].astype(np.float64) - w).max(
        initial=0.0)) for k, w in want.items()}}))


if __name__ == "__main__":
    _main(*sys.argv[1:3])
