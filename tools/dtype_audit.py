"""List op-database targets whose entries never sample a floating or complex dtype torch accepts.

For each entry, draws samples from its strategy and records the dtypes of the tensor inputs.
Then it recasts the floating inputs of a few drawn samples to each of float64, float16,
bfloat16, complex64 and complex128 and calls torch eagerly: a dtype torch computes without an
error, but the entry never draws, is printed as a gap. Run from the repository root::

    python tools/dtype_audit.py [--draws 40] [--only substring]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import torch
from hypothesis import HealthCheck, Phase, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.torch import op_db
from tests.torch.op_db._entry import OpEntry, Sample

CANDIDATES = (torch.float64, torch.float16, torch.bfloat16, torch.complex64, torch.complex128)


def draw_samples(entry: OpEntry, count: int) -> list[Sample]:
    drawn: list[Sample] = []

    @settings(max_examples=count, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(sample=entry.samples)
    def collect(sample: Sample) -> None:
        drawn.append(sample)

    collect()
    return drawn


def input_dtypes(sample: Sample) -> set[torch.dtype]:
    return {a.dtype for a in sample.args if isinstance(a, torch.Tensor)}


def torch_accepts(entry: OpEntry, sample: Sample, dtype: torch.dtype) -> bool:
    def recast(a: object) -> object:
        if isinstance(a, torch.Tensor) and (a.dtype.is_floating_point or a.dtype.is_complex):
            return a.to(dtype)
        return a

    args = tuple(recast(a) for a in sample.args)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = entry.fn(*args, **sample.kwargs)
    except Exception:  # any failure means torch does not take this dtype
        return False
    # an empty result may come from an early exit that never reached the dtype's kernel
    results = result if isinstance(result, (tuple, list)) else (result,)
    return any(isinstance(r, torch.Tensor) and r.numel() > 0 for r in results)


def gaps(entries: list[OpEntry], draws: int) -> tuple[set[torch.dtype], list[torch.dtype]]:
    """Dtypes the entries of one target draw, and those torch accepts that none draws."""
    seen: set[torch.dtype] = set()
    tried: list[tuple[OpEntry, Sample]] = []
    for entry in entries:
        samples = draw_samples(entry, draws)
        seen |= set().union(*(input_dtypes(s) for s in samples)) if samples else set()
        tried += [(entry, s) for s in samples
                  if any(d.is_floating_point or d.is_complex for d in input_dtypes(s))][:3]
    missing = [d for d in CANDIDATES if d not in seen
               and any(torch_accepts(entry, s, d) for entry, s in tried)]
    return seen, missing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=40)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    by_target: dict[str, list[OpEntry]] = {}
    for entry in op_db.ENTRIES:
        if args.only in entry.target:
            by_target.setdefault(entry.target, []).append(entry)
    total = 0
    for target, entries in by_target.items():
        seen, missing = gaps(entries, args.draws)
        if missing:
            total += 1
            names = ", ".join(str(d).removeprefix("torch.") for d in missing)
            print(f"{target}: torch accepts {names}; entries draw "
                  f"{sorted(str(d).removeprefix('torch.') for d in seen)}", flush=True)
    print(f"{total} of {len(by_target)} targets with gaps")


if __name__ == "__main__":
    main()
