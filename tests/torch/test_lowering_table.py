"""Per-instance lowering tables: names, duplicates, overrides, introspection, isolation."""

from __future__ import annotations

import inspect
import threading

import numpy as np
import pytest
import torch

from coreai_core.dialects import coreai
from coreai_torch import TorchConverter
from coreai_torch._binding import FORMS, Lowering
from coreai_torch._table import LoweringTable, check_qualified_name, qualified_name
from coreai_torch.lowerings import default_table
from coreai_torch.utils import get_operand
from tests.torch.harness import export


class AddOne(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) + 1.0


@pytest.mark.parametrize("name", [
    "relu", "aten::relu", "aten.relu.default", "aten::relu.", "::relu.default", "aten::.x",
    "aten::relu.default.extra", "", 3, None, "a b::c.d",
])
def test_malformed_names_raise(name: object) -> None:
    converter = TorchConverter()
    with pytest.raises(ValueError, match=r"namespace::op_name\.overload"):
        converter.register_torch_lowering(name)  # type: ignore[arg-type]


def test_missing_overload_hint() -> None:
    with pytest.raises(ValueError, match=r"'my_lib::op.default'"):
        check_qualified_name("my_lib::op")


def test_duplicate_builtin_needs_allow_override() -> None:
    converter = TorchConverter()
    with pytest.raises(ValueError, match="allow_override=True"):
        converter.register_torch_lowering("aten::relu.default")(lambda v, n, loc: None)
    fn = converter.register_torch_lowering("aten::relu.default", allow_override=True)(
        lambda v, n, loc: None)
    assert converter.lowering_for("aten::relu.default") is fn


def test_duplicate_user_lowering_raises() -> None:
    converter = TorchConverter()
    converter.register_torch_lowering("my_lib::op.default")(lambda v, n, loc: None)
    with pytest.raises(ValueError, match="already registered by this converter"):
        converter.register_torch_lowering("my_lib::op.default")(lambda v, n, loc: None)


def test_introspection_lists_builtin_and_user() -> None:
    converter = TorchConverter()
    converter.register_torch_lowering("my_lib::op.default")(lambda v, n, loc: None)
    names = converter.supported_ops()
    assert "my_lib::op.default" in names and "aten::relu.default" in names
    assert names == sorted(names)
    assert converter.user_lowerings == ["my_lib::op.default"]
    assert converter.lowering_for("aten::nope.default") is None
    assert "my_lib::op.default" in repr(converter)
    assert "my_lib::op.default" not in default_table()


def test_default_table_is_frozen() -> None:
    with pytest.raises(RuntimeError, match="frozen"):
        default_table().register_torch_lowering("my_lib::x.default")(lambda v, n, loc: None)


def test_qualified_names_of_targets() -> None:
    import operator

    assert qualified_name(torch.ops.aten.add.Tensor) == "aten::add.Tensor"
    assert qualified_name(torch.ops.aten.relu.default) == "aten::relu.default"
    assert qualified_name(torch.ops.higher_order.cond) == "higher_order::cond.default"
    assert qualified_name(operator.getitem) == "coreaix::getitem.default"


def test_table_overlay_reads_fall_through_and_writes_stay_local() -> None:
    parent = LoweringTable()
    parent.register_torch_lowering("a::x.default")(lambda v, n, loc: "parent")
    child = LoweringTable(parent)
    child.register_torch_lowering("a::x.default", allow_override=True)(
        lambda v, n, loc: "child")
    assert child["a::x.default"].fn(None, None, None) == "child"
    assert parent["a::x.default"].fn(None, None, None) == "parent"
    assert LoweringTable(parent)["a::x.default"].fn(None, None, None) == "parent"


def _override(converter: TorchConverter, offset: float) -> None:
    @converter.register_torch_lowering("aten::relu.default", allow_override=True)
    def relu_plus(values_map, node, loc):
        x = get_operand(values_map, node, 0, loc)
        return coreai.broadcasting_add(coreai.relu(x, loc=loc), offset, loc=loc)


def test_overrides_are_isolated_across_threads() -> None:
    """Each thread owns its converter (the contract is isolation *between* converters; one
    converter's staging is not meant to be shared by threads). The threads start together
    (a barrier) and convert repeatedly, so their registrations and conversions interleave."""
    x = torch.randn(3, 5)
    ep = export(AddOne(), (x,))
    expected = (torch.relu(x) + 1.0).numpy()
    offsets = [10.0, 20.0, 10.0, 20.0]
    start = threading.Barrier(len(offsets))
    errors: list[BaseException] = []

    def work(offset: float) -> None:
        try:
            converter = TorchConverter()
            _override(converter, offset)
            start.wait(timeout=60)
            for _ in range(20):
                converter.clear()
                program = converter.add_exported_program(ep).to_coreai()
                (out,) = program.run({"x": x.numpy()}).values()
                np.testing.assert_allclose(out, expected + offset, rtol=1e-6)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(o,)) for o in offsets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    # the defaults and a converter created later are unaffected
    later = TorchConverter()
    (out,) = later.add_exported_program(ep).to_coreai().run({"x": x.numpy()}).values()
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert later.lowering_for("aten::relu.default") is default_table()[
        "aten::relu.default"].fn


def test_the_form_is_read_once_at_registration_never_per_call(monkeypatch) -> None:
    x = torch.randn(3, 5)
    ep = export(AddOne(), (x,))
    inspected: list[object] = []
    signature = inspect.signature

    def counting(obj, *args, **kwargs):
        inspected.append(obj)
        return signature(obj, *args, **kwargs)

    monkeypatch.setattr(inspect, "signature", counting)
    converter = TorchConverter()

    @converter.register_torch_lowering("aten::relu.default", allow_override=True)
    def relu(self):
        return coreai.relu(self)

    @converter.register_torch_lowering("aten::add.Tensor", allow_override=True)
    def add(values_map, node, loc):
        a, b = (get_operand(values_map, node, i, loc) for i in (0, 1))
        return coreai.broadcasting_add(a, b)

    assert [f for f in inspected if f is relu or f is add] == [relu, add]
    lowerings = {id(converter.lowering_for(n)) for n in converter.supported_ops()}
    inspected.clear()
    for _ in range(2):
        converter.clear()
        (out,) = converter.add_exported_program(ep).to_coreai().run({"x": x.numpy()}).values()
        np.testing.assert_allclose(out, (torch.relu(x) + 1.0).numpy(), rtol=1e-6)
    assert not [f for f in inspected if id(f) in lowerings], "a lowering was inspected per call"


def test_every_table_entry_carries_the_form_decided_at_registration() -> None:
    for name, entry in default_table().items():
        assert isinstance(entry, Lowering) and entry.form in FORMS, name
        assert (entry.signature is None) == (entry.form == "node"), name
    table = LoweringTable()
    with pytest.raises(TypeError, match=r"register a function with register_torch_lowering"):
        table.register("my_lib::op.default", lambda self: self)  # type: ignore[arg-type]
    fn = table.register_torch_lowering("my_lib::op.default", form="schema")(
        lambda values_map, node, loc: None)
    entry = table["my_lib::op.default"]
    assert entry.fn is fn and entry.form == "schema" and entry.signature is not None
    with pytest.raises(ValueError, match=r"built by as_lowering\(fn, form\)"):
        Lowering(fn, "schema")
