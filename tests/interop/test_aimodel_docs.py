"""docs/coreai-interop.md shows the mapping as the code has it and names every other op."""

from __future__ import annotations

from pathlib import Path

from coreai_core._opdef import OPS
from coreai_torch.aimodel import MAPPINGS, mapping_table_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "coreai-interop.md"


def test_doc_ends_with_the_generated_mapping_table() -> None:
    assert DOC.read_text(encoding="utf-8").rstrip("\n").endswith(mapping_table_markdown()), (
        "docs/coreai-interop.md is stale: replace its table with mapping_table_markdown()")


def test_doc_names_every_op_that_is_not_exported() -> None:
    text = DOC.read_text(encoding="utf-8")
    short = {name: name.removeprefix("coreai.") for name in OPS if name not in MAPPINGS}
    missing = [name for name, s in short.items()
               if f"`{s}`" not in text and f"`{name}`" not in text]
    assert missing == [], f"say why these are not exported: {missing}"


def test_every_mapping_targets_a_dialect_op() -> None:
    assert set(MAPPINGS) <= set(OPS)
