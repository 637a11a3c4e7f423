"""Op-database entries (compression family): compression — the ``coreai::`` custom ops with
Apple's schemas and this project's packed ``coreaix::`` ones that rebuild compressed weights and
quantize/dequantize, and the ``quantized_decomposed::`` ops of torch's PT2E flow.

Packed 4-bit data is passed as a keyword argument, so the exported module holds it as a
constant (the lowering needs it constant to store it as a 4-bit weight); everything else is
an input of the exported module.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.ao.quantization.fx._decomposed
from hypothesis import strategies as st

from coreai_core.packing import pack_bits
from tests.torch.op_db._entry import FLOAT_DTYPES, FLOATS, EntrySet, Sample, sizes, tensors

coreai_ops = torch.ops.coreai
coreaix_ops = torch.ops.coreaix
qd = torch.ops.quantized_decomposed

ENTRIES = EntrySet()

FOUR_BIT = ("int4", "uint4", "float4_e2m1fn")
EIGHT_BIT = {"int8": torch.int8, "uint8": torch.uint8, "float8_e4m3fn": torch.float8_e4m3fn,
             "float8_e5m2": torch.float8_e5m2}
INT_RANGE = {"int4": (-8, 7), "uint4": (0, 15), "int8": (-128, 127), "uint8": (0, 255)}
# quantize to float8 only from float32/half inputs: torch converts float64 to float8 through
# float32 (two roundings) where the runtime rounds once, correctly
QUANT_INPUT = {torch.int8: FLOATS, torch.uint8: FLOATS,
               torch.float8_e4m3fn: st.sampled_from((torch.float32, torch.float16,
                                                     torch.bfloat16)),
               torch.float8_e5m2: st.sampled_from((torch.float32, torch.float16,
                                                   torch.bfloat16))}


add = ENTRIES.add


def _divisor(n: int) -> st.SearchStrategy[int]:
    """A divisor of ``n`` up to 6 (group and block counts; 47 itself is rare enough)."""
    return st.sampled_from([d for d in range(1, min(n, 6) + 1) if n % d == 0] +
                           ([n] if n == 47 else []))


def _shape(draw: Any, max_rank: int = 3) -> list[int]:
    return [draw(sizes(1, 6)) for _ in range(draw(st.integers(1, max_rank)))]


def _codes(draw: Any, count: int, high: int) -> np.ndarray:
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    return rng.integers(0, high, count).astype(np.uint8)


def _nibbles(codes: np.ndarray) -> torch.Tensor:
    flat = np.concatenate([codes, np.zeros(len(codes) % 2, np.uint8)])
    return torch.from_numpy((flat[0::2] | (flat[1::2] << 4)).astype(np.uint8))


# -- coreaix:: custom ops ----------------------------------------------------------------------

@st.composite
def _lut(draw: Any) -> Sample:
    shape = _shape(draw)
    nbits = draw(st.integers(1, 8))
    groups = [draw(_divisor(n)) for n in shape]
    lut = draw(tensors([*groups, 1 << nbits], draw(FLOATS)))
    indices = torch.from_numpy(pack_bits(_codes(draw, int(np.prod(shape)), 1 << nbits), nbits))
    return Sample((indices, lut), {"shape": shape})


add("coreaix::lut_to_dense.default",
    lambda indices, lut, shape: coreaix_ops.lut_to_dense(indices, lut, shape), _lut())


def _block_params(draw: Any, shape: list[int], dtype: torch.dtype) -> torch.Tensor:
    return draw(tensors([draw(_divisor(n)) for n in shape], dtype, low=0.01, high=2.0))


@st.composite
def _blockwise(draw: Any) -> Sample:
    name = draw(st.sampled_from((*FOUR_BIT, *EIGHT_BIT)))
    shape = _shape(draw)
    count = int(np.prod(shape))
    scale = _block_params(draw, shape, draw(FLOATS))
    if name in FOUR_BIT:
        data = _nibbles(_codes(draw, count, 16))
    elif name in ("int8", "uint8"):
        data = torch.from_numpy(_codes(draw, count, 256).reshape(shape)).view(EIGHT_BIT[name])
    else:
        data = draw(tensors(shape, torch.float32, low=-8, high=8)).to(EIGHT_BIT[name])
    offset = None
    if name in INT_RANGE and draw(st.booleans()):
        lo, hi = INT_RANGE[name]
        offset = draw(tensors(list(scale.shape), torch.int64, low=lo, high=hi)).to(
            torch.int8 if lo < 0 else torch.uint8)
    return Sample((scale,), {"data": data, "offset": offset, "dtype": name, "shape": shape})


add("coreaix::constexpr_blockwise_shift_scale.default",
    lambda scale, data, offset, dtype, shape: coreaix_ops.constexpr_blockwise_shift_scale(
        data, scale, offset, dtype, shape), _blockwise())


@st.composite
def _granularity(draw: Any, shape: list[int], dtype: torch.dtype,
                 ) -> tuple[torch.Tensor, int | None]:
    """A positive scale per tensor, per channel (with its axis) or per block."""
    kind = draw(st.sampled_from(("tensor", "channel", "block")))
    if kind == "tensor":
        return draw(tensors([], dtype, low=0.01, high=2.0)), None
    if kind == "channel":
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        return draw(tensors([shape[axis]], dtype, low=0.01, high=2.0)), axis
    return _block_params(draw, shape, dtype), None


@st.composite
def _quantize(draw: Any) -> Sample:
    dtype = draw(st.sampled_from(tuple(QUANT_INPUT)))
    shape = _shape(draw)
    x = draw(tensors(shape, draw(QUANT_INPUT[dtype]), low=-300, high=300))
    scale, axis = draw(_granularity(shape, x.dtype))
    zero_point = None
    if not dtype.is_floating_point and draw(st.booleans()):
        info = torch.iinfo(dtype)
        zero_point = draw(tensors(list(scale.shape), torch.int32, low=info.min, high=info.max))
    return Sample((x, scale, zero_point), {"dtype": dtype, "axis": axis})


add("coreaix::quantize.default",
    lambda x, scale, zero_point, dtype, axis: coreaix_ops.quantize(x, scale, zero_point, dtype,
                                                                  axis), _quantize())


@st.composite
def _dequantize(draw: Any) -> Sample:
    dtype = draw(st.sampled_from(tuple(QUANT_INPUT)))
    shape = _shape(draw)
    if dtype.is_floating_point:
        x = draw(tensors(shape, torch.float32, low=-100, high=100)).to(dtype)
    else:
        info = torch.iinfo(dtype)
        x = draw(tensors(shape, dtype, low=info.min, high=info.max))
    scale, axis = draw(_granularity(shape, draw(FLOATS)))
    zero_point = None
    if not dtype.is_floating_point and draw(st.booleans()):
        zero_point = draw(tensors(list(scale.shape), torch.int64, low=-20, high=20))
    return Sample((x, scale, zero_point), {"axis": axis})


add("coreaix::dequantize.default",
    lambda x, scale, zero_point, axis: coreaix_ops.dequantize(x, scale, zero_point, axis),
    _dequantize())


@st.composite
def _sparse(draw: Any) -> Sample:
    shape = _shape(draw)
    bits = _codes(draw, int(np.prod(shape)), 2)
    values = draw(tensors([int(bits.sum())], draw(st.sampled_from(
        (*FLOAT_DTYPES, torch.int8, torch.int32, torch.int64)))))
    return Sample((torch.from_numpy(pack_bits(bits, 1)), values), {"shape": shape})


add("coreaix::sparse_to_dense.default",
    lambda mask, values, shape: coreaix_ops.sparse_to_dense(mask, values, shape), _sparse())


# -- coreai:: custom ops (Apple's schemas) ------------------------------------------------------
# Indices, masks and sub-byte data are keyword arguments (constants of the exported module): the
# converter packs or retypes them, which needs their data.

@st.composite
def _apple_lut(draw: Any) -> Sample:
    shape = _shape(draw)
    nbits = draw(st.sampled_from((1, 2, 3, 4, 6, 8)))
    vector = draw(st.sampled_from((1, 1, 2, 3)))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    tables = [draw(_divisor(n)) for n in shape]
    lut = draw(tensors([*tables, 1 << nbits, vector], draw(st.sampled_from(
        (torch.float32, torch.float16, torch.bfloat16, torch.int8)))))
    indices = torch.from_numpy(_codes(draw, int(np.prod(shape)), 1 << nbits).reshape(shape))
    return Sample((lut,), {"indices": indices, "axis": axis})


add("coreai::lut_to_dense.default",
    lambda lut, indices, axis: coreai_ops.lut_to_dense(indices, lut, axis), _apple_lut())


@st.composite
def _apple_blockwise(draw: Any) -> Sample:
    # packed float4 (uint8 data with an e8m0 scale) is tested through coreai-opt's fp4 weights
    # in tests/interop/test_coreai_opt.py: torch.export mis-orders a module whose only
    # tensors are lifted constants, which an e8m0 scale (not a valid program input) must be
    kind = draw(st.sampled_from(("int8", "uint8", "int4", "uint4", "float8_e4m3fn",
                                 "float8_e5m2")))
    shape = _shape(draw)
    scale_dtype = draw(st.sampled_from((torch.float32, torch.float16)))
    scale = _block_params(draw, shape, scale_dtype)
    kwargs: dict[str, Any] = {"zero_point": None, "minval": None, "input_dtype": None,
                              "output_dtype": None}
    if kind.startswith("float8"):
        data = draw(tensors(shape, torch.float32, low=-8, high=8)).to(getattr(torch, kind))
        return Sample((scale, data), kwargs)
    lo, hi = INT_RANGE[kind]
    storage = torch.int8 if lo < 0 else torch.uint8
    kwargs["input"] = draw(tensors(shape, torch.int64, low=lo, high=hi)).to(storage)
    if kind in ("int4", "uint4"):
        kwargs["input_dtype"] = getattr(torch, kind)
    offset = draw(st.sampled_from(("none", "zero_point", "minval")))
    if offset == "zero_point":
        kwargs["zero_point"] = draw(tensors(list(scale.shape), torch.int64, low=lo,
                                            high=hi)).to(storage)
    elif offset == "minval":
        kwargs["minval"] = draw(tensors(list(scale.shape), scale_dtype, low=-2.0, high=2.0))
        kwargs["input_dtype"] = getattr(torch, kind)
    return Sample((scale,), kwargs)


def _call_blockwise(*tensors: torch.Tensor, **kw: Any) -> torch.Tensor:
    if tensors:
        kw["scale"], *data = tensors
        kw["input"] = data[0] if data else kw["input"]
    return coreai_ops.constexpr_blockwise_shift_scale(
        kw["input"], kw["scale"], kw["zero_point"], kw["minval"], kw["input_dtype"],
        kw["output_dtype"])


add("coreai::constexpr_blockwise_shift_scale.default", _call_blockwise, _apple_blockwise())


@st.composite
def _per_tensor_or_channel(draw: Any, shape: list[int], dtype: torch.dtype,
                           ) -> tuple[torch.Tensor, int]:
    """Apple's granularities: one scale (0-d or 1-element) or one per channel of ``axis``."""
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    kind = draw(st.sampled_from(("0-d", "1-element", "channel", "channel, input rank")))
    n = {"0-d": None, "1-element": 1}.get(kind, shape[axis])
    scale = draw(tensors([] if n is None else [n], dtype, low=0.01, high=2.0))
    if kind == "channel, input rank":
        view = [1] * len(shape)
        view[axis] = n  # type: ignore[call-overload]
        scale = scale.reshape(view)
    return scale, axis


