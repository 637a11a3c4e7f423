"""The Jupyter tutorials: each one executes cleanly, and each is stored without outputs.

Every notebook in ``tutorials/`` runs top to bottom in a fresh ``python3`` kernel with nbclient.
The kernel spec is written to a temporary directory and points at the interpreter running the
tests, so a user-level or system-wide ``python3`` kernel (another Python, another venv) can never
be picked up by accident. A failing cell fails the test with its source and the error.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

TUTORIALS = Path(__file__).resolve().parent.parent / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))
EXPECTED = [
    "01_quickstart", "02_custom_op_lowering", "03_overriding_a_builtin",
    "04_debugging_a_mismatch", "05_building_by_hand", "06_stateful_kv_cache",
    "07_export_aimodel", "08_llm", "compression",
]
CELL_TIMEOUT = 180  # seconds per cell; generous for loaded CI machines, cells take ~1 s
STARTUP_TIMEOUT = 180  # starting a kernel on a loaded machine can be slow
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A kernel-spec directory with one ``python3`` kernel running this very interpreter."""
    root = tmp_path_factory.mktemp("kernels")
    spec = root / "python3"
    spec.mkdir()
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (test interpreter)",
        "language": "python",
    }))
    return str(root)


def test_all_tutorials_present() -> None:
    missing = set(EXPECTED) - {nb.stem for nb in NOTEBOOKS}
    assert not missing, f"tutorials missing from {TUTORIALS}: {sorted(missing)}"


def _describe_failure(path: Path, nb: nbformat.NotebookNode, index: int | None,
                      error: BaseException) -> str:
    if index is None:
        return f"{path.name}: the kernel failed before any cell ran: {error}"
    cell = nb.cells[index]
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if errors:
        detail = "\n".join(errors[0].get("traceback", [])) or \
            f"{errors[0].get('ename')}: {errors[0].get('evalue')}"
    else:
        detail = f"{type(error).__name__}: {error}"
    code_cells = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    return (f"{path.name}: code cell {code_cells.index(index) + 1} (cell {index}) failed\n"
            f"---- source ----\n{cell.source}\n---- error ----\n{_ANSI.sub('', detail)}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_tutorial_executes(path: Path, kernel_dir: str, tmp_path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    km = KernelManager(kernel_name="python3",
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[kernel_dir]))
    current: dict[str, int] = {}
    client = NotebookClient(
        nb, km=km, timeout=CELL_TIMEOUT, startup_timeout=STARTUP_TIMEOUT,
        kernel_name="python3", allow_errors=False, force_raise_errors=True, record_timing=False,
        # the working directory is a scratch directory: notebooks write nothing else
        resources={"metadata": {"path": str(tmp_path)}},
        on_cell_execute=lambda cell, cell_index: current.update(index=cell_index),
    )
    failure = None
    try:
        client.execute()
    except Exception as e:  # CellExecutionError, CellTimeoutError, DeadKernelError, ...
        failure = _describe_failure(path, nb, current.get("index"), e)
    finally:
        if client.kc is not None:
            client.kc.stop_channels()
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    if failure is not None:  # outside the except block: report the cell, not nbclient's chain
        pytest.fail(failure, pytrace=False)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_tutorial_is_stored_clean(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
    assert nb.cells and nb.cells[0].cell_type == "markdown", "start with a title cell"
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"cell {i} has stored outputs; strip them"
            assert cell.execution_count is None, f"cell {i} has an execution count"
        assert not {"execution", "collapsed", "scrolled"} & set(cell.metadata), \
            f"cell {i} carries execution metadata: {dict(cell.metadata)}"
