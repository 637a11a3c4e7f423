"""canonicalize's ``pad_into_conv``: a zero ``pad`` of the spatial axes folds into the conv.

TF-style "same" padding (HF's MobileNetV2, EfficientNet ports) pads explicitly before each
conv; folded, the conv pads inside its own kernel and the copy of the padded input is gone.
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from coreai_core import Program, TensorType, Value
from coreai_core.dialects import coreai
from coreai_core.optimizer import optimize
from coreai_torch import TorchConverter, get_decomp_table


def _names(p: Program) -> list[str]:
    return [op.name for op in p.graphs["main"].ops]


class PadConv(torch.nn.Module):
    def __init__(self, conv: torch.nn.Module, pad: tuple[int, ...]) -> None:
        super().__init__()
        self.conv, self.pad = conv, pad

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(torch.nn.functional.pad(x, self.pad))


@st.composite
def pad_convs(draw: st.DrawFn) -> tuple[PadConv, torch.Tensor]:
    spatial = draw(st.integers(1, 2))
    groups = draw(st.sampled_from([1, 2]))
    channels = groups * draw(st.integers(1, 3))
    out = groups * draw(st.integers(1, 2))
    kernel = draw(st.integers(1, 3))
    conv_type = torch.nn.Conv1d if spatial == 1 else torch.nn.Conv2d
    conv = conv_type(channels, out, kernel, stride=draw(st.integers(1, 2)),
                     dilation=draw(st.integers(1, 2)), groups=groups,
                     padding=draw(st.integers(0, 1)), bias=draw(st.booleans()))
    pad = tuple(draw(st.lists(st.integers(0, 2), min_size=2 * spatial, max_size=2 * spatial)))
    size = [draw(st.sampled_from([1, 2, 5, 47])) for _ in range(spatial)]
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    torch.manual_seed(draw(st.integers(0, 2**16)))
    model = PadConv(conv.to(dtype), pad).eval()
    return model, torch.randn(draw(st.integers(1, 2)), channels, *size, dtype=dtype)


@given(pad_convs())
def test_folded_conv_matches_torch_and_the_unfolded_program(
        case: tuple[PadConv, torch.Tensor]) -> None:
    model, x = case
    try:
        with torch.no_grad():
            expected = model(x).numpy()
    except RuntimeError:  # the window does not fit the padded input: nothing to fold
        return
    ep = torch.export.export(model, (x,)).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep, input_names=["x"]).to_coreai()
    (before,) = program.run({"x": x.numpy()}).values()
    optimize(program, ["canonicalize", "dce"])
    assert "coreai.pad" not in _names(program)
    (after,) = program.run({"x": x.numpy()}).values()
    # the same window sums; the conv may take another method (im2col for a padded 1x1), whose
    # summation order differs, hence a rounding tolerance of the dtype
    tol = 1e-5 if x.dtype == torch.float32 else 1e-12
    np.testing.assert_allclose(after, before, rtol=tol, atol=tol)
    np.testing.assert_allclose(after, expected, rtol=10 * tol, atol=10 * tol)


def _program(pads: list[int], mode: str = "constant", value: float = 0.0) -> Program:
    p = Program()
    w = np.random.default_rng(0).standard_normal((2, 2, 3, 3)).astype(np.float32)
    with p.graph("main", inputs={"x": TensorType((1, 2, 6, 6), "float32")}) as g:
        x: Value = g["x"]
        g.outputs({"y": coreai.conv(coreai.pad(x, pads, mode=mode, value=value),
                                    coreai.constant(w))})
    return p


def test_padding_conv_does_not_do_is_left_alone() -> None:
    x = {"x": np.random.default_rng(1).standard_normal((1, 2, 6, 6)).astype(np.float32)}
    cases = {
        "reflect": _program([0, 0, 0, 0, 1, 1, 1, 1], mode="reflect"),
        "a nonzero value": _program([0, 0, 0, 0, 1, 1, 1, 1], value=1.0),
        "-0.0": _program([0, 0, 0, 0, 1, 1, 1, 1], value=-0.0),
        "a cropping amount": _program([0, 0, 0, 0, -1, 1, 1, 1]),
        "the batch axis": _program([1, 0, 0, 0, 1, 1, 1, 1]),
    }
    for what, p in cases.items():
        before = p.run(x)["y"]
        optimize(p, ["canonicalize", "dce"])
        assert "coreai.pad" in _names(p), what
        np.testing.assert_array_equal(p.run(x)["y"], before, err_msg=what)


def test_pad_with_another_reader_is_kept_for_it() -> None:
    p = Program()
    w = np.ones((1, 1, 2, 2), np.float32)
    with p.graph("main", inputs={"x": TensorType((1, 1, 4, 4), "float32")}) as g:
        padded = coreai.pad(g["x"], [0, 0, 0, 0, 1, 0, 0, 1])
        g.outputs({"y": coreai.conv(padded, coreai.constant(w)), "padded": padded})
    x = {"x": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)}
    before = p.run(x)
    optimize(p, ["canonicalize", "dce"])
    assert _names(p).count("coreai.pad") == 1
    conv = next(op for op in p.graphs["main"].ops if op.name == "coreai.conv")
    assert conv.operands[0].owner is None  # the graph input x, no longer the pad
    after = p.run(x)
    for k in before:
        np.testing.assert_array_equal(after[k], before[k], err_msg=k)
