"""The one registry: one registration verb, frozen defaults, op definitions as a Registry."""

from __future__ import annotations

import types

import pytest

from coreai_core import TensorType, Value, defop
from coreai_core._opdef import OPS, OpDef
from coreai_core.dialects import coreai
from coreai_core.registry import Registry, frozen_union


def _one(x: int) -> int:
    return x + 1


def _two(x: int) -> int:
    return x + 2


def test_register_is_both_the_call_and_the_decorator() -> None:
    reg: Registry = Registry("thing", "a test registry")
    assert reg.register("a", _one) is _one

    @reg.register("b")
    def b(x: int) -> int:
        return x

    assert reg["a"] is _one and reg["b"] is b
    assert reg.items() == [("a", _one), ("b", b)]
    with pytest.raises(ValueError, match=r"'a' is already registered by a test registry .*_one"):
        reg.register("a", _two)
    reg.register("a", _two, allow_override=True)
    assert reg["a"] is _two
    with pytest.raises(KeyError, match="no thing named 'c' in a test registry"):
        reg["c"]


def test_items_follow_registration_order_through_the_parent() -> None:
    parent: Registry = Registry("thing", "parent", entries={"z": _one, "a": _one})
    child: Registry = Registry("thing", "child", parent=parent)
    child.register("m", _two)
    child.register("z", _two, allow_override=True)
    assert child.items() == [("z", _two), ("a", _one), ("m", _two)]
    assert child.names() == ["a", "m", "z"]
    assert child.values() == [_two, _one, _two]


def test_frozen_union_joins_parts_then_refuses_every_write() -> None:
    left: Registry = Registry("thing", "the left part", entries={"a": _one})
    right: Registry = Registry("thing", "the right part", entries={"b": _two})
    table = frozen_union(Registry("thing", "the union"), (left, right))
    assert table.items() == [("a", _one), ("b", _two)]
    for write in (lambda: table.register("c", _one), lambda: table.unregister("a"),
                  lambda: table.update(left)):
        with pytest.raises(RuntimeError, match="the union thing registry is frozen"):
            write()
    clash: Registry = Registry("thing", "a clashing part", entries={"a": _two})
    with pytest.raises(ValueError, match=r"'a' is defined by both the left part .* and a "
                                         r"clashing part"):
        frozen_union(Registry("thing", "another union"), (left, clash))


def test_op_definitions_are_a_registry_of_data() -> None:
    assert isinstance(OPS, Registry)
    relu = OPS["coreai.relu"]
    assert isinstance(relu, OpDef) and relu.builder is coreai.relu

    @defop("test_registry.ident")
    def ident(x: Value) -> TensorType:
        """x."""
        return x.type

    try:
        assert OPS["test_registry.ident"].builder is ident
        with pytest.raises(ValueError, match=r"'test_registry.ident' is already defined by "
                                             r".*test_registry.*ident"):
            defop("test_registry.ident")(ident.opdef.rule)
    finally:
        OPS.unregister("test_registry.ident")
    assert "test_registry.ident" not in OPS


def test_coreai_exports_every_family_name_once() -> None:
    first = types.ModuleType("fam_a")
    first.__all__ = ["f"]  # type: ignore[attr-defined]
    first.f = _one  # type: ignore[attr-defined]
    second = types.ModuleType("fam_b")
    second.__all__ = ["f"]  # type: ignore[attr-defined]
    second.f = _two  # type: ignore[attr-defined]
    assert coreai._exports((first,)) == {"f": _one}  # type: ignore[attr-defined]
    with pytest.raises(ImportError, match=r"coreai\.f is exported by both fam_a and fam_b"):
        coreai._exports((first, second))  # type: ignore[attr-defined]
