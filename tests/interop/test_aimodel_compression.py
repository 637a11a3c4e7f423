"""Compressed weights through the .aimodel export: each compression op on Apple's interpreter
against coreai_core's runtime, the adaptations the exporter makes (coreai_torch/aimodel/
mappings/compression.py), and compressed models whose asset stays small."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import torch
from torch import nn

from coreai_core import DType, Program, Value
from coreai_core.dialects import coreai
from coreai_core.packing import pack_bits
from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.aimodel import export_aimodel, verify_aimodel
from coreai_torch.aimodel.mappings.compression import MAPPINGS as COMPRESSION_MAPPINGS
from coreai_torch.compression import palettize, prune, quantize_weights
from coreai_torch.errors import UnexportableOpsError
from tests.core.op_samples import SAMPLES, build_sample
from tests.interop.helpers import check_matches_runtime

RNG = np.random.default_rng(7)


def _ints(dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Every value of an integer type is possible (zero points and data alike)."""
    info = ml_dtypes.iinfo(dtype)
    return RNG.integers(int(info.min), int(info.max) + 1, shape).astype(dtype)


def _floats(shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    return (RNG.standard_normal(shape) * 3).astype(dtype)


def _mask(bits: int, ones: int) -> np.ndarray:
    """A packed 1-bit mask over ``bits`` positions with ``ones`` of them set."""
    flags = np.zeros(bits, np.uint8)
    flags[RNG.choice(bits, ones, replace=False)] = 1
    return pack_bits(flags, 1)


# Valid operand data for each compression op's sample (tests/core/op_samples.py).
SAMPLE_DATA: dict[str, Callable[[], list[np.ndarray]]] = {
    "coreai.quantize": lambda: [_floats((2, 3)), np.abs(_floats((3,))) + 0.05,
                                _ints(np.int8, (3,))],
    "coreai.dequantize": lambda: [_ints(np.int8, (2, 3)), np.array(0.37, np.float32),
                                  np.array(-5, np.int8)],
    "coreai.lut_to_dense": lambda: [_ints(np.uint8, (3,)), _floats((2, 1, 4))],
    "coreai.constexpr_blockwise_shift_scale": lambda: [
        _ints(ml_dtypes.int4, (4, 6)), _floats((2, 3)), _ints(ml_dtypes.int4, (2, 3))],
    "coreai.sparse_to_dense": lambda: [_mask(12, 5), _floats((5,))],
}
OPS = sorted(COMPRESSION_MAPPINGS)


def constant_program(build: Callable[..., Any], operands: list[np.ndarray]) -> Program:
    """``build`` applied to constants: a compressed weight as it is in a converted model."""
    p = Program()
    with p.graph("main", inputs={}) as g:
        g.outputs({"y": build(*(coreai.constant(np.asarray(a)) for a in operands))})
    return p


def test_every_compression_op_has_sample_data() -> None:
    assert sorted(SAMPLE_DATA) == OPS
    assert set(OPS) <= set(SAMPLES)


@pytest.mark.parametrize("op_name", OPS)
def test_sample_as_constant_weights_matches_runtime(op_name: str, tmp_path: Path) -> None:
    program = constant_program(SAMPLES[op_name].build, SAMPLE_DATA[op_name]())
    check_matches_runtime(program, tmp_path / "op.aimodel", {})


# Samples whose operands can be graph inputs (dequantize's scale and zero point are 0-d).
@pytest.mark.parametrize("op_name", ["coreai.constexpr_blockwise_shift_scale",
                                     "coreai.quantize", "coreai.dequantize"])
def test_sample_with_inputs_matches_runtime(op_name: str, tmp_path: Path) -> None:
    inputs = {f"x{i}": a for i, a in enumerate(SAMPLE_DATA[op_name]())}
    check_matches_runtime(build_sample(op_name), tmp_path / "op.aimodel", inputs)


@pytest.mark.parametrize("op_name", ["coreai.lut_to_dense", "coreai.sparse_to_dense"])
def test_computed_bit_stream_is_refused_with_the_reason(op_name: str, tmp_path: Path) -> None:
    with pytest.raises(UnexportableOpsError) as info:
        export_aimodel(build_sample(op_name), tmp_path / "op.aimodel")
    [refusal] = info.value.ops
    assert refusal.op == op_name and "computed at run time" in refusal.reason
    assert "no bitcast" in refusal.reason and 'model.py":7' in str(info.value)
    assert list(tmp_path.iterdir()) == []


def _lut(nbits: int, groups: tuple[int, int]) -> tuple[Callable[..., Any], list[np.ndarray]]:
    shape = [4, 6]
    codes = RNG.integers(0, 1 << nbits, shape)
    return (lambda i, lut: coreai.lut_to_dense(i, lut, shape=shape),
            [pack_bits(codes, nbits), _floats((*groups, 1 << nbits))])


def _blockwise(dtype: Any, scale_dtype: Any, offset: bool) -> tuple[Callable[..., Any],
                                                                     list[np.ndarray]]:
    if np.dtype(dtype).kind in "iu" or dtype in (ml_dtypes.int4, ml_dtypes.uint4):
        data, off = _ints(dtype, (4, 6)), _ints(dtype, (2, 3))
    else:
        data, off = _floats((4, 6)).astype(dtype), _floats((2, 3)).astype(dtype)
    scale = _floats((2, 3), scale_dtype)
    if offset:
        return coreai.constexpr_blockwise_shift_scale, [data, scale, off]
    return (lambda d, s: coreai.constexpr_blockwise_shift_scale(d, s)), [data, scale]


def _quantize(dtype: str, scale_shape: tuple[int, ...], axis: int | None, zero_point: bool,
              x_dtype: Any = np.float32) -> tuple[Callable[..., Any], list[np.ndarray]]:
    x = _floats((4, 6), x_dtype) * 4
    x[0, :3] = [np.inf, -np.inf, 6e4]  # saturation (6e4 fits float16)
    scale = (np.abs(_floats(scale_shape)) + 0.05).astype(np.float32)
    operands = [x, scale]
    if zero_point:
        operands.append(_ints(np.dtype(dtype).type if dtype != "int4" else ml_dtypes.int4,
                              scale_shape))
    return (lambda x, s, z=None: coreai.quantize(x, s, z, axis=axis, dtype=dtype)), operands


def _dequantize(dtype: Any, scale_shape: tuple[int, ...], axis: int | None,
                ) -> tuple[Callable[..., Any], list[np.ndarray]]:
    def build(x: Value, s: Value, z: Value) -> Value:
        return coreai.dequantize(x, s, z, axis=axis)

    return build, [_ints(dtype, (4, 6)), _floats(scale_shape), _ints(dtype, scale_shape)]


# The forms the samples do not reach; each name says what it checks.
CASES: dict[str, Callable[[], tuple[Callable[..., Any], list[np.ndarray]]]] = {
    **{f"lut_{n}bit": functools.partial(_lut, n, (2, 3)) for n in range(1, 9)},  # 5, 7: widened
    "lut_per_tensor": lambda: _lut(4, (1, 1)),
    "blockwise_uint4_no_offset": lambda: _blockwise(ml_dtypes.uint4, np.float32, False),
    "blockwise_int4_float16_scale": lambda: _blockwise(ml_dtypes.int4, np.float16, True),
    "blockwise_int8": lambda: _blockwise(np.int8, np.float32, True),
    "blockwise_uint8": lambda: _blockwise(np.uint8, np.float32, True),
    "blockwise_float8_e4m3fn": lambda: _blockwise(ml_dtypes.float8_e4m3fn, np.float32, False),
    "blockwise_float8_e5m2": lambda: _blockwise(ml_dtypes.float8_e5m2, np.float32, False),
    "blockwise_float8_e5m2_offset": lambda: _blockwise(ml_dtypes.float8_e5m2, np.float32,
                                                       True),  # adapted: converted first
    "blockwise_float8_e4m3fn_float16_scale_offset": lambda: _blockwise(
        ml_dtypes.float8_e4m3fn, np.float16, True),  # adapted, one rounding to float16
    "blockwise_uint8_float16_scale": lambda: _blockwise(np.uint8, np.float16, True),
    "blockwise_int8_bfloat16_scale": lambda: _blockwise(np.int8, ml_dtypes.bfloat16, True),
    "blockwise_float4_bfloat16_scale": lambda: _blockwise(ml_dtypes.float4_e2m1fn,
                                                          ml_dtypes.bfloat16, False),
    "blockwise_float4_float32_scale": lambda: _blockwise(ml_dtypes.float4_e2m1fn, np.float32,
                                                         True),  # adapted: unit f16 scale
    "blockwise_float4_float16_scale": lambda: _blockwise(ml_dtypes.float4_e2m1fn, np.float16,
                                                         False),
    "dequantize_per_channel": lambda: _dequantize(np.uint8, (6,), -1),
    "dequantize_per_block": lambda: _dequantize(ml_dtypes.int4, (2, 3), None),
    "dequantize_0d": lambda: (coreai.dequantize, [np.array(-7, np.int8), np.array(0.25, np.float32),
                                                  np.array(3, np.int8)]),
    "dequantize_int32_zero_point_that_fits": lambda: (
        coreai.dequantize, [_ints(np.uint8, (4, 6)), np.array(0.5, np.float32),
                            np.array(200, np.int32)]),
    "quantize_int4_per_block": lambda: _quantize("int4", (2, 3), None, True),
    "quantize_uint8_per_tensor": lambda: _quantize("uint8", (), None, True),
    "quantize_int8_per_channel_float16": lambda: _quantize("int8", (4,), 0, False, np.float16),
    "quantize_float8_e4m3fn": lambda: _quantize("float8_e4m3fn", (), None, False),
    "quantize_float8_e5m2": lambda: _quantize("float8_e5m2", (6,), 1, False),
    "quantize_float4_e2m1fn": lambda: _quantize("float4_e2m1fn", (2, 3), None, False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_compression_case_matches_runtime(case: str, tmp_path: Path) -> None:
    build, operands = CASES[case]()
    check_matches_runtime(constant_program(build, operands), tmp_path / "op.aimodel", {})


def test_quantize_keeps_our_reciprocal_order(tmp_path: Path) -> None:
    """x * (1/s) and x / s round apart for these values (found by search below); Core AI's
    quantize divides, the export must multiply like ours (and torch)."""
    scales = np.abs(_floats((4096,))) + 0.01
    xs = ((RNG.integers(-100, 100, 4096) + 0.5) * scales).astype(np.float32)
    xs = np.concatenate([xs, np.nextafter(xs, np.float32(np.inf))])
    scales = np.concatenate([scales, scales]).astype(np.float32)
    apart = np.rint(xs / scales) != np.rint(xs * (np.float32(1) / scales))
    assert apart.sum() >= 8, "the search found too few values to tell the orders apart"
    x, s = xs[apart], scales[apart]
    program = constant_program(lambda a, b: coreai.quantize(a, b, axis=0, dtype="int8"), [x, s])
    check_matches_runtime(program, tmp_path / "q.aimodel", {})


def test_zero_point_that_does_not_fit_is_refused(tmp_path: Path) -> None:
    program = constant_program(coreai.dequantize, [
        _ints(np.int8, (2, 3)), np.array(0.5, np.float32), np.array(300, np.int32)])
    with pytest.raises(UnexportableOpsError, match="do not fit the data's element type int8"):
        export_aimodel(program, tmp_path / "q.aimodel")


def test_quantize_to_int16_is_refused(tmp_path: Path) -> None:
    program = constant_program(lambda x, s: coreai.quantize(x, s, dtype="int16"),
                               [_floats((2, 3)), np.array(0.5, np.float32)])
    with pytest.raises(UnexportableOpsError, match="quantizing to int16"):
        export_aimodel(program, tmp_path / "q.aimodel")


# -- compressed models ---------------------------------------------------------------------------

class ConvMLP(nn.Module):
    """Weights large enough (0.54M parameters) for the asset size to be the weights' size."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 8 * 8, 256)
        self.fc2 = nn.Linear(256, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv(x)).flatten(1)
        return self.fc2(torch.relu(self.fc1(h)))


COMPRESSIONS: dict[str, Callable[[nn.Module], nn.Module]] = {
    "float32": lambda m: m,
    "int4 blockwise (32)": lambda m: quantize_weights(m, "int4", 32),
    "palettized 4-bit (groups of 16)": lambda m: palettize(m, 4, 16),
    "palettized 2-bit": lambda m: palettize(m, 2),
    "uint4 blockwise (32), zero points": lambda m: quantize_weights(m, "uint4", 32),
    "float4_e2m1fn blockwise (32)": lambda m: quantize_weights(m, "float4_e2m1fn", 32),
    "pruned 50%": lambda m: prune(m, 0.5),
}


def _asset_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def packed_weight_bytes(program: Program) -> int:
    """Bytes of the program's weights as stored, a 4-bit element taking half a byte."""
    arrays = [a for a in program.weights.values() if a is not None]
    assert len(arrays) == len(program.weights), "every weight is bound"
    return sum((a.size * DType.of(a.dtype).bits + 7) // 8 for a in arrays)


def export_compressed(name: str, path: Path) -> tuple[nn.Module, Program, torch.Tensor]:
    torch.manual_seed(0)
    model = COMPRESSIONS[name](ConvMLP().eval())
    x = torch.randn(2, 8, 8, 8, generator=torch.Generator().manual_seed(1))
    ep = torch.export.export(model, (x,)).run_decompositions(get_decomp_table())
    program = TorchConverter(progress=False).add_exported_program(
        ep, input_names=["x"]).to_coreai()
    program.optimize()
    export_aimodel(program, path)
    return model, program, x


@pytest.mark.slow
def test_compressed_models_run_and_stay_small(tmp_path: Path) -> None:
    sizes: dict[str, tuple[int, int]] = {}
    for i, name in enumerate(COMPRESSIONS):
        path = tmp_path / f"m{i}.aimodel"
        model, program, x = export_compressed(name, path)
        # against torch eager of the compressed model (its weights are the dequantized ones)
        # and our runtime, with verify()'s tolerances
        report = verify_aimodel(model, path, x, program=program)
        assert report.passed, f"{name}:\n{report}"
        sizes[name] = (_asset_bytes(path), packed_weight_bytes(program))
    # The float32 asset is its weights plus a fixed cost (graph, metadata). A compressed asset
    # holds its weights as stored in the program (4-bit data: half a byte, 2-bit indices: a
    # quarter): not expanded, nothing dropped; beyond them only that fixed cost and the
    # decompression ops with their small operands (zero offsets, shapes: < 4 KiB here).
    float_asset, float_weights = sizes["float32"]
    fixed = float_asset - float_weights
    assert 0 < fixed < 16384
    for name, (asset, weights) in sizes.items():
        assert weights <= asset <= weights + fixed + 4096, (name, asset, weights)
    # 4-bit weights with a float32 scale per 32 values take (4 + 32/32) / 32 of float32;
    # 4-bit/2-bit indices with tables of 16/4 values, ~4/32 and ~2/32
    assert sizes["int4 blockwise (32)"][0] < 0.17 * float_asset
    assert sizes["palettized 4-bit (groups of 16)"][0] < 0.14 * float_asset
    assert sizes["palettized 2-bit"][0] < 0.075 * float_asset
