"""Damaged and hostile ``.aimodel`` assets never take the process down and never hang: each
is one clear error naming the file (``tests/interop/hostile_assets.py`` makes them: truncated,
bit-flipped in the code and in a weight, a stale or missing hash, a folder, a FIFO or a link to
/dev/zero in place of a file, sparse files of huge sizes, bad metadata and dynamic-dims
records). Every case that could kill the process runs in a child process with a timeout."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from coreai_core import Dim, Program, RuntimeInputError, TensorType
from coreai_core.dialects import coreai
from coreai_torch.aimodel import (
    AimodelAssetError,
    AimodelEntrypointError,
    AimodelInterpreterError,
    export_aimodel,
    load_aimodel,
    run_aimodel,
    verify_aimodel,
)
from tests.interop import hostile_assets as hostile


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("hostile")
    hostile.write_assets(work)
    for name in [*hostile.CASES, *hostile.FORGED]:
        hostile.make_case(work, work, name)
    return work


# the in-process abort of a forged asset last: that process dies (the others then run on)
ABORT = "load:truncated-rehashed"


@pytest.fixture(scope="module")
def found(cases: Path) -> dict[str, dict[str, object]]:
    """Every case opened in child processes (one, until one dies or hangs), by MODE:NAME."""
    return hostile.outcomes(cases, [*(f"load:{n}" for n in hostile.CASES),
                                    *(f"isolated:{n}" for n in hostile.FORGED), ABORT])


def _assert_clear(found: dict[str, dict[str, object]], mode: str,
                  expected: dict[str, tuple[str, object, str, str]]) -> None:
    bad = {}
    for name, (_, _, kind, pattern) in expected.items():
        got = found[f"{mode}:{name}"]
        if got.get("raised") != kind or not re.search(pattern, str(got.get("message"))):
            bad[name] = got
    assert not bad, json.dumps(bad, indent=1)


def test_damaged_assets_are_clear_errors_in_process(found: dict[str, dict[str, object]]) -> None:
    _assert_clear(found, "load", hostile.CASES)
    for name in hostile.CASES:  # every message names the asset's file
        assert f"{name}.aimodel/" in str(found[f"load:{name}"]["message"]), name


def test_forged_assets_are_clear_errors_when_isolated(found: dict[str, dict[str, object]],
                                                      ) -> None:
    """Damaged and re-hashed: Apple's parser aborts its (child) process; the error carries
    Apple's own message."""
    _assert_clear(found, "isolated", hostile.FORGED)
    for name in hostile.FORGED:
        got = found[f"isolated:{name}"]
        assert "failed to parse bytecode" in str(got["message"]), got


def test_an_abort_in_process_still_shows_apples_message(found: dict[str, dict[str, object]],
                                                        ) -> None:
    """Without isolation a forged asset still ends the process (Apple aborts), but Apple's
    message reaches stderr (the load-announcement filter used to swallow it)."""
    got = found[ABORT]
    assert got.get("died") == 6, got  # SIGABRT
    assert "failed to parse bytecode" in str(got["stderr"]), got


def test_verify_aimodel_is_isolated_by_default(cases: Path) -> None:
    """verify_aimodel runs Apple's interpreter in a child process unless told otherwise, so
    this test process survives a forged asset."""
    weight = torch.tensor(hostile.WEIGHT)

    class Scale(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * weight

    x = torch.tensor(hostile.X)
    with pytest.raises(AimodelInterpreterError, match="failed to parse bytecode") as info:
        verify_aimodel(Scale(), cases / "truncated-rehashed.aimodel", (x,))
    assert "failed to parse bytecode" in info.value.stderr
    report = verify_aimodel(Scale(), cases / "static.aimodel", (x,))  # the good one passes
    assert report.passed, str(report)
    with pytest.raises(AimodelAssetError, match=r"weight-bit-flipped\.aimodel/main\.mlirb does "
                                                "not match main.hash"):
        verify_aimodel(Scale(), cases / "weight-bit-flipped.aimodel", (x,))


def _stateful(tmp_path: Path) -> tuple[Program, Path]:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((3,), "float32")},
                 state={"total": np.zeros((3,), np.float32)}) as g:
        total = coreai.broadcasting_add(g["total"], g["x"])
        g.outputs({"y": coreai.broadcasting_mul(total, 2.0)}, state={"total": total})
    return p, export_aimodel(p, tmp_path / "acc.aimodel")


