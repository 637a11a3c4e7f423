"""The sliding-window output length (conv and pool type rules, and the kernels' geometry)
agrees with torch on every small case: the same length, or an error where torch raises.
Includes ceil_mode windows longer than the padded input (HF EfficientNet's final pool)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from coreai_core import Program, TensorType
from coreai_core._shapes import window_out
from coreai_core.dialects import coreai
from coreai_core.errors import TypeRuleError


def _torch_length(size: int, k: int, s: int, p: int, ceil_mode: bool) -> int | None:
    try:
        return F.avg_pool1d(torch.zeros(1, 1, size), k, s, p, ceil_mode).shape[-1]
    except RuntimeError:
        return None


def test_pool_length_matches_torch_everywhere_small() -> None:
    for size, k, s, ceil_mode in itertools.product(range(1, 8), range(1, 7), range(1, 5),
                                                   (False, True)):
        for p in range(k // 2 + 1):  # torch's limit: padding at most half the kernel
            want = _torch_length(size, k, s, p, ceil_mode)
            case = f"size={size} k={k} s={s} p={p} ceil_mode={ceil_mode}"
            if want is None:
                with pytest.raises(TypeRuleError, match="does not fit"):
                    window_out(size, k, s, p, p, 1, ceil_mode)
            else:
                assert window_out(size, k, s, p, p, 1, ceil_mode) == want, case


@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize(("k", "pad"), [(5, 0), (1280, 0), (4, 1)])
def test_avgpool_window_longer_than_the_padded_input(k: int, pad: int,
                                                     count_include_pad: bool) -> None:
    x = np.random.default_rng(0).standard_normal((1, 3, 2, 2)).astype(np.float32)
    want = F.avg_pool2d(torch.from_numpy(x), k, padding=pad, ceil_mode=True,
                        count_include_pad=count_include_pad).numpy()
    program = Program()
    with program.graph("main", inputs={"x": TensorType((1, 3, 2, 2), "float32")}) as g:
        y = coreai.avgpool(g["x"], kernel_size=[k, k], pads=[pad] * 4, ceil_mode=True,
                           count_include_pad=count_include_pad)
        g.outputs({"y": y})
    assert y.type.shape == want.shape
    got = program.run({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    if pad == 0:  # one window clipped to the input: the plain mean
        np.testing.assert_allclose(got, x.mean((2, 3), keepdims=True), rtol=1e-6)


def test_window_that_torch_rejects_is_a_type_error() -> None:
    with pytest.raises(RuntimeError):
        F.avg_pool2d(torch.zeros(1, 1, 2, 2), 5, stride=2, ceil_mode=True)
    program = Program()
    with program.graph("main", inputs={"x": TensorType((1, 1, 2, 2), "float32")}) as g, \
            pytest.raises(TypeRuleError, match=r"window of size 5 .*input length 2.*"
                                               r"output length 0"):
        coreai.avgpool(g["x"], kernel_size=[5, 5], strides=[2, 2], ceil_mode=True)
