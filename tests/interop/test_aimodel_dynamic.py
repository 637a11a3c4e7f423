"""Dynamic dimensions export as Core AI dynamic dimensions: one asset runs at every size in
the bounds on Apple's interpreter, matching torch eager and coreai_core's runtime; the bounds
and the names that tie inputs together are checked before anything runs; an op whose mapping
needs static sizes is refused by name with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.export import Dim

from coreai_core import Dim as CoreDim
from coreai_core import Program, RuntimeInputError, TensorType
from coreai_core.dialects import coreai
from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.aimodel import export_aimodel, load_aimodel
from coreai_torch.aimodel._dims import KEY as DIMS_KEY
from coreai_torch.errors import UnexportableOpsError
from coreai_torch.verify import compare
from tests.models.corpus import CORPUS
from tests.models.zoo import all_models

# float32 kernels of two implementations differ by ulps (tests/interop/helpers.py); against
# torch eager the model tests' tolerances (tests/models/test_models.py)
RTOL, ATOL = 1e-5, 1e-6
TORCH_RTOL, TORCH_ATOL = 1e-3, 1e-4
SIZES = [1, 2, 7, 47]


def _convert(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
             dynamic_shapes: tuple[object, ...] | None) -> Program:
    with torch.no_grad():
        ep = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    program = TorchConverter().add_exported_program(
        ep.run_decompositions(get_decomp_table())).to_coreai()
    program.optimize()
    return program


def _check(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> None:
    assert got.shape == want.shape, f"{name}: shape {got.shape}, expected {want.shape}"
    err = compare(name, got, want, rtol, atol)
    assert err.passed, err


class ShapeOps(torch.nn.Module):
    """Every shape mapping that reads sizes at run time: slices (open-ended, negative and
    strided bounds), a split on a static axis, reshape/flatten, unsqueeze/squeeze, expand,
    arange of a dynamic length, index_select, concat."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [n, 6]
        n = x.shape[0]
        a, b = x.split([2, 4], dim=1)                         # [n, 2], [n, 4]
        head = x[:, :100]                                     # [n, 6], past the end
        inner = x[:, 1:-1:2]                                  # [n, 2], strided
        flat = x.reshape(-1)                                  # [6n]
        picked = x.index_select(0, torch.arange(n))           # [n, 6]
        grown = b.unsqueeze(1).expand(n, 3, 4)[:, 0]          # [n, 4]
        out = torch.cat([a * 2, picked[:, :4] + grown], dim=1)
        return out + head.sum() + inner.sum() + flat[-1]


def test_shape_mappings_run_at_every_size_from_one_asset(tmp_path: Path) -> None:
    model = ShapeOps()
    x = torch.randn(5, 6)
    program = _convert(model, (x,), ({0: Dim("n", min=1, max=64)},))
    assert program.graphs["main"].inputs["x"].type.static_shape is None
    path = export_aimodel(program, tmp_path / "shape_ops.aimodel")
    rng = np.random.default_rng(0)
    with load_aimodel(path) as asset:
        for n in SIZES:
            feed = rng.standard_normal((n, 6)).astype(np.float32)
            got = asset.run({"x": feed})
            ours = program.run({"x": feed})
            with torch.no_grad():
                want = model(torch.from_numpy(feed)).numpy()
            for name in ours:
                _check(name, got[name], ours[name], RTOL, ATOL)
                _check(name, got[name], want, TORCH_RTOL, TORCH_ATOL)


def _tied_program() -> Program:
    """Two inputs whose first dimension is the same symbol ``n`` in [1, 8]."""
    n = CoreDim("n", 1, 8)
    p = Program()
    with p.graph("main", inputs={"x": TensorType((n, 3), "float32"),
                                 "w": TensorType((n,), "float32")}) as g:
        g.outputs({"y": coreai.broadcasting_mul(g["x"], coreai.expand_dims(g["w"], axes=[1]))})
    return p


@pytest.fixture(scope="module")
def tied(tmp_path_factory: pytest.TempPathFactory) -> tuple[Program, Path]:
    program = _tied_program()
    return program, export_aimodel(program, tmp_path_factory.mktemp("tied") / "tied.aimodel")


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 8))
def test_a_named_dimension_runs_at_every_size_in_its_bounds(
        tied: tuple[Program, Path], n: int) -> None:
    program, path = tied
    rng = np.random.default_rng(n)
    feed = {"x": rng.standard_normal((n, 3)).astype(np.float32),
            "w": rng.standard_normal(n).astype(np.float32)}
    with load_aimodel(path) as asset:
        got = asset.run(feed)
    _check("y", got["y"], program.run(feed)["y"], RTOL, ATOL)


