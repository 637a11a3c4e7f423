"""Parse time of 10 kB, 100 kB and 1 MB texts: parsing must grow linearly with the text.

Inputs: a malformed long number (the case that backtracked quadratically, issue 18), a long
identifier, a valid program of many ops, and a valid program with inline dense data. The
last column divides the 1 MB time by 100 times the 10 kB time: about 1 when linear (a
quadratic scanner gives about 100). Run: ``python benchmarks/bench_parse.py``.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median_time, print_table

from coreai_core import ParseError, parse

SIZES = {"10 kB": 10_000, "100 kB": 100_000, "1 MB": 1_000_000}


def long_number(n: int) -> str:
    return "9" * (n - 1) + "x"


def long_identifier(n: int) -> str:
    head = "coreai.program { weight @"
    return head + "a" * (n - len(head) - 1) + "("


def many_ops(n: int) -> str:
    lines = ["coreai.program {", "  graph @main(%x: tensor<4xf32>) {",
             "    %0 = coreai.neg(%x) : tensor<4xf32>"]
    size, i = sum(len(s) + 1 for s in lines), 0
    while size < n - 40:
        line = f"    %{i + 1} = coreai.neg(%{i}) : tensor<4xf32>"
        lines.append(line)
        size, i = size + len(line) + 1, i + 1
    lines += [f"    coreai.output(y = %{i})", "  }", "}"]
    return "\n".join(lines)


def dense_data(n: int) -> str:
    count = (n - 60) // len("0.25, ")
    body = ", ".join(["0.25"] * count)
    return f"coreai.program {{\n  weight @w : tensor<{count}xf32> = dense<[{body}]>\n}}"


CASES: dict[str, Callable[[int], str]] = {
    "long number (malformed)": long_number,
    "long identifier (malformed)": long_identifier,
    "program of neg ops": many_ops,
    "inline dense data": dense_data,
}


def parse_time(text: str) -> float:
    def run() -> None:
        with contextlib.suppress(ParseError):
            parse(text)

    return median_time(run, repeat=3, clock=time.process_time)


def main() -> None:
    rows = []
    for name, make in CASES.items():
        times = [parse_time(make(n)) for n in SIZES.values()]
        rows.append([name, *(f"{t * 1e3:.2f}" for t in times),
                     f"{times[-1] / (100 * max(times[0], 1e-6)):.2f}"])
    print_table(["input", *(f"{k} (ms)" for k in SIZES), "1 MB / (100 x 10 kB)"], rows)


if __name__ == "__main__":
    main()
