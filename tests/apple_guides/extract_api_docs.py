"""Rewrite the API-page fixtures of this folder from Apple's coreai-torch repository.

    python tests/apple_guides/extract_api_docs.py /path/to/apple/coreai-torch   (a work tree)

Each page of API_PAGES becomes ``api-<name>.md`` here: a comment naming its source, commit and
license, then the page as it is with one change: ``coreai._compiler.dialects`` becomes
``coreai_core.dialects``. ``tests/test_apple_debugging_docs.py`` runs its ``python`` blocks.
Apple's docs are BSD-3-Clause licensed (LICENSE beside the fixtures).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
API_PAGES = {"debugging": "docs/api/debugging.md", "TorchConverter": "docs/api/TorchConverter.md"}
REPLACED = ("coreai._compiler.dialects", "coreai_core.dialects")


def main(repo: Path) -> None:
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    for name, path in API_PAGES.items():
        text = (repo / path).read_text()
        header = (f"<!-- Apple's coreai-torch page {path} (commit {commit}), Copyright 2026 "
                  f"Apple Inc., BSD-3-Clause (see LICENSE beside this file), with one change: "
                  f"{REPLACED[0]} is replaced by {REPLACED[1]}. Regenerate with "
                  "tests/apple_guides/extract_api_docs.py. -->\n")
        (HERE / f"api-{name}.md").write_text(header + text.replace(*REPLACED))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
