"""Built-in lowerings (nn family): backward (training) ops of pooling, normalization and
convolution.

Pooling gradients spread each window's gradient back onto the input with
``coreai.scatter_along_axis(reduction="add")``. The (window, element) pairs are listed in
torch's loop order and the per-window division happens in the gradient's dtype, so float16 /
bfloat16 / int64 results round exactly like torch's CPU kernels. Normalization gradients use
torch's algebraic form (``dx = rstd * gamma * dy + b * x + c``) in ``opmath`` (float32 for half
types). ``convolution_backward`` is a transposed convolution (grad_input), a convolution of
the input with the output gradient, batch and channel axes swapped (grad_weight), and a sum
(grad_bias); for ``transposed=True`` the roles of conv and conv_transpose swap. Outputs
masked off by ``output_mask`` are returned as None, like torch.

The window geometry needs static spatial sizes; batch and channel sizes may be dynamic
(``max_pool2d_with_indices_backward`` accepts dynamic spatial sizes too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._nn_utils import (
    const,
    const64,
    filled,
    leading_shape,
    ntuple,
    opmath,
    shape_like,
    static_sizes,
)
from coreai_torch.utils import cast_to, result_dtype, result_meta

LOWERINGS = LoweringSet("nn_backward")
reg = LOWERINGS.register_torch_lowering

Window = tuple[int, int]


# -- helpers --------------------------------------------------------------------------------------

def _flatten_tail(x: Value, lead: int) -> Value:
    """``x`` reshaped to its first ``lead`` axes and one axis holding the rest."""
    tail = [d for d in x.type.shape[lead:] if isinstance(d, int)]
    size = math.prod(tail) if len(tail) == x.type.rank - lead else -1
    return coreai.reshape(x, leading_shape(x, lead, [size]))


def _zeros_like(x: Value, dtype: DType) -> Value:
    return filled(0, dtype, shape_like(x))


def _masked(results: Sequence[Value | None]) -> list[Value | None]:
    """Results cast to torch's dtypes; None where ``output_mask`` switched an output off."""
    val = result_meta()
    return [None if v is None or val[i] is None else cast_to(v, result_dtype(index=i))
            for i, v in enumerate(results)]


# -- pooling --------------------------------------------------------------------------------------

def _axis_pairs(windows: Sequence[Window]) -> tuple[np.ndarray, np.ndarray]:
    """(output index, input index) of every element of every window, window by window."""
    outs = [np.full(max(b - a, 0), o, np.int64) for o, (a, b) in enumerate(windows)]
    ins = [np.arange(a, b, dtype=np.int64) for a, b in windows]
    return np.concatenate([np.zeros(0, np.int64), *outs]), np.concatenate(
        [np.zeros(0, np.int64), *ins])


def _spread(delta: Value, x: Value, windows: Sequence[Sequence[Window]],
            ) -> Value:
    """Zeros shaped like ``x`` plus ``delta[..., o]`` added at every element of window ``o``.

    ``windows[i]`` lists the clipped ``[start, end)`` of each output position on spatial
    axis ``i``. The pairs are ordered by output position per axis, so the contributions to
    one input element arrive in torch's order (output row-major) and half sums round alike.
    """
    n = len(windows)
    lead = x.type.rank - n
    in_sizes = static_sizes(x, range(lead, x.type.rank), "pooling gradient input")
    out_sizes = [len(w) for w in windows]
    out_idx = np.zeros(1, np.int64)
    in_idx = np.zeros(1, np.int64)
    for i, axis_windows in enumerate(windows):
        o, j = _axis_pairs(axis_windows)
        out_idx = (out_idx[:, None] * out_sizes[i] + o[None, :]).reshape(-1)
        in_idx = (in_idx[:, None] * in_sizes[i] + j[None, :]).reshape(-1)
    m = len(in_idx)
    flat = coreai.reshape(delta, leading_shape(delta, lead, [math.prod(out_sizes)]))
    updates = coreai.gather(flat, const64(out_idx), axis=lead)
    index_shape = leading_shape(x, lead, [m])
    if not isinstance(index_shape, Value):
        index_shape = const64(index_shape)
    indices = coreai.broadcast_to(const64(in_idx.reshape([1] * lead + [m])), index_shape)
    zeros = coreai.reshape(_zeros_like(x, delta.type.element_type),
                           leading_shape(x, lead, [math.prod(in_sizes)]))
    y = coreai.scatter_along_axis(zeros, indices, updates, axis=lead, reduction="add")
    return coreai.reshape(y, shape_like(x))


