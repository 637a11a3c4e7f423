"""State in an .aimodel: a KV-cache decode loop and a prefill/decode pair sharing state run on
Apple's interpreter with the state carried across calls, step by step against torch eager and
coreai_core's runtime; and what happens when the state given is wrong."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

from coreai_core import Dim, Program, RuntimeInputError, TensorType
from coreai_core.dialects import coreai
from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.aimodel import export_aimodel, run_aimodel, verify_aimodel
from coreai_torch.errors import UnexportableOpsError
from coreai_torch.verify import compare
from tests.interop.helpers import ATOL, RTOL

# Apple's interpreter against torch eager: the model tests' float32 tolerances
# (tests/models/test_models.py); against our runtime: tests/interop/helpers.py's
TORCH_RTOL, TORCH_ATOL = 1e-3, 1e-4
HEADS, MAX_LEN, DIM = 2, 16, 4
STATE = ("k_cache", "v_cache", "pos")


class KVCache(torch.nn.Module):
    """Appends the keys and values of ``t`` new tokens at ``pos`` of a fixed-size cache and
    attends causally over the cache: ``t`` = 1 is a decode step, more is a prefill.

    The cache is written with a one-hot matmul and ``where`` (exact: each written slot is
    1 * its value plus zeros), a form that maps onto Core AI's ops.
    """

    k_cache: torch.Tensor
    v_cache: torch.Tensor
    pos: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(1, HEADS, MAX_LEN, DIM))
        self.register_buffer("v_cache", torch.zeros(1, HEADS, MAX_LEN, DIM))
        self.register_buffer("pos", torch.zeros((), dtype=torch.int64))
        self.proj = torch.nn.Linear(DIM, 3 * DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [1, heads, t, dim]
        q, k, v = self.proj(x).split(DIM, dim=-1)
        t = x.shape[2]
        slots = torch.arange(MAX_LEN)
        new = self.pos + torch.arange(t)  # the positions of the new tokens
        place = (slots[:, None] == new[None, :]).to(x.dtype)  # [slots, t], one-hot
        written = ((slots >= self.pos) & (slots < self.pos + t))[:, None]
        self.k_cache.copy_(torch.where(written, place @ k, self.k_cache))
        self.v_cache.copy_(torch.where(written, place @ v, self.v_cache))
        scores = q @ self.k_cache.transpose(-1, -2) / DIM**0.5
        scores = scores.masked_fill(slots[None, :] > new[:, None], float("-inf"))
        self.pos.add_(t)
        return torch.softmax(scores, dim=-1) @ self.v_cache


def _model() -> KVCache:
    torch.manual_seed(0)
    return KVCache().eval()


def _export(model: KVCache, tokens: int) -> torch.export.ExportedProgram:
    x = torch.randn(1, HEADS, tokens, DIM)
    return torch.export.export(model, (x,)).run_decompositions(get_decomp_table())


@pytest.fixture(scope="module")
def decode(tmp_path_factory: pytest.TempPathFactory) -> tuple[KVCache, Program, Path]:
    """A decode step (one token), converted and exported as entrypoint "main"."""
    model = _model()
    program = TorchConverter().add_exported_program(_export(model, 1),
                                                    output_names=["attn"]).to_coreai()
    program.optimize()
    path = export_aimodel(program, tmp_path_factory.mktemp("decode") / "decode.aimodel")
    return model, program, path


@pytest.fixture(scope="module")
def prefill_decode(tmp_path_factory: pytest.TempPathFactory,
                   ) -> tuple[KVCache, Program, Path]:
    """Two entrypoints of one module, converted into one program sharing the state."""
    model = _model()
    program = (TorchConverter()
               .add_exported_program(_export(model, 4), entrypoint_name="prefill")
               .add_exported_program(_export(model, 1), entrypoint_name="decode")
               .to_coreai())
    program.optimize()
    path = export_aimodel(program, tmp_path_factory.mktemp("pd") / "prefill_decode.aimodel")
    return model, program, path


def _fresh_state(program: Program) -> dict[str, np.ndarray]:
    return {k: v.copy() for k, v in program.initial_state.items()}


def _check_step(what: str, got: np.ndarray, eager: np.ndarray, ours: np.ndarray,
                apple_state: dict[str, np.ndarray], program: Program,
                reference: torch.nn.Module) -> None:
    """One call's output and new state: Apple's against torch eager and our runtime's."""
    assert compare(what, got, eager, TORCH_RTOL, TORCH_ATOL).passed, what
    assert compare(what, got, ours, RTOL, ATOL).passed, what
    for name in STATE:
        buffer = getattr(reference, name).numpy()
        assert apple_state[name].dtype == buffer.dtype, (what, name)  # int64 comes back
        assert compare(name, apple_state[name], buffer, TORCH_RTOL, TORCH_ATOL).passed, (
            what, name)
        assert compare(name, apple_state[name], program.state[name], RTOL, ATOL).passed, (
            what, name)
    assert int(apple_state["pos"]) == int(reference.pos)  # exact, not within a tolerance


