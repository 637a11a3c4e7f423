"""The coreai:: compression ops agree with eager at the edges (issue 36): data eager accepts
converts to the same numbers, and a call eager refuses is refused by the converter with the
same message (both run the checks of ``coreai_torch.compression.checks``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.compression.checks import int_range

OPS = torch.ops.coreai


class Weight(torch.nn.Module):
    """``fn(buffers...)`` with the compressed data held as buffers (constants once exported),
    added to the input so the program has one."""

    def __init__(self, fn: Callable[..., torch.Tensor], **buffers: torch.Tensor) -> None:
        super().__init__()
        self.fn, self.names = fn, list(buffers)
        for name, value in buffers.items():
            self.register_buffer(name, value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fn(*(getattr(self, n) for n in self.names))


def _convert(module: Weight, x: torch.Tensor) -> np.ndarray:
    ep = torch.export.export(module, (x,)).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
    return next(iter(program.run([x.numpy()]).values()))


def _same_refusal(module: Weight, x: torch.Tensor) -> None:
    """Eager raises; conversion raises an error carrying eager's message."""
    with pytest.raises(ValueError) as eager:
        module(x)
    message = str(eager.value)
    assert message.startswith("coreai::")
    with pytest.raises(Exception) as converted:
        _convert(module, x)
    assert message in str(converted.value), (message, str(converted.value))


def _shift_scale(dtype: torch.dtype, zero_point: bool) -> Callable[..., torch.Tensor]:
    if zero_point:
        return lambda q, s, z: OPS.constexpr_blockwise_shift_scale(q, s, z, None, dtype)
    return lambda q, s: OPS.constexpr_blockwise_shift_scale(q, s, None, None, dtype)


@settings(max_examples=10)
@given(dtype=st.sampled_from([torch.int4, torch.uint4]), zero_point=st.booleans(),
       cols=st.sampled_from([1, 3, 8]), seed=st.integers(0, 2**16))
def test_in_range_sub_byte_data_converts_to_eager_values(dtype: torch.dtype, zero_point: bool,
                                                         cols: int, seed: int) -> None:
    lo, hi = int_range(dtype)
    g = torch.Generator().manual_seed(seed)
    held = torch.int8 if lo < 0 else torch.uint8
    q = torch.randint(lo, hi + 1, (4, cols), generator=g).to(held)
    q[0, 0], q[-1, -1] = lo, hi  # both ends of the range
    buffers = {"q": q, "s": torch.rand(4, 1, generator=g) + 0.1}
    if zero_point:
        buffers["z"] = torch.randint(lo, hi + 1, (4, 1), generator=g).to(held)
    module = Weight(_shift_scale(dtype, zero_point), **buffers)
    x = torch.randn(4, cols, generator=g)
    np.testing.assert_allclose(_convert(module, x), module(x).numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype, value", [(torch.int4, 100), (torch.int4, 8), (torch.int4, -9),
                                          (torch.uint4, 16), (torch.uint4, 200)])
def test_out_of_range_sub_byte_data_is_refused_in_eager_and_conversion(dtype: torch.dtype,
                                                                        value: int) -> None:
    held = torch.int8 if int_range(dtype)[0] < 0 else torch.uint8
    q = torch.tensor([[value, 1]], dtype=held)
    module = Weight(_shift_scale(dtype, False), q=q, s=torch.tensor([[0.5]]))
    _same_refusal(module, torch.zeros(1, 2))


@pytest.mark.parametrize("dtype, value", [(torch.int4, 9), (torch.int4, -100),
                                          (torch.uint4, 31)])
def test_out_of_range_sub_byte_zero_points_are_refused(dtype: torch.dtype, value: int) -> None:
    held = torch.int8 if int_range(dtype)[0] < 0 else torch.uint8
    module = Weight(_shift_scale(dtype, True), q=torch.tensor([[1, 2]], dtype=held),
                    s=torch.tensor([[0.5]]), z=torch.tensor([[value]], dtype=held))
    _same_refusal(module, torch.zeros(1, 2))


def test_an_int32_lut_is_refused() -> None:
    module = Weight(lambda i, t: OPS.lut_to_dense(i, t, 0),
                    i=torch.tensor([0, 1, 1], dtype=torch.uint8),
                    t=torch.tensor([[[1], [2]]], dtype=torch.int32))
    _same_refusal(module, torch.zeros(3, dtype=torch.int32))


def test_float_indices_are_refused() -> None:
    module = Weight(lambda i, t: OPS.lut_to_dense(i, t, 0), i=torch.tensor([0.0, 1.0, 1.0]),
                    t=torch.tensor([[[1.0], [2.0]]]))
    _same_refusal(module, torch.zeros(3))


def test_out_of_range_indices_are_refused() -> None:
    module = Weight(lambda i, t: OPS.lut_to_dense(i, t, 0),
                    i=torch.tensor([0, 2, 1], dtype=torch.uint8), t=torch.tensor([[[1.0], [2.0]]]))
    _same_refusal(module, torch.zeros(3))


def test_zero_point_with_minval_is_refused() -> None:
    module = Weight(lambda q, s, z, m: OPS.constexpr_blockwise_shift_scale(q, s, z, m, torch.int8),
                    q=torch.tensor([[1, 2]], dtype=torch.int8), s=torch.tensor([[0.5]]),
                    z=torch.tensor([[0]], dtype=torch.int8), m=torch.tensor([[0.0]]))
    _same_refusal(module, torch.zeros(1, 2))


@pytest.mark.parametrize("dtype", [torch.int4, torch.uint4])
def test_quantize_to_a_sub_byte_type_is_refused(dtype: torch.dtype) -> None:
    class Quantize(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return OPS.quantize(x, torch.tensor(0.1), dtype)

    x = torch.randn(2, 3)
    with pytest.raises(ValueError) as eager:
        Quantize()(x)
    assert "torch cannot compute" in str(eager.value)
    ep = torch.export.export(Quantize(), (x,)).run_decompositions(get_decomp_table())
    with pytest.raises(Exception) as converted:
        TorchConverter().add_exported_program(ep).to_coreai()
    assert str(eager.value) in str(converted.value)


def test_valid_calls_still_match_eager() -> None:
    """The shared checks refuse nothing eager accepts: int8 with a zero point, minval, and a
    palettized weight convert to eager's values."""
    g = torch.Generator().manual_seed(4)
    q = torch.randint(-128, 128, (3, 5), generator=g).to(torch.int8)
    s = torch.rand(3, 1, generator=g) + 0.1
    x = torch.randn(3, 5, generator=g)
    cases = [
        Weight(lambda q, s, z: OPS.constexpr_blockwise_shift_scale(q, s, z), q=q, s=s,
               z=torch.randint(-128, 128, (3, 1), generator=g).to(torch.int8)),
        Weight(lambda q, s, m: OPS.constexpr_blockwise_shift_scale(q, s, None, m, torch.int8),
               q=q, s=s, m=torch.randn(3, 1, generator=g)),
        Weight(lambda i, t: OPS.lut_to_dense(i, t, 0),
               i=torch.randint(0, 4, (3, 5), generator=g).to(torch.uint8),
               t=torch.randn(1, 1, 4, 1, generator=g)),
    ]
    for module in cases:
        np.testing.assert_allclose(_convert(module, x), module(x).numpy(), rtol=1e-6, atol=1e-6)
