"""nn-family lowerings beyond the op database: dynamic (torch.export.Dim) sizes, and overloads
that torch always decomposes inside ``run_decompositions`` but that a program exported without
decomposition still contains."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import Dim
from tests.torch.harness import FnModule, assert_matches, convert, export, flatten, to_numpy

aten = torch.ops.aten


def _check(module: torch.nn.Module, program: Any, inputs: list[torch.Tensor], what: str,
           tol: float = 1e-5) -> None:
    with torch.no_grad():
        expected = flatten(module(*inputs))
    got = list(program.run([to_numpy(t) for t in inputs]).values())
    assert_matches(expected, got, atol=tol, rtol=tol, what=what)


# name -> (fn, example shapes, dynamic axes of the first input, sizes to run it on)
DYNAMIC: dict[str, tuple[Callable[..., Any], list[tuple[int, ...]], dict[int, str],
                         list[tuple[int, ...]]]] = {
    "linear_batch": (lambda x, w, b: F.linear(x, w, b), [(4, 3), (5, 3), (5,)], {0: "n"},
                     [(4, 3), (9, 3)]),
    "conv2d_batch": (lambda x, w: F.conv2d(x, w, padding=1), [(2, 3, 6, 6), (4, 3, 3, 3)],
                     {0: "n"}, [(2, 3, 6, 6), (5, 3, 6, 6)]),
    "adaptive_avg_spatial": (lambda x: F.adaptive_avg_pool2d(x, (3, 2)), [(1, 2, 7, 5)],
                             {2: "h", 3: "w"}, [(1, 2, 7, 5), (1, 2, 11, 4), (1, 2, 5, 9)]),
    "max_pool_batch": (lambda x: F.max_pool2d(x, 2, return_indices=True), [(2, 3, 6, 6)],
                       {0: "n"}, [(2, 3, 6, 6), (3, 3, 6, 6)]),
    "layer_norm_rows": (lambda x: aten.native_layer_norm(x, [6], None, None, 1e-5),
                        [(4, 5, 6)], {1: "n"}, [(4, 5, 6), (4, 8, 6)]),
    "group_norm_batch": (lambda x: F.group_norm(x, 2), [(3, 4, 5, 5)], {0: "n"},
                         [(3, 4, 5, 5), (6, 4, 5, 5)]),
    "batch_norm_eval": (lambda x, m, v: F.batch_norm(x, m, v), [(3, 4, 5), (4,), (4,)],
                        {0: "n"}, [(3, 4, 5), (7, 4, 5)]),
    "sdpa_causal_length": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v,
                                                                          is_causal=True),
                           [(1, 2, 5, 8), (1, 2, 5, 8), (1, 2, 5, 8)], {2: "l"},
                           [(1, 2, 5, 8), (1, 2, 9, 8)]),
    "col2im_batch": (lambda x: F.fold(x, (4, 5), (2, 2)), [(3, 8, 12)], {0: "n"},
                     [(3, 8, 12), (5, 8, 12)]),
}


@pytest.mark.parametrize("name", sorted(DYNAMIC))
def test_dynamic_sizes(name: str) -> None:
    fn, shapes, axes, runs = DYNAMIC[name]
    examples = [torch.randn(s) for s in shapes]
    if name == "batch_norm_eval":
        examples[2] = examples[2].abs() + 0.5
    module = FnModule(fn, examples, {})
    dims = {a: torch.export.Dim(n, min=2, max=64) for a, n in axes.items()}
    dynamic: tuple[Any, ...] = (dims, *({} for _ in shapes[1:]))
    if name == "sdpa_causal_length":  # q, k, v share the length
        dynamic = (dims, dims, dims)
    ep = export(module, examples, dynamic_shapes=(dynamic,))  # forward(*tensors)
    program = convert(ep)
    first = next(iter(program.graphs["main"].inputs.values()))
    assert any(isinstance(d, Dim) for d in first.type.shape)
    for shape in runs:
        inputs = [torch.randn(shape), *examples[1:]]
        if name == "sdpa_causal_length":
            inputs = [torch.randn(shape) for _ in range(3)]
        _check(module, program, inputs, f"{name} {shape}")


def _undecomposed(fn: Callable[..., Any], x: torch.Tensor) -> tuple[torch.nn.Module, Any]:
    module = FnModule(fn, [x], {})
    return module, convert(torch.export.export(module, (x,)))


@pytest.mark.parametrize(("name", "align_corners", "scales"), [
    ("upsample_bilinear2d", False, (None, None)), ("upsample_bilinear2d", True, (1.5, 2.5)),
    ("upsample_bicubic2d", False, (1.5, None)), ("upsample_bicubic2d", True, (None, None)),
])
def test_upsample_default_without_decomposition(name: str, align_corners: bool,
                                                scales: tuple) -> None:
    """torch's Autograd py_impl decomposes these .default overloads in run_decompositions, so
    the op database cannot reach them; an exported (undecomposed) program calls them."""
    op = getattr(aten, name).default
    x = torch.randn(2, 3, 4, 5)
    module, program = _undecomposed(lambda t: op(t, [7, 9], align_corners, *scales), x)
    _check(module, program, [x], f"{name} {align_corners} {scales}")


@pytest.mark.parametrize(("length", "out"), [(12, 4), (47, 5), (1, 3), (9, 9)])
def test_adaptive_avg_pool1d_without_decomposition(length: int, out: int) -> None:
    """get_decomp_table rewrites adaptive_avg_pool1d to the 2-d Core ATen op; an exported
    (undecomposed) program still calls it."""
    x = torch.randn(2, 3, length)
    module, program = _undecomposed(
        lambda t: torch.ops.aten.adaptive_avg_pool1d.default(t, [out]), x)
    _check(module, program, [x], f"adaptive_avg_pool1d {length}->{out}")


@settings(max_examples=25, deadline=None)
@given(data=st.data(), mode=st.sampled_from(("nearest", "bilinear")),
       how=st.sampled_from(("size", "scale", "scale_pair", "recompute")))
def test_upsample_vec_dynamic_sizes(data: st.DataObject, mode: str, how: str) -> None:
    """upsample_{nearest,bilinear}2d.vec exported with Dim.AUTO spatial sizes: a fixed size
    (1 included), an integer or non-integer scale_factor (one or per axis, the given scale
    used in the coordinate transform) or recompute_scale_factor=True; align_corners both
    ways. Converted once, run on several input sizes."""
    kwargs: dict[str, Any] = {"mode": mode}
    if mode == "bilinear":
        kwargs["align_corners"] = data.draw(st.booleans())
    scales = st.sampled_from((0.5, 0.75, 1.0, 1.3, 1.5, 2.0, 2.5, 3.0))
    if how == "size":
        kwargs["size"] = (data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9)))
    elif how == "scale_pair":
        kwargs["scale_factor"] = (data.draw(scales), data.draw(scales))
    else:
        kwargs["scale_factor"] = data.draw(scales)
        kwargs["recompute_scale_factor"] = how == "recompute" or None
    dtype = data.draw(st.sampled_from((torch.float32, torch.float64)))
    module = FnModule(lambda x: F.interpolate(x, **kwargs), [torch.zeros(1)], {})
    auto = torch.export.Dim.AUTO
    ep = export(module, [torch.randn(2, 3, 4, 5, dtype=dtype)],
                dynamic_shapes=(({2: auto, 3: auto},),))
    program = convert(ep)
    for _ in range(3):
        shape = (2, 3, data.draw(st.integers(2, 12)), data.draw(st.integers(2, 12)))
        x = torch.randn(shape, dtype=dtype)
        _check(module, program, [x], f"{kwargs} {shape}")
