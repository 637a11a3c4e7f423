"""The documentation site builds from this checkout with warnings as errors.

The build is the README's command: Sphinx with MyST-NB over ``docs/`` (guides, the API
reference generated from the docstrings) and ``tutorials/`` (every notebook executed during the
build; a failing cell fails it). Cross-references are checked (``nitpicky``), so a docstring that
names a function that does not exist, or a guide linking to a missing anchor, fails here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_site_builds_without_warnings(tmp_path: Path) -> None:
    out = tmp_path / "html"
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-c", "docs",
         # a fresh notebook cache: every tutorial runs, whatever a local build cached
         "-D", f"nb_execution_cache_path={tmp_path / 'jupyter_cache'}",
         "-d", str(tmp_path / "doctrees"), ".", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=1500)
    warnings = "\n".join(line for line in result.stderr.splitlines()
                         if "WARNING" in line or "ERROR" in line)
    assert result.returncode == 0, f"sphinx failed:\n{warnings or result.stderr[-4000:]}"
    for page in ["index.html", "docs/index.html", "docs/runtime.html",
                 "docs/reference/coreai_torch.html", "tutorials/01_quickstart.html"]:
        assert (out / page).is_file(), f"{page} was not built"
    # every tutorial is on the site with its executed outputs
    for notebook in sorted((ROOT / "tutorials").glob("*.ipynb")):
        html = (out / "tutorials" / f"{notebook.stem}.html").read_text()
        assert "cell_output" in html, f"{notebook.name} has no outputs on the site"
    # the API reference documents the contract's names
    reference = (out / "docs/reference/coreai_torch.html").read_text()
    for name in ["TorchConverter", "register_torch_lowering", "get_decomp_table", "verify"]:
        assert name in reference, f"{name} missing from the API reference"
