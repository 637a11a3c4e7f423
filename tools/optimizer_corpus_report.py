"""Run the optimizer corpus and print what each pass did and how far each model drifts.

Run from the repository root: ``python tools/optimizer_corpus_report.py [-k SUBSTRING]``.
Each model of ``tests/models/corpus`` is converted once and compared with torch eager raw,
after each default pass alone, and after the default pipeline (the checks of
``tests/models/test_corpus.py``). Printed:

- per model, the largest absolute error of every variant (``!`` marks a variant beyond the
  corpus tolerance, ``raised`` a pass that raised);
- per pass, summed over the corpus, the ops it removed, added and rewritten and the weights
  it removed and added, in the default pipeline and when run alone, with how many models it
  changed and how many it broke.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from coreai_core.optimizer import PassStats, pass_names
from tests.models.corpus import CORPUS
from tests.models.corpus.differential import (
    ATOL,
    PIPELINE,
    RAW,
    RTOL,
    ModelResult,
    VariantResult,
    check_model,
)


def _cell(v: VariantResult) -> str:
    if v.error:
        return "raised"
    return f"{v.max_abs:.1e}" + ("" if v.passed else "!")


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join([r[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(r[1:], widths[1:]))])
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _pass_rows(results: list[ModelResult], pipeline: bool) -> list[list[str]]:
    rows = [["pass", "removed", "added", "rewritten", "weights -/+", "models changed",
             "models broken"]]
    for name in pass_names():
        total, changed, broken = PassStats(), 0, 0
        for r in results:
            v = r.variant(PIPELINE if pipeline else name)
            if v.report is None:
                continue
            stats = v.report[name]
            total += stats
            changed += stats.changed
            broken += not pipeline and not v.passed
        rows.append([name, str(total.removed), str(total.added), str(total.rewritten),
                     f"{total.weights_removed}/{total.weights_added}", str(changed),
                     "-" if pipeline else str(broken)])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only models whose id contains this")
    args = parser.parse_args()
    names = [n for n in sorted(CORPUS) if args.k in n]
    start = time.perf_counter()
    results: list[ModelResult] = []
    rows = [["model", RAW, *pass_names(), PIPELINE, "seconds"]]
    for name in names:
        r = check_model(name, CORPUS[name]())
        results.append(r)
        rows.append([name, *(_cell(v) for v in r.variants), f"{r.seconds:.1f}"])
        print(f"  {name}: {r.seconds:.1f}s", file=sys.stderr, flush=True)
    print(f"max abs error against torch eager (rtol={RTOL:g}, atol={ATOL:g} x max(1, output "
          f"scale); ! = beyond), {len(results)} models in {time.perf_counter() - start:.0f}s\n")
    print(_table(rows))
    print("\nper pass across the corpus, in the default pipeline (summed over its iterations):")
    print(_table(_pass_rows(results, pipeline=True)))
    print("\nper pass across the corpus, each pass alone on the raw program:")
    print(_table(_pass_rows(results, pipeline=False)))
    failed = [r for r in results if r.failures]
    for r in failed:
        print(f"\n{r.name}:")
        for v in r.failures:
            print(f"  {v.describe()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