def test_kv_cache_decode_loop_carries_state(decode: tuple[KVCache, Program, Path]) -> None:
    model, program, path = decode
    reference = copy.deepcopy(model)
    program.reset_state()
    apple_state = _fresh_state(program)
    assert sorted(program.state_names) == sorted(STATE) and program.input_names == ["x"]
    rng = np.random.default_rng(1)
    for step in range(6):
        x = rng.standard_normal((1, HEADS, 1, DIM)).astype(np.float32)
        with torch.no_grad():
            eager = reference(torch.from_numpy(x)).numpy()
        outputs = run_aimodel(path, {"x": x}, state=apple_state)
        assert list(outputs) == ["attn"]  # the state is neither an input nor an output
        got = outputs["attn"]
        (ours,) = program.run({"x": x}).values()
        _check_step(f"step {step}", got, eager, ours, apple_state, program, reference)
    assert int(apple_state["pos"]) == 6
    # the sixth token attends over all six: a state that did not carry would not match torch


class IndexCopyCache(KVCache):
    """Tutorial 06's decode step: the cache is written with ``index_copy_`` (a ``scatter_nd``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.proj(x).split(DIM, dim=-1)
        index = self.pos.reshape(1)
        self.k_cache.index_copy_(2, index, k)
        self.v_cache.index_copy_(2, index, v)
        self.pos.add_(1)
        scores = q @ self.k_cache.transpose(-1, -2) / DIM**0.5
        scores = scores.masked_fill(torch.arange(MAX_LEN) >= self.pos, float("-inf"))
        return torch.softmax(scores, dim=-1) @ self.v_cache


def test_index_copy_cache_decode_loop(tmp_path: Path) -> None:
    torch.manual_seed(2)
    model = IndexCopyCache().eval()
    reference = copy.deepcopy(model)
    ep = torch.export.export(model, (torch.randn(1, HEADS, 1, DIM),))
    program = TorchConverter().add_exported_program(
        ep.run_decompositions(get_decomp_table()), output_names=["attn"]).to_coreai()
    program.optimize()
    assert "coreai.scatter_nd" in {op.name for op in program.graphs["main"].ops}
    path = export_aimodel(program, tmp_path / "decode.aimodel")
    apple_state = _fresh_state(program)
    rng = np.random.default_rng(3)
    for step in range(5):
        x = rng.standard_normal((1, HEADS, 1, DIM)).astype(np.float32)
        with torch.no_grad():
            eager = reference(torch.from_numpy(x)).numpy()
        got = run_aimodel(path, {"x": x}, state=apple_state)["attn"]
        (ours,) = program.run({"x": x}).values()
        _check_step(f"step {step}", got, eager, ours, apple_state, program, reference)


def test_prefill_and_decode_share_state(prefill_decode: tuple[KVCache, Program, Path],
                                        ) -> None:
    model, program, path = prefill_decode
    assert set(program.graphs["prefill"].state_inputs) == set(STATE)
    assert set(program.graphs["decode"].state_inputs) == set(STATE)
    reference = copy.deepcopy(model)
    apple_state = _fresh_state(program)
    rng = np.random.default_rng(2)
    calls = [("prefill", 4), ("decode", 1), ("decode", 1), ("prefill", 4), ("decode", 1)]
    for i, (entrypoint, tokens) in enumerate(calls):
        x = rng.standard_normal((1, HEADS, tokens, DIM)).astype(np.float32)
        with torch.no_grad():
            eager = reference(torch.from_numpy(x)).numpy()
        (got,) = run_aimodel(path, {"x": x}, entrypoint=entrypoint, state=apple_state).values()
        (ours,) = program.run({"x": x}, entrypoint=entrypoint).values()
        _check_step(f"call {i} ({entrypoint})", got, eager, ours, apple_state, program,
                    reference)
    assert int(apple_state["pos"]) == 11


def test_verify_aimodel_step_by_step(decode: tuple[KVCache, Program, Path]) -> None:
    """verify_aimodel carries ``state``; torch's model is advanced alongside it."""
    model, program, path = decode
    reference = copy.deepcopy(model)
    apple_state = _fresh_state(program)
    for step in range(3):
        x = torch.randn(1, HEADS, 1, DIM)
        report = verify_aimodel(reference, path, (x,), program=program, state=apple_state)
        assert report.passed, f"step {step}:\n{report}"
        assert report.against_runtime is not None
        assert sorted(o.name for o in report.against_runtime.outputs) == sorted(
            ["attn", *(f"state:{k}" for k in STATE)])
        with torch.no_grad():
            reference(x)
        assert int(apple_state["pos"]) == int(reference.pos) == step + 1


