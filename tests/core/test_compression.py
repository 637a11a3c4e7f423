"""Compression in coreai_core: bit packing, sub-byte element types, the decompression ops'
type rules and kernels, packed storage in saved artifacts, and constant folding leaving
compressed weights compressed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import ArtifactError, DType, Program, TensorType, TypeRuleError, load, parse
from coreai_core._artifact_read import digest
from coreai_core.dialects import coreai
from coreai_core.packing import pack_bits, pack_nibbles, unpack_bits, unpack_nibbles

FOUR_BIT = (DType.int4, DType.uint4, DType.float4_e2m1fn)
SIZES = st.one_of(st.integers(0, 20), st.just(47))


def _four_bit_array(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...]):
    """Random elements of a 4-bit type, drawn from its valid codes."""
    if dtype is DType.int4:
        return rng.integers(-8, 8, shape).astype(dtype.numpy)
    if dtype is DType.uint4:
        return rng.integers(0, 16, shape).astype(dtype.numpy)
    values = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)
    return rng.choice(values, shape).astype(dtype.numpy)


# -- packing -----------------------------------------------------------------------------------

@settings(max_examples=40)
@given(nbits=st.integers(1, 8), count=SIZES, seed=st.integers(0, 2**31 - 1))
def test_bit_streams_are_little_endian_and_round_trip(nbits: int, count: int, seed: int) -> None:
    codes = np.random.default_rng(seed).integers(0, 1 << nbits, count).astype(np.uint8)
    packed = pack_bits(codes, nbits)
    # the stream as one little-endian integer: code i at bit i * nbits
    as_int = sum(int(c) << (i * nbits) for i, c in enumerate(codes))
    expected = as_int.to_bytes(math.ceil(count * nbits / 8), "little")
    assert packed.tobytes() == expected
    np.testing.assert_array_equal(unpack_bits(packed, nbits, count), codes)


@settings(max_examples=30)
@given(dtype=st.sampled_from(FOUR_BIT), count=SIZES, seed=st.integers(0, 2**31 - 1))
def test_nibbles_pack_two_per_byte_low_first(dtype: DType, count: int, seed: int) -> None:
    data = _four_bit_array(np.random.default_rng(seed), dtype, (count,))
    packed = pack_nibbles(data)
    assert packed.dtype == np.uint8 and packed.shape == ((count + 1) // 2,)
    codes = data.view(np.uint8) & 0x0F
    assert all(packed[i // 2] >> (4 * (i % 2)) & 0x0F == codes[i] for i in range(count))
    back = unpack_nibbles(packed, dtype, (count,))
    assert back.dtype == dtype.numpy
    np.testing.assert_array_equal(back.astype(np.float32), data.astype(np.float32))


def test_malformed_packed_data_is_rejected() -> None:
    with pytest.raises(ValueError, match="padding nibble"):
        unpack_nibbles(np.array([0x21], np.uint8), "int4", (1,))
    with pytest.raises(ValueError, match=r"take a uint8\[2\]"):
        unpack_nibbles(np.zeros(3, np.uint8), "uint4", (4,))
    with pytest.raises(ValueError, match="take 2 bytes"):
        unpack_bits(np.zeros(3, np.uint8), 3, 5)
    with pytest.raises(ValueError, match="codes must be integers"):
        pack_bits(np.array([4]), 2)


# -- element types -----------------------------------------------------------------------------

def test_narrow_types_map_to_ml_dtypes_and_print_round_trip() -> None:
    rng = np.random.default_rng(0)
    p = Program()
    arrays = {d.value: _four_bit_array(rng, d, (3,)) for d in FOUR_BIT}
    arrays["float8_e4m3fn"] = np.array([1.5, -448, np.nan], ml_dtypes.float8_e4m3fn)
    arrays["float8_e5m2"] = np.array([0.25, -57344, np.inf], ml_dtypes.float8_e5m2)
    with p.graph("main") as g:
        g.outputs({k: coreai.constant(v) for k, v in arrays.items()})
    text = str(p)
    for short in ("i4", "u4", "f4E2M1FN", "f8E4M3FN", "f8E5M2"):
        assert f"3x{short}>" in text
    assert parse(text) == p
    for name, out in p.run().items():
        assert out.dtype == DType.of(name).numpy
        np.testing.assert_array_equal(out.astype(np.float64), arrays[name].astype(np.float64))


# -- type rules --------------------------------------------------------------------------------

@pytest.mark.parametrize(("build", "message"), [
    (lambda: coreai.lut_to_dense(np.zeros(3, np.uint8), np.zeros((1, 4), np.float32),
                                 shape=[5]), "5 indices of 2 bits take 2 bytes"),
    (lambda: coreai.lut_to_dense(np.zeros(2, np.uint8), np.zeros((2, 4), np.float32),
                                 shape=[5]), "does not divide"),
    (lambda: coreai.lut_to_dense(np.zeros(3, np.uint8), np.zeros((1, 3), np.float32),
                                 shape=[5]), "2\\*\\*nbits entries"),
    (lambda: coreai.constexpr_blockwise_shift_scale(
        np.zeros((4, 4), ml_dtypes.int4), np.ones((2, 3), np.float32)), "does not divide"),
    (lambda: coreai.constexpr_blockwise_shift_scale(
        np.zeros((4, 4), ml_dtypes.int4), np.ones((2, 2), np.float32),
        np.zeros((2, 2), np.int8)), "offset must have the data's element type int4"),
    (lambda: coreai.constexpr_blockwise_shift_scale(
        np.zeros((4,), np.float32), np.ones((2,), np.float32)), "data must be one of"),
    (lambda: coreai.quantize(np.zeros(4, np.float32), np.float32(1), np.int8(0),
                             dtype="float8_e4m3fn"), "takes no zero point"),
    (lambda: coreai.dequantize(np.zeros((4, 6), np.int8), np.ones((3, 4), np.float32)),
     "does not divide"),
    (lambda: coreai.sparse_to_dense(np.zeros(1, np.uint8), np.zeros(3, np.float32),
                                    shape=[3, 4]), "takes 2 bytes"),
])
def test_type_rules_explain_bad_operands(build, message: str) -> None:
    with Program().graph("main"), pytest.raises(TypeRuleError, match=message):
        build()


# -- kernels against loops over the definition ---------------------------------------------------

@settings(max_examples=25)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), nbits=st.integers(1, 8),
       seed=st.integers(0, 2**31 - 1), data=st.data())
def test_lut_to_dense_looks_up_each_group_table(shape, nbits, seed, data) -> None:
    rng = np.random.default_rng(seed)
    groups = [data.draw(st.sampled_from([g for g in range(1, n + 1) if n % g == 0]))
              for n in shape]
    lut = rng.standard_normal((*groups, 1 << nbits)).astype(np.float32)
    codes = rng.integers(0, 1 << nbits, math.prod(shape)).astype(np.uint8)
    p = Program()
    with p.graph("main") as g:
        g.outputs({"w": coreai.lut_to_dense(pack_bits(codes, nbits), lut, shape=shape)})
    got = p.run()["w"]
    for flat, pos in enumerate(np.ndindex(*shape)):
        group = tuple(i // (n // k) for i, n, k in zip(pos, shape, groups))
        assert got[pos] == lut[(*group, codes[flat])]


@settings(max_examples=25)
@given(dtype=st.sampled_from([*FOUR_BIT, DType.int8, DType.uint8, DType.float8_e4m3fn]),
       rows=st.sampled_from([1, 2, 4]), blocks=st.sampled_from([1, 3]),
       offset=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_blockwise_shift_scale_applies_each_block_parameters(dtype, rows, blocks, offset,
                                                             seed) -> None:
    rng = np.random.default_rng(seed)
    shape = (rows * 2, blocks * 5)
    if dtype in FOUR_BIT:
        data = _four_bit_array(rng, dtype, shape)
    else:
        data = rng.integers(-100, 100, shape).astype(np.float32).astype(dtype.numpy)
        if dtype is DType.uint8:
            data = rng.integers(0, 255, shape).astype(np.uint8)
    scale = rng.uniform(0.1, 2, (rows, blocks)).astype(np.float32)
    off = data[::2, ::5].copy() if offset and not dtype.is_float else None
    p = Program()
    with p.graph("main") as g:
        g.outputs({"w": coreai.constexpr_blockwise_shift_scale(data, scale, off)})
    got = p.run()["w"]
    for i, j in np.ndindex(*shape):
        o = 0.0 if off is None else float(off[i // 2, j // 5])
        want = np.float32(np.float32(float(data[i, j]) - o) * scale[i // 2, j // 5])
        assert got[i, j] == want


def test_sparse_to_dense_scatters_in_row_major_order_and_checks_the_count() -> None:
    mask = np.array([[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 1, 1]], bool)
    values = np.arange(1, 9, dtype=np.float32)
    p = Program()
    with p.graph("main") as g:
        g.outputs({"w": coreai.sparse_to_dense(pack_bits(mask.astype(np.uint8), 1), values,
                                               shape=[3, 4])})
    got = p.run()["w"]
    np.testing.assert_array_equal(got[mask], values)
    assert not got[~mask].any()
    bad = Program()
    with bad.graph("main") as g:
        g.outputs({"w": coreai.sparse_to_dense(pack_bits(mask.astype(np.uint8), 1),
                                               values[:5], shape=[3, 4])})
    with pytest.raises(Exception, match="sets 8 positions but 5"):
        bad.run()


# -- packed storage ------------------------------------------------------------------------------

def _compressed_program(rng: np.random.Generator) -> Program:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((3, 64), "float32")}) as g:
        data = coreai.constant(_four_bit_array(rng, DType.int4, (47, 64)), name="w.data")
        scale = coreai.constant(rng.uniform(0.01, 0.1, (47, 2)).astype(np.float32),
                                name="w.scale")
        w = coreai.constexpr_blockwise_shift_scale(data, scale)
        fp4 = coreai.constant(_four_bit_array(rng, DType.float4_e2m1fn, (5, 7)), name="fp4")
        fp8 = coreai.constant(rng.standard_normal((5, 7)).astype(ml_dtypes.float8_e5m2),
                              name="fp8")
        g.outputs({"y": coreai.batch_matmul(g["x"], coreai.transpose(w, perm=[1, 0])),
                   "fp4": fp4, "fp8": fp8})
    return p


def _weights_file(root) -> Path:
    return root / json.loads((root / "manifest.json").read_text())["revision"] / \
        "weights.safetensors"


def test_save_stores_four_bit_weights_packed_and_load_restores_them(tmp_path) -> None:
    from safetensors import safe_open

    rng = np.random.default_rng(1)
    p = _compressed_program(rng)
    p.save(tmp_path / "m")
    with safe_open(_weights_file(tmp_path / "m"), framework="np") as f:
        stored = f.get_tensor("w.data")
        real = json.loads(f.metadata()["coreai.element_types"])
    assert real["w.data"] == {"dtype": "int4", "shape": [47, 64]}
    assert stored.dtype == np.uint8 and stored.shape == (47 * 32,)
    np.testing.assert_array_equal(stored, pack_nibbles(p.weights["w.data"]))
    loaded = load(tmp_path / "m")
    assert loaded == p
    for name in ("w.data", "fp4", "fp8"):
        assert loaded.weights[name].dtype == p.weights[name].dtype
        assert loaded.weights[name].tobytes() == p.weights[name].tobytes()
    x = {"x": rng.standard_normal((3, 64)).astype(np.float32)}
    np.testing.assert_array_equal(loaded.run(x)["y"], p.run(x)["y"])


def test_load_rejects_a_packed_file_with_a_stray_padding_nibble(tmp_path) -> None:
    from safetensors.numpy import load_file, save_file

    p = Program()
    with p.graph("main") as g:
        g.outputs({"w": coreai.constant(np.arange(-8, 7).astype(ml_dtypes.int4), name="w")})
    root = tmp_path / "m"
    p.save(root)
    weights = _weights_file(root)
    with open(weights, "rb") as f:
        metadata = json.loads(f.read(int.from_bytes(f.read(8), "little")))["__metadata__"]
    stored = dict(load_file(weights))
    stored["w"] = stored["w"].copy()
    stored["w"][-1] |= 0xF0  # the high nibble of the last byte pads the odd element count
    save_file(stored, weights, metadata=metadata)
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["files"]["weights.safetensors"] = {"sha256": digest(weights),
                                                "size": weights.stat().st_size}
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="padding nibble"):
        load(root)


# -- optimizer -----------------------------------------------------------------------------------

def test_constant_folding_keeps_compressed_weights_compressed() -> None:
    rng = np.random.default_rng(2)
    p = Program()
    codes = rng.integers(0, 4, 8 * 8).astype(np.uint8)
    mask = rng.integers(0, 2, 64).astype(np.uint8)
    with p.graph("main", inputs={"x": TensorType((2, 8), "float32")}) as g:
        x = g["x"]
        lut = coreai.lut_to_dense(pack_bits(codes, 2), rng.standard_normal((2, 1, 4)).astype(
            np.float32), shape=[8, 8])
        blockwise = coreai.constexpr_blockwise_shift_scale(
            _four_bit_array(rng, DType.int4, (8, 8)), np.full((8, 1), 0.5, np.float32))
        sparse = coreai.sparse_to_dense(pack_bits(mask, 1), rng.standard_normal(
            int(mask.sum())).astype(np.float32), shape=[8, 8])
        dq = coreai.dequantize(rng.integers(-9, 9, (8, 8)).astype(np.int8), np.float32(0.1),
                               np.int8(1))
        # a plain dequantization written with primitive ops is folded (the control)
        plain = coreai.broadcasting_mul(coreai.cast(np.ones((8, 8), np.int8), "float32"), 0.5)
        y = x
        for w in (lut, blockwise, sparse, dq, plain):
            y = coreai.batch_matmul(y, w)
        g.outputs({"y": y})
    feeds = {"x": rng.standard_normal((2, 8)).astype(np.float32)}
    before = p.run(feeds)["y"]
    p.optimize()
    names = [op.name for op in p.graphs["main"].ops]
    for op in ("coreai.lut_to_dense", "coreai.constexpr_blockwise_shift_scale",
               "coreai.sparse_to_dense", "coreai.dequantize"):
        assert names.count(op) == 1, names
    assert "coreai.cast" not in names  # the control was folded
    dense = [n for n, w in p.weights.items() if w.dtype == np.float32 and w.shape == (8, 8)]
    assert len(dense) == 1, dense  # the control's folded result only
    # folding the control's float32 arithmetic into a constant may round it once differently
    np.testing.assert_allclose(p.run(feeds)["y"], before, rtol=1e-6)
