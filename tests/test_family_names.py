"""Family names line up across layers: dialect -> kernels -> lowerings -> op database.

The rule (also in ``docs/adding-an-op.md``): the dialect's op families are the modules
``coreai_core/dialects/_<family>.py``. The kernels of a family are
``coreai_core/runtime/kernels/<family>.py`` (one module per family, exactly its ops). The
lowerings (``coreai_torch/lowerings/``), op-database entries (``tests/torch/op_db/``) and kernel
tests (``tests/core/test_kernels_<...>.py``) are named ``<family>.py`` or, where a family needs
several files, ``<family>_<part>.py``; every family has at least one module in each layer. The
``.aimodel`` exporter's op mappings (``coreai_torch/aimodel/mappings/``) follow the same names,
each module mapping only its family's ops; a family whose ops are all left unexported has no
module there. An op-database module holds only entries whose target is lowered by its own
family's lowerings modules (an entry on complex or half inputs goes to the family of its op,
e.g. ``nn_complex.py``, never to a module named after the dtype).
Modules starting with ``_`` are shared helpers, outside the rule. A module's docstring names its
family on its first line: ``(<family> family)``.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import ModuleType

import pytest

import coreai_torch.aimodel.mappings
import coreai_torch.lowerings
import tests.torch.op_db
from coreai_core._opdef import OPS
from coreai_core.runtime import kernels
from coreai_torch._table import LoweringSet

ROOT = Path(__file__).resolve().parent.parent
DIALECTS = ROOT / "coreai_core" / "dialects"
KERNELS = ROOT / "coreai_core" / "runtime" / "kernels"
LOWERINGS = ROOT / "coreai_torch" / "lowerings"
OP_DB = ROOT / "tests" / "torch" / "op_db"
AIMODEL = ROOT / "coreai_torch" / "aimodel" / "mappings"
KERNEL_TESTS = ROOT / "tests" / "core"
# kernel tests that check every family at once, not one family
CROSS_FAMILY_KERNEL_TESTS = {"coverage"}

FAMILIES = sorted(p.stem[1:] for p in DIALECTS.glob("_*.py") if p.stem != "__init__")


def _public_modules(folder: Path) -> list[str]:
    """The module names in ``folder`` outside the helper convention (no leading ``_``)."""
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))


def family_of_op(name: str) -> str:
    """The family of op ``name``: the dialect module that defines it."""
    builder = OPS[name].builder
    assert builder is not None, f"{name} has no builder to tell its family"
    return builder.__module__.rpartition("._")[2]


def family_of(module: str) -> str:
    """The family a ``<family>`` or ``<family>_<part>`` module name belongs to."""
    return module.partition("_")[0]


def _first_docstring_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return " ".join(doc.split("\n\n")[0].split())


def test_families_are_single_words() -> None:
    """``<family>_<part>`` is unambiguous only if no family name holds an underscore."""
    assert FAMILIES and all("_" not in f for f in FAMILIES), FAMILIES


def test_kernel_modules_are_exactly_the_families() -> None:
    assert _public_modules(KERNELS) == FAMILIES


@pytest.mark.parametrize("family", FAMILIES)
def test_kernel_module_holds_exactly_its_family_ops(family: str) -> None:
    module = importlib.import_module(f"coreai_core.runtime.kernels.{family}")
    dialect = f"coreai_core.dialects._{family}"
    ops = {name for name, op in OPS.items()
           if op.builder is not None and op.builder.__module__ == dialect}
    registered = set(module.KERNELS.own_names())
    assert registered == ops, (
        f"kernels/{family}.py: kernels of other families {sorted(registered - ops)}, "
        f"missing kernels {sorted(ops - registered)}")
    assert module.KERNELS in kernels.FAMILIES, f"kernels/{family}.py is not in FAMILIES"


@pytest.mark.parametrize("folder", [LOWERINGS, OP_DB, AIMODEL],
                         ids=["lowerings", "op_db", "aimodel"])
def test_modules_map_to_a_family(folder: Path) -> None:
    stray = [m for m in _public_modules(folder)
             if m != "__init__" and family_of(m) not in FAMILIES]
    assert not stray, f"{folder}: modules named after no dialect family: {stray} " \
                      f"(name them <family>.py or <family>_<part>.py, family in {FAMILIES})"


@pytest.mark.parametrize("folder", [LOWERINGS, OP_DB], ids=["lowerings", "op_db"])
def test_every_family_has_modules(folder: Path) -> None:
    present = {family_of(m) for m in _public_modules(folder)}
    assert set(FAMILIES) <= present, f"{folder}: no module for {sorted(set(FAMILIES) - present)}"


@pytest.mark.parametrize(("package", "folder"), [(coreai_torch.lowerings, LOWERINGS),
                                                 (tests.torch.op_db, OP_DB),
                                                 (coreai_torch.aimodel.mappings, AIMODEL)],
                         ids=["lowerings", "op_db", "aimodel"])
def test_every_module_is_listed(package: ModuleType, folder: Path) -> None:
    listed = sorted(m.__name__.rsplit(".", 1)[1] for m in package.FAMILIES)
    assert listed == [m for m in _public_modules(folder) if m != "__init__"]


@pytest.mark.parametrize(
    "path", [p for folder in (LOWERINGS, OP_DB, AIMODEL) for p in sorted(folder.glob("[a-z]*.py"))
             if p.stem != "__init__"], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_docstring_names_the_family(path: Path) -> None:
    line = _first_docstring_line(path)
    assert f"({family_of(path.stem)} family)" in line, (
        f"{path.name}: the docstring's first paragraph should name its family as "
        f"'({family_of(path.stem)} family)', got {line!r}")


@pytest.mark.parametrize("module", coreai_torch.aimodel.mappings.FAMILIES,
                         ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_aimodel_module_maps_only_its_family_ops(module: ModuleType) -> None:
    family = family_of(module.__name__.rsplit(".", 1)[1])
    names = module.MAPPINGS.own_names()
    stray = [n for n in names if family_of_op(n) != family]
    assert names and not stray, (
        f"{module.__name__}: maps ops of other families "
        f"{[(n, family_of_op(n)) for n in stray]}; move each to its family's module")


def _lowering_family_of_target() -> dict[str, str]:
    """Every built-in lowering's target -> the family of the lowerings module registering it."""
    return {name: family_of(module.__name__.rsplit(".", 1)[1])
            for module in coreai_torch.lowerings.FAMILIES for name in module.LOWERINGS.own_names()}


