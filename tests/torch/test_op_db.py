"""One generic test over the op database, plus drift guards.

Each entry's sample is exported as a tiny module, decomposed with get_decomp_table(),
converted, run with the numpy runtime and compared with torch eager — before and after
``optimize()``. Runs are seeded (``SEED``) so that entries of random ops, whose ``compare``
checks distributions instead of values, are deterministic.
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import given, settings

from coreai_torch.lowerings import default_table
from tests.torch import op_db
from tests.torch.harness import (
    FnModule,
    assert_matches,
    call_targets,
    convert,
    export,
    flatten,
    to_numpy,
)
from tests.torch.op_db._entry import DEFAULT_TOL, OpEntry, Sample

# Each example exports a module (0.1-0.3 s with conversion and two runs), and the op
# database's ~900 entries were 56% of the CI suite at 6 examples each: the fixed-seed CI
# profile takes 4 (the first ones hypothesis draws include the smallest shapes), other
# profiles a twelfth of their max_examples, at least 6 (HYPOTHESIS_PROFILE=dev: 8).
OPDB_EXAMPLES = (4 if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci"
                 else max(6, settings.default.max_examples // 12))
SEED = 0


def _tolerance(entry: OpEntry, outputs: list[torch.Tensor]) -> tuple[float, float]:
    floats = [o.dtype for o in outputs if o.dtype.is_floating_point or o.dtype.is_complex]
    atol, rtol = max((DEFAULT_TOL[d] for d in floats), default=(0.0, 0.0))
    if entry.atol is not None:
        atol = max(atol, entry.atol)
    if entry.rtol is not None:
        rtol = max(rtol, entry.rtol)
    return atol, rtol


def run_case(entry: OpEntry, sample: Sample) -> None:
    module = FnModule(entry.fn, sample.args, sample.kwargs)
    inputs = [a for a in sample.args if isinstance(a, torch.Tensor)]
    with torch.no_grad():
        expected = flatten(module(*inputs) if entry.reference is None
                           else entry.reference(*sample.args, **sample.kwargs))
    ep = export(module, inputs)
    targets = call_targets(ep)
    assert entry.target in targets, (
        f"{entry.id}: exported graph does not call {entry.target}; it calls {sorted(targets)}")
    program = convert(ep)
    feeds = [to_numpy(t) for t in inputs]
    got = list(program.run(feeds, seed=SEED).values())
    atol, rtol = _tolerance(entry, expected)
    if entry.compare is not None:
        entry.compare(expected, got, sample)
    else:
        assert_matches(expected, got, atol=atol, rtol=rtol, what=entry.id)
    program.optimize()
    got = list(program.run(feeds, seed=SEED).values())
    if entry.compare is not None:
        entry.compare(expected, got, sample)
    else:
        assert_matches(expected, got, atol=atol, rtol=rtol, what=f"{entry.id} (optimized)")


@pytest.mark.parametrize("entry", op_db.ENTRIES, ids=lambda e: e.id)
def test_lowering_matches_torch(entry: OpEntry) -> None:
    @settings(max_examples=OPDB_EXAMPLES)
    @given(sample=entry.samples)
    def check(sample: Sample) -> None:
        run_case(entry, sample)

    check()


def test_every_builtin_lowering_has_an_entry() -> None:
    covered = {e.target for e in op_db.ENTRIES} | set(op_db.COVERED_ELSEWHERE)
    missing = sorted(set(default_table().names()) - covered)
    assert not missing, f"built-in lowerings without an op-database entry: {missing}"


def test_entries_name_lowered_targets() -> None:
    unknown = sorted({e.target for e in op_db.ENTRIES} - set(default_table().names()))
    assert not unknown, f"op-database entries for targets with no lowering: {unknown}"
