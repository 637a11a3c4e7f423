"""A forward() argument mutated in place is state in the .aimodel too (Apple's rule): the
asset's function lists it in its state after the mutated buffers, takes the arguments that are
not mutated as inputs, and on Apple's interpreter writes the argument's new value into the
state mapping, as torch eager mutates the tensor."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

from coreai_core import Program, RuntimeInputError
from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.aimodel import export_aimodel, load_aimodel, run_aimodel
from coreai_torch.verify import compare
from tests.interop.helpers import ATOL, RTOL
from tests.torch.test_mutated_inputs import Mixed

# Apple's interpreter against torch eager: the model tests' float32 tolerances
# (tests/interop/test_aimodel_state.py); against our runtime: tests/interop/helpers.py's
TORCH_RTOL, TORCH_ATOL = 1e-3, 1e-4
N = 6
STATE = ["cache", "step", "b_state", "a_state"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Mixed, Program, Path]:
    model = Mixed(N).eval()
    ep = torch.export.export(model, tuple(torch.zeros(1, N) for _ in range(4)))
    program = TorchConverter().add_exported_program(
        ep.run_decompositions(get_decomp_table()), state_names=STATE,
        input_names=["query", "context"], output_names=["attn_out", "scaled"]).to_coreai()
    program.optimize()
    path = export_aimodel(program, tmp_path_factory.mktemp("mutated") / "mixed.aimodel")
    return model, program, path


def test_mutated_args_are_state_of_the_asset(exported: tuple[Mixed, Program, Path]) -> None:
    _, _, path = exported
    with load_aimodel(path) as asset:
        assert list(asset.state_names("main")) == STATE
        assert list(asset.input_names("main")) == ["query", "context"]
        assert list(asset.output_names("main")) == ["attn_out", "scaled"]


def test_decode_loop_on_apples_interpreter_matches_torch(
        exported: tuple[Mixed, Program, Path]) -> None:
    model, program, path = exported
    reference = copy.deepcopy(model)
    apple = {"cache": np.zeros((1, N), np.float32), "step": np.zeros(1, np.float32)}
    ours = {k: v.copy() for k, v in apple.items()}
    rng = np.random.default_rng(5)
    for step in range(3):
        b, x, a, z = (rng.standard_normal((1, N)).astype(np.float32) for _ in range(4))
        eager_b, eager_a = torch.from_numpy(b.copy()), torch.from_numpy(a.copy())
        with torch.no_grad():
            eager = [t.numpy() for t in reference(eager_b, torch.from_numpy(x), eager_a,
                                                  torch.from_numpy(z))]
        apple.update(b_state=b.copy(), a_state=a.copy())
        ours.update(b_state=b.copy(), a_state=a.copy())
        got = run_aimodel(path, {"query": x, "context": z}, state=apple)
        want = program.run({"query": x, "context": z}, state=ours)
        assert list(got) == ["attn_out", "scaled"]
        for name, e in zip(got, eager, strict=True):
            what = f"{name} at step {step}"
            assert compare(what, got[name], e, TORCH_RTOL, TORCH_ATOL).passed, what
            assert compare(what, got[name], want[name], RTOL, ATOL).passed, what
        torch_state = {"cache": reference.kv_cache.numpy(), "step": reference.pos_idx.numpy(),
                       "b_state": eager_b.numpy(), "a_state": eager_a.numpy()}
        for k in STATE:
            what = f"state {k} at step {step}"
            assert compare(what, apple[k], torch_state[k], TORCH_RTOL, TORCH_ATOL).passed, what
            assert compare(what, apple[k], ours[k], RTOL, ATOL).passed, what
    assert float(apple["step"][0]) == 3.0  # the buffers carried across the calls


def test_the_asset_asks_for_the_mutated_args(exported: tuple[Mixed, Program, Path]) -> None:
    _, _, path = exported
    state = {"cache": np.zeros((1, N), np.float32), "step": np.zeros(1, np.float32)}
    with pytest.raises(RuntimeInputError) as info:
        run_aimodel(path, {"query": np.zeros((1, N), np.float32),
                           "context": np.zeros((1, N), np.float32)}, state=state)
    msg = str(info.value)
    assert "missing state 'b_state'" in msg and "missing state 'a_state'" in msg
    assert "'cache'" not in msg
