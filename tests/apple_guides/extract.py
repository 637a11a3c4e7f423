"""Rewrite the fixtures of this folder from a checkout of Apple's coreai-torch repository.

    python tests/apple_guides/extract.py /path/to/apple/coreai-torch   (a work tree)

Each of Apple's guide notebooks listed in GUIDES becomes ``<name>.ipynb`` here: a header cell
naming its source, commit and license, then the notebook's code cells in order (and, for
guides that show their conversion code in a fenced ``python`` block of a markdown cell, that
block as a code cell where it stands: FENCED), with one change only: ``coreai._compiler.dialects``
becomes ``coreai_core.dialects``. Outputs are not kept. Apple's code is BSD-3-Clause licensed
(LICENSE, copied beside the fixtures as clause 1 asks).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GUIDES = {
    "quickstart": "docs/getting-started/quickstart.ipynb",
    "conversion-workflows": "docs/guides/conversion-workflows.ipynb",
    "composite-ops": "docs/guides/composite-ops.ipynb",
    "custom-op-lowering": "docs/guides/custom-op-lowering.ipynb",
    "externalization": "docs/guides/externalization.ipynb",
    "custom-metal-kernels": "docs/guides/custom-metal-kernels.ipynb",
}
# guides whose markdown shows the code to run (other fenced blocks are illustrations with
# placeholders, such as composite-ops' ``SomeOp``)
FENCED = {"externalization"}
REPLACED = ("coreai._compiler.dialects", "coreai_core.dialects")
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _cell(kind: str, source: str) -> dict:
    cell: dict = {"cell_type": kind, "metadata": {}, "source": source}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def extract(repo: Path, name: str, path: str, commit: str) -> dict:
    notebook = json.loads((repo / path).read_text())
    header = (f"# {name}\n\nThe code of Apple's `coreai-torch` guide `{path}` (commit "
              f"`{commit}`), Copyright 2026 Apple Inc., BSD-3-Clause (see LICENSE beside this "
              f"file), with one change: `{REPLACED[0]}` is replaced by `{REPLACED[1]}`. "
              "Regenerate with `tests/apple_guides/extract.py`; executed by "
              "`tests/test_apple_guides.py`.")
    cells = [_cell("markdown", header)]
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code":
            cells.append(_cell("code", source.replace(*REPLACED)))
        elif cell["cell_type"] == "markdown" and name in FENCED:
            cells += [_cell("code", block.replace(*REPLACED))
                      for block in PYTHON_BLOCK.findall(source)]
    return {"cells": cells, "metadata": {"kernelspec": {"name": "python3",
                                                       "display_name": "Python 3",
                                                       "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def main(repo: Path) -> None:
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    for name, path in GUIDES.items():
        notebook = extract(repo, name, path, commit)
        (HERE / f"{name}.ipynb").write_text(json.dumps(notebook, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
