"""Save/load artifacts (round trip, tampering, escaping paths, mmap) and bind_weights."""

from __future__ import annotations

import json
import os
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch

from coreai_core import ArtifactError, DType, Program, TensorType, WeightRef, load
from coreai_core import _artifact_read as ser_read
from coreai_core import serialization as ser
from coreai_core.dialects import coreai

BF16 = np.dtype(ml_dtypes.bfloat16)


def make_program() -> Program:
    """Weights of several dtypes (bfloat16, float16, bool, int64), an unbound weight, state."""
    rng = np.random.default_rng(0)
    p = Program()
    p.add_weight("unbound.w", None, TensorType((3, 4), "float32"))
    with p.graph("main", inputs={"x": TensorType((3, 4), "float32")},
                 state={"acc": rng.standard_normal((3, 4)).astype(np.float32)}) as g:
        x = g["x"]
        f32 = coreai.constant(rng.standard_normal((3, 4)).astype(np.float32), name="layer.w")
        bf = coreai.constant(rng.standard_normal((5, 7)).astype(BF16), name="bf")
        f16 = coreai.constant(rng.standard_normal((20,)).astype(np.float16), name="half")
        flags = coreai.constant(rng.random((4, 5)) > 0.5, name="flags")
        idx = coreai.constant(np.arange(-10, 20, dtype=np.int64), name="idx")
        small = coreai.constant(np.array([1.5, -2.0], np.float32), name="small")
        unbound = coreai.constant(WeightRef("unbound.w"))
        acc = coreai.broadcasting_add(g["acc"], coreai.broadcasting_mul(x, f32))
        y = coreai.broadcasting_add(acc, unbound)
        g.outputs({"y": y, "bf": bf, "half": f16, "flags": flags, "idx": idx, "small": small},
                  state={"acc": acc})
    return p


@pytest.fixture
def artifact(tmp_path: Path) -> Path:
    path = tmp_path / "model.coreai"
    make_program().save(path)
    return path


def bind_unbound(p: Program) -> None:
    p.bind_weights({"unbound.w": np.full((3, 4), 0.5, np.float32)})


# -- round trip ----------------------------------------------------------------------------------

def test_round_trip_is_equal_and_runs_identically(artifact: Path) -> None:
    p = make_program()
    q = load(artifact)
    assert q == p
    assert q.weights["unbound.w"] is None
    assert q.weights["bf"].dtype == BF16
    assert q.weights["flags"].dtype == np.bool_
    assert q.initial_state["acc"].dtype == np.float32
    for prog in (p, q):
        bind_unbound(prog)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for _ in range(2):  # the state advances identically
        a, b = p.run({"x": x}), q.run({"x": x})
        assert list(a) == list(b)
        for k in a:
            assert a[k].dtype == b[k].dtype
            np.testing.assert_array_equal(a[k], b[k])


def revision(artifact: Path) -> Path:
    """The current revision folder of an artifact."""
    return artifact / json.loads((artifact / "manifest.json").read_text())["revision"]


def rechecksum(artifact: Path) -> None:
    """Make the manifest agree with the files again after a test edited one (so that only
    the loader's other checks stand between the edit and a loaded program)."""
    path = artifact / "manifest.json"
    manifest = json.loads(path.read_text())
    for name in manifest["files"]:
        f = artifact / manifest["revision"] / name
        manifest["files"][name] = {"sha256": ser_read.digest(f), "size": f.stat().st_size}
    path.write_text(json.dumps(manifest))


def test_artifact_layout_and_manifest(artifact: Path) -> None:
    manifest = json.loads((artifact / "manifest.json").read_text())
    assert manifest["format"] == ser.FORMAT and manifest["version"] == ser.FORMAT_VERSION
    assert manifest["writer"].startswith("coreai-torch ")
    rev = revision(artifact)
    assert sorted(p.name for p in artifact.iterdir()) == sorted(["manifest.json", rev.name])
    assert sorted(p.name for p in rev.iterdir()) == ["program.coreai", "weights.safetensors"]
    for name, entry in manifest["files"].items():
        assert (rev / name).stat().st_size == entry["size"]
        assert ser_read.digest(rev / name) == entry["sha256"]
    text = (rev / "program.coreai").read_text()
    assert "weight @bf : tensor<5x7xbf16>\n" in text  # large data is elided from the text


