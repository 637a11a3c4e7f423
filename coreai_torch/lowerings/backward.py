"""Built-in lowerings: backward (training) ops of pooling, normalization and convolution.

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
from typing import Any

import numpy as np
import torch.fx

from coreai_core import DType, Location, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._common import ValuesMap
from coreai_torch.utils import cast_to, get_arg, get_operand, int_list, result_dtype

LOWERINGS = LoweringSet("backward")
reg = LOWERINGS.register_torch_lowering

Window = tuple[int, int]


# -- helpers --------------------------------------------------------------------------------------

def _opmath(dtype: DType) -> DType:
    """torch's CPU compute type: float32 for float16/bfloat16."""
    return DType.float32 if dtype in (DType.float16, DType.bfloat16) else dtype


def _const(value: Any, dtype: DType, loc: Location) -> Value:
    return coreai.constant(value, dtype=dtype, loc=loc)


def _const64(value: Any, loc: Location) -> Value:
    return coreai.constant(np.asarray(value, dtype=np.int64), loc=loc)


def _tensor(values_map: ValuesMap, node: torch.fx.Node, index: int, name: str) -> Value | None:
    """A tensor argument given positionally or by keyword (None when absent)."""
    arg = get_arg(node, index, name)
    return None if arg is None else values_map[arg.name]


def _ints(node: torch.fx.Node, index: int, name: str, n: int, default: list[int] | None = None,
          ) -> list[int]:
    """A window argument as ``n`` static ints (one value repeats; empty means ``default``)."""
    arg = get_arg(node, index, name)
    values = int_list(arg, node, name) if arg is not None else []
    if not values:
        if default is None:
            raise NotImplementedError(f"{name} of {node.name!r} is empty")
        return list(default)
    if len(values) == 1:
        values = values * n
    if len(values) != n:
        raise NotImplementedError(f"{name} of {node.name!r} needs {n} entries, got {values}")
    return values


def _static(x: Value, axes: Sequence[int], node: torch.fx.Node, what: str) -> list[int]:
    sizes = [x.type.shape[a] for a in axes]
    if not all(isinstance(s, int) for s in sizes):
        raise NotImplementedError(f"{what} of {node.name!r} needs static sizes on axes "
                                  f"{list(axes)}, got {x.type}")
    return [int(s) for s in sizes]


def _lead_shape(x: Value, count: int, tail: Sequence[int], loc: Location) -> Any:
    """``x``'s first ``count`` sizes followed by ``tail``: a list when static, else a Value."""
    lead = x.type.shape[:count]
    if all(isinstance(d, int) for d in lead):
        return [*map(int, lead), *tail]
    sizes = coreai.slice_(coreai.get_shape(x, loc=loc), [0], [count], axes=[0], strides=[1],
                          loc=loc)
    return coreai.concat([sizes, _const64(list(tail), loc)], axis=0, loc=loc)


def _shape_of(x: Value, loc: Location) -> Any:
    if x.type.is_static:
        return [int(d) for d in x.type.shape]
    return coreai.get_shape(x, loc=loc)


def _flatten_tail(x: Value, lead: int, loc: Location) -> Value:
    """``x`` reshaped to its first ``lead`` axes and one axis holding the rest."""
    tail = x.type.shape[lead:]
    size = math.prod(tail) if all(isinstance(d, int) for d in tail) else -1
    return coreai.reshape(x, _lead_shape(x, lead, [size], loc), loc=loc)


def _zeros_like(x: Value, dtype: DType, loc: Location) -> Value:
    shape = _shape_of(x, loc)
    if not isinstance(shape, Value):
        shape = _const64(shape, loc)
    return coreai.broadcast_to(_const(0, dtype, loc), shape, loc=loc)


def _masked(node: torch.fx.Node, results: Sequence[Value | None], loc: Location,
            ) -> list[Value | None]:
    """Results cast to torch's dtypes; None where ``output_mask`` switched an output off."""
    val = node.meta["val"]
    return [None if v is None or val[i] is None else cast_to(v, result_dtype(node, i), loc)
            for i, v in enumerate(results)]


def _output_mask(node: torch.fx.Node, index: int) -> list[bool]:
    mask = get_arg(node, index, "output_mask", [True, True, True])
    return [bool(m) for m in mask]


# -- pooling --------------------------------------------------------------------------------------

