"""Programs and fault injection for the atomic-export tests (test_aimodel_save_atomic.py).

Every step of ``export_aimodel`` that changes the disk is a function of
:mod:`coreai_core.durable_fs` or Apple's writer as ``export.py`` calls it; :func:`inject`
replaces each with one that counts calls and, at a chosen call, raises or kills the process.
Run as a script, this module exports a variant with a kill at a given step, in one forked
process per run.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from coreai_core import Dim, Program, TensorType
from coreai_core import durable_fs as fs
from coreai_core.dialects import coreai
from coreai_torch.aimodel import export as export_module
from coreai_torch.aimodel import export_aimodel

FS_STEPS = ("make_dir", "fsync_tree", "replace", "remove_tree")
EXPORT_STEPS = ("save_program_asset", "write_custom_metadata")  # Apple's writes


def program(variant: str) -> Program:
    """``y = x * w`` with ``x`` of a dynamic size (so the dims record is written too); the
    variants differ in ``w``."""
    w = np.random.default_rng({"a": 0, "b": 1, "c": 2}[variant]).standard_normal(8)
    p = Program()
    with p.graph("main", inputs={"x": TensorType((Dim("n", 1, 4), 8), "float32")}) as g:
        g.outputs({"y": coreai.broadcasting_mul(
            g["x"], coreai.constant(w.astype(np.float32), name="w"))})
    return p


def write(writer: str, variant: str, path: str | Path) -> None:
    """Export ``program(variant)`` to ``path`` with ``export_aimodel`` or
    ``Program.save_asset`` (which returns Apple's asset object)."""
    if writer == "save_asset":
        program(variant).save_asset(path)
    else:
        export_aimodel(program(variant), path)


@contextmanager
def inject(at: int | None, fault: Callable[[str], None]) -> Iterator[list[str]]:
    """Count the steps taken in the block (their names, in order, in the yielded list);
    call ``fault(name)`` instead of step number ``at`` (0-based)."""
    taken: list[str] = []
    owners = [(fs, name) for name in FS_STEPS] + [(export_module, n) for n in EXPORT_STEPS]
    saved = [(owner, name, getattr(owner, name)) for owner, name in owners]

    def wrap(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: Any, **kwargs: Any) -> Any:
            taken.append(name)
            if len(taken) - 1 == at:
                fault(name)
            return real(*args, **kwargs)
        return step

    for owner, name, real in saved:
        setattr(owner, name, wrap(name, real))
    try:
        yield taken
    finally:
        for owner, name, real in saved:
            setattr(owner, name, real)


def _kill(name: str) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def kill_each(variant: str, runs: list[str]) -> list[int]:
    """For each ``WRITER:AT:PATH`` of ``runs``, export ``program(variant)`` to ``PATH`` with
    ``WRITER`` in a forked process killed before step ``AT``; return the wait statuses
    (forking spares each one the imports)."""
    statuses = []
    for run in runs:
        writer, at, path = run.split(":", 2)
        pid = os.fork()
        if pid == 0:
            try:
                with inject(int(at), _kill):
                    write(writer, variant, path)
            finally:
                os._exit(0)
        statuses.append(os.waitpid(pid, 0)[1])
    return statuses


if __name__ == "__main__":
    print(json.dumps(kill_each(sys.argv[1], sys.argv[2:])))
