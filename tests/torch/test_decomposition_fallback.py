"""The converter's on-the-fly use of torch's decompositions when one of them does not trace."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import coreai_torch.converter as converter_module
from coreai_torch import TorchConverter, UnsupportedOpsError
from coreai_torch._table import qualified_name


@torch.library.custom_op("coreai_test_fallback::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op("coreai_test_fallback::broken", mutates_args=())
def broken(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@broken.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _broken_decomposition(x: torch.Tensor) -> torch.Tensor:
    raise AssertionError("this decomposition does not trace")


def _decompositions(target):
    if target is torch.ops.coreai_test_fallback.twice.default:
        return lambda x: x + x
    if target is torch.ops.coreai_test_fallback.broken.default:
        return _broken_decomposition
    return None


def test_a_decomposition_that_fails_leaves_its_op_unsupported(monkeypatch):
    """torch's own decomposition raising (as aten.complex's does under export) gives an
    UnsupportedOpsError naming that op; the other op's decomposition is still applied."""
    monkeypatch.setattr(converter_module, "_torch_decomposition", _decompositions)

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.ops.coreai_test_fallback.broken(torch.ops.coreai_test_fallback.twice(x))

    ep = torch.export.export(M(), (torch.randn(3, 4),))
    converter = TorchConverter(progress=False)
    with pytest.raises(UnsupportedOpsError) as info:
        converter.add_exported_program(ep).to_coreai()
    assert [op.qualified_name for op in info.value.ops] == [
        qualified_name(torch.ops.coreai_test_fallback.broken.default)]
    assert any("decomposition of coreai_test_fallback::broken.default failed to trace" in line
               for line in converter.conversion_log)


def test_a_working_decomposition_is_applied(monkeypatch):
    monkeypatch.setattr(converter_module, "_torch_decomposition", _decompositions)

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.ops.coreai_test_fallback.twice(x) * 3

    x = torch.randn(5, 1)
    ep = torch.export.export(M(), (x,))
    program = TorchConverter(progress=False).add_exported_program(ep).to_coreai()
    (out,) = program.run([x.numpy()]).values()
    np.testing.assert_allclose(out, (x * 6).numpy(), rtol=1e-6)


def test_aten_complex_no_longer_crashes_the_converter():
    """aten.complex has no lowering yet (issue 10 §2) and torch's decomposition of it fails
    under export: the converter must report it (or, once lowered, convert it), not crash."""
    class M(torch.nn.Module):
        def forward(self, re, im):
            return torch.complex(re, im)

    re, im = torch.randn(3, 4), torch.randn(3, 4)
    ep = torch.export.export(M(), (re, im))
    try:
        program = TorchConverter(progress=False).add_exported_program(ep).to_coreai()
    except UnsupportedOpsError as e:
        assert "aten::complex.default" in [op.qualified_name for op in e.ops]
    else:
        (out,) = program.run([re.numpy(), im.numpy()]).values()
        np.testing.assert_array_equal(out, torch.complex(re, im).numpy())


@torch.library.custom_op("coreai_test_fallback::internal", mutates_args=())
def internal(x: torch.Tensor) -> torch.Tensor:
    return x - 1


@internal.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def test_a_decomposition_into_unlowered_ops_is_not_applied(monkeypatch):
    """The error names the op the user called, not the internals its decomposition needs."""
    def decompositions(target):
        if target is torch.ops.coreai_test_fallback.twice.default:
            return lambda x: torch.ops.coreai_test_fallback.internal(x)
        return None

    monkeypatch.setattr(converter_module, "_torch_decomposition", decompositions)

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.ops.coreai_test_fallback.twice(x)

    ep = torch.export.export(M(), (torch.randn(2, 3),))
    converter = TorchConverter(progress=False)
    with pytest.raises(UnsupportedOpsError) as info:
        converter.add_exported_program(ep).to_coreai()
    assert [op.qualified_name for op in info.value.ops] == [
        qualified_name(torch.ops.coreai_test_fallback.twice.default)]
    assert any("produces coreai_test_fallback::internal" in line
               for line in converter.conversion_log)
