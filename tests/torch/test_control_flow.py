"""Higher-order ops: cond, while_loop, map, scan lower to if_/while_ regions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch._higher_order_ops.map import map as torch_map
from torch._higher_order_ops.scan import scan as torch_scan
from torch._higher_order_ops.while_loop import while_loop

from tests.torch.harness import convert, export


def _check(module: torch.nn.Module, *inputs: torch.Tensor) -> None:
    program = convert(export(module, inputs))
    program.verify()
    with torch.no_grad():
        expected = module(*inputs)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    got = list(program.run([t.numpy() for t in inputs]).values())
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e.numpy(), rtol=1e-5, atol=1e-6)


class Cond(torch.nn.Module):
    def forward(self, x, y):
        def true_fn(x, y):
            return x.sin() + y

        def false_fn(x, y):
            return x.cos() - y

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x, y))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_takes_the_branch_torch_takes(sign: float) -> None:
    x = torch.rand(3, 4) * sign
    _check(Cond(), x, torch.randn(3, 4))
    program = convert(export(Cond(), (x, torch.randn(3, 4))))
    assert "coreai.if" in str(program)


class Loop(torch.nn.Module):
    def forward(self, x, limit):
        def cond_fn(i, x):
            return i < limit.sum()

        def body_fn(i, x):
            return i + 1, x * 2 + 1

        return while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), x))


def test_while_loop() -> None:
    _check(Loop(), torch.randn(5), torch.tensor([3]))


class Map(torch.nn.Module):
    def forward(self, xs, y):
        return torch_map(lambda x, y: x * y + 1, xs, y)


def test_map() -> None:
    _check(Map(), torch.randn(4, 3), torch.randn(3))


class Scan(torch.nn.Module):
    def forward(self, xs):
        def combine(carry, x):
            return carry + x, carry * 2

        return torch_scan(combine, torch.zeros(3), xs)


def test_scan() -> None:
    _check(Scan(), torch.randn(5, 3))


class GradAndAutocast(torch.nn.Module):
    def forward(self, x):
        y = x + 1
        with torch.no_grad():
            z = y * 2
        with torch.autocast("cpu", dtype=torch.bfloat16):
            w = z @ z.T
        return w.float() + y.sum()


def test_grad_and_autocast_wrappers_are_inlined() -> None:
    from coreai_torch import TorchConverter

    x = torch.randn(3, 3)
    ep = torch.export.export(GradAndAutocast(), (x,))  # undecomposed: the wrappers remain
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert {"wrap_with_set_grad_enabled", "wrap_with_autocast"} <= targets
    program = TorchConverter().add_exported_program(ep).to_coreai()
    (out,) = program.run([x.numpy()]).values()
    with torch.no_grad():
        expected = GradAndAutocast()(x)
    # the bf16 matmul rounds its result to bfloat16 (8 bits of mantissa), as torch does
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-2, atol=1e-2)