def _axis_pairs(windows: Sequence[Window]) -> tuple[np.ndarray, np.ndarray]:
    """(output index, input index) of every element of every window, window by window."""
    outs = [np.full(max(b - a, 0), o, np.int64) for o, (a, b) in enumerate(windows)]
    ins = [np.arange(a, b, dtype=np.int64) for a, b in windows]
    return np.concatenate([np.zeros(0, np.int64), *outs]), np.concatenate(
        [np.zeros(0, np.int64), *ins])


def _spread(delta: Value, x: Value, windows: Sequence[Sequence[Window]], loc: Location,
            ) -> Value:
    """Zeros shaped like ``x`` plus ``delta[..., o]`` added at every element of window ``o``.

    ``windows[i]`` lists the clipped ``[start, end)`` of each output position on spatial
    axis ``i``. The pairs are ordered by output position per axis, so the contributions to
    one input element arrive in torch's order (output row-major) and half sums round alike.
    """
    n = len(windows)
    lead = x.type.rank - n
    in_sizes = [int(s) for s in x.type.shape[lead:]]
    out_sizes = [len(w) for w in windows]
    out_idx = np.zeros(1, np.int64)
    in_idx = np.zeros(1, np.int64)
    for i, axis_windows in enumerate(windows):
        o, j = _axis_pairs(axis_windows)
        out_idx = (out_idx[:, None] * out_sizes[i] + o[None, :]).reshape(-1)
        in_idx = (in_idx[:, None] * in_sizes[i] + j[None, :]).reshape(-1)
    m = len(in_idx)
    flat = coreai.reshape(delta, _lead_shape(delta, lead, [math.prod(out_sizes)], loc), loc=loc)
    updates = coreai.gather(flat, _const64(out_idx, loc), axis=lead, loc=loc)
    index_shape = _lead_shape(x, lead, [m], loc)
    if not isinstance(index_shape, Value):
        index_shape = _const64(index_shape, loc)
    indices = coreai.broadcast_to(_const64(in_idx.reshape([1] * lead + [m]), loc), index_shape,
                                  loc=loc)
    zeros = coreai.reshape(_zeros_like(x, delta.type.element_type, loc),
                           _lead_shape(x, lead, [math.prod(in_sizes)], loc), loc=loc)
    y = coreai.scatter_along_axis(zeros, indices, updates, axis=lead, reduction="add", loc=loc)
    return coreai.reshape(y, _shape_of(x, loc), loc=loc)


@reg("aten::max_pool2d_with_indices_backward.default")
def aten_max_pool2d_with_indices_backward_default(values_map: ValuesMap, node: torch.fx.Node,
                                                  loc: Location) -> Value:
    """max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor

    Adds each output gradient at its saved flat index in the (N, C) plane of a zero tensor.
    """  # noqa: E501
    grad = get_operand(values_map, node, 0, loc)
    x = get_operand(values_map, node, 1, loc)
    indices = _tensor(values_map, node, 7, "indices")
    lead = x.type.rank - 2
    zeros = _flatten_tail(_zeros_like(x, grad.type.element_type, loc), lead, loc)
    y = coreai.scatter_along_axis(zeros, _flatten_tail(indices, lead, loc),
                                  _flatten_tail(grad, lead, loc), axis=lead, reduction="add",
                                  loc=loc)
    return cast_to(coreai.reshape(y, _shape_of(x, loc), loc=loc), result_dtype(node), loc)


def _pool_windows(size: int, out: int, k: int, s: int, p: int,
                  ) -> tuple[list[Window], np.ndarray, np.ndarray]:
    """torch's avg-pool windows on one axis: clipped bounds, padded and clipped lengths."""
    start = np.arange(out, dtype=np.int64) * s - p
    end = np.minimum(start + k, size + p)
    lo, hi = np.maximum(start, 0), np.minimum(end, size)
    return [(int(a), int(b)) for a, b in zip(lo, hi, strict=True)], end - start, hi - lo