@st.composite
def _apple_quantize(draw: Any) -> Sample:
    out = draw(st.sampled_from((torch.int8, torch.uint8, torch.float8_e4m3fn,
                                torch.float8_e5m2)))
    shape = _shape(draw)
    x = draw(tensors(shape, draw(st.sampled_from((torch.float32, torch.float16))),
                     low=-300, high=300))
    scale, axis = draw(_per_tensor_or_channel(shape, torch.float32))
    zero_point = minval = None
    offset = "none" if out.is_floating_point else draw(st.sampled_from(
        ("none", "zero_point", "minval")))
    if offset == "zero_point":
        info = torch.iinfo(out)
        zero_point = draw(tensors(list(scale.shape), out, low=info.min, high=info.max))
    elif offset == "minval":
        minval = draw(tensors(list(scale.shape), x.dtype, low=-50, high=0))
    return Sample((x, scale, zero_point, minval), {"output_dtype": out, "axis": axis})


add("coreai::quantize.default",
    lambda x, scale, zero_point, minval, output_dtype, axis: coreai_ops.quantize(
        x, scale, output_dtype, zero_point, minval, axis), _apple_quantize())


@st.composite
def _apple_dequantize(draw: Any) -> Sample:
    dtype = draw(st.sampled_from((torch.int8, torch.uint8, torch.float8_e4m3fn,
                                  torch.float8_e5m2)))
    shape = _shape(draw)
    scale, axis = draw(_per_tensor_or_channel(shape, draw(st.sampled_from(
        (torch.float32, torch.float16)))))
    zero_point = minval = input_dtype = None
    if dtype.is_floating_point:
        x = draw(tensors(shape, torch.float32, low=-100, high=100)).to(dtype)
    else:
        info = torch.iinfo(dtype)
        x = draw(tensors(shape, dtype, low=info.min, high=info.max))
        offset = draw(st.sampled_from(("none", "zero_point", "minval")))
        if offset == "zero_point":
            zero_point = draw(tensors(list(scale.shape), dtype, low=info.min, high=info.max))
        elif offset == "minval":
            minval = draw(tensors(list(scale.shape), scale.dtype, low=-2.0, high=2.0))
            input_dtype = dtype
    out = draw(st.sampled_from((None, torch.float32, torch.float16)))
    return Sample((x, scale, zero_point, minval),
                  {"axis": axis, "input_dtype": input_dtype, "output_dtype": out})


