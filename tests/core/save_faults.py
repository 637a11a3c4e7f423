"""Programs and fault injection for the atomic-save tests (tests/core/test_save_atomic.py).

Every disk-changing step of a save goes through :mod:`coreai_core.durable_fs`;
:func:`inject` replaces each such function with one that counts calls and, at a chosen call,
raises or kills the process. Run as a script, this module saves program ``a``, ``b`` or ``c``
with a kill at each step in turn, or in a loop (the concurrent-save test).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from coreai_core import Program, TensorType, WeightRef
from coreai_core import durable_fs as fs
from coreai_core.dialects import coreai

# the disk-changing steps (locked_dir is made of make_dir and fsync_dir)
STEPS = tuple(name for name in fs.__all__ if name != "locked_dir")


def program(variant: str) -> Program:
    """A program with weights of several stored forms (bfloat16, int4 packed, complex as
    pairs, large elided and small inline), an unbound weight and state; ``variant`` picks the
    weights' values so that the variants differ."""
    rng = np.random.default_rng({"a": 0, "b": 1, "c": 2}[variant])
    p = Program()
    p.add_weight("unbound", None, TensorType((2,), "float32"))
    with p.graph("main", inputs={"x": TensorType((4, 8), "float32")},
                 state={"step": np.zeros((1,), np.float32)}) as g:
        w = coreai.constant(rng.standard_normal((8, 8)).astype(np.float32), name="w")
        bf = coreai.constant(rng.standard_normal((3, 5)).astype(ml_dtypes.bfloat16), name="bf")
        i4 = coreai.constant(rng.integers(-8, 8, (3, 5)).astype(ml_dtypes.int4), name="i4")
        cx = coreai.constant((rng.standard_normal(3) + 1j).astype(np.complex64), name="cx")
        small = coreai.constant(rng.standard_normal(2).astype(np.float32), name="small")
        free = coreai.constant(WeightRef("unbound"))
        y = coreai.batch_matmul(g["x"], w)
        step = coreai.broadcasting_add(g["step"], 1.0)
        g.outputs({"y": y, "bf": bf, "i4": i4, "cx": cx, "small": small, "free": free},
                  state={"step": step})
    return p


@contextmanager
def inject(at: int | None, fault: Callable[[str], None]) -> Iterator[list[str]]:
    """Count the steps taken in the block (their names, in order, in the yielded list);
    call ``fault(name)`` instead of step number ``at`` (0-based)."""
    taken: list[str] = []
    saved = {name: getattr(fs, name) for name in STEPS}

    def wrap(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: Any, **kwargs: Any) -> Any:
            taken.append(name)
            if len(taken) - 1 == at:
                fault(name)
            return real(*args, **kwargs)
        return step

    for name, real in saved.items():
        setattr(fs, name, wrap(name, real))
    try:
        yield taken
    finally:
        for name, real in saved.items():
            setattr(fs, name, real)


def _kill(name: str) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def kill_each(variant: str, paths: list[str]) -> list[int]:
    """Save ``program(variant)`` to ``paths[i]`` in a forked process killed before step
    ``i``; return the processes' wait statuses (forking spares each one the imports)."""
    p = program(variant)
    statuses = []
    for at, path in enumerate(paths):
        pid = os.fork()
        if pid == 0:  # the child: save, killed at step ``at``
            try:
                with inject(at, _kill):
                    p.save(path)
            finally:
                os._exit(0)
        statuses.append(os.waitpid(pid, 0)[1])
    return statuses


def kill_mid_write(path: str) -> None:
    """Save a 64 MiB weight to ``path`` and die while the safetensors library is writing it
    (its temporary file exists, the weights file does not yet)."""
    p = Program()
    with p.graph("main") as g:
        g.outputs({"w": coreai.constant(np.ones(1 << 24, np.float32), name="w")})
    real = fs.write_safetensors

    def write_and_die(target: Path, *args: Any) -> None:
        def watch() -> None:
            while True:
                names = os.listdir(target.parent)
                if any(n.startswith(".tmp") for n in names):
                    os.kill(os.getpid(), signal.SIGKILL)
                if target.name in names:  # finished before a poll saw it: exit, say so
                    os._exit(3)

        threading.Thread(target=watch, daemon=True).start()
        real(target, *args)
        time.sleep(60)  # the watcher ends the process

    fs.write_safetensors = write_and_die  # type: ignore[assignment]
    p.save(path)


def main(argv: list[str]) -> None:
    """``save_faults.py kill-each VARIANT PATH...`` (prints the wait statuses as JSON),
    ``save_faults.py kill-mid-write PATH`` or ``save_faults.py loop VARIANT N PATH``."""
    mode, variant = argv[0], argv[1]
    if mode == "kill-mid-write":
        kill_mid_write(variant)
    elif mode == "kill-each":
        print(json.dumps(kill_each(variant, argv[2:])))
    else:
        p = program(variant)
        for _ in range(int(argv[2])):
            p.save(argv[3])


if __name__ == "__main__":
    main(sys.argv[1:])
