"""docs/coreai-interop.md shows the mapping as the code has it and names every other op."""

from __future__ import annotations

from pathlib import Path

from coreai_core._opdef import OPS
from coreai_torch.aimodel import MAPPINGS, mapping_table_markdown
from coreai_torch.aimodel.not_exported import NOT_EXPORTED

DOC = Path(__file__).resolve().parents[2] / "docs" / "coreai-interop.md"


def test_doc_ends_with_the_generated_mapping_table() -> None:
    assert DOC.read_text(encoding="utf-8").rstrip("\n").endswith(mapping_table_markdown()), (
        "docs/coreai-interop.md is stale: run python tools/gen_interop_docs.py")


def test_the_table_names_every_dialect_op() -> None:
    # only the dialect's own ops: guides and tests may define ops of other namespaces
    dialect = sorted(name for name in OPS if name.startswith("coreai."))
    table = mapping_table_markdown()
    assert [name for name in dialect if f"| `{name}` |" not in table] == []
    for name in dialect:
        status = "*not exported*" not in table.split(f"| `{name}` |")[1].split("\n")[0]
        assert status == (name in MAPPINGS), name


def test_every_mapping_targets_a_dialect_op() -> None:
    assert set(MAPPINGS) <= set(OPS)


def test_reasons_are_for_dialect_ops_without_a_mapping() -> None:
    """A reason for a mapped op (or a misspelt name) would be stale."""
    assert sorted(set(NOT_EXPORTED) - set(OPS)) == []
    assert sorted(set(NOT_EXPORTED) & set(MAPPINGS)) == []