@reg("aten::avg_pool2d_backward.default")
def aten_avg_pool2d_backward_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                     ) -> Value:
    """avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor

    Each window's gradient divided by torch's divisor (in the gradient's dtype; integers
    truncate), then spread over the window's input elements.
    """  # noqa: E501
    grad = get_operand(values_map, node, 0, loc)
    x = get_operand(values_map, node, 1, loc)
    k = _ints(node, 2, "kernel_size", 2)
    s = _ints(node, 3, "stride", 2, default=k)
    p = _ints(node, 4, "padding", 2, default=[0, 0])
    include_pad = bool(get_arg(node, 6, "count_include_pad", True))
    override = get_arg(node, 7, "divisor_override")
    rank = x.type.rank
    sizes = _static(x, [rank - 2, rank - 1], node, "avg_pool2d_backward input")
    outs = _static(grad, [rank - 2, rank - 1], node, "avg_pool2d_backward grad_output")
    geo = [_pool_windows(sizes[i], outs[i], k[i], s[i], p[i]) for i in range(2)]
    if override:
        divisor = np.full(outs, int(override), np.int64)
    else:
        counts = [g[1] if include_pad else g[2] for g in geo]
        divisor = counts[0][:, None] * counts[1][None, :]
    divisor = np.where(divisor == 0, 1, divisor)  # an empty window receives nothing anyway
    dtype = grad.type.element_type
    delta = coreai.broadcasting_divide(grad, _const(divisor, dtype, loc), loc=loc)
    y = _spread(delta, x, [g[0] for g in geo], loc)
    return cast_to(y, result_dtype(node), loc)


