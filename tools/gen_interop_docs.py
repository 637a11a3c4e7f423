"""Regenerate the op table at the end of docs/coreai-interop.md from coreai_torch.aimodel.

Run: ``python tools/gen_interop_docs.py`` (needs the ``coreai`` extra: Apple's coreai-core).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coreai_torch.aimodel import mapping_table_markdown  # noqa: E402

DOC = ROOT / "docs" / "coreai-interop.md"
TABLE_START = "| dialect op | Core AI |"


def main() -> None:
    text = DOC.read_text(encoding="utf-8")
    head = text[: text.index(TABLE_START)] if TABLE_START in text else text + "\n"
    DOC.write_text(head + mapping_table_markdown() + "\n", encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
