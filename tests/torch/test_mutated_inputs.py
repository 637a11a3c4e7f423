"""A forward() argument mutated in place is state, like a mutated buffer (Apple's converter
rule, docs/api/TorchConverter.md "IO naming"): ``input_names`` name the arguments that are not
mutated, ``state_names`` the mutated buffers (registration order) then the mutated arguments
(signature order). The caller gives the tensor torch would mutate; the program's new state is
that tensor's value after torch's call."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from coreai_core import Program, RuntimeInputError, load
from coreai_torch import TorchConverter
from tests.torch.harness import export

# Elementwise float32 add/mul/sub computed in the same order as torch's kernels: equal up to
# the last bit on any CPU; the margin only covers a rounding difference in a future kernel.
RTOL, ATOL = 1e-6, 1e-7
BUFFERS = ["kv_cache", "pos_idx"]  # registration order
MUTATED_ARGS = ["b", "a"]  # signature order (forward mutates a first)
INPUTS = ["x", "z"]


class Mixed(torch.nn.Module):
    """Two mutated buffers, one read-only buffer, two mutated arguments and two read ones,
    mutated in an order that is neither registration nor signature order."""

    kv_cache: torch.Tensor
    pos_idx: torch.Tensor
    scale: torch.Tensor

    def __init__(self, n: int) -> None:
        super().__init__()
        self.register_buffer("kv_cache", torch.zeros(1, n))
        self.register_buffer("pos_idx", torch.zeros(1))
        self.register_buffer("scale", torch.linspace(-1.0, 1.0, n))  # read only: a constant

    def forward(self, b: torch.Tensor, x: torch.Tensor, a: torch.Tensor, z: torch.Tensor,
                ) -> tuple[torch.Tensor, torch.Tensor]:
        self.pos_idx.add_(1)
        a.mul_(2)
        self.kv_cache.add_(x)
        b.sub_(x * self.scale)
        return self.kv_cache + b, z * 3 + a * self.pos_idx


def _arrays(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    return {k: rng.standard_normal((1, n)).astype(np.float32) for k in ("b", "x", "a", "z")}


def _example(n: int) -> dict[str, np.ndarray]:
    return _arrays(np.random.default_rng(0), n)


def _program(n: int, **names: list[str]) -> tuple[Mixed, Program]:
    model = Mixed(n).eval()
    ex = {k: torch.from_numpy(v.copy()) for k, v in _example(n).items()}
    ep = export(model, (ex["b"], ex["x"], ex["a"], ex["z"]))
    return model, TorchConverter().add_exported_program(ep, **names).to_coreai()


def _eager(reference: Mixed, arrays: dict[str, np.ndarray],
           ) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    """Torch's outputs and the mutated arguments' values after the call."""
    args = {k: torch.from_numpy(v.copy()) for k, v in arrays.items()}
    with torch.no_grad():
        out = reference(args["b"], args["x"], args["a"], args["z"])
    return [t.numpy() for t in out], {k: args[k].numpy() for k in MUTATED_ARGS}


@settings(max_examples=6, deadline=None)
@given(n=st.integers(1, 47), seed=st.integers(0, 2**32 - 1))
@example(n=1, seed=1)
@example(n=47, seed=2)
def test_mixed_state_matches_torch_eager_step_by_step(n: int, seed: int) -> None:
    model, program = _program(n)
    assert program.state_names == BUFFERS + MUTATED_ARGS  # buffers, then mutated args
    assert program.input_names == INPUTS
    for k in MUTATED_ARGS:  # a mutated argument starts as the export's example
        np.testing.assert_array_equal(program.initial_state[k], _example(n)[k])
    reference = copy.deepcopy(model)
    rng = np.random.default_rng(seed)
    for step in range(3):  # the buffers carry across calls in the program's own state
        arrays = _arrays(rng, n)
        expected, mutated = _eager(reference, arrays)
        for k in MUTATED_ARGS:  # the caller gives the tensors torch mutates
            program.state[k] = arrays[k].copy()
        got = program.run({k: arrays[k] for k in INPUTS})
        for g, e in zip(got.values(), expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=f"step {step}")
        for k in MUTATED_ARGS:
            np.testing.assert_allclose(program.state[k], mutated[k], rtol=RTOL, atol=ATOL,
                                       err_msg=f"state {k} at step {step}")
        for k in BUFFERS:
            np.testing.assert_allclose(program.state[k], getattr(reference, k).numpy(),
                                       rtol=RTOL, atol=ATOL, err_msg=f"{k} at step {step}")
    program.reset_state()  # back to the buffers' values and the examples
    assert float(program.state["pos_idx"][0]) == 0.0
    np.testing.assert_array_equal(program.state["b"], _example(n)["b"])


def test_explicit_names_follow_apples_order() -> None:
    """state_names name the buffers (registration order) then the mutated args (signature
    order); input_names the args that are not mutated: each name carries its own value."""
    n = 5
    model, program = _program(n, state_names=["cache", "step", "b_state", "a_state"],
                              input_names=["query", "context"],
                              output_names=["attn_out", "scaled"])
    assert program.state_names == ["cache", "step", "b_state", "a_state"]
    assert program.input_names == ["query", "context"]
    assert program.output_names == ["attn_out", "scaled"]
    arrays = _arrays(np.random.default_rng(4), n)
    state = {"cache": np.full((1, n), 0.25, np.float32), "step": np.array([7.0], np.float32),
             "b_state": arrays["b"].copy(), "a_state": arrays["a"].copy()}
    reference = copy.deepcopy(model)
    reference.kv_cache.fill_(0.25)
    reference.pos_idx.fill_(7.0)
    expected, mutated = _eager(reference, arrays)
    got = program.run({"query": arrays["x"], "context": arrays["z"]}, state=state)
    np.testing.assert_allclose(got["attn_out"], expected[0], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got["scaled"], expected[1], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(state["b_state"], mutated["b"], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(state["a_state"], mutated["a"], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(state["cache"], reference.kv_cache.numpy(), rtol=RTOL, atol=ATOL)
    assert float(state["step"][0]) == float(reference.pos_idx[0]) == 8.0


def test_explicit_state_without_the_mutated_args_says_which_and_how() -> None:
    _, program = _program(3)
    buffers = {k: v.copy() for k, v in program.initial_state.items() if k in BUFFERS}
    with pytest.raises(RuntimeInputError) as info:
        program.run({k: np.zeros((1, 3), np.float32) for k in INPUTS}, state=buffers)
    msg = str(info.value)
    assert "missing state 'b' (tensor<1x3xf32>)" in msg
    assert "missing state 'a' (tensor<1x3xf32>)" in msg
    assert "pass state={name: array} holding every state of the graph" in msg
    assert "'kv_cache'" not in msg and "'pos_idx'" not in msg  # given
    assert sorted(buffers) == BUFFERS  # nothing was run, nothing written


def test_naming_errors_say_what_the_program_has() -> None:
    model = Mixed(2)
    ep = export(model, tuple(torch.zeros(1, 2) for _ in range(4)))
    # every forward() arg named as an input (what input_names covered before Apple's change)
    with pytest.raises(ValueError, match=r"input_names has 4 names but the program has 2 user "
                                         r"inputs \['x', 'z'\].*arguments \['b', 'a'\] are "
                                         r"mutated in place, so they are state"):
        TorchConverter().add_exported_program(ep, input_names=["b", "x", "a", "z"])
    with pytest.raises(ValueError, match=r"state_names has 2 names but the program has 4 "
                                         r"mutated buffers/inputs \(in state order: buffer "
                                         r"'kv_cache', buffer 'pos_idx', forward\(\) argument "
                                         r"'b', mutated in place, forward\(\) argument 'a'"):
        TorchConverter().add_exported_program(ep, state_names=["cache", "step"])
    with pytest.raises(ValueError, match=r"'b' names both an input and the state of the "
                                         r"forward\(\) argument 'b'"):
        TorchConverter().add_exported_program(ep, input_names=["b", "w"])


class SameName(torch.nn.Module):
    """A buffer and a forward() argument both called ``x``, both mutated."""

    x: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("x", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.x.add_(x)
        x.mul_(3)
        return self.x * 2


def test_a_buffer_and_an_arg_of_the_same_name_need_state_names() -> None:
    ep = export(SameName(), (torch.ones(3),))
    with pytest.raises(ValueError, match=r"default state names repeat \['x'\].*pass "
                                         r"state_names=\[\.\.\.\] in state order: buffer 'x', "
                                         r"forward\(\) argument 'x'"):
        TorchConverter().add_exported_program(ep)
    program = TorchConverter().add_exported_program(
        ep, state_names=["total", "x_arg"]).to_coreai()
    assert program.state_names == ["total", "x_arg"] and program.input_names == []
    reference = SameName()
    arg = torch.tensor([1.0, -2.0, 0.5])
    with torch.no_grad():
        expected = reference(eager_arg := arg.clone())
    state = {"total": np.zeros(3, np.float32), "x_arg": arg.numpy().copy()}
    (got,) = program.run({}, state=state).values()
    np.testing.assert_allclose(got, expected.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(state["x_arg"], eager_arg.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(state["total"], reference.x.numpy(), rtol=RTOL, atol=ATOL)


def test_a_cloned_arg_stays_an_input() -> None:
    """Apple's way out: mutate a clone, and the argument is a plain input."""

    class Cloned(torch.nn.Module):
        def forward(self, y: torch.Tensor) -> torch.Tensor:
            local = y.clone()
            local.mul_(2)
            return local + 1

    ep = export(Cloned(), (torch.ones(4),))
    program = TorchConverter().add_exported_program(ep, input_names=["y_in"]).to_coreai()
    assert program.input_names == ["y_in"] and program.state_names == []
    y = np.arange(4, dtype=np.float32)
    (got,) = program.run({"y_in": y}).values()
    np.testing.assert_allclose(got, Cloned()(torch.from_numpy(y)).numpy(), rtol=RTOL,
                               atol=ATOL)


def test_program_with_mutated_args_verifies_and_saves(tmp_path: Path) -> None:
    """Every state has an initial value (the examples for the mutated args): the program
    verifies, saves and loads back with the same state."""
    _, program = _program(2)
    program.verify()
    program.save(tmp_path / "m.coreai")
    loaded = load(tmp_path / "m.coreai")
    assert loaded == program and loaded.state_names == BUFFERS + MUTATED_ARGS
    np.testing.assert_array_equal(loaded.initial_state["a"], _example(2)["a"])
