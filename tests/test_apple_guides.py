"""Apple's coreai-torch guides run against this project with only the dialect import changed.

The fixtures in ``tests/apple_guides/`` are the code cells of Apple's guide notebooks
(``extract.py`` there writes them from Apple's repository; ``coreai._compiler.dialects`` is the
one line it changes). Each notebook's cells run in order in one namespace, in a scratch working
directory, like a notebook kernel: top-level ``await`` included (the guides run their
``.aimodel`` with Apple's asynchronous runtime). A failing cell fails the test with its source.

The guides need Apple's ``coreai-core`` (the test extra installs it): they save with
``program.save_asset`` and run the asset on Apple's interpreter. The quickstart's second model
is torchvision's MobileNetV2; torchvision is not a dependency (PyPI's Linux wheels are CUDA
builds that do not load with the CPU torch), so when it is missing the test provides
``torchvision.models.mobilenet_v2``, built from the architecture's published definition in
``tests/apple_guides/mobilenet.py``. The custom Metal kernels guide needs a Mac: its first cell
must raise the clear ``MetalUnavailableError``.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

from coreai_torch.errors import MetalUnavailableError

GUIDES = Path(__file__).resolve().parent / "apple_guides"
RUNNABLE = ["quickstart", "conversion-workflows", "composite-ops", "custom-op-lowering",
            "externalization"]
# the quickstart converts MobileNetV2 at 224x224 and runs it on Apple's interpreter (~40 s)
PARAMS = [pytest.param(n, marks=pytest.mark.slow) if n == "quickstart" else n for n in RUNNABLE]


def code_cells(name: str) -> list[str]:
    notebook = json.loads((GUIDES / f"{name}.ipynb").read_text())
    return [c["source"] for c in notebook["cells"] if c["cell_type"] == "code"]


def run_cells(name: str) -> dict:
    """Run the notebook's cells in one namespace; a cell with a top-level ``await`` runs in an
    event loop of its own, as Jupyter's autoawait does."""
    namespace: dict = {"__name__": f"apple_guide_{name.replace('-', '_')}"}
    for i, source in enumerate(code_cells(name)):
        code = compile(source, f"{name}.ipynb code cell {i + 1}", "exec",
                       flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        try:
            result = eval(code, namespace)
            if asyncio.iscoroutine(result):
                asyncio.run(result)
        except Exception as e:
            e.add_note(f"---- {name}.ipynb code cell {i + 1} ----\n{source}")
            raise
    return namespace


@pytest.fixture
def torchvision_models(monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec("torchvision") is not None:
        return
    from tests.apple_guides.mobilenet import mobilenet_v2

    package = types.ModuleType("torchvision")
    models = types.ModuleType("torchvision.models")
    models.mobilenet_v2 = mobilenet_v2  # type: ignore[attr-defined]
    package.models = models  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torchvision", package)
    monkeypatch.setitem(sys.modules, "torchvision.models", models)


def test_fixtures_change_only_the_dialect_import() -> None:
    for path in GUIDES.glob("*.ipynb"):
        text = "\n".join(code_cells(path.stem))
        assert "coreai._compiler.dialects" not in text, path.name
    assert sorted(p.stem for p in GUIDES.glob("*.ipynb")) == sorted(
        [*RUNNABLE, "custom-metal-kernels"])


@pytest.mark.parametrize("name", PARAMS)
def test_apple_guide_runs(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          torchvision_models: None, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    run_cells(name)
    out = capsys.readouterr().out
    # the guides print their own comparison with torch: it must say they match
    assert "Outputs match: False" not in out, out
    if name in ("quickstart", "composite-ops"):
        assert "Outputs match: True" in out, out


def test_metal_guide_stops_at_its_first_cell_with_a_clear_error() -> None:
    with pytest.raises(MetalUnavailableError, match=r"TorchMetalKernel\('vector_add'\): custom "
                                                    r"Metal kernels need macOS with Metal"):
        run_cells("custom-metal-kernels")
