"""An .aimodel loaded once (``load_aimodel``) steps without reloading: a tiny Llama's KV-cache
decode loop runs step after step on Apple's interpreter against torch eager, with the state
held by the asset or passed explicitly, and the interpreter's load announcements stay off the
console."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from coreai_core import Program, RuntimeInputError, TensorType
from coreai_core.dialects import coreai
from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.aimodel import (
    LoadedAimodel,
    export_aimodel,
    load_aimodel,
    run_aimodel,
    verify_aimodel,
)
from coreai_torch.aimodel.loaded import _without_load_announcements
from coreai_torch.verify import compare
from tests.models.llm import LlamaDecodeStep, tiny_llama

# the model tests' float32 tolerances (tests/models/test_models.py): two implementations'
# float32 kernels (transcendentals, summation order) differ by ulps
RTOL, ATOL = 1e-3, 1e-4
MAX_LEN = 16
TOKENS = [5, 17, 2, 90, 33, 1, 60]  # a prompt fed one token per step


@pytest.fixture(scope="module")
def decoder(tmp_path_factory: pytest.TempPathFactory) -> tuple[LlamaDecodeStep, Program, Path]:
    step = LlamaDecodeStep(tiny_llama(), MAX_LEN).eval()
    ep = torch.export.export(copy.deepcopy(step), (torch.tensor([[3]]), torch.tensor([0])))
    program = TorchConverter().add_exported_program(
        ep.run_decompositions(get_decomp_table()), output_names=["logits"]).to_coreai()
    program.optimize()
    path = export_aimodel(program, tmp_path_factory.mktemp("llm") / "decode.aimodel")
    return step, program, path


def _feed(n: int, token: int) -> dict[str, np.ndarray]:
    return {"ids": np.array([[token]]), "pos": np.array([n])}


def _torch_logits(step: LlamaDecodeStep) -> list[np.ndarray]:
    """The logits of each step of the prompt, from a fresh copy of the torch module."""
    model = copy.deepcopy(step)
    with torch.no_grad():
        return [model(torch.tensor([[t]]), torch.tensor([n])).numpy()
                for n, t in enumerate(TOKENS)]


def test_decode_loop_steps_on_one_loaded_asset(
        decoder: tuple[LlamaDecodeStep, Program, Path]) -> None:
    step, program, path = decoder
    want = _torch_logits(step)
    with load_aimodel(path, state=program.state) as asset:
        assert asset.function_names == ["main"] and asset.state_names() == program.state_names
        first = None
        for n, token in enumerate(TOKENS):
            got = asset.run(_feed(n, token))["logits"]
            first = got if first is None else first
            err = compare("logits", got, want[n], RTOL, ATOL)
            assert err.passed, f"step {n}: {err}"
        # the held state is the cache torch's buffers hold after the prompt
        torch_model = copy.deepcopy(step)
        with torch.no_grad():
            for n, token in enumerate(TOKENS):
                torch_model(torch.tensor([[token]]), torch.tensor([n]))
        for name in program.state_names:
            err = compare(name, asset.state[name], getattr(torch_model, name).numpy(), RTOL,
                          ATOL)
            assert err.passed, err
        asset.reset_state()
        for name, initial in program.state.items():
            np.testing.assert_array_equal(asset.state[name], initial)
        np.testing.assert_array_equal(asset.run(_feed(0, TOKENS[0]))["logits"], first)


def test_explicit_state_leaves_the_held_state_alone_and_matches_run_aimodel(
        decoder: tuple[LlamaDecodeStep, Program, Path]) -> None:
    """``state=`` is read and updated in place, like ``Program.run``; ``run_aimodel`` (a load
    per call) computes the same values bit for bit: the same interpreter runs both."""
    _, program, path = decoder
    mine = {k: v.copy() for k, v in program.state.items()}
    reloaded = {k: v.copy() for k, v in program.state.items()}
    with load_aimodel(path, state=program.state) as asset:
        for n, token in enumerate(TOKENS[:3]):
            got = asset.run(_feed(n, token), state=mine)["logits"]
            np.testing.assert_array_equal(
                got, run_aimodel(path, _feed(n, token), state=reloaded)["logits"])
        for name, initial in program.state.items():
            np.testing.assert_array_equal(asset.state[name], initial)  # untouched
            np.testing.assert_array_equal(mine[name], reloaded[name])
            assert not np.array_equal(mine[name], initial)  # three tokens were written


def test_verify_aimodel_steps_a_loaded_asset(
        decoder: tuple[LlamaDecodeStep, Program, Path]) -> None:
    step, program, path = decoder
    model = copy.deepcopy(step)
    state = {k: v.copy() for k, v in program.state.items()}
    with load_aimodel(path) as asset:
        for n, token in enumerate(TOKENS[:3]):
            inputs = (torch.tensor([[token]]), torch.tensor([n]))  # a sequence, in input order
            report = verify_aimodel(model, asset, inputs, program=program, state=state,
                                    rtol=RTOL, atol=ATOL)
            assert report.passed, f"step {n}:\n{report}"
            with torch.no_grad():
                model(*inputs)  # advance torch's cache along with ``state``
        assert not asset.closed  # verify_aimodel does not close an asset it was given


def test_load_announcements_stay_off_the_console(
        decoder: tuple[LlamaDecodeStep, Program, Path], capfd: pytest.CaptureFixture[str],
        ) -> None:
    _, program, path = decoder
    capfd.readouterr()
    with load_aimodel(path, state=program.state) as asset:
        asset.run(_feed(0, 3))
    run_aimodel(path, _feed(0, 3), state={k: v.copy() for k, v in program.state.items()})
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_only_the_announcements_are_dropped(capfd: pytest.CaptureFixture[str]) -> None:
    """Anything else written to file descriptor 2 while loading is passed on."""
    capfd.readouterr()
    with _without_load_announcements():
        os.write(2, b"ODIE [default]: Loading function 'main'\n")
        os.write(2, b"ODIE [default]: something went wrong\n")
    assert capfd.readouterr().err == "ODIE [default]: something went wrong\n"


def _double(tmp_path: Path) -> Path:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((3,), "float32")}) as g:
        g.outputs({"y": coreai.broadcasting_mul(g["x"], 2.0)})
    return export_aimodel(p, tmp_path / "double.aimodel")


def test_a_closed_asset_says_so(tmp_path: Path) -> None:
    asset = load_aimodel(_double(tmp_path))
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(asset.run([x])["y"], 2 * x)  # a sequence, in input order
    assert "functions=['main']" in repr(asset) and isinstance(asset, LoadedAimodel)
    asset.close()
    asset.close()  # idempotent
    assert asset.closed and "closed" in repr(asset)
    with pytest.raises(ValueError, match="was closed; load it again"):
        asset.run({"x": x})


def test_bad_calls_name_the_problem(tmp_path: Path) -> None:
    path = _double(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"is not an \.aimodel asset"):
        load_aimodel(tmp_path / "missing.aimodel")
    with load_aimodel(path) as asset:
        with pytest.raises(KeyError, match=r"no function 'decode'; it has \['main'\]"):
            asset.run({"x": np.zeros(3, np.float32)}, entrypoint="decode")
        with pytest.raises(RuntimeInputError, match=r"got 2 inputs, .* takes \['x'\]"):
            asset.run([np.zeros(3, np.float32)] * 2)
        with pytest.raises(RuntimeInputError, match="axis 0 is 4, expected 3"):
            asset.run({"x": np.zeros(4, np.float32)})