def test_weights_file_is_plain_safetensors(artifact: Path) -> None:
    """Any safetensors reader gets every bound weight by name (bfloat16 as BF16)."""
    from safetensors import safe_open
    from safetensors.numpy import load_file

    p = make_program()
    read = load_file(revision(artifact) / "weights.safetensors")
    bound = {k: v for k, v in p.weights.items() if v is not None}
    assert sorted(read) == sorted(bound)
    for name, data in bound.items():
        assert read[name].dtype == data.dtype and read[name].shape == data.shape
        np.testing.assert_array_equal(read[name], data)
    with safe_open(revision(artifact) / "weights.safetensors", framework="pt") as f:
        bf = f.get_tensor("bf")
    assert bf.dtype == torch.bfloat16
    assert bf.view(torch.int16).numpy().tobytes() == p.weights["bf"].tobytes()


def test_save_replaces_an_artifact_but_not_other_folders(tmp_path: Path) -> None:
    p = make_program()
    path = tmp_path / "a"
    p.save(path)
    p.save(path)
    assert load(path) == p
    other = tmp_path / "docs"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError):
        p.save(other)
    assert (other / "notes.txt").read_text() == "keep me"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a", "docs"]  # no temp leftovers


def test_large_weights_are_memory_mapped(tmp_path: Path) -> None:
    p = Program()
    big = np.arange(ser.MMAP_BYTES // 4 + 10, dtype=np.float32)
    with p.graph("main", inputs={"x": TensorType((1,), "float32")}) as g:
        w = coreai.constant(big, name="big")
        g.outputs({"y": coreai.broadcasting_add(g["x"], coreai.reduce_sum(w, axes=(0,)))})
    p.save(tmp_path / "m")
    q = load(tmp_path / "m")
    assert isinstance(q.weights["big"], np.memmap)
    assert not q.weights["big"].flags.writeable
    np.testing.assert_array_equal(q.weights["big"], big)


# -- tampering -----------------------------------------------------------------------------------

def _weights_file(artifact: Path) -> Path:
    return revision(artifact) / "weights.safetensors"


def test_flipped_byte_is_rejected(artifact: Path) -> None:
    f = _weights_file(artifact)
    data = bytearray(f.read_bytes())
    data[-1] ^= 0x01
    f.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match=r"rev-\w+/weights\.safetensors: SHA-256 checksum"):
        load(artifact)


def test_flipped_byte_in_text_is_rejected(artifact: Path) -> None:
    f = revision(artifact) / "program.coreai"
    f.write_text(f.read_text().replace("tensor<3x4xf32>", "tensor<4x3xf32>", 1))
    with pytest.raises(ArtifactError, match=r"program\.coreai"):
        load(artifact)


def test_truncated_file_is_rejected(artifact: Path) -> None:
    f = _weights_file(artifact)
    f.write_bytes(f.read_bytes()[:-8])
    with pytest.raises(ArtifactError, match=r"weights\.safetensors: size .*\(truncated"):
        load(artifact)


def test_missing_file_is_rejected(artifact: Path) -> None:
    _weights_file(artifact).unlink()
    with pytest.raises(ArtifactError, match=r"weights\.safetensors: file is missing"):
        load(artifact)


def test_extra_file_in_the_revision_is_rejected(artifact: Path) -> None:
    (revision(artifact) / "99.npy").write_bytes(b"x")
    with pytest.raises(ArtifactError, match=r"99\.npy: file is not listed"):
        load(artifact)


def test_user_files_next_to_the_manifest_are_ignored(artifact: Path) -> None:
    (artifact / "README.md").write_text("my model")
    (artifact / "notes").mkdir()
    assert load(artifact) == make_program()


def test_missing_manifest_is_rejected(artifact: Path) -> None:
    (artifact / "manifest.json").unlink()
    with pytest.raises(ArtifactError, match=r"manifest\.json is missing"):
        load(artifact)


@pytest.mark.parametrize("bad", ["../outside", "/etc", "rev-0/../..", ".", "weights"])
def test_revisions_escaping_the_folder_are_rejected(artifact: Path, bad: str) -> None:
    _edit_manifest(artifact, lambda m: m.update(revision=bad))
    with pytest.raises(ArtifactError, match="'revision' must be a folder name"):
        load(artifact)