@reg("aten::max_pool2d_with_indices_backward.default")
def aten_max_pool2d_with_indices_backward_default(
        grad_output: Value, self: Value, kernel_size: list[int], stride: list[int],
        padding: list[int], dilation: list[int], ceil_mode: bool, indices: Value) -> Value:
    """max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor

    Adds each output gradient at its saved flat index in the (N, C) plane of a zero tensor.
    """  # noqa: E501
    grad, x = grad_output, self
    lead = x.type.rank - 2
    zeros = _flatten_tail(_zeros_like(x, grad.type.element_type), lead)
    y = coreai.scatter_along_axis(zeros, _flatten_tail(indices, lead),
                                  _flatten_tail(grad, lead), axis=lead, reduction="add")
    return cast_to(coreai.reshape(y, shape_like(x)), result_dtype())


def _pool_windows(size: int, out: int, k: int, s: int, p: int,
                  ) -> tuple[list[Window], np.ndarray, np.ndarray]:
    """torch's avg-pool windows on one axis: clipped bounds, padded and clipped lengths."""
    start = np.arange(out, dtype=np.int64) * s - p
    end = np.minimum(start + k, size + p)
    lo, hi = np.maximum(start, 0), np.minimum(end, size)
    return [(int(a), int(b)) for a, b in zip(lo, hi, strict=True)], end - start, hi - lo


@reg("aten::avg_pool2d_backward.default")
def aten_avg_pool2d_backward_default(
        grad_output: Value, self: Value, kernel_size: list[int], stride: list[int],
        padding: list[int], ceil_mode: bool, count_include_pad: bool,
        divisor_override: int | None) -> Value:
    """avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor

    Each window's gradient divided by torch's divisor (in the gradient's dtype; integers
    truncate), then spread over the window's input elements.
    """  # noqa: E501
    grad, x = grad_output, self
    k = ntuple(kernel_size, 2, "kernel_size")
    s = ntuple(stride, 2, "stride", default=k)
    p = ntuple(padding, 2, "padding", default=[0, 0])
    include_pad, override = count_include_pad, divisor_override
    rank = x.type.rank
    sizes = static_sizes(x, [rank - 2, rank - 1], "avg_pool2d_backward input")
    outs = static_sizes(grad, [rank - 2, rank - 1], "avg_pool2d_backward grad_output")
    geo = [_pool_windows(sizes[i], outs[i], k[i], s[i], p[i]) for i in range(2)]
    if override:
        divisor = np.full(outs, int(override), np.int64)
    else:
        counts = [g[1] if include_pad else g[2] for g in geo]
        divisor = counts[0][:, None] * counts[1][None, :]
    divisor = np.where(divisor == 0, 1, divisor)  # an empty window receives nothing anyway
    dtype = grad.type.element_type
    delta = coreai.broadcasting_divide(grad, const(divisor, dtype))
    y = _spread(delta, x, [g[0] for g in geo])
    return cast_to(y, result_dtype())