add("coreai::dequantize.default",
    lambda x, scale, zero_point, minval, axis, input_dtype, output_dtype: coreai_ops.dequantize(
        x, scale, zero_point, minval, axis, input_dtype, output_dtype), _apple_dequantize())


@st.composite
def _apple_sparse(draw: Any) -> Sample:
    shape = _shape(draw)
    mask = torch.from_numpy(_codes(draw, int(np.prod(shape)), 2).reshape(shape)).bool()
    values = draw(tensors([int(mask.sum())], draw(st.sampled_from(
        (torch.float32, torch.float16, torch.bfloat16, torch.int8)))))
    return Sample((values,), {"mask": mask})


add("coreai::sparse_to_dense.default",
    lambda values, mask: coreai_ops.sparse_to_dense(values, mask), _apple_sparse())


# -- quantized_decomposed:: (torch's PT2E flow) -------------------------------------------------

QD_DTYPES = st.sampled_from((torch.int8, torch.uint8))
PT2E_INPUTS = st.sampled_from((torch.float32, torch.float16, torch.bfloat16))


@st.composite
def _qrange(draw: Any, dtype: torch.dtype) -> tuple[int, int]:
    info = torch.iinfo(dtype)
    lo = draw(st.sampled_from((info.min, info.min + 1)))
    return lo, info.max


