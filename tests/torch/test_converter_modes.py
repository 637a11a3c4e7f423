"""``TorchConverter(mode=...)``: DEBUG keeps each op's source (file and line, module path,
op id, the user's call stack) in the program, its text and its saved artifact; RELEASE keeps
the op id only. Both compute the same results. Also Apple's ``converter.Context`` and
``TorchMetalKernel.template_kernel_src``."""

from __future__ import annotations

import inspect
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import Program, load, parse
from coreai_torch import TorchConverter, TorchMetalKernel, get_decomp_table
from coreai_torch.converter import Context
from coreai_torch.errors import MetalUnavailableError

Mode = TorchConverter.Mode
THIS_FILE = Path(__file__).name


def _helper(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) * 3  # torch.export records module forwards' frames, not this one


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(5, 7)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _helper(self.fc(x)) + x.sum()


def _ep(batch: int = 3) -> torch.export.ExportedProgram:
    torch.manual_seed(0)
    x = torch.randn(batch, 5)
    return torch.export.export(Net(), (x,)).run_decompositions(get_decomp_table())


def _convert(mode: TorchConverter.Mode, ep: torch.export.ExportedProgram | None = None,
             ) -> Program:
    return TorchConverter(mode=mode).add_exported_program(ep or _ep()).to_coreai()


def _computing_ops(program: Program) -> list:
    return [op for op in program.graphs["main"].ops if op.name != "coreai.constant"]


def test_debug_ops_carry_file_line_module_id_and_the_full_stack() -> None:
    ops = _computing_ops(_convert(Mode.DEBUG))
    node_names = {n.name for n in _ep().graph.nodes}
    for op in ops:
        loc = op.location
        assert loc.op_id in node_names, (op.name, loc)
        assert loc.file is not None and loc.file.endswith(THIS_FILE), (op.name, loc)
        assert loc.stack and any(THIS_FILE in f for f in loc.stack), (op.name, loc)
    forward_line = inspect.getsourcelines(Net.forward)[1] + 1
    tanh = next(op for op in ops if op.name == "coreai.tanh")
    assert tanh.location.line == forward_line
    assert tanh.location.stack == (f"{tanh.location.file}:{forward_line} in forward",)
    # the Linear's ops: the user's forward, then torch's nn.Linear.forward (outermost first)
    matmul = next(op for op in ops if op.name == "coreai.batch_matmul")
    assert matmul.location.stack[0] == f"{matmul.location.file}:{forward_line} in forward"
    assert matmul.location.stack[1].startswith("torch/nn/modules/linear.py:")
    assert any(op.location.module_path == "fc" for op in ops)


def test_release_ops_carry_the_op_id_only() -> None:
    debug, release = _convert(Mode.DEBUG), _convert(Mode.RELEASE)
    for d, r in zip(debug.graphs["main"].ops, release.graphs["main"].ops, strict=True):
        assert (r.location.file, r.location.line, r.location.module_path, r.location.stack) == \
            (None, None, None, ())
        assert r.location.op_id is not None and r.location.op_id == d.location.op_id