def test_isolated_runs_match_in_process_runs(tmp_path: Path) -> None:
    program, path = _stateful(tmp_path)
    rng = np.random.default_rng(0)
    steps = [rng.standard_normal(3).astype(np.float32) for _ in range(4)]
    want_state = {k: v.copy() for k, v in program.state.items()}
    want = [program.run({"x": x}, state=want_state)["y"] for x in steps]
    with load_aimodel(path, state=program.state, isolated=True) as asset:
        assert asset.isolated and asset.state_names() == ["total"]
        got = [asset.run({"x": x})["y"] for x in steps]
        with pytest.raises(RuntimeInputError, match="axis 0 is 4, expected 3"):
            asset.run({"x": np.zeros(4, np.float32)})  # checked before the child sees it
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    np.testing.assert_allclose(asset.state["total"], want_state["total"], rtol=1e-6)
    assert asset.closed
    with pytest.raises(ValueError, match="was closed"):
        asset.run({"x": steps[0]})


def test_a_loaded_asset_is_safe_from_several_threads(tmp_path: Path) -> None:
    """Before calls were serialized, half of them failed with "This event loop is already
    running"."""
    p = Program()
    with p.graph("main", inputs={"x": TensorType((47,), "float32")}) as g:
        g.outputs({"y": coreai.broadcasting_mul(coreai.sin(g["x"]), 3.0)})
    path = export_aimodel(p, tmp_path / "sin.aimodel")
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(47).astype(np.float32) for _ in range(4)]
    want = [p.run({"x": x})["y"] for x in xs]
    errors: list[BaseException] = []
    for isolated in (False, True):
        with load_aimodel(path, isolated=isolated) as asset:
            def work(i: int, asset=asset) -> None:
                try:
                    for _ in range(15):
                        got = asset.run({"x": xs[i]})["y"]
                        np.testing.assert_allclose(got, want[i], rtol=1e-5, atol=1e-6)
                except BaseException as e:  # collected: an assert in a thread is not seen
                    errors.append(e)

            threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
        assert not errors, errors[:3]


def test_a_missing_entrypoint_lists_the_ones_there_are(cases: Path) -> None:
    with load_aimodel(cases / "static.aimodel") as asset, \
            pytest.raises(AimodelEntrypointError) as info:
        asset.run({"x": hostile.X}, entrypoint="decode")
    assert str(info.value) == (f"{cases / 'static.aimodel'} has no function 'decode'; it has "
                               "['main'] (pass one of them as entrypoint=)")
    assert isinstance(info.value, KeyError)  # what it was before


def _with_record(path: Path, record: object) -> None:
    meta = json.loads((path / "metadata.json").read_text())
    meta["creatorDefinedMetadata"][hostile.DIMS_KEY] = json.dumps(record)
    (path / "metadata.json").write_text(json.dumps(meta))


def test_apples_static_sizes_win_over_the_dims_record(tmp_path: Path) -> None:
    """An edited record cannot make a static axis dynamic nor change its size; it only names
    and bounds what Apple's descriptor leaves dynamic."""
    p = Program()
    with p.graph("main", inputs={"x": TensorType((Dim("n", 1, 8), 3), "float32")}) as g:
        g.outputs({"y": coreai.broadcasting_mul(g["x"], 2.0)})
    path = export_aimodel(p, tmp_path / "d.aimodel")
    x = np.ones((2, 3), np.float32)
    for axis1 in (7, ["m", 1, 9]):
        _with_record(path, {"main": {"input": {"x": [["n", 1, 8], axis1]}, "state": {}}})
        np.testing.assert_array_equal(run_aimodel(path, {"x": x})["y"], 2 * x)
        with pytest.raises(RuntimeInputError, match="axis 1 is 7, expected 3"):
            run_aimodel(path, {"x": np.ones((2, 7), np.float32)})
    # the bounds of the dynamic axis still come from the record
    with pytest.raises(RuntimeInputError, match=r"axis 0 = 9 is outside the bounds of \?n\[1:8\]"):
        run_aimodel(path, {"x": np.ones((9, 3), np.float32)})
