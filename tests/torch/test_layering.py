"""coreai_torch's layering: it uses coreai_core through its public modules only, and coreai_core
never depends on coreai_torch."""

from __future__ import annotations

import ast
from pathlib import Path

import coreai_core
import coreai_torch
from tests.import_graph import import_cycles

TORCH_PACKAGE = Path(coreai_torch.__file__).parent
CORE_PACKAGE = Path(coreai_core.__file__).parent


def _imported_modules(source: str) -> list[tuple[int, str]]:
    """(line, dotted name) of every absolute import in ``source``, ``from m import n`` giving
    ``m.n`` (so a private module imported by name counts too)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.extend((node.lineno, f"{node.module}.{a.name}") for a in node.names)
    return out


def _private(dotted: str) -> bool:
    return any(part.startswith("_") for part in dotted.split("."))


def test_coreai_torch_imports_no_private_coreai_core_module_or_name() -> None:
    found = [f"{path.relative_to(TORCH_PACKAGE.parent)}:{line} {name}"
             for path in sorted(TORCH_PACKAGE.rglob("*.py"))
             for line, name in _imported_modules(path.read_text(encoding="utf-8"))
             if name.startswith("coreai_core.") and _private(name)]
    assert found == [], ("coreai_torch reaches into coreai_core's private modules; export what "
                         "it needs from a public module instead")


def test_coreai_core_does_not_import_coreai_torch() -> None:
    found = [f"{path.relative_to(CORE_PACKAGE.parent)}:{line} {name}"
             for path in sorted(CORE_PACKAGE.rglob("*.py"))
             for line, name in _imported_modules(path.read_text(encoding="utf-8"))
             if name == "coreai_torch" or name.startswith("coreai_torch.")]
    assert found == []


def test_the_check_sees_private_imports() -> None:
    """The scan reports both spellings of a private import (guards the guard)."""
    source = "from coreai_core._builder import current\nfrom coreai_core import _ir\n"
    names = [n for _, n in _imported_modules(source)]
    assert names == ["coreai_core._builder.current", "coreai_core._ir"]
    assert all(_private(n) for n in names)


def test_no_import_cycle_not_even_for_type_checking() -> None:
    """No two modules of coreai_torch import each other, directly or through others,
    ``TYPE_CHECKING`` imports included (the check itself is tested in tests/core)."""
    assert import_cycles(TORCH_PACKAGE) == []


def _imports_apples_package(dotted: str) -> bool:
    return dotted == "coreai" or dotted.startswith("coreai.")


def test_only_the_adapter_imports_apples_package() -> None:
    """Apple's ``coreai`` package (its versioned facade and its unversioned raw layer) is
    reached through ``coreai_torch/aimodel/_apple.py`` only, so a new release of it is
    adapted in one file (function-local imports count too)."""
    adapter = TORCH_PACKAGE / "aimodel" / "_apple.py"
    found = [f"{path.relative_to(TORCH_PACKAGE.parent)}:{line} {name}"
             for path in sorted([*TORCH_PACKAGE.rglob("*.py"), *CORE_PACKAGE.rglob("*.py")])
             if path != adapter
             for line, name in _imported_modules(path.read_text(encoding="utf-8"))
             if _imports_apples_package(name)]
    assert found == [], ("import Apple's coreai package through coreai_torch.aimodel._apple "
                         "(add what is missing there)")
    assert any(_imports_apples_package(n)
               for _, n in _imported_modules(adapter.read_text(encoding="utf-8")))


def test_the_adapter_check_sees_every_spelling() -> None:
    """Guards the guard: plain, dotted and from-imports of Apple's package are seen, our own
    ``coreai_core``/``coreai_torch`` are not."""
    source = ("import coreai\nimport coreai._compiler.ir as raw\nfrom coreai import authoring\n"
              "from coreai.authoring.constant import constant\nimport coreai_core\n"
              "from coreai_torch.aimodel._apple import ca\n")
    assert [n for _, n in _imported_modules(source) if _imports_apples_package(n)] == [
        "coreai", "coreai._compiler.ir", "coreai.authoring", "coreai.authoring.constant.constant"]


# the modules that look lowerings up and call them
LOWERING_PATH = ("_binding.py", "_lowerer.py", "_table.py", "composite_lowering.py")


def _functions_using_inspect(source: str) -> list[str]:
    """Names of the functions in ``source`` that use the ``inspect`` module."""
    out = []
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(n, ast.Name) and n.id == "inspect" for n in ast.walk(fn)):
            out.append(fn.name)
    return out


def test_a_lowerings_signature_is_read_only_when_it_is_registered() -> None:
    """The form and the parameters of a lowering are decided once, by ``as_lowering`` at
    registration, and stored in the table; nothing on the way from the table to the call
    inspects the function again."""
    found = {name: [f for f in _functions_using_inspect(
        (TORCH_PACKAGE / name).read_text(encoding="utf-8")) if f != "as_lowering"]
        for name in LOWERING_PATH}
    assert all(not fns for fns in found.values()), found


def test_the_inspect_check_sees_a_use_inside_a_function() -> None:
    source = ("import inspect\n\ndef as_lowering(fn):\n    return inspect.signature(fn)\n\n"
              "def call(fn):\n    return inspect.signature(fn).parameters\n")
    assert _functions_using_inspect(source) == ["as_lowering", "call"]