@pytest.mark.parametrize("module", tests.torch.op_db.FAMILIES,
                         ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_op_db_module_holds_only_its_family_entries(module: ModuleType) -> None:
    """An entry (or a ``COVERED_ELSEWHERE`` name) lives in the op-db module of its target's
    lowering family: a module named after its inputs' dtype (``complex_nn``) or holding another
    family's targets fails here."""
    stem = module.__name__.rsplit(".", 1)[1]
    lowered_by = _lowering_family_of_target()
    ids = {e.id: e.target for e in module.ENTRIES}
    ids.update({name: name for name in getattr(module, "COVERED_ELSEWHERE", {})})
    stray = [(i, lowered_by.get(target)) for i, target in ids.items()
             if lowered_by.get(target) != family_of(stem)]
    assert not stray, (
        f"op_db/{stem}.py: entries whose targets another family lowers {stray}; move each to "
        f"op_db/<family>.py or op_db/<family>_<part>.py of that family")


def test_aimodel_mappings_are_the_union_of_the_modules() -> None:
    own = [n for m in coreai_torch.aimodel.mappings.FAMILIES for n in m.MAPPINGS.own_names()]
    assert sorted(own) == sorted(coreai_torch.aimodel.mappings.MAPPINGS)


def test_kernel_tests_map_to_a_family() -> None:
    names = [p.stem.removeprefix("test_kernels_") for p in KERNEL_TESTS.glob("test_kernels_*.py")]
    stray = [n for n in names if n not in CROSS_FAMILY_KERNEL_TESTS
             and family_of(n) not in FAMILIES]
    assert names and not stray, f"kernel tests named after no family: {stray}"


@pytest.mark.parametrize("module", coreai_torch.lowerings.FAMILIES,
                         ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_lowering_module_registers_into_its_own_family_set(module: ModuleType) -> None:
    """Each module fills one ``LoweringSet`` named after it, with the converter's verb; the
    default table holds exactly those records (the form decided at registration included)."""
    stem = module.__name__.rsplit(".", 1)[1]
    assert isinstance(module.LOWERINGS, LoweringSet) and module.LOWERINGS.family == stem
    table = coreai_torch.lowerings.default_table()
    assert module.LOWERINGS.own_names(), f"lowerings/{stem}.py registers nothing"
    for name, entry in module.LOWERINGS.own_items():
        assert table[name] is entry, name


def test_aimodel_duplicate_mapping_is_an_error_naming_both_modules() -> None:
    """Two mapping modules mapping one op is refused when MAPPINGS is built, naming both."""
    from coreai_core.registry import frozen_union
    from coreai_torch.aimodel.mappings import _registry, elementwise, special

    name = special.MAPPINGS.own_names()[0]
    clash = _registry.family_mappings(elementwise.__name__, {name: special.MAPPINGS[name]})
    with pytest.raises(ValueError, match="defined by both") as info:
        frozen_union(_registry.mapping_registry("test"), [special.MAPPINGS, clash])
    assert special.__name__ in str(info.value) and elementwise.__name__ in str(info.value)


AIMODEL_PACKAGE = ROOT / "coreai_torch" / "aimodel"


def _private_imports(path: Path) -> set[tuple[str, str]]:
    """(module, name) of every ``from module import _name`` in ``path`` that is a name, not a
    submodule (``from package import _apple`` imports a module of the package)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                package = ROOT.joinpath(*node.module.split("."))
                submodule = ((package / f"{alias.name}.py").exists()
                             or (package / alias.name).is_dir())
                if private and not submodule:
                    found.add((node.module, alias.name))
    return found


def test_aimodel_modules_import_no_private_names_of_other_modules() -> None:
    """The exporter's modules use each other's public names only (issue 35): a helper two
    modules need is public (``_emit.py`` holds those shared by several mapping families)."""
    crossing: dict[str, list[str]] = {}
    for path in sorted(AIMODEL_PACKAGE.rglob("*.py")):
        rel = path.relative_to(AIMODEL_PACKAGE).as_posix()
        for module, name in sorted(_private_imports(path)):
            crossing.setdefault(f"{rel} <- {module}", []).append(name)
    assert not crossing, crossing
