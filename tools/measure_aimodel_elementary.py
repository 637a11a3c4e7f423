"""Measure the float32 errors of Apple's interpreter's log, exp and atan (the L, E, A that the
bounds of coreai_torch/aimodel/mappings/elementwise_elementary.py are relative to) and the
largest error of each exported expansion in float32 and float16, in ulps against the float64 value.

    PYTHONPATH=. python tools/measure_aimodel_elementary.py [--dense]

Samples: tests/interop/test_aimodel_elementary.py's (every float16 value; every float32
exponent with 2**11 significands, random bit patterns and the special values). ``--dense``
adds every float32 in [0.5, 2) for log and in [-1, 1] with a stride of 7 for exp and atan.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coreai_core.dialects import coreai
from coreai_torch.aimodel import export_aimodel, run_aimodel
from tests.interop.test_aimodel_elementary import (
    BINARY,
    UNARY,
    _pairs16,
    _pairs32,
    all_float16,
    float32_sample,
    ulp_errors,
)
from tests.interop.test_aimodel_export import program_of, t


def _run(op: str, dtype: str, **inputs: np.ndarray) -> np.ndarray:
    n = next(iter(inputs.values())).size
    program = program_of({k: t(n, dtype=dtype) for k in inputs}, getattr(coreai, op))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.aimodel"
        export_aimodel(program, path)
        return run_aimodel(path, inputs)["y0"]


def _worst(op: str, dtype: str, fn: object, *xs: np.ndarray) -> float:
    got = _run(op, dtype, **dict(zip(("x", "y"), xs)))
    with np.errstate(all="ignore"):
        exact = fn(*[x.astype(np.float64) for x in xs])  # type: ignore[operator]
    if op == "broadcasting_hypot":
        exact[np.isinf(xs[0]) | np.isinf(xs[1])] = np.inf
    return float(ulp_errors(got, exact).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dense", action="store_true", help="add dense float32 ranges")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x32, x16 = float32_sample(rng), all_float16()
    apple = {"log": np.log, "exp": np.exp, "atan": np.arctan}
    print("Apple's interpreter (float32, ulps):")
    for op, fn in apple.items():
        xs = x32
        if args.dense:
            lo, hi = (0x3F000000, 0x40000000) if op == "log" else (0, 0x3F800001)
            dense = np.arange(lo, hi, 1 if op == "log" else 7, dtype=np.uint32).view(np.float32)
            xs = np.concatenate([x32, dense, -dense if op != "log" else dense[:0]])
        print(f"  {op:6s} {_worst(op, 'float32', fn, xs):.3f}")
    print("expansions (ulps):          float32   float16   (stated float32 bound)")
    for op, (fn, bound) in UNARY.items():
        print(f"  {op:24s} {_worst(op, 'float32', fn, x32):8.3f}  "
              f"{_worst(op, 'float16', fn, x16):8.3f}   ({bound:.2f})")
    for op, (fn, bound) in BINARY.items():
        print(f"  {op:24s} {_worst(op, 'float32', fn, *_pairs32(rng)):8.3f}  "
              f"{_worst(op, 'float16', fn, *_pairs16(rng)):8.3f}   ({bound:.2f})")


if __name__ == "__main__":
    main()
