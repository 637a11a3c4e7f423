"""The one registry: one registration verb, frozen defaults, op definitions as a Registry."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import numpy as np
import pytest

from coreai_core import Operation, Program, TensorType, Value, defop
from coreai_core._opdef import OPS, OpDef
from coreai_core.dialects import coreai
from coreai_core.optimizer import CanonicalizePass, Rewriter, canonicalize
from coreai_core.optimizer.canonicalize import RewriteRule, rules_by_op
from coreai_core.registry import Registry, frozen_union
from coreai_core.runtime.kernels import elementwise

ROOT = Path(__file__).resolve().parents[2]


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


# -- tables of ops are registries, not plain dicts -------------------------------------------------

def _abs_of_abs(op: Operation, rw: Rewriter) -> Value | None:
    # abs(abs(x)) -> abs(x)
    inner = rw.producer(op.operands[0], op.name)
    return inner.result if inner is not None else None


def _abs_program() -> Program:
    program = Program()
    with program.graph("main", inputs={"x": TensorType((5,), "float32")}) as g:
        g.outputs({"y": coreai.abs_(coreai.abs_(g["x"]))})
    return program


def _op_names(program: Program) -> list[str]:
    return [op.name for op in program.graphs["main"].walk()]


def test_rewrite_rules_are_a_frozen_registry_extended_by_a_child() -> None:
    assert isinstance(canonicalize.RULES, Registry)
    with pytest.raises(RuntimeError, match="frozen"):
        canonicalize.RULES.register("abs_of_abs", RewriteRule(_abs_of_abs, ("coreai.abs",)))
    mine: Registry[RewriteRule] = Registry("rewrite rule", "my rules",
                                           parent=canonicalize.RULES, callable_entries=False)
    mine.register("abs_of_abs", RewriteRule(_abs_of_abs, ("coreai.abs",)))
    # a rule named like a built-in one is an error naming both functions
    with pytest.raises(ValueError, match=r"'involution' is already registered by canonicalize "
                                         r"\(.*canonicalize.involution\).*_abs_of_abs"):
        mine.register("involution", RewriteRule(_abs_of_abs, ("coreai.abs",)))
    x = np.array([-2.5, -0.0, 0.0, 1.0, np.inf], dtype=np.float32)
    default, extended = _abs_program(), _abs_program()
    CanonicalizePass().run(default)
    CanonicalizePass(rules=mine).run(extended)
    assert _op_names(default).count("coreai.abs") == 2  # the built-in rules are unchanged
    assert _op_names(extended).count("coreai.abs") == 1
    np.testing.assert_array_equal(extended.run({"x": x})["y"], np.abs(x))
    # a built-in rule still applies under the child: the parent's rules come first
    assert rules_by_op(mine)["coreai.neg"] == (canonicalize.involution,)


def test_ufunc_rows_are_a_registry_that_refuses_a_second_row() -> None:
    assert isinstance(elementwise.UFUNCS, Registry)
    assert elementwise.UFUNCS["coreai.exp"][0] is np.exp
    with pytest.raises(ValueError, match=r"'coreai.exp' is already registered by the elementwise "
                                         r"kernels \(numpy.exp\).*numpy.expm1"):
        elementwise.UFUNCS.register("coreai.exp", (np.expm1, "f", None))
    assert elementwise.UFUNCS["coreai.exp"][0] is np.exp


# A module-level dict that code writes into (``X[k] = v``, ``X.update``, ``X.setdefault``) is a
# registry without duplicate checks: a second entry silently wins. Caches are the exception.
CACHES = {("coreai_torch/_schema.py", "_SCHEMAS"): "torch's parsed schemas, by op"}


def _plain_dict_registries(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text())
    dicts: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value, annotation = node.targets, node.value, None
        elif isinstance(node, ast.AnnAssign):
            targets, value, annotation = [node.target], node.value, node.annotation
        else:
            continue
        if (isinstance(value, (ast.Dict, ast.DictComp))
                or (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                    and value.func.id in ("dict", "defaultdict"))
                or (annotation is not None
                    and ast.unparse(annotation).startswith(("dict", "defaultdict")))):
            dicts |= {t.id for t in targets if isinstance(t, ast.Name)}
    writes = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                        and t.value.id in dicts):
                    writes.add((t.value.id, node.lineno))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("update", "setdefault")
              and isinstance(node.func.value, ast.Name) and node.func.value.id in dicts):
            writes.add((node.func.value.id, node.lineno))
    return sorted(writes)


def test_no_plain_dict_registry_is_left() -> None:
    found = []
    for package in ("coreai_core", "coreai_torch"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            found += [f"{rel}:{line} {name}" for name, line in _plain_dict_registries(path)
                      if (rel, name) not in CACHES]
    assert not found, ("module-level dicts filled like registries (make them "
                       f"coreai_core.registry.Registry instances): {found}")


def test_the_plain_dict_check_sees_every_way_of_filling_one(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("A: dict[str, int] = {}\nB = {}\nC = dict()\nD = {'x': 1}\n"
                   "A['x'] = 1\n\ndef f():\n    B.update(x=1)\n    C.setdefault('x', 1)\n")
    assert _plain_dict_registries(src) == [("A", 5), ("B", 8), ("C", 9)]