@st.composite
def _per_tensor(draw: Any, overload: str, quantized_input: bool) -> Sample:
    dtype = draw(QD_DTYPES)
    shape = [draw(sizes(1, 6)) for _ in range(draw(st.integers(0, 3)))]
    lo, hi = draw(_qrange(dtype))
    scale = draw(st.floats(0.005, 2.0))
    zp = draw(st.integers(lo, hi))
    if quantized_input:
        x = draw(tensors(shape, dtype, low=lo, high=hi))
    else:
        x = draw(tensors(shape, draw(PT2E_INPUTS), low=-200, high=200))
    params: list[Any] = [scale, zp, lo, hi]
    if overload != "default":
        # a dequantize scale may be stored in any float dtype (torch reads its value)
        sdtype = draw(st.sampled_from(FLOAT_DTYPES)) if quantized_input else torch.float64
        params[:2] = [torch.tensor([scale], dtype=sdtype), torch.tensor([zp])]
    if overload == "tensor2":
        params[2:] = [torch.tensor(lo), torch.tensor(hi)]
    kwargs: dict[str, Any] = {}
    if quantized_input:
        kwargs["out_dtype"] = draw(st.sampled_from((None, *FLOAT_DTYPES)))
    return Sample((x, *params, dtype), kwargs)


