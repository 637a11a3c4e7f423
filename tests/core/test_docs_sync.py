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