@settings(max_examples=4)
@given(batch=st.sampled_from([1, 2, 47]), seed=st.integers(0, 2**31 - 1))
def test_both_modes_compute_identical_results(batch: int, seed: int) -> None:
    ep = _ep(batch)
    x = np.random.default_rng(seed).standard_normal((batch, 5), dtype=np.float32)
    debug, release = _convert(Mode.DEBUG, ep), _convert(Mode.RELEASE, ep)
    assert debug == release  # same program: locations are debug information only
    got_debug, got_release = debug.run({"x": x}), release.run({"x": x})
    np.testing.assert_array_equal(got_debug["add"], got_release["add"])
    want = ep.module()(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(got_debug["add"], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", list(Mode))
def test_locations_survive_the_text_form_and_the_artifact(mode: TorchConverter.Mode,
                                                          tmp_path: Path) -> None:
    program = _convert(mode)
    text = program.to_text(locations=True)
    assert (" stack [" in text) == (mode is Mode.DEBUG)
    assert parse(text).to_text(locations=True) == text
    program.save(tmp_path / "m.coreai")
    assert load(tmp_path / "m.coreai").to_text(locations=True) == text
    assert "stack" not in str(program.graphs["main"].ops[-1].location)  # messages: one line


def test_release_text_and_artifact_are_smaller(tmp_path: Path) -> None:
    sizes = {}
    for mode in Mode:
        program = _convert(mode)
        program.save(tmp_path / f"{mode.value}.coreai")
        sizes[mode] = (len(program.to_text(locations=True)),
                       sum(f.stat().st_size for f in (tmp_path / f"{mode.value}.coreai")
                           .rglob("*") if f.is_file()))
    assert sizes[Mode.RELEASE][0] < sizes[Mode.DEBUG][0]
    assert sizes[Mode.RELEASE][1] < sizes[Mode.DEBUG][1]


@torch.library.custom_op("modes_test::unlowered", mutates_args=())
def _unlowered(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@_unlowered.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class Unlowered(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _unlowered(x) + 1


def test_errors_still_name_the_users_line_in_release_mode() -> None:
    from coreai_torch.errors import UnsupportedOpsError

    ep = torch.export.export(Unlowered(), (torch.ones(2),))
    line = inspect.getsourcelines(Unlowered.forward)[1] + 1
    with pytest.raises(UnsupportedOpsError, match=rf"{THIS_FILE}:{line}"):
        TorchConverter(mode=Mode.RELEASE).add_exported_program(ep).to_coreai()


def test_mode_is_checked_and_takes_apples_values() -> None:
    assert TorchConverter().mode is Mode.DEBUG
    assert TorchConverter(mode="release").mode is Mode.RELEASE  # type: ignore[arg-type]
    assert [m.value for m in Mode] == ["debug", "release"]  # Apple's Enum values
    with pytest.raises(TypeError, match=r"TorchConverter\.Mode\.DEBUG or \.RELEASE"):
        TorchConverter(mode="fast")  # type: ignore[arg-type]
    assert next(iter(inspect.signature(TorchConverter).parameters)) == "mode"


def test_two_converters_in_threads_keep_their_own_mode() -> None:
    ep = _ep()
    results: dict[str, Program] = {}

    def run(mode: TorchConverter.Mode) -> None:
        for _ in range(3):
            results[mode.value] = _convert(mode, ep)

    threads = [threading.Thread(target=run, args=(m,)) for m in Mode]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(op.location.stack for op in _computing_ops(results["debug"]))
    assert not any(op.location.stack for op in _computing_ops(results["release"]))
    # and nothing leaks out of a conversion: the default is debug again
    assert all(op.location.file for op in _computing_ops(_convert(Mode.DEBUG, ep)))


def test_apples_context_is_a_context_manager_on_every_converter() -> None:
    converter = TorchConverter()
    assert isinstance(converter.context, Context)
    with converter.context as entered:
        assert entered is converter.context
        program = converter.add_exported_program(_ep()).to_coreai()
    assert program.run({"x": np.ones((3, 5), np.float32)})


def test_template_kernel_src_has_apples_signature_and_needs_metal() -> None:
    params = list(inspect.signature(TorchMetalKernel.template_kernel_src).parameters)
    assert params == ["self", "kernel_id", "input_metadata", "result_metadata"]
    with pytest.raises(MetalUnavailableError, match=r"template_kernel_src.*macOS"):
        TorchMetalKernel.template_kernel_src(object.__new__(TorchMetalKernel), "k", [], [])


def test_the_rest_of_apples_kernel_surface_needs_metal_too() -> None:
    kernel = object.__new__(TorchMetalKernel)
    with pytest.raises(MetalUnavailableError, match="result_shape_params"):
        _ = kernel.result_shape_params
    with pytest.raises(MetalUnavailableError, match="validate_and_set_dtype_templates"):
        kernel.validate_and_set_dtype_templates({"T": "x"}, ["x"])
    # MLIR element type -> Metal type, as Apple's class has it (data, no Metal needed)
    assert TorchMetalKernel.metal_type_mappings["f32"] == "float"
    assert TorchMetalKernel.metal_type_mappings["f16"] == "half"


def test_apples_converter_module_names() -> None:
    import coreai_torch
    import coreai_torch.converter as converter_module

    for name in ("TorchConverter", "TorchMetalKernel", "generate_composite_decl",
                 "ExternalizeSpec", "Context", "get_operand"):
        assert hasattr(converter_module, name), name
    assert converter_module.generate_composite_decl is coreai_torch.generate_composite_decl
