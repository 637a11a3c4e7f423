"""Relations between dynamic dims that torch.export records are checked by ``run()``.

torch.export names a derived dim by its expression (``2*s0``, ``s0 + 1``, ``s0*s1``); the
converter keeps that name, so the program states the relation and the runtime rejects inputs
that break it, as the exported module's own guards do. The oracle is torch: for every size
combination tried, the program accepts exactly the inputs ``ep.module()`` accepts.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.export import Dim

from coreai_core import RuntimeInputError, load, parse
from coreai_torch import TorchConverter, get_decomp_table


class SumBoth(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x.sum(0) + y.sum(0)


class FlattenAdd(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x.flatten() + y


def _convert(model: torch.nn.Module, args: tuple[torch.Tensor, ...],
             dynamic_shapes: dict) -> tuple[torch.export.ExportedProgram, object]:
    ep = torch.export.export(model, args, dynamic_shapes=dynamic_shapes)
    program = TorchConverter().add_exported_program(
        ep.run_decompositions(get_decomp_table())).to_coreai()
    return ep, program


def _torch_accepts(module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> bool:
    try:
        module(*args)
    except Exception:  # torch's guard errors have several types (AssertionError, ...)
        return False
    return True


def _only(outputs: dict[str, np.ndarray]) -> np.ndarray:
    (value,) = outputs.values()
    return value


DX = Dim("dx", min=2, max=9)
CASES = {
    "double": ({"x": {0: DX}, "y": {0: 2 * DX}}, (3, 6)),
    "affine": ({"x": {0: DX}, "y": {0: 2 * DX + 1}}, (3, 7)),
    "offset": ({"x": {0: DX}, "y": {0: DX - 1}}, (3, 2)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_derived_dims_are_enforced_exactly_like_torch(case: str) -> None:
    shapes, (nx, ny) = CASES[case]
    ep, program = _convert(SumBoth(), (torch.randn(nx, 2), torch.randn(ny, 2)), shapes)
    module = ep.module()
    # x's rows inside dx's declared range [2, 9]: torch's guards decide about y alone
    for rows_x, rows_y in itertools.product(range(2, 8), range(0, 16)):
        args = (torch.randn(rows_x, 2), torch.randn(rows_y, 2))
        inputs = {"x": args[0].numpy(), "y": args[1].numpy()}
        if _torch_accepts(module, args):
            np.testing.assert_allclose(_only(program.run(inputs)), module(*args).numpy(),
                                       rtol=1e-5, atol=1e-5)
        else:
            with pytest.raises(RuntimeInputError):
                program.run(inputs)


def test_a_broken_relation_is_named() -> None:
    _, program = _convert(SumBoth(), (torch.randn(3, 2), torch.randn(6, 2)),
                          CASES["double"][0])
    with pytest.raises(RuntimeInputError, match=r"'y': dimension \?\"2\*(\w+)\" = 5, but "
                                                r"2\*\1 = 6 with \1 = 3 \(from 'x'\)"):
        program.run({"x": np.zeros((3, 2), np.float32), "y": np.zeros((5, 2), np.float32)})


def test_a_product_of_dims_is_enforced() -> None:
    auto = {"x": {0: Dim.AUTO, 1: Dim.AUTO}, "y": {0: Dim.AUTO}}
    ep, program = _convert(FlattenAdd(), (torch.randn(3, 4), torch.randn(12)), auto)
    module = ep.module()
    for rows, cols, n in [(3, 4, 12), (2, 5, 10), (3, 4, 11), (2, 5, 12)]:
        args = (torch.randn(rows, cols), torch.randn(n))
        inputs = {"x": args[0].numpy(), "y": args[1].numpy()}
        if _torch_accepts(module, args):
            np.testing.assert_allclose(_only(program.run(inputs)), module(*args).numpy(),
                                       rtol=1e-6)
        else:
            assert n != rows * cols
            with pytest.raises(RuntimeInputError, match=r"s\d+\*s\d+"):
                program.run(inputs)


def test_relations_survive_print_parse_save_and_load(tmp_path: Path) -> None:
    _, program = _convert(SumBoth(), (torch.randn(3, 2), torch.randn(7, 2)),
                          CASES["affine"][0])
    program.save(tmp_path / "m.coreai")
    bad = {"x": np.zeros((3, 2), np.float32), "y": np.zeros((6, 2), np.float32)}
    good = {"x": np.ones((3, 2), np.float32), "y": np.ones((7, 2), np.float32)}
    for copy in (parse(str(program)), load(tmp_path / "m.coreai")):
        np.testing.assert_array_equal(_only(copy.run(good)), _only(program.run(good)))
        with pytest.raises(RuntimeInputError, match=r"2\*\w+ \+ 1"):
            copy.run(bad)


class CopyIntoBuffer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.buf.copy_(x)
        return self.buf + 0


def test_state_copied_from_an_input_does_not_alias_it() -> None:
    ep = torch.export.export(CopyIntoBuffer(), (torch.randn(3),))
    program = TorchConverter().add_exported_program(
        ep.run_decompositions(get_decomp_table())).to_coreai()
    x = np.array([1.0, 2.0, 3.0], np.float32)
    program.run({"x": x})
    assert not np.shares_memory(program.state["buf"], x)
    x[:] = 0
    np.testing.assert_array_equal(program.state["buf"], [1.0, 2.0, 3.0])
    explicit = {"buf": np.zeros(3, np.float32)}
    program.run({"x": x}, state=explicit)
    assert not np.shares_memory(explicit["buf"], x)