def test_verify_aimodel_starts_from_the_programs_state(decode: tuple[KVCache, Program, Path],
                                                      ) -> None:
    model, program, path = decode
    program.reset_state()
    before = _fresh_state(program)
    report = verify_aimodel(model, path, (torch.randn(1, HEADS, 1, DIM),), program=program)
    assert report.passed, str(report)
    for k in STATE:  # verify runs on copies
        np.testing.assert_array_equal(program.state[k], before[k])


def _state_program() -> Program:
    """State of three kinds: updated, only read, and int64 (narrowed to int32)."""
    p = Program()
    state = {"acc": np.zeros(3, np.float32), "scale": np.full(3, 2.0, np.float32),
             "count": np.zeros((), np.int64)}
    with p.graph("main", inputs={"x": TensorType((3,), "float32")}, state=state) as g:
        acc = coreai.broadcasting_add(g["acc"], coreai.broadcasting_mul(g["x"], g["scale"]))
        count = coreai.broadcasting_add(g["count"], coreai.constant(np.array(1)))
        g.outputs({"y": coreai.relu(acc)}, state={"acc": acc, "count": count})
    return p


def test_read_only_state_is_left_alone(tmp_path: Path) -> None:
    program = _state_program()
    path = export_aimodel(program, tmp_path / "s.aimodel")
    apple = _fresh_state(program)
    ours = _fresh_state(program)
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = rng.standard_normal(3).astype(np.float32)
        got = run_aimodel(path, {"x": x}, state=apple)
        want = program.run({"x": x}, state=ours)
        np.testing.assert_allclose(got["y"], want["y"], rtol=RTOL, atol=ATOL)
        for k in ours:
            assert apple[k].dtype == ours[k].dtype
            np.testing.assert_allclose(apple[k], ours[k], rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(apple["scale"], program.initial_state["scale"])
    assert int(apple["count"]) == 3


# -- errors -------------------------------------------------------------------------------------

def _x() -> dict[str, np.ndarray]:
    return {"x": np.zeros((1, HEADS, 1, DIM), np.float32)}


def test_missing_state_says_how_to_pass_it(decode: tuple[KVCache, Program, Path]) -> None:
    _, _, path = decode
    with pytest.raises(RuntimeInputError) as info:
        run_aimodel(path, _x())
    msg = str(info.value)
    assert "bad inputs for function 'main'" in msg and "nothing was run" in msg
    assert all(f"missing state {k!r}" in msg for k in STATE)
    assert "pass state={name: array}" in msg and "program.state" in msg


def test_every_state_problem_in_one_error_and_nothing_changed(
        decode: tuple[KVCache, Program, Path]) -> None:
    _, program, path = decode
    state = _fresh_state(program)
    state["k_cahce"] = state.pop("k_cache")
    state["v_cache"] = np.zeros((1, HEADS, 8, DIM), np.float32)
    state["pos"] = np.array(2**40)
    kept = {k: v.copy() for k, v in state.items()}
    with pytest.raises(RuntimeInputError) as info:
        run_aimodel(path, {"x": np.zeros((1, HEADS, 1, DIM), np.float16)}, state=state)
    lines = str(info.value).splitlines()[1:]
    assert len(lines) == 5, lines
    msg = "\n".join(lines)
    assert "unknown state 'k_cahce'; did you mean 'k_cache'?" in msg
    assert "missing state 'k_cache' (tensor<1x2x16x4xf32>)" in msg
    assert "'state v_cache': expected tensor<1x2x16x4xf32>" in msg
    assert "axis 2 is 8, expected 16" in msg
    assert "state 'pos': int64 values in [1099511627776, 1099511627776] do not fit" in msg
    assert "'input x': expected tensor<1x2x1x4xf32>, got float16 array" in msg
    assert state.keys() == kept.keys()
    for k in kept:
        np.testing.assert_array_equal(state[k], kept[k])


def test_state_of_another_function_is_accepted_and_kept(
        prefill_decode: tuple[KVCache, Program, Path], tmp_path: Path) -> None:
    """A mapping may hold state another function of the asset uses (bind_state's rule)."""
    _, program, path = prefill_decode
    state = {**_fresh_state(program), "elsewhere": np.ones(2)}
    with pytest.raises(RuntimeInputError, match="unknown state 'elsewhere'"):
        run_aimodel(path, _x(), entrypoint="decode", state=state)
    two = Program()
    with two.graph("a", inputs={"x": TensorType((2,), "float32")},
                   state={"s": np.zeros(2, np.float32)}) as g:
        g.outputs({"y": g["x"]}, state={"s": coreai.broadcasting_add(g["s"], g["x"])})
    with two.graph("b", inputs={"x": TensorType((2,), "float32")}) as g:
        g.outputs({"y": coreai.relu(g["x"])})
    path2 = export_aimodel(two, tmp_path / "two.aimodel")
    state2 = {"s": np.ones(2, np.float32)}
    run_aimodel(path2, {"x": np.ones(2, np.float32)}, entrypoint="b", state=state2)
    np.testing.assert_array_equal(state2["s"], np.ones(2, np.float32))
    run_aimodel(path2, {"x": np.ones(2, np.float32)}, entrypoint="a", state=state2)
    np.testing.assert_array_equal(state2["s"], np.full(2, 2.0, np.float32))


def test_bad_state_argument_and_entrypoint(decode: tuple[KVCache, Program, Path]) -> None:
    _, program, path = decode
    with pytest.raises(TypeError, match="state must be a mutable mapping"):
        run_aimodel(path, _x(), state=tuple(_fresh_state(program).items()))  # type: ignore[arg-type]
    with pytest.raises(KeyError, match=r"no function 'decode'; it has \['main'\]"):
        run_aimodel(path, _x(), entrypoint="decode", state=_fresh_state(program))


def test_unexportable_state_listed_with_the_ops(tmp_path: Path) -> None:
    p = Program()
    dynamic = TensorType((Dim("n", 1, 8),), "float32")
    with p.graph("main", inputs={"x": TensorType((2,), "float32")},
                 state={"s": np.zeros(2, np.complex64), "d": dynamic}) as g:
        g.outputs({"y": coreai.relu(g["x"])})
    with pytest.raises(UnexportableOpsError) as info:
        export_aimodel(p, tmp_path / "m.aimodel")
    found = {(op.op, op.reason.split(":")[0]) for op in info.value.ops}
    assert found == {("state", "'s'"), ("state", "'d'")}, info.value
    reasons = " | ".join(op.reason for op in info.value.ops)
    assert "complex states are not exported" in reasons and "dynamic shape" in reasons
    assert list(tmp_path.iterdir()) == []


def test_stateful_graph_takes_any_input_name(tmp_path: Path) -> None:
    """A stateful graph is declared without Core AI's decorator, which names inputs after
    Python parameters (a stateless graph's input must be an identifier: test_aimodel_export)."""
    p = Program()
    with p.graph("main", inputs={"in": TensorType((2,), "float32")},
                 state={"seen.total": np.zeros(2, np.float32)}) as g:
        total = coreai.broadcasting_add(g["seen.total"], g["in"])
        g.outputs({"out.sum": total}, state={"seen.total": total})
    path = export_aimodel(p, tmp_path / "names.aimodel")
    state = {"seen.total": np.ones(2, np.float32)}
    x = np.array([2.0, -3.0], np.float32)
    got = run_aimodel(path, {"in": x}, state=state)
    assert list(got) == ["out.sum"]
    np.testing.assert_array_equal(got["out.sum"], np.ones(2, np.float32) + x)
    np.testing.assert_array_equal(state["seen.total"], np.ones(2, np.float32) + x)


def test_float64_input_that_overflows_float32_is_refused(
        decode: tuple[KVCache, Program, Path]) -> None:
    _, program, path = decode
    state = _fresh_state(program)
    x = np.zeros((1, HEADS, 1, DIM))  # float64, narrowed to the .aimodel's float32
    x[0, 0, 0, 0] = 1e300
    with pytest.raises(RuntimeInputError, match=r"input 'x': float64 values up to 1e\+300 "
                                                r"overflow the .aimodel's float32 input"):
        run_aimodel(path, {"x": x}, state=state)
    x[0, 0, 0, 0] = np.inf  # an infinity is a float32 value too
    run_aimodel(path, {"x": x}, state=state)