for _overload in ("default", "tensor", "tensor2"):
    add(f"quantized_decomposed::quantize_per_tensor.{_overload}",
        getattr(qd.quantize_per_tensor, _overload), _per_tensor(_overload, False),
        name=f"quantize_per_tensor.{_overload}")
    add(f"quantized_decomposed::dequantize_per_tensor.{_overload}",
        getattr(qd.dequantize_per_tensor, _overload), _per_tensor(_overload, True),
        name=f"dequantize_per_tensor.{_overload}")


@st.composite
def _per_channel(draw: Any, quantized_input: bool) -> Sample:
    dtype = draw(QD_DTYPES)
    shape = [draw(sizes(1, 6)) for _ in range(draw(st.integers(1, 4)))]
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    lo, hi = draw(_qrange(dtype))
    scale_dtypes = FLOAT_DTYPES if quantized_input else (torch.float32, torch.float64)
    scales = draw(tensors([shape[axis]], draw(st.sampled_from(scale_dtypes)), low=0.005,
                          high=2.0))
    zps = draw(tensors([shape[axis]], torch.int64, low=lo, high=hi))
    if quantized_input:
        x = draw(tensors(shape, dtype, low=lo, high=hi))
        zp = zps if draw(st.booleans()) else None
        out = draw(st.sampled_from((None, *FLOAT_DTYPES)))
        return Sample((x, scales, zp, axis, lo, hi, dtype), {"out_dtype": out})
    x = draw(tensors(shape, draw(PT2E_INPUTS), low=-200, high=200))
    return Sample((x, scales, zps, axis, lo, hi, dtype))


add("quantized_decomposed::quantize_per_channel.default", qd.quantize_per_channel.default,
    _per_channel(False))
add("quantized_decomposed::dequantize_per_channel.default", qd.dequantize_per_channel.default,
    _per_channel(True))


@st.composite
def _choose_qparams(draw: Any) -> Sample:
    dtype = draw(QD_DTYPES)
    info = torch.iinfo(dtype)
    shape = [draw(sizes(1, 6)) for _ in range(draw(st.integers(1, 3)))]
    # mixed signs, all positive, all negative: the zero point sits inside, below, above
    low, high = draw(st.sampled_from(((-5.0, 5.0), (0.5, 5.0), (-5.0, -0.5))))
    x = draw(tensors(shape, draw(PT2E_INPUTS), low=low, high=high))
    return Sample((x, info.min, info.max, torch.finfo(torch.float32).eps, dtype))


add("quantized_decomposed::choose_qparams.tensor", qd.choose_qparams.tensor, _choose_qparams())