@reg("aten::_adaptive_avg_pool2d_backward.default")
def aten__adaptive_avg_pool2d_backward_default(grad_output: Value, self: Value) -> Value:
    """_adaptive_avg_pool2d_backward(Tensor grad_output, Tensor self) -> Tensor

    The transpose of the averaging: window ``[floor(i*in/out), ceil((i+1)*in/out))`` gets
    ``grad / kh / kw`` (two divisions in the gradient's dtype, like torch) on every element.
    """
    grad, x = grad_output, self
    rank = x.type.rank
    sizes = static_sizes(x, [rank - 2, rank - 1], "_adaptive_avg_pool2d_backward input")
    outs = static_sizes(grad, [rank - 2, rank - 1], "_adaptive_avg_pool2d_backward grad")
    windows = [[((o * size) // out, -(-((o + 1) * size) // out)) for o in range(out)]
               for size, out in zip(sizes, outs, strict=True)]
    dtype = grad.type.element_type
    kh = np.asarray([b - a for a, b in windows[0]], np.int64).reshape(-1, 1)
    kw = np.asarray([b - a for a, b in windows[1]], np.int64).reshape(1, -1)
    delta = coreai.broadcasting_divide(grad, const(kh, dtype))
    delta = coreai.broadcasting_divide(delta, const(kw, dtype))
    return cast_to(_spread(delta, x, windows), result_dtype())


# -- normalization --------------------------------------------------------------------------------

def _mul(a: Value, b: Value) -> Value:
    return coreai.broadcasting_mul(a, b)


def _add(a: Value, b: Value) -> Value:
    return coreai.broadcasting_add(a, b)


def _sub(a: Value, b: Value) -> Value:
    return coreai.broadcasting_sub(a, b)


def _input_grad(dy_gamma: Value, x: Value, mean: Value, rstd: Value, ds: Value, db: Value,
                count: int) -> Value:
    """torch's ``dx = rstd * gamma * dy + b * x + c`` with ``b = (db * mean - ds) * rstd^3 / n``
    and ``c = -b * mean - db * rstd / n`` (``ds = sum(gamma*dy*x)``, ``db = sum(gamma*dy)``)."""
    scale = const(1.0 / count if count else 0.0, x.type.element_type)
    rstd3 = _mul(_mul(rstd, rstd), rstd)
    b = _mul(_mul(_sub(_mul(db, mean), ds), rstd3), scale)
    c = _sub(coreai.neg(_mul(b, mean)), _mul(_mul(db, rstd), scale))
    return _add(_add(_mul(rstd, dy_gamma), _mul(b, x)), c)


@reg("aten::native_layer_norm_backward.default")
def aten_native_layer_norm_backward_default(
        grad_out: Value, input: Value, normalized_shape: list[int], mean: Value, rstd: Value,
        weight: Value | None, bias: Value | None, output_mask: list[bool]) -> list[Value | None]:
    """native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)"""  # noqa: E501
    compute = opmath(input.type.element_type)
    dy, x, mean, rstd = (cast_to(v, compute) for v in (grad_out, input, mean, rstd))
    mask = output_mask
    k = len(normalized_shape)
    rank = x.type.rank
    axes, batch_axes = list(range(rank - k, rank)), list(range(rank - k))
    grads: list[Value | None] = [None, None, None]
    if mask[0]:
        count = math.prod(static_sizes(x, axes, "native_layer_norm_backward"))
        g = dy if weight is None else _mul(dy, cast_to(weight, compute))
        ds = coreai.reduce_sum(_mul(g, x), axes=axes, keep_dims=True)
        db = coreai.reduce_sum(g, axes=axes, keep_dims=True)
        grads[0] = _input_grad(g, x, mean, rstd, ds, db, count)
    if mask[1]:
        x_hat = _mul(_sub(x, mean), rstd)
        grads[1] = _batch_sum(_mul(dy, x_hat), batch_axes)
    if mask[2]:
        grads[2] = _batch_sum(dy, batch_axes)
    return _masked(grads)


def _batch_sum(v: Value, axes: list[int]) -> Value:
    return coreai.reduce_sum(v, axes=axes) if axes else v


@reg("aten::native_group_norm_backward.default")
def aten_native_group_norm_backward_default(
        grad_out: Value, input: Value, mean: Value, rstd: Value, weight: Value | None,
        N: int | Value, C: int | Value, HxW: int | Value, group: int,
        output_mask: list[bool]) -> list[Value | None]:
    """native_group_norm_backward(Tensor grad_out, Tensor input, Tensor mean, Tensor rstd, Tensor? weight, SymInt N, SymInt C, SymInt HxW, int group, bool[3] output_mask) -> (Tensor, Tensor, Tensor)"""  # noqa: E501
    compute = opmath(input.type.element_type)
    dy, x, mean, rstd = (cast_to(v, compute) for v in (grad_out, input, mean, rstd))
    groups, mask = group, output_mask
    c = static_sizes(x, [1], "native_group_norm_backward channels")[0]
    per_group = c // groups
    hw = math.prod(static_sizes(x, range(2, x.type.rank), "native_group_norm_backward"))

    def grouped(v: Value) -> Value:  # [N, C, *] -> [N, G, C/G, HxW]
        return coreai.reshape(v, leading_shape(v, 1, [groups, per_group, hw]))

    dy_g, x_g = grouped(dy), grouped(x)
    mean = coreai.reshape(mean, leading_shape(mean, 1, [groups, 1, 1]))
    rstd = coreai.reshape(rstd, leading_shape(rstd, 1, [groups, 1, 1]))
    ds = coreai.reduce_sum(_mul(dy_g, x_g), axes=[3], keep_dims=True)
    db = coreai.reduce_sum(dy_g, axes=[3], keep_dims=True)  # [N, G, C/G, 1]
    grads: list[Value | None] = [None, None, None]
    if mask[0]:
        gamma = None
        if weight is not None:
            gamma = coreai.reshape(cast_to(weight, compute), [groups, per_group, 1])
        g = dy_g if gamma is None else _mul(dy_g, gamma)
        ds_g, db_g = (coreai.reduce_sum(v if gamma is None else _mul(v, gamma), axes=[2],
                                        keep_dims=True) for v in (ds, db))
        dx = _input_grad(g, x_g, mean, rstd, ds_g, db_g, per_group * hw)
        grads[0] = coreai.reshape(dx, shape_like(x))
    if mask[1]:
        dgamma = _mul(_sub(ds, _mul(db, mean)), rstd)
        grads[1] = coreai.reshape(coreai.reduce_sum(dgamma, axes=[0]), [c])
    if mask[2]:
        grads[2] = coreai.reshape(coreai.reduce_sum(db, axes=[0]), [c])
    return _masked(grads)


# -- convolution ----------------------------------------------------------------------------------

def _crop(v: Value, sizes: Sequence[int]) -> Value:
    """``v``'s spatial axes (from axis 2) cut to ``sizes`` when they are longer."""
    have = static_sizes(v, range(2, v.type.rank), "convolution gradient")
    if have == list(sizes):
        return v
    axes = list(range(2, 2 + len(sizes)))
    return coreai.slice_(v, [0] * len(sizes), list(sizes), axes=axes, strides=[1] * len(sizes))


def _weight_grad(inp: Value, grad: Value, kernel: Sequence[int], stride: Sequence[int],
                 padding: Sequence[int], dilation: Sequence[int], groups: int) -> Value:
    """dW[o, c, k] = sum over n, y of grad[n, o, y] * inp[n, g*Cg + c, y*stride + k*dilation - pad].

    A convolution of ``inp`` as [Cg, G*N, *S] with ``grad`` as the kernel [O, N, *Y]
    (groups G, stride and dilation swapped), cropped to the kernel size: [O, Cg, *K].
    """
    n = len(kernel)
    spatial = static_sizes(inp, range(2, n + 2), "convolution_backward input")
    cin = static_sizes(inp, [1], "convolution_backward channels")[0]
    cg = cin // groups
    batch = inp.type.shape[0]
    nb = int(batch) if isinstance(batch, int) else -1
    xr = coreai.reshape(inp, [nb, groups, cg, *spatial])
    xr = coreai.transpose(xr, [2, 1, 0, *range(3, n + 3)])  # [Cg, G, N, *S]
    xr = coreai.reshape(xr, [cg, groups * nb if nb >= 0 else -1, *spatial])
    kern = coreai.transpose(grad, [1, 0, *range(2, n + 2)])  # [O, N, *Y]
    dw = coreai.conv(xr, kern, strides=list(dilation), pads=list(padding),
                     dilation=list(stride), groups=groups)  # [Cg, O, *K']
    dw = _crop(dw, kernel)
    return coreai.transpose(dw, [1, 0, *range(2, n + 2)])


@reg("aten::convolution_backward.default")
def aten_convolution_backward_default(
        grad_output: Value, input: Value, weight: Value, bias_sizes: list[int] | None,
        stride: list[int], padding: list[int], dilation: list[int], transposed: bool,
        output_padding: list[int], groups: int, output_mask: list[bool]) -> list[Value | None]:
    """convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]? bias_sizes, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)

    ``transposed`` swaps the roles: grad_input is a convolution with the same weight.
    """  # noqa: E501
    dy, x, w = grad_output, input, weight
    n = w.type.rank - 2
    if x.type.rank != n + 2:
        raise NotImplementedError(f"convolution_backward expects a batched input, got {x.type}")
    stride = ntuple(stride, n, "stride", default=[1] * n)
    padding = ntuple(padding, n, "padding", default=[0] * n)
    dilation = ntuple(dilation, n, "dilation", default=[1] * n)
    mask = output_mask
    kernel = static_sizes(w, range(2, n + 2), "convolution_backward weight")
    x_sizes = static_sizes(x, range(2, n + 2), "convolution_backward input")
    y_sizes = static_sizes(dy, range(2, n + 2), "convolution_backward grad_output")
    grads: list[Value | None] = [None, None, None]
    if mask[0]:
        if transposed:  # the adjoint of conv_transpose is conv with the same weight
            gi = _crop(coreai.conv(dy, w, strides=stride, pads=padding, dilation=dilation,
                                   groups=groups), x_sizes)
        else:
            out_pad = [x_sizes[i] - ((y_sizes[i] - 1) * stride[i] - 2 * padding[i]
                                     + dilation[i] * (kernel[i] - 1) + 1) for i in range(n)]
            gi = coreai.conv_transpose(dy, w, strides=stride, pads=padding, dilation=dilation,
                                       groups=groups, output_padding=out_pad)
        grads[0] = gi
    if mask[1]:
        if transposed:  # roles swap: dy is the "input", x the "output gradient"
            grads[1] = _weight_grad(dy, x, kernel, stride, padding, dilation, groups)
        else:
            grads[1] = _weight_grad(x, dy, kernel, stride, padding, dilation, groups)
    if mask[2]:
        acc = cast_to(dy, opmath(dy.type.element_type))
        grads[2] = coreai.reduce_sum(acc, axes=[0, *range(2, n + 2)])
    return _masked(grads)


__all__ = ["LOWERINGS"]