@reg("aten::_adaptive_avg_pool2d_backward.default")
def aten__adaptive_avg_pool2d_backward_default(values_map: ValuesMap, node: torch.fx.Node,
                                               loc: Location) -> Value:
    """_adaptive_avg_pool2d_backward(Tensor grad_output, Tensor self) -> Tensor

    The transpose of the averaging: window ``[floor(i*in/out), ceil((i+1)*in/out))`` gets
    ``grad / kh / kw`` (two divisions in the gradient's dtype, like torch) on every element.
    """
    grad = get_operand(values_map, node, 0, loc)
    x = get_operand(values_map, node, 1, loc)
    rank = x.type.rank
    sizes = _static(x, [rank - 2, rank - 1], node, "_adaptive_avg_pool2d_backward input")
    outs = _static(grad, [rank - 2, rank - 1], node, "_adaptive_avg_pool2d_backward grad")
    windows = [[((o * size) // out, -(-((o + 1) * size) // out)) for o in range(out)]
               for size, out in zip(sizes, outs, strict=True)]
    dtype = grad.type.element_type
    kh = np.asarray([b - a for a, b in windows[0]], np.int64).reshape(-1, 1)
    kw = np.asarray([b - a for a, b in windows[1]], np.int64).reshape(1, -1)
    delta = coreai.broadcasting_divide(grad, _const(kh, dtype, loc), loc=loc)
    delta = coreai.broadcasting_divide(delta, _const(kw, dtype, loc), loc=loc)
    return cast_to(_spread(delta, x, windows, loc), result_dtype(node), loc)


# -- normalization --------------------------------------------------------------------------------

def _mul(a: Value, b: Value, loc: Location) -> Value:
    return coreai.broadcasting_mul(a, b, loc=loc)


def _add(a: Value, b: Value, loc: Location) -> Value:
    return coreai.broadcasting_add(a, b, loc=loc)


def _sub(a: Value, b: Value, loc: Location) -> Value:
    return coreai.broadcasting_sub(a, b, loc=loc)


def _input_grad(dy_gamma: Value, x: Value, mean: Value, rstd: Value, ds: Value, db: Value,
                count: int, loc: Location) -> Value:
    """torch's ``dx = rstd * gamma * dy + b * x + c`` with ``b = (db * mean - ds) * rstd^3 / n``
    and ``c = -b * mean - db * rstd / n`` (``ds = sum(gamma*dy*x)``, ``db = sum(gamma*dy)``)."""
    scale = _const(1.0 / count if count else 0.0, x.type.element_type, loc)
    rstd3 = _mul(_mul(rstd, rstd, loc), rstd, loc)
    b = _mul(_mul(_sub(_mul(db, mean, loc), ds, loc), rstd3, loc), scale, loc)
    c = _sub(coreai.neg(_mul(b, mean, loc), loc=loc), _mul(_mul(db, rstd, loc), scale, loc), loc)
    return _add(_add(_mul(rstd, dy_gamma, loc), _mul(b, x, loc), loc), c, loc)


@reg("aten::native_layer_norm_backward.default")
def aten_native_layer_norm_backward_default(values_map: ValuesMap, node: torch.fx.Node,
                                            loc: Location) -> list[Value | None]:
    """native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)"""  # noqa: E501
    x_in = get_operand(values_map, node, 1, loc)
    compute = _opmath(x_in.type.element_type)
    dy, x, mean, rstd = (cast_to(get_operand(values_map, node, i, loc), compute, loc)
                         for i in (0, 1, 3, 4))
    weight = _tensor(values_map, node, 5, "weight")
    mask = _output_mask(node, 7)
    k = len(get_arg(node, 2, "normalized_shape"))
    rank = x.type.rank
    axes, batch_axes = list(range(rank - k, rank)), list(range(rank - k))
    grads: list[Value | None] = [None, None, None]
    if mask[0]:
        count = math.prod(_static(x, axes, node, "native_layer_norm_backward"))
        g = dy if weight is None else _mul(dy, cast_to(weight, compute, loc), loc)
        ds = coreai.reduce_sum(_mul(g, x, loc), axes=axes, keep_dims=True, loc=loc)
        db = coreai.reduce_sum(g, axes=axes, keep_dims=True, loc=loc)
        grads[0] = _input_grad(g, x, mean, rstd, ds, db, count, loc)
    if mask[1]:
        x_hat = _mul(_sub(x, mean, loc), rstd, loc)
        grads[1] = _batch_sum(_mul(dy, x_hat, loc), batch_axes, loc)
    if mask[2]:
        grads[2] = _batch_sum(dy, batch_axes, loc)
    return _masked(node, grads, loc)


def _batch_sum(v: Value, axes: list[int], loc: Location) -> Value:
    return coreai.reduce_sum(v, axes=axes, loc=loc) if axes else v


@reg("aten::native_group_norm_backward.default")
def aten_native_group_norm_backward_default(values_map: ValuesMap, node: torch.fx.Node,
                                            loc: Location) -> list[Value | None]:
    """native_group_norm_backward(Tensor grad_out, Tensor input, Tensor mean, Tensor rstd, Tensor? weight, SymInt N, SymInt C, SymInt HxW, int group, bool[3] output_mask) -> (Tensor, Tensor, Tensor)"""  # noqa: E501
    x_in = get_operand(values_map, node, 1, loc)
    compute = _opmath(x_in.type.element_type)
    dy, x, mean, rstd = (cast_to(get_operand(values_map, node, i, loc), compute, loc)
                         for i in (0, 1, 2, 3))
    weight = _tensor(values_map, node, 4, "weight")
    groups = int(get_arg(node, 8, "group"))
    mask = _output_mask(node, 9)
    c = _static(x, [1], node, "native_group_norm_backward channels")[0]
    per_group = c // groups
    hw = math.prod(_static(x, range(2, x.type.rank), node, "native_group_norm_backward"))

    def grouped(v: Value) -> Value:  # [N, C, *] -> [N, G, C/G, HxW]
        return coreai.reshape(v, _lead_shape(v, 1, [groups, per_group, hw], loc), loc=loc)

    dy_g, x_g = grouped(dy), grouped(x)
    mean = coreai.reshape(mean, _lead_shape(mean, 1, [groups, 1, 1], loc), loc=loc)
    rstd = coreai.reshape(rstd, _lead_shape(rstd, 1, [groups, 1, 1], loc), loc=loc)
    ds = coreai.reduce_sum(_mul(dy_g, x_g, loc), axes=[3], keep_dims=True, loc=loc)
    db = coreai.reduce_sum(dy_g, axes=[3], keep_dims=True, loc=loc)  # [N, G, C/G, 1]
    grads: list[Value | None] = [None, None, None]
    if mask[0]:
        gamma = None
        if weight is not None:
            gamma = coreai.reshape(cast_to(weight, compute, loc), [groups, per_group, 1], loc=loc)
        g = dy_g if gamma is None else _mul(dy_g, gamma, loc)
        ds_g, db_g = (coreai.reduce_sum(v if gamma is None else _mul(v, gamma, loc), axes=[2],
                                        keep_dims=True, loc=loc) for v in (ds, db))
        dx = _input_grad(g, x_g, mean, rstd, ds_g, db_g, per_group * hw, loc)
        grads[0] = coreai.reshape(dx, _shape_of(x, loc), loc=loc)
    if mask[1]:
        dgamma = _mul(_sub(ds, _mul(db, mean, loc), loc), rstd, loc)
        grads[1] = coreai.reshape(coreai.reduce_sum(dgamma, axes=[0], loc=loc), [c], loc=loc)
    if mask[2]:
        grads[2] = coreai.reshape(coreai.reduce_sum(db, axes=[0], loc=loc), [c], loc=loc)
    return _masked(node, grads, loc)


# -- convolution ----------------------------------------------------------------------------------

def _crop(v: Value, sizes: Sequence[int], loc: Location) -> Value:
    """``v``'s spatial axes (from axis 2) cut to ``sizes`` when they are longer."""
    have = [int(d) for d in v.type.shape[2:]]
    if have == list(sizes):
        return v
    axes = list(range(2, 2 + len(sizes)))
    return coreai.slice_(v, [0] * len(sizes), list(sizes), axes=axes, strides=[1] * len(sizes),
                         loc=loc)


def _weight_grad(inp: Value, grad: Value, kernel: Sequence[int], stride: Sequence[int],
                 padding: Sequence[int], dilation: Sequence[int], groups: int,
                 node: torch.fx.Node, loc: Location) -> Value:
    """dW[o, c, k] = sum over n, y of grad[n, o, y] * inp[n, g*Cg + c, y*stride + k*dilation - pad].

    A convolution of ``inp`` as [Cg, G*N, *S] with ``grad`` as the kernel [O, N, *Y]
    (groups G, stride and dilation swapped), cropped to the kernel size: [O, Cg, *K].
    """
    n = len(kernel)
    spatial = _static(inp, range(2, n + 2), node, "convolution_backward input")
    cin = _static(inp, [1], node, "convolution_backward channels")[0]
    cg = cin // groups
    batch = inp.type.shape[0]
    nb = int(batch) if isinstance(batch, int) else -1
    xr = coreai.reshape(inp, [nb, groups, cg, *spatial], loc=loc)
    xr = coreai.transpose(xr, [2, 1, 0, *range(3, n + 3)], loc=loc)  # [Cg, G, N, *S]
    xr = coreai.reshape(xr, [cg, groups * nb if nb >= 0 else -1, *spatial], loc=loc)
    kern = coreai.transpose(grad, [1, 0, *range(2, n + 2)], loc=loc)  # [O, N, *Y]
    dw = coreai.conv(xr, kern, strides=list(dilation), pads=list(padding),
                     dilation=list(stride), groups=groups, loc=loc)  # [Cg, O, *K']
    dw = _crop(dw, kernel, loc)
    return coreai.transpose(dw, [1, 0, *range(2, n + 2)], loc=loc)


@reg("aten::convolution_backward.default")
def aten_convolution_backward_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                      ) -> list[Value | None]:
    """convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]? bias_sizes, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)

    ``transposed`` swaps the roles: grad_input is a convolution with the same weight.
    """  # noqa: E501
    dy = get_operand(values_map, node, 0, loc)
    x = get_operand(values_map, node, 1, loc)
    w = get_operand(values_map, node, 2, loc)
    n = w.type.rank - 2
    if x.type.rank != n + 2:
        raise NotImplementedError(f"convolution_backward expects a batched input, got {x.type}")
    stride = _ints(node, 4, "stride", n, default=[1] * n)
    padding = _ints(node, 5, "padding", n, default=[0] * n)
    dilation = _ints(node, 6, "dilation", n, default=[1] * n)
    transposed = bool(get_arg(node, 7, "transposed", False))
    groups = int(get_arg(node, 9, "groups", 1))
    mask = _output_mask(node, 10)
    kernel = _static(w, range(2, n + 2), node, "convolution_backward weight")
    x_sizes = _static(x, range(2, n + 2), node, "convolution_backward input")
    y_sizes = _static(dy, range(2, n + 2), node, "convolution_backward grad_output")
    window = {"pads": padding, "dilation": dilation, "groups": groups}
    grads: list[Value | None] = [None, None, None]
    if mask[0]:
        if transposed:  # the adjoint of conv_transpose is conv with the same weight
            gi = _crop(coreai.conv(dy, w, strides=stride, **window, loc=loc), x_sizes, loc)
        else:
            out_pad = [x_sizes[i] - ((y_sizes[i] - 1) * stride[i] - 2 * padding[i]
                                     + dilation[i] * (kernel[i] - 1) + 1) for i in range(n)]
            gi = coreai.conv_transpose(dy, w, strides=stride, output_padding=out_pad, **window,
                                       loc=loc)
        grads[0] = gi
    if mask[1]:
        if transposed:  # roles swap: dy is the "input", x the "output gradient"
            grads[1] = _weight_grad(dy, x, kernel, stride, padding, dilation, groups, node, loc)
        else:
            grads[1] = _weight_grad(x, dy, kernel, stride, padding, dilation, groups, node, loc)
    if mask[2]:
        acc = cast_to(dy, _opmath(dy.type.element_type), loc)
        grads[2] = coreai.reduce_sum(acc, axes=[0, *range(2, n + 2)], loc=loc)
    return _masked(node, grads, loc)


__all__ = ["LOWERINGS"]
