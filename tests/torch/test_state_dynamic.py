"""Mutated buffers become program state; torch.export.Dim becomes a bounded dynamic dim."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from coreai_core import Dim, RuntimeInputError
from coreai_torch import TorchConverter
from tests.torch.harness import export


class KVCacheStep(torch.nn.Module):
    """One decode step: append k/v at position `pos` of a fixed-size cache, attend over it."""

    def __init__(self, heads: int = 2, max_len: int = 8, dim: int = 4) -> None:
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(1, heads, max_len, dim))
        self.register_buffer("v_cache", torch.zeros(1, heads, max_len, dim))
        self.register_buffer("pos", torch.zeros((), dtype=torch.int64))
        self.proj = torch.nn.Linear(dim, 3 * dim)
        self.heads, self.dim = heads, dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [1, heads, 1, dim]
        q, k, v = self.proj(x).split(self.dim, dim=-1)
        index = self.pos.reshape(1)
        self.k_cache.index_copy_(2, index, k)
        self.v_cache.index_copy_(2, index, v)
        self.pos.add_(1)
        scores = q @ self.k_cache.transpose(-1, -2) / self.dim**0.5
        positions = torch.arange(self.k_cache.shape[2])
        scores = scores.masked_fill(positions >= self.pos, float("-inf"))
        return torch.softmax(scores, dim=-1) @ self.v_cache


def test_kv_cache_decode_matches_torch_at_every_step() -> None:
    torch.manual_seed(0)
    model = KVCacheStep().eval()
    reference = KVCacheStep().eval()
    reference.load_state_dict(model.state_dict())
    ep = export(model, (torch.randn(1, 2, 1, 4),))
    program = TorchConverter().add_exported_program(ep).to_coreai()
    assert sorted(program.state_names) == ["k_cache", "pos", "v_cache"]
    assert program.input_names == ["x"]
    for step in range(5):
        x = torch.randn(1, 2, 1, 4)
        with torch.no_grad():
            expected = reference(x)
        (out,) = program.run({"x": x.numpy()}).values()
        np.testing.assert_allclose(out, expected.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"step {step}")
        for name in ("k_cache", "v_cache", "pos"):
            np.testing.assert_allclose(program.state[name], getattr(reference, name).numpy(),
                                       rtol=1e-6, atol=1e-7, err_msg=f"{name} at step {step}")
    program.reset_state()
    assert int(program.state["pos"]) == 0


def test_state_names_rename_mutated_buffers() -> None:
    class Counter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("count", torch.zeros(3))

        def forward(self, x):
            self.count.add_(x)
            return self.count * 2

    ep = export(Counter(), (torch.ones(3),))
    program = TorchConverter().add_exported_program(ep, state_names=["total"]).to_coreai()
    assert program.state_names == ["total"]
    for i in range(1, 4):
        (out,) = program.run({"x": np.ones(3, np.float32)}).values()
        np.testing.assert_array_equal(out, np.full(3, 2.0 * i, np.float32))
    explicit = {"total": np.full(3, 10.0, np.float32)}
    (out,) = program.run({"x": np.ones(3, np.float32)}, state=explicit).values()
    np.testing.assert_array_equal(out, np.full(3, 22.0, np.float32))
    np.testing.assert_array_equal(explicit["total"], np.full(3, 11.0, np.float32))


def test_mutated_user_input_becomes_state() -> None:
    class InPlace(torch.nn.Module):
        def forward(self, acc, x):
            acc.add_(x)
            return x * 2

    acc0 = torch.zeros(4)
    ep = export(InPlace(), (acc0.clone(), torch.ones(4)))
    program = TorchConverter().add_exported_program(ep).to_coreai()
    assert program.state_names == ["acc"] and program.input_names == ["x"]
    program.run({"x": np.ones(4, np.float32)})
    program.run({"x": np.ones(4, np.float32)})
    np.testing.assert_array_equal(program.state["acc"], np.full(4, 2.0, np.float32))


class Flex(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n = x.shape
        y = x.reshape(b * n) * 2
        return y.reshape(b, n).sum(dim=0) + x.new_ones(n) * b


def _dynamic_program():
    batch = torch.export.Dim("batch", min=2, max=64)
    ep = export(Flex(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: batch}})
    return TorchConverter().add_exported_program(ep).to_coreai()


def test_dynamic_dims_keep_bounds() -> None:
    program = _dynamic_program()
    (x_type,) = [v.type for v in program.graphs["main"].inputs.values()]
    dim = x_type.shape[0]
    assert isinstance(dim, Dim) and (dim.min, dim.max) == (2, 64)
    assert x_type.shape[1] == 3


@given(st.sampled_from([2, 3, 17, 47, 64]))
def test_dynamic_program_runs_on_any_size_in_range(batch: int) -> None:
    program = _dynamic_program()
    x = torch.randn(batch, 3)
    (out,) = program.run({"x": x.numpy()}).values()
    np.testing.assert_allclose(out, Flex()(x).numpy(), rtol=1e-5, atol=1e-5)


def test_dynamic_dim_out_of_range_is_rejected() -> None:
    program = _dynamic_program()
    with pytest.raises(RuntimeInputError, match="x"):
        program.run({"x": np.zeros((65, 3), np.float32)})


def test_unbounded_dynamic_dim_has_no_max() -> None:
    batch = torch.export.Dim("batch", min=2)  # no max: torch records int_oo
    ep = export(Flex(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: batch}})
    program = TorchConverter().add_exported_program(ep).to_coreai()
    (x_type,) = [v.type for v in program.graphs["main"].inputs.values()]
    assert x_type.shape[0].min == 2 and x_type.shape[0].max is None
    x = torch.randn(300, 3)
    (out,) = program.run({"x": x.numpy()}).values()
    np.testing.assert_allclose(out, Flex()(x).numpy(), rtol=1e-5, atol=1e-4)
