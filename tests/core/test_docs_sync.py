"""docs/dialect.md is generated from the op definitions and must stay in sync with them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from coreai_core._opdef import OPS

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_dialect_docs",
                                                  ROOT / "tools" / "gen_dialect_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dialect_docs_match_the_op_definitions():
    expected = _generator().render()
    actual = (ROOT / "docs" / "dialect.md").read_text(encoding="utf-8")
    assert actual == expected, "docs/dialect.md is stale: run `python tools/gen_dialect_docs.py`"


def test_dialect_docs_list_every_op_with_its_signature():
    text = _generator().render()
    for opdef in OPS.values():
        assert f"- `{opdef.signature_text()}`" in text


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_builder_stub_matches_the_op_definitions():
    expected = _tool("gen_dialect_stub").render()
    actual = (ROOT / "coreai_core" / "dialects" / "coreai.pyi").read_text(encoding="utf-8")
    assert actual == expected, (
        "coreai_core/dialects/coreai.pyi is stale: run `python tools/gen_dialect_stub.py`")


def test_coreai_namespace_lists_a_builder_for_every_dialect_op():
    from coreai_core.dialects import coreai

    assert len(set(coreai.__all__)) == len(coreai.__all__)
    assert all(hasattr(coreai, name) for name in coreai.__all__)
    built = {getattr(coreai, n).opdef.name for n in coreai.__all__
             if hasattr(getattr(coreai, n), "opdef")}
    dialect_ops = {name for name, d in OPS.items()
                   if d.rule.__module__.startswith("coreai_core.dialects.")}
    assert dialect_ops - built == {"coreai.constant"}  # built by coreai.constant(...)
    assert callable(coreai.constant) and "constant" in coreai.__all__
