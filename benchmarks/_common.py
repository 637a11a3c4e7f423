"""Shared helpers for benchmark scripts: timing medians, resident memory, table printing."""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def median_time(fn: Callable[[], Any], repeat: int = 5, warmup: int = 1,
                clock: Callable[[], float] = time.perf_counter) -> float:
    """Median time of ``fn()`` in seconds over ``repeat`` runs after ``warmup`` runs.

    ``clock=time.process_time`` measures CPU time, which a loaded machine disturbs less than
    wall time (single-threaded work only).
    """
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times)


def rss(field: str = "VmRSS") -> int:
    """This process's resident memory in bytes (Linux): ``VmRSS`` now, ``VmHWM`` its peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def reset_peak_rss() -> None:
    """Make ``rss("VmHWM")`` start again from the current RSS (Linux; elsewhere a no-op)."""
    with contextlib.suppress(OSError):  # writing 5 resets VmHWM to the current RSS
        Path("/proc/self/clear_refs").write_text("5")


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a GitHub-markdown table."""
    cells = [[str(c) for c in headers]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for j, r in enumerate(cells):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
        if j == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


def _fmt(c: Any) -> str:
    if isinstance(c, float):
        return f"{c:.3g}" if abs(c) < 1000 else f"{c:.0f}"
    return str(c)
