"""Smoke test of benchmarks/bench_opinfo.py: a few OpInfos end to end, so the harness does not
rot (the full database runs only as the benchmark)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("expecttest")  # torch.testing._internal needs it (the test extra has it)

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_opinfo.py"


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_opinfo", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_harness_runs_opinfos_end_to_end(tmp_path, capsys):
    bench = _load_bench()
    out = tmp_path / "cases.json"
    totals = bench.main(["--ops", "abs,cat,normal", "--samples", "2", "--json", str(out)])
    printed = capsys.readouterr().out
    cases = json.loads(out.read_text())["cases"]

    assert "## Totals" in printed and "| verified rate (of exportable)" in printed
    known = set(bench.CONVERTER_OUTCOMES) | set(bench.SKIP_OUTCOMES)
    assert {c["outcome"] for c in cases} <= known
    assert totals["samples"] == len(cases) > 0
    assert totals["exportable"] == sum(c["outcome"] in bench.CONVERTER_OUTCOMES for c in cases)
    assert totals["crash"] == 0
    # abs and cat are deterministic and lowered: compared value by value and verified
    for name in ("abs", "cat"):
        mine = [c for c in cases if c["op"] == name]
        assert mine and all(c["outcome"] == "verified" and not c["random"] for c in mine), mine
    # normal reseeds inside its OpInfo wrapper; the harness still finds it random
    normal = [c for c in cases if c["op"] == "normal" and c["outcome"] == "verified"]
    assert normal and all(c["random"] for c in normal)


def test_compare_reports_each_kind_of_difference():
    bench = _load_bench()
    want = [torch.tensor([1.0, 2.0, float("nan")])]
    same = np.array([1.0, 2.0, np.nan], np.float32)
    assert bench.compare([same], want, 1.3e-6, 1e-5, values=True) == ""
    off = np.array([1.0, 2.5, np.nan], np.float32)
    assert "values differ" in bench.compare([off], want, 1.3e-6, 1e-5, values=True)
    assert bench.compare([off], want, 1.3e-6, 1e-5, values=False) == ""  # random: shape only
    assert "dtype" in bench.compare([same.astype(np.float64)], want, 1e-6, 1e-5, values=False)
    assert "shape" in bench.compare([same[:2]], want, 1e-6, 1e-5, values=False)
    assert "outputs" in bench.compare([same, same], want, 1e-6, 1e-5, values=True)


def test_eig_invariants_accept_any_phase_and_reject_wrong_vectors():
    bench = _load_bench()
    a = torch.tensor([[2.0, 1.0, 0.0], [-1.0, 1.0, 3.0], [0.5, 0.0, -1.0]])
    w, v = torch.linalg.eig(a)
    want = [w, v]
    phase = torch.exp(1j * torch.tensor([0.3, 2.0, -1.0]))  # another valid choice per column
    rotated = [w.numpy(), (v * phase).numpy()]
    assert bench._eig_invariants([a], rotated, want, 1.3e-6, 1e-5) == ""
    assert bench.compare(rotated, want, 1.3e-6, 1e-5, values=True) != ""  # raw values differ
    swapped = [w.numpy(), v.numpy()[:, [1, 0, 2]]]  # unit vectors of other eigenvalues
    assert "A V - V diag(w)" in bench._eig_invariants([a], swapped, want, 1.3e-6, 1e-5)
    scaled = [w.numpy(), 2 * v.numpy()]
    assert "norms" in bench._eig_invariants([a], scaled, want, 1.3e-6, 1e-5)


def test_svd_and_eigh_invariants_accept_any_signs_and_reject_wrong_vectors():
    bench = _load_bench()
    g = torch.Generator().manual_seed(0)
    a = torch.randn(4, 3, generator=g)
    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    flips = torch.tensor([1.0, -1.0, -1.0])  # another valid sign per singular pair
    flipped = [(u * flips).numpy(), s.numpy(), (vh * flips[:, None]).numpy()]
    svd = bench.INVARIANTS["linalg.svd"]
    assert svd([a], flipped, [u, s, vh], 1.3e-6, 1e-5) == ""
    assert bench.compare(flipped, [u, s, vh], 1.3e-6, 1e-5, values=True) != ""
    half_flipped = [(u * flips).numpy(), s.numpy(), vh.numpy()]  # U and Vh no longer pair up
    assert "U diag(S) Vh" in svd([a], half_flipped, [u, s, vh], 1.3e-6, 1e-5)
    torch_svd = bench.INVARIANTS["svd"]  # torch.svd returns V, not Vh
    assert torch_svd([a], [u.numpy(), s.numpy(), vh.mT.numpy()], [u, s, vh.mT],
                     1.3e-6, 1e-5) == ""

    h = a.mT @ a  # symmetric
    w, v = torch.linalg.eigh(h)
    eigh = bench.INVARIANTS["linalg.eigh"]
    assert eigh([h], [w.numpy(), (v * flips).numpy()], [w, v], 1.3e-6, 1e-5) == ""
    assert "A V - V diag(w)" in eigh([h], [w.numpy(), v.numpy()[:, [1, 0, 2]]], [w, v],
                                     1.3e-6, 1e-5)


def test_float64_reference_is_recorded_with_its_reason(tmp_path):
    bench = _load_bench()
    out = tmp_path / "cases.json"
    bench.main(["--ops", "matrix_exp", "--samples", "2", "--json", str(out)])
    cases = json.loads(out.read_text())["cases"]
    assert cases and all(c["outcome"] == "verified" for c in cases), cases
    assert all(c["reference"].startswith("float64: torch's float32 matrix_exp") for c in cases)
