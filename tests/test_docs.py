"""The guides' Python code blocks run, in order, one namespace per guide."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
GUIDES = sorted(p for p in DOCS.glob("*.md") if "```python" in p.read_text())
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def test_there_are_guides_with_code() -> None:
    assert len(GUIDES) >= 8


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.name)
def test_guide_code_runs(guide: Path, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_{guide.stem.replace('-', '_')}"}
    for i, block in enumerate(BLOCK.findall(guide.read_text())):
        code = compile(block, f"{guide.name} block {i + 1}", "exec")
        exec(code, namespace)