def test_bounds_and_names_are_checked_before_running(tied: tuple[Program, Path]) -> None:
    """Core AI's types hold no bounds or names: the exporter keeps them in the asset's
    metadata and the loaded asset checks them like Program.run does."""
    _, path = tied
    with load_aimodel(path) as asset:
        with pytest.raises(RuntimeInputError, match=r"axis 0 = 9 is outside the bounds of "
                                                    r"\?n\[1:8\]"):
            asset.run({"x": np.zeros((9, 3), np.float32), "w": np.zeros(9, np.float32)})
        with pytest.raises(RuntimeInputError, match=r"'input w'.*n"):
            asset.run({"x": np.zeros((4, 3), np.float32), "w": np.zeros(5, np.float32)})


def test_an_asset_without_the_record_still_runs(tmp_path: Path) -> None:
    """An asset whose metadata lost the dims' record (written by another tool, say) runs;
    each dynamic size is then a symbol of its own."""
    program = _tied_program()
    path = export_aimodel(program, tmp_path / "bare.aimodel")
    metadata = json.loads((path / "metadata.json").read_text())
    metadata.get("creatorDefinedMetadata", {}).pop(DIMS_KEY)
    (path / "metadata.json").write_text(json.dumps(metadata))
    feed = {"x": np.ones((4, 3), np.float32), "w": np.arange(4, dtype=np.float32)}
    with load_aimodel(path) as asset:
        assert [str(d) for d in asset._function("main").inputs["x"].shape][1] == "3"
        _check("y", asset.run(feed)["y"], program.run(feed)["y"], RTOL, ATOL)


def test_static_size_reading_mappings_are_refused_by_name(tmp_path: Path) -> None:
    """An op whose mapping reads a dynamic size at export time is named with the reason."""
    class Flip(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.flip(x, [0]) + x

    program = _convert(Flip(), (torch.randn(5, 3),), ({0: Dim("n", min=1, max=64)},))
    with pytest.raises(UnexportableOpsError) as info:
        export_aimodel(program, tmp_path / "flip.aimodel")
    ops = {op.op: op.reason for op in info.value.ops}
    assert "coreai.reverse" in ops, info.value
    assert "needs static shapes" in ops["coreai.reverse"]
    assert not (tmp_path / "flip.aimodel").exists()


@pytest.mark.slow
def test_llm_prefill_runs_at_several_prompt_lengths_from_one_asset(tmp_path: Path) -> None:
    """The zoo's Llama (2 layers, grouped-query attention, rotary positions, causal mask)
    exported once with a dynamic prompt length."""
    model, (ids,) = all_models()["llama[sdpa]"]()
    program = _convert(model, (ids,), (({1: Dim("seq", min=1, max=48)},),))
    path = export_aimodel(program, tmp_path / "prefill.aimodel")
    name = program.input_names[0]
    with load_aimodel(path) as asset:
        for length in (1, 7, 47):
            prompt = torch.randint(0, 96, (ids.shape[0], length),
                                   generator=torch.Generator().manual_seed(length))
            got = asset.run({name: prompt.numpy()})
            ours = program.run({name: prompt.numpy()})
            with torch.no_grad():
                want = model(prompt).numpy()
            (out,) = ours
            _check(out, got[out], ours[out], RTOL, ATOL)
            _check(out, got[out], want, TORCH_RTOL, TORCH_ATOL)


@pytest.mark.slow
def test_funnel_exports_and_matches_torch(tmp_path: Path) -> None:
    """Funnel-Transformer (torch.export specializes its sequence length, so it is exported
    with static shapes)."""
    from coreai_torch.aimodel import verify_aimodel

    model, inputs = CORPUS["encoder/funnel"]()
    program = _convert(model, inputs, None)
    path = export_aimodel(program, tmp_path / "funnel.aimodel")
    report = verify_aimodel(model, path, inputs, program=program, rtol=TORCH_RTOL,
                            atol=TORCH_ATOL)
    assert report.passed, report