@pytest.mark.parametrize("bad", ["../x.safetensors", "weights.npy", "program.coreai/x"])
def test_files_other_than_the_format_s_are_rejected(artifact: Path, bad: str) -> None:
    def edit(m):
        m["files"][bad] = m["files"].pop("weights.safetensors")

    _edit_manifest(artifact, edit)
    with pytest.raises(ArtifactError, match="'files' must list exactly"):
        load(artifact)


def _edit_manifest(artifact: Path, edit) -> None:
    path = artifact / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


def test_symlinked_file_is_rejected(artifact: Path, tmp_path: Path) -> None:
    f = _weights_file(artifact)
    outside = tmp_path / "outside.safetensors"
    outside.write_bytes(f.read_bytes())
    f.unlink()
    os.symlink(outside, f)
    with pytest.raises(ArtifactError, match=r"^rev-[0-9a-f]{16}/weights\.safetensors: is a "
                                            r"symlink \(to '.*outside\.safetensors'\)"):
        load(artifact)


def test_symlinked_revision_is_rejected(artifact: Path, tmp_path: Path) -> None:
    rev = revision(artifact)
    os.replace(rev, tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", rev)
    with pytest.raises(ArtifactError, match=r"^rev-[0-9a-f]{16}: is a symlink \(to "
                                            r"'.*elsewhere'\); an artifact holds only real"):
        load(artifact)


def _rewrite_weights(artifact: Path, arrays: dict, metadata: dict | None = None) -> None:
    from safetensors.numpy import save_file

    save_file(arrays, _weights_file(artifact), metadata=metadata)
    rechecksum(artifact)


def _stored(artifact: Path) -> dict:
    from safetensors.numpy import load_file

    return dict(load_file(_weights_file(artifact)))


def test_weight_of_another_dtype_than_declared_is_rejected(artifact: Path) -> None:
    arrays = _stored(artifact)
    arrays["layer.w"] = arrays["layer.w"].astype(np.float16)
    _rewrite_weights(artifact, arrays)
    with pytest.raises(ArtifactError, match=r"weight 'layer.w': weights\.safetensors holds "
                                            r"float16\[3, 4\], program\.coreai declares "
                                            r"tensor<3x4xf32>"):
        load(artifact)


def test_weight_the_text_does_not_declare_is_rejected(artifact: Path) -> None:
    arrays = _stored(artifact)
    arrays["stray"] = np.zeros(3, np.float32)
    _rewrite_weights(artifact, arrays)
    with pytest.raises(ArtifactError, match=r"holds weights program\.coreai does not declare: "
                                            r"\['stray'\]"):
        load(artifact)


def test_inline_weight_missing_from_the_weights_file_is_rejected(artifact: Path) -> None:
    arrays = _stored(artifact)
    del arrays["small"]  # printed inline in the text
    _rewrite_weights(artifact, arrays)
    with pytest.raises(ArtifactError, match=r"weight 'small': program\.coreai gives its data, "
                                            r"but weights\.safetensors does not hold it"):
        load(artifact)


def test_inline_weight_differing_from_the_weights_file_is_rejected(artifact: Path) -> None:
    arrays = _stored(artifact)
    arrays["small"] = arrays["small"] + 1
    _rewrite_weights(artifact, arrays)
    with pytest.raises(ArtifactError, match=r"weight 'small': the data in program\.coreai "
                                            r"differs from weights\.safetensors"):
        load(artifact)


def test_weights_file_that_is_not_safetensors_is_rejected(artifact: Path) -> None:
    with open(_weights_file(artifact), "wb") as f:  # a pickle-bearing .npy under the name
        np.save(f, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    rechecksum(artifact)
    with pytest.raises(ArtifactError, match=r"weights\.safetensors: header length"):
        load(artifact)


@pytest.mark.parametrize("content", ["{not json", "[]", '{"format": "other"}',
                                     '{"format": "coreai-artifact", "version": 99}'])
def test_malformed_manifest_is_rejected(artifact: Path, content: str) -> None:
    (artifact / "manifest.json").write_text(content)
    with pytest.raises(ArtifactError, match=r"manifest\.json"):
        load(artifact)


def test_newer_format_names_its_writer(artifact: Path) -> None:
    _edit_manifest(artifact, lambda m: m.update(version=3, writer="coreai-torch 9.0"))
    with pytest.raises(ArtifactError, match=r"artifact format 3 by coreai-torch 9\.0; this "
                                            r"coreai-torch .* reads formats 1 and 2"):
        load(artifact)


def test_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(ArtifactError, match="not a coreai artifact"):
        load(tmp_path / "f")
    with pytest.raises(ArtifactError, match="does not exist"):
        load(tmp_path / "nothing")


# -- bind_weights --------------------------------------------------------------------------------

def unbound_program() -> Program:
    p = Program()
    p.add_weight("enc.weight", None, TensorType((2, 3), "float32"))
    p.add_weight("enc.bias", None, TensorType((3,), "bfloat16"))
    with p.graph("main", inputs={"x": TensorType((2, 3), "float32")}) as g:
        w = coreai.constant(WeightRef("enc.weight"))
        b = coreai.cast(coreai.constant(WeightRef("enc.bias")), "float32")
        g.outputs({"y": coreai.broadcasting_add(coreai.broadcasting_mul(g["x"], w), b)})
    return p


W = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.array([0.5, -1.0, 2.0], dtype=BF16)


def check_bound(p: Program) -> None:
    np.testing.assert_array_equal(p.weights["enc.weight"], W)
    assert p.weights["enc.bias"].dtype == BF16
    np.testing.assert_array_equal(p.weights["enc.bias"].astype(np.float32),
                                  B.astype(np.float32))
    y = p.run({"x": np.ones((2, 3), np.float32)})["y"]
    np.testing.assert_array_equal(y, W + B.astype(np.float32))


def test_bind_from_numpy_dict() -> None:
    p = unbound_program()
    p.bind_weights({"enc.weight": W, "enc.bias": B})
    check_bound(p)


def test_bind_from_torch_state_dict() -> None:
    p = unbound_program()
    p.bind_weights({"enc.weight": torch.from_numpy(W),
                    "enc.bias": torch.tensor([0.5, -1.0, 2.0], dtype=torch.bfloat16)})
    check_bound(p)


def test_bind_from_npz(tmp_path: Path) -> None:
    np.savez(tmp_path / "w.npz", **{"enc.weight": W, "enc.bias": B})
    p = unbound_program()
    p.bind_weights(tmp_path / "w.npz")
    check_bound(p)


def test_bind_from_safetensors(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    save_file({"enc.weight": torch.from_numpy(W),
               "enc.bias": torch.tensor([0.5, -1.0, 2.0], dtype=torch.bfloat16)},
              str(tmp_path / "w.safetensors"))
    p = unbound_program()
    p.bind_weights(str(tmp_path / "w.safetensors"))
    check_bound(p)


def test_read_safetensors_all_dtypes(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    arrays = {f"t{i}": np.arange(6).reshape(2, 3).astype(dt) for i, dt in enumerate(
        [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8,
         np.bool_])}
    arrays["empty"] = np.zeros((0, 4), np.float32)
    save_file(arrays, str(tmp_path / "a.safetensors"))
    read = ser.read_safetensors(tmp_path / "a.safetensors")
    assert sorted(read) == sorted(arrays)
    for k, a in arrays.items():
        assert read[k].dtype == a.dtype
        np.testing.assert_array_equal(read[k], a)


def test_bind_reports_unknown_names_with_suggestions() -> None:
    p = unbound_program()
    with pytest.raises(ValueError, match=r"unknown weight 'enc.weigth' \(did you mean "
                                         r"'enc.weight'\?\)") as e:
        p.bind_weights({"enc.weigth": W, "enc.bias": B})
    assert "missing weight 'enc.weight'" in str(e.value)
    assert p.weights["enc.bias"] is None  # nothing bound when a check fails


def test_bind_reports_shape_and_dtype_mismatches() -> None:
    p = unbound_program()
    with pytest.raises(ValueError) as e:
        p.bind_weights({"enc.weight": W.T, "enc.bias": B.astype(np.float32)})
    assert "weight 'enc.weight': expected float32[2, 3], got float32[3, 2]" in str(e.value)
    assert "weight 'enc.bias': expected bfloat16[3], got float32[3]" in str(e.value)


def test_bind_non_strict_ignores_unknown_and_missing() -> None:
    p = unbound_program()
    p.bind_weights({"enc.weight": W, "other": W}, strict=False)
    np.testing.assert_array_equal(p.weights["enc.weight"], W)
    assert p.weights["enc.bias"] is None
    with pytest.raises(ValueError, match="expected float32"):
        p.bind_weights({"enc.weight": W.astype(np.float64)}, strict=False)


def test_bind_rejects_other_sources(tmp_path: Path) -> None:
    p = unbound_program()
    with pytest.raises(ValueError, match=r"expected a \.npz or \.safetensors"):
        p.bind_weights(tmp_path / "w.pt")
    with pytest.raises(TypeError, match="bind_weights expects"):
        p.bind_weights(42)


@pytest.mark.parametrize("corrupt", ["header_too_long", "bad_json", "bad_offsets",
                                     "bad_dtype", "short"])
def test_malformed_safetensors_is_rejected(tmp_path: Path, corrupt: str) -> None:
    header = {"enc.weight": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}
    if corrupt == "bad_offsets":
        header["enc.weight"]["data_offsets"] = [0, 400]
    if corrupt == "bad_dtype":
        header["enc.weight"]["dtype"] = "F8_E4M3"
    raw = json.dumps(header).encode()
    if corrupt == "bad_json":
        raw = b"{" + raw
    length = len(raw) + (10_000 if corrupt == "header_too_long" else 0)
    blob = length.to_bytes(8, "little") + raw + W.tobytes()
    if corrupt == "short":
        blob = blob[:5]
    (tmp_path / "w.safetensors").write_bytes(blob)
    with pytest.raises(ArtifactError, match=r"w\.safetensors"):
        unbound_program().bind_weights(tmp_path / "w.safetensors")


def test_every_stored_form_reads_back_with_safetensors_alone(tmp_path: Path) -> None:
    """A reader with only safetensors and numpy recovers each weight: native types as they
    are, complex as (real, imag) pairs, 4-bit types two per byte (low nibble first), with
    the real type and shape in the metadata."""
    from safetensors import safe_open

    from tests.core.save_faults import program

    p = program("a")
    p.save(tmp_path / "m")
    with safe_open(revision(tmp_path / "m") / "weights.safetensors", framework="np") as f:
        stored = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (not a dict)
        real = json.loads(f.metadata()["coreai.element_types"])
    assert real == {"cx": {"dtype": "complex64", "shape": [3]},
                    "i4": {"dtype": "int4", "shape": [3, 5]}}
    assert sorted(stored) == ["bf", "cx", "i4", "small", "w"]
    for name in ("w", "small", "bf"):
        assert stored[name].dtype == p.weights[name].dtype
        np.testing.assert_array_equal(stored[name], p.weights[name])
    cx = p.weights["cx"]
    assert stored["cx"].dtype == np.float32 and stored["cx"].shape == (3, 2)
    np.testing.assert_array_equal(stored["cx"][:, 0], cx.real)
    np.testing.assert_array_equal(stored["cx"][:, 1], cx.imag)
    codes = p.weights["i4"].astype(np.int8).reshape(-1) & 0x0F  # 15 two's-complement nibbles
    assert stored["i4"].dtype == np.uint8 and stored["i4"].shape == (8,)
    np.testing.assert_array_equal(stored["i4"] & 0x0F, codes[0::2])
    np.testing.assert_array_equal(stored["i4"][:7] >> 4, codes[1::2])
    assert stored["i4"][7] >> 4 == 0  # the padding nibble of an odd count


@pytest.mark.parametrize("shape", [(), (0,), (7,), (2, 3, 5)], ids=str)
@pytest.mark.parametrize("dtype", list(DType), ids=str)
def test_every_element_type_and_shape_round_trips(tmp_path: Path, dtype: DType,
                                                  shape: tuple) -> None:
    rng = np.random.default_rng(0)
    n = int(np.prod(shape))
    if dtype.is_complex:
        data = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype.numpy)
    elif dtype.is_float or dtype in (DType.int4, DType.uint4, DType.float4_e2m1fn):
        data = rng.integers(-6, 7, n).astype(np.float32).astype(dtype.numpy)
    else:
        data = rng.integers(0, 2, n).astype(dtype.numpy)
    data = data.reshape(shape)
    p = Program()
    with p.graph("main") as g:
        g.outputs({"w": coreai.constant(data, name="w")})
    p.save(tmp_path / "m")
    got = load(tmp_path / "m").weights["w"]
    assert got.dtype == data.dtype and got.shape == data.shape
    assert got.tobytes() == data.tobytes()
