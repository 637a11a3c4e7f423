"""One sample build per dialect op, as data: input types and a call of the op's builder.

Elementwise unary/binary ops get their sample generated from their traits (the first element
type their rule accepts); every other op has a row in ``_TABLE``. ``SAMPLES`` covers every op in
``OPS`` (tests/core/test_text.py fails otherwise), and ``build_sample(name)`` makes a Program
``main(x0, x1, ...) -> y0, y1, ...`` out of a row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from coreai_core import Dim, DType, Location, Program, TensorType, Value
from coreai_core._builder import current_program, default_location
from coreai_core._opdef import OPS, OpDef, normalize_attr
from coreai_core.dialects import coreai
from coreai_core.errors import TypeRuleError

__all__ = ["SAMPLES", "Sample", "build_sample", "showcase_program", "t"]


@attrs.frozen
class Sample:
    inputs: tuple[TensorType, ...]
    build: Callable[..., Any]
    setup: Callable[[Program], None] | None = None  # e.g. graphs the sample invokes


def t(*shape: Any, dtype: Any = "float32") -> TensorType:
    """Shorthand for a TensorType: ``t(2, 3)``, ``t(dtype="bool")`` (0-d)."""
    return TensorType(shape, dtype)


I64 = "int64"
BUILDERS: dict[str, Callable[..., Any]] = {
    fn.opdef.name: fn for fn in vars(coreai).values() if hasattr(fn, "opdef")}


def _helper_graph(p: Program) -> None:
    with p.graph("helper", inputs={"a": t(2)}) as g:
        g.outputs({"b": coreai.neg(g["a"]), "c": g["a"]})


def _reduction(name: str) -> Sample:
    return Sample((t(2, 3, 4),), lambda x: BUILDERS[name](x, axes=[0, -1], keep_dims=True))


_TABLE: dict[str, Sample] = {
    "coreai.constant": Sample((), lambda: coreai.constant(
        np.array([[1.5, -0.0], [np.nan, np.inf]], np.float32))),
    "coreai.cast": Sample((t(2, 3),), lambda x: coreai.cast(x, np.int32)),
    "coreai.gelu": Sample((t(2, 3),), lambda x: coreai.gelu(x, approximate="tanh")),
    "coreai.softmax": Sample((t(2, 3),), lambda x: coreai.softmax(x, axis=0)),
    "coreai.log_softmax": Sample((t(2, Dim("n")),), lambda x: coreai.log_softmax(x)),
    "coreai.broadcasting_where": Sample((t(2, 1, dtype="bool"), t(3), t(2, 3)), coreai.where),
    "coreai.batch_matmul": Sample((t(5, 2, 3), t(3, 4)), coreai.batch_matmul),
    "coreai.conv": Sample((t(1, 4, 8, 8), t(6, 2, 3, 3), t(6)), lambda x, w, b: coreai.conv(
        x, w, b, strides=[2, 2], pads=[1, 1], dilation=[1, 1], groups=2)),
    "coreai.conv_transpose": Sample((t(1, 4, 5), t(4, 3, 3)), lambda x, w: coreai.conv_transpose(
        x, w, strides=[2], output_padding=[1])),
    "coreai.maxpool": Sample((t(1, 2, 6, 6),), lambda x: coreai.maxpool2d(
        x, kernel_size=np.array([2, 2], np.uint32), strides=[2, 2], return_indices=True)),
    "coreai.sumpool": Sample((t(1, 2, 6, 6),), lambda x: coreai.sumpool2d(
        x, kernel_size=[3, 3], dilation=coreai.constant([1, 1], dtype=np.uint32))),
    "coreai.avgpool": Sample((t(1, 2, 7),), lambda x: coreai.avgpool(
        x, kernel_size=[3], pads=[1], ceil_mode=True, count_include_pad=False,
        divisor_override=2)),
    "coreai.interpolate": Sample((t(1, 1, 4, 4),), lambda x: coreai.interpolate(
        x, sizes=[8, 6], mode="cubic", align_corners=True, scales=[0.5, 0.75])),
    "coreai.quantize": Sample((t(2, 3), t(3), t(3, dtype="int8")),
                              lambda x, s, z: coreai.quantize(x, s, z, axis=1, dtype="uint8")),
    "coreai.dequantize": Sample((t(2, 3, dtype="int8"), t(), t(dtype="int8")),
                                coreai.dequantize),
    "coreai.lut_to_dense": Sample((t(3, dtype="uint8"), t(2, 1, 4)),
                                  lambda i, lut: coreai.lut_to_dense(i, lut, shape=[2, 6])),
    "coreai.constexpr_blockwise_shift_scale": Sample(
        (t(4, 6, dtype="int4"), t(2, 3), t(2, 3, dtype="int4")),
        coreai.constexpr_blockwise_shift_scale),
    "coreai.sparse_to_dense": Sample((t(2, dtype="uint8"), t(5)),
                                     lambda m, v: coreai.sparse_to_dense(m, v, shape=[3, 4])),
    **{name: _reduction(name) for name in (
        "coreai.reduce_sum", "coreai.reduce_mean", "coreai.reduce_max", "coreai.reduce_min",
        "coreai.reduce_product", "coreai.all", "coreai.any")},
    "coreai.argmax": Sample((t(2, 3),), lambda x: coreai.argmax(x, axis=1, keep_dims=True)),
    "coreai.argmin": Sample((t(2, 3),), coreai.argmin),
    "coreai.scan": Sample((t(2, 3),), lambda x: coreai.scan(
        x, axis=1, kind="max", reverse=True, exclusive=True)),
    "coreai.sort": Sample((t(2, 3),), lambda x: coreai.sort(x, axis=0, descending=True)),
    "coreai.argsort": Sample((t(2, 3, dtype="int32"),), lambda x: coreai.argsort(x, stable=False)),
    "coreai.topk": Sample((t(2, 5),), lambda x: coreai.topk(x, 2, largest=False)),
    "coreai.reshape": Sample((t(2, 3, 4),), lambda x: coreai.reshape(x, [4, -1])),
    "coreai.broadcast_to": Sample((t(3, 1),), lambda x: coreai.broadcast_to(x, [2, 3, 4])),
    "coreai.transpose": Sample((t(2, 3, 4),), lambda x: coreai.transpose(x, [2, 0, 1])),
    "coreai.expand_dims": Sample((t(2, 3),), lambda x: coreai.expand_dims(x, [0, -1])),
    "coreai.shrink_dims": Sample((t(1, 3, 1),), lambda x: coreai.shrink_dims(x, [0, 2])),
    "coreai.tile": Sample((t(2, 3),), lambda x: coreai.tile(x, [2, 1])),
    "coreai.concat": Sample((t(2, 3), t(2, Dim("n", 1, None))),
                            lambda a, b: coreai.concat([a, b, a], axis=1)),
    "coreai.split": Sample((t(6, 2),), lambda x: coreai.split(x, [1, 2, 3], axis=0)),
    "coreai.slice": Sample((t(5, 6),), lambda x: coreai.slice_(
        x, [0, 5], [5, 0], axes=[0, 1], strides=[2, -1])),
    "coreai.slice_update": Sample((t(5, 6), t(5, 2)), lambda x, u: coreai.slice_update(
        x, u, [1], [3], axes=[1], strides=[1])),
    "coreai.pad": Sample((t(2, 3),), lambda x: coreai.pad(
        x, [1, 0, 0, 2], mode="reflect", value=-0.0)),
    "coreai.reverse": Sample((t(2, 3),), lambda x: coreai.reverse(x, [1])),
    "coreai.get_shape": Sample((t(2, Dim("n")),), coreai.get_shape),
    "coreai.range": Sample((), lambda: coreai.range_(0, 10, 3)),
    "coreai.gather": Sample((t(4, 3), t(2, dtype=I64)), lambda x, i: coreai.gather(x, i, axis=0)),
    "coreai.gather_along_axis": Sample((t(4, 3), t(4, 2, dtype=I64)),
                                       lambda x, i: coreai.gather_along_axis(x, i, axis=1)),
    "coreai.gather_nd": Sample((t(4, 3, 2), t(5, 2, dtype=I64)), coreai.gather_nd),
    "coreai.scatter_along_axis": Sample(
        (t(4, 3), t(4, 2, dtype=I64), t(4, 2)), lambda x, i, u: coreai.scatter_along_axis(
            x, i, u, axis=1, reduction="add", include_self=False)),
    "coreai.scatter_nd": Sample((t(4, 3), t(2, 1, dtype=I64), t(2, 3)),
                                lambda x, i, u: coreai.scatter_nd(x, i, u, accumulate=True)),
    "coreai.non_zero": Sample((t(2, 3),), coreai.non_zero),
    "coreai.complex": Sample((t(2, 3), t(3)), coreai.complex_),
    "coreai.view_as_real": Sample((t(2, 3, dtype="complex64"),), coreai.view_as_real),
    "coreai.view_as_complex": Sample((t(3, 2, dtype="float64"),), coreai.view_as_complex),
    "coreai.fft_c2c": Sample((t(4, 3, dtype="complex64"),), lambda x: coreai.fft_c2c(
        x, axes=[0, -1], forward=False, normalization="by_n")),
    "coreai.fft_r2c": Sample((t(4, 5),), lambda x: coreai.fft_r2c(
        x, axes=[1, 0], normalization="by_root_n", onesided=True)),
    "coreai.fft_c2r": Sample((t(4, 3, dtype="complex128"),), lambda x: coreai.fft_c2r(
        x, axes=[1], last_dim_size=5)),
    "coreai.if": Sample((t(dtype="bool"), t(2, 3)), lambda p, x: coreai.if_(
        p, [x], lambda a: coreai.neg(a), lambda a: a)),
    "coreai.while": Sample((t(),), lambda i: coreai.while_(
        [i], lambda a: coreai.broadcasting_less(a, 10.0),
        lambda a: coreai.broadcasting_add(a, 1.0))),
    "coreai.invoke": Sample((t(2),), lambda x: coreai.invoke([x], callee="helper"),
                            setup=_helper_graph),
    "coreai.random_uniform": Sample((), lambda: coreai.random_uniform(
        [2, 3], low=-1.0, high=2.5, dtype="bfloat16")),
    "coreai.random_normal": Sample((t(2, Dim("n")),), lambda x: coreai.random_normal(
        coreai.get_shape(x), mean=1.0, std=0.5, dtype="float64")),
    "coreai.random_integers": Sample((), lambda: coreai.random_integers(
        [4], low=-3, high=7, dtype="int8")),
    "coreai.random_permutation": Sample((), lambda: coreai.random_permutation(5)),
    "coreai.random_bernoulli": Sample((t(2, 3),), coreai.random_bernoulli),
    "coreai.random_multinomial": Sample((t(2, 4),), lambda w: coreai.random_multinomial(
        w, num_samples=3, replacement=True)),
    "coreai.special": Sample((t(2, 3),), lambda x: coreai.special(x, fn="i0e")),
    "coreai.special_binary": Sample((t(2, 3), t(3)), lambda x, n: coreai.special_binary(
        x, n, fn="chebyshev_polynomial_t")),
    "coreai.frexp": Sample((t(2, 3, dtype="float16"),), coreai.frexp),
    "coreai.svd": Sample((t(2, 4, 3),), lambda x: coreai.svd(x, full_matrices=True)),
    "coreai.eig": Sample((t(2, 3, 3),), coreai.eig),
    "coreai.eigh": Sample((t(3, 3, dtype="float64"),), lambda x: coreai.eigh(x, upper=True)),
    "coreai.cholesky": Sample((t(2, 3, 3),), lambda x: coreai.cholesky(x, upper=True)),
    "coreai.lu_factor": Sample((t(4, 3),), coreai.lu_factor),
    "coreai.lu_solve": Sample((t(2, 3, 3), t(2, 3, dtype="int32"), t(3, 2)),
                              lambda a, p, b: coreai.lu_solve(a, p, b, adjoint=True)),
    "coreai.pivots_to_permutation": Sample(
        (t(2, 3, dtype="int32"),), lambda p: coreai.pivots_to_permutation(p, size=4)),
    "coreai.triangular_solve": Sample((t(3, 3), t(2, 4, 3)), lambda a, b: coreai.triangular_solve(
        a, b, upper=False, left=False, unitriangular=True)),
    "coreai.geqrf": Sample((t(5, 3),), coreai.geqrf),
    "coreai.householder_product": Sample((t(5, 3), t(2)), coreai.householder_product),
    "coreai.matrix_exp": Sample((t(2, 3, 3),), coreai.matrix_exp),
    "coreai.ldl_factor": Sample((t(3, 3),), coreai.ldl_factor),
    "coreai.ldl_solve": Sample((t(3, 3), t(3, dtype="int32"), t(3, 1)), coreai.ldl_solve),
}


def _accepts(opdef: OpDef, types: tuple[TensorType, ...]) -> bool:
    operands = dict(zip([p.name for p in opdef.operands], [Value(x) for x in types]))
    attrs_ = {p.name: normalize_attr(p, p.default, opdef.name) for p in opdef.attributes}
    try:
        opdef.infer(operands, attrs_)
    except TypeRuleError:
        return False
    return True


def _elementwise_sample(opdef: OpDef) -> Sample | None:
    """Unary ops on [2, 3]; binary ops on [2, 3] and [3] (same shapes unless broadcasting)."""
    if "unary" in opdef.traits:
        shapes: list[tuple[int, ...]] = [(2, 3)]
    elif "binary" in opdef.traits:
        shapes = [(2, 3), (3,) if opdef.name.startswith("coreai.broadcasting_") else (2, 3)]
    else:
        return None
    for dtype in (DType.float32, DType.int32, DType.bool, DType.complex64):
        types = tuple(TensorType(s, dtype) for s in shapes)
        if _accepts(opdef, types):
            return Sample(types, BUILDERS[opdef.name])
    raise AssertionError(f"{opdef.name} accepts none of float32, int32, bool, complex64")


def _all_samples() -> dict[str, Sample]:
    out = {}
    for name, opdef in OPS.items():
        sample = _TABLE.get(name) or _elementwise_sample(opdef)
        if sample is not None:
            out[name] = sample
    return out


SAMPLES = _all_samples()


def build_sample(name: str) -> Program:
    """The sample program of op ``name``; its ops are located at ``model.py:7 in blocks.<op>``."""
    sample = SAMPLES[name]
    p = Program()
    if sample.setup:
        sample.setup(p)
    inputs = {f"x{i}": typ for i, typ in enumerate(sample.inputs)}
    with p.graph("main", inputs=inputs) as g:
        with default_location(Location("model.py", 7, f"blocks.{name}")):
            out = sample.build(*g.inputs.values())
        outs = list(out) if isinstance(out, tuple | list) else [out]
        g.outputs({f"y{i}": v for i, v in enumerate(outs)})
    assert current_program() is None
    return p


def showcase_program() -> Program:
    """A program using every text feature: weights (elided and inline), state, a dynamic
    dim, a quoted input name, a region op, a location (the golden text in test_text.py)."""
    p = Program()
    inputs = {"x": TensorType((Dim("batch", 1, 64), 5), "float32"), "x-1": t(dtype="bool")}
    with p.graph("main", inputs=inputs, state={"cache": np.zeros((2, 1), np.float32)}) as g:
        w = coreai.constant(np.zeros((4, 5), np.float32), name="fc.weight")
        y = coreai.batch_matmul(g["x"], coreai.transpose(w, [1, 0]))
        top, idx = coreai.topk(y, 2, loc=Location("model.py", 12, "fc"))
        (z,) = coreai.if_(g["x-1"], [top], lambda a: coreai.neg(a), lambda a: a)
        new = coreai.broadcasting_add(g["cache"], 1.0)
        coreai.constant(np.array([0.5, -1.0], np.float32), name="bias")
        g.outputs({"y": z, "indices.0": idx}, state={"cache": new})
    return p
